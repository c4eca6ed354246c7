"""Peer-to-peer GPU traffic over PCIe, and the job hangs at its first collectives

## What it means
`nvidia-smi topo -m` shows GPU pairs connected only through PCIe (PIX, PXB, PHB, NODE,
SYS; no `NV#` NVLink), or `topo -p2p` reports peer access as unsupported, and NCCL set
up peer-to-peer channels (`via P2P/IPC`, `P2P/CUMEM`, `P2P/direct pointer`) — while the
job hangs in communicator init or its very first collectives. On many PCIe platforms
P2P reads/writes are silently broken by PCIe ACS or the IOMMU (VT-d/AMD-Vi), and NCCL
waits forever for data that never arrives.

CUDA may also say so itself: `cudaErrorPeerAccessUnsupported` (217, "peer access is not
supported between these two devices") when NCCL opens a peer's memory for its P2P
transport, or in torch's `CUDA error: …`. That is the platform's answer, whatever the
stage: the GPUs cannot reach each other's memory.

## Why it hangs
NCCL believes the GPUs can write to each other's memory directly; the platform drops
or redirects those transactions, so the first transfer never completes.

## Evidence used
The topology matrix (`nvidia-smi topo -m` / `-p2p`), NCCL channel lines saying which
transport each connection uses, and timeouts at sequence numbers ≤ 2 or NCCL init that
never completes. Alone, CUDA's own error string for `cudaErrorPeerAccessUnsupported`
(libcudart's error-string table; NCCL prints it in `transport/p2p.cc`'s `failed to open
CUDA IPC handle : %d %s` and its `Cuda failure %d '%s'` checks) in an error line.

## How to confirm
Run `NCCL_P2P_DISABLE=1` once: if the hang disappears, P2P is the cause. The CUDA
`p2pBandwidthLatencyTest` sample shows broken P2P paths; `lspci -vvv | grep ACSCtl`
shows ACS enabled on the bridges.

## How to fix
Disable PCIe ACS on the bridges and/or the IOMMU in the BIOS (or `iommu=pt`), or run
with `NCCL_P2P_DISABLE=1` (slower) or `NCCL_P2P_LEVEL=NVL` so that P2P is only used over
NVLink.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.host import GpuTopology
from hangdoc.analyzer.payloads.nccl import NcclInit, NcclInitState, NcclTransport, Transport
from hangdoc.analyzer.payloads.torch_pg import Work
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs

# The kinds of lines that report an error (CUDA's, NCCL's, an exception) rather than
# describe the machine.
_ERROR_KINDS = (
    EventKind.CUDA_ERROR,
    EventKind.NCCL_ERROR,
    EventKind.NCCL_WARN,
    EventKind.EXCEPTION,
    EventKind.WATCHDOG_TEARDOWN,
)


class GpuP2pTopology(Rule):
    __doc__ = __doc__
    id = "HD302"
    name = "gpu-p2p-over-pcie"
    summary = "P2P over PCIe (no NVLink) and a hang at the first collectives"
    categories = (Category.GPU_HARDWARE,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        unsupported = [
            p for p in tl.of(*_ERROR_KINDS) if Sign.PEER_ACCESS_UNSUPPORTED in p.event.payload.signs
        ]
        if unsupported:
            yield _cuda_says_unsupported(unsupported)
            return
        topo = [
            (p, matrix)
            for p in tl.of(EventKind.GPU_TOPOLOGY)
            if (matrix := p.event.payload_as(GpuTopology)) is not None
        ]
        pcie = [(p, m) for p, m in topo if (m.pcie_pairs or 0) > 0 and (m.nvlink_pairs or 0) == 0]
        blocked = [(p, m) for p, m in topo if (m.p2p_unsupported_pairs or 0) > 0]
        if not pcie and not blocked:
            return
        p2p = [
            p
            for p in tl.of(EventKind.NCCL_TRANSPORT)
            if (transport := p.event.payload_as(NcclTransport))
            and any(via.transport == Transport.P2P for via in transport.via)
        ]
        timeouts = tl.of(EventKind.COLLECTIVE_TIMEOUT)
        early = [
            p
            for p in timeouts
            if (work := p.event.payload_as(Work)) is not None and (work.seq or 99) <= 2
        ]
        inits = [
            (p, p.event.payload_as(NcclInit) or NcclInit()) for p in tl.of(EventKind.NCCL_INIT)
        ]
        completed = {
            (p.event.host, p.event.pid, init.comm)
            for p, init in inits
            if init.state == NcclInitState.COMPLETE
        }
        init_stuck = [
            p
            for p, init in inits
            if init.state == NcclInitState.START
            and (p.event.host, p.event.pid, init.comm) not in completed
        ]
        hang_early = bool(early or init_stuck or tl.of(EventKind.HEARTBEAT_TIMEOUT))
        if not hang_early:
            return
        severity = Severity.ERROR if p2p and pcie else Severity.WARNING
        links = (pcie or blocked)[0][1].links or ""
        yield Finding(
            rule=self.id,
            category=Category.GPU_HARDWARE,
            severity=severity,
            title="GPUs talk P2P over PCIe (no NVLink) and the job hangs at its first collectives",
            explanation=(
                f"The topology shows PCIe-only GPU pairs ({links})"
                + (", NCCL uses P2P channels" if p2p else "")
                + " and the hang happens in communicator setup or the first collectives: "
                "the classic signature of PCIe ACS / IOMMU breaking GPU peer-to-peer."
            ),
            fix=(
                "Confirm with NCCL_P2P_DISABLE=1; then disable ACS/IOMMU in the BIOS (or "
                "iommu=pt), or keep NCCL_P2P_DISABLE=1 / NCCL_P2P_LEVEL=NVL."
            ),
            evidence=tuple(
                limited_refs(
                    [*(p for p, _ in (pcie or blocked)[:1]), *p2p[:2], *(early or init_stuck)[:2]]
                )
            ),
            strength=Strength.SIGNAL if severity is Severity.ERROR else Strength.HINT,
        )


def _cuda_says_unsupported(errors: list[Placed]) -> Finding:
    """CUDA's own word that two GPUs cannot reach each other's memory: the platform, not
    NCCL's configuration, is what to change."""
    ranks = sorted({p.rank for p in errors if p.rank is not None})
    return Finding(
        rule=GpuP2pTopology.id,
        category=Category.GPU_HARDWARE,
        # the error that ended the rank, as HD301's: its death (HD030) is this error's
        severity=Severity.CRITICAL,
        title="CUDA says peer-to-peer access is not supported between the GPUs",
        explanation=(
            "CUDA refused peer access between two GPUs (cudaErrorPeerAccessUnsupported: "
            "peer access is not supported between these two devices) when NCCL or the job "
            "tried to map a peer's memory: "
            "the platform (PCIe topology, ACS/IOMMU, the GPU model) does not allow it, so "
            "the transport between them cannot be built."
        ),
        fix=(
            "Run with NCCL_P2P_DISABLE=1 (exported to every rank's environment), or "
            "NCCL_P2P_LEVEL=NVL; check `nvidia-smi topo -p2p r` and disable ACS/IOMMU "
            "where the platform should support P2P."
        ),
        culprit_ranks=tuple(ranks),
        evidence=tuple(limited_refs(errors, limit=3)),
        strength=Strength.STATED,
    )


RULE = GpuP2pTopology
