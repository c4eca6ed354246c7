"""Peer-to-peer GPU traffic over PCIe, and the job hangs at its first collectives

## What it means
`nvidia-smi topo -m` shows GPU pairs connected only through PCIe (PIX, PXB, PHB, NODE,
SYS; no `NV#` NVLink), or `topo -p2p` reports peer access as unsupported, and NCCL set
up peer-to-peer channels (`via P2P/IPC`, `P2P/CUMEM`, `P2P/direct pointer`) — while the
job hangs in communicator init or its very first collectives. On many PCIe platforms
P2P reads/writes are silently broken by PCIe ACS or the IOMMU (VT-d/AMD-Vi), and NCCL
waits forever for data that never arrives.

## Why it hangs
NCCL believes the GPUs can write to each other's memory directly; the platform drops
or redirects those transactions, so the first transfer never completes.

## Evidence used
The topology matrix (`nvidia-smi topo -m` / `-p2p`), NCCL channel lines saying which
transport each connection uses, and timeouts at sequence numbers ≤ 2 or NCCL init that
never completes.

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
from hangdoc.analyzer.views.timeline import fint
from hangdoc.analyzer.vocabulary import F_SEQ, EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs


class GpuP2pTopology(Rule):
    __doc__ = __doc__
    id = "HD302"
    name = "gpu-p2p-over-pcie"
    summary = "P2P over PCIe (no NVLink) and a hang at the first collectives"
    categories = (Category.GPU_HARDWARE,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        topo = tl.of(EventKind.GPU_TOPOLOGY)
        pcie = [
            p
            for p in topo
            if (fint(p.event, "pcie_pairs") or 0) > 0 and (fint(p.event, "nvlink_pairs") or 0) == 0
        ]
        blocked = [p for p in topo if (fint(p.event, "p2p_unsupported_pairs") or 0) > 0]
        if not pcie and not blocked:
            return
        p2p = [p for p in tl.of(EventKind.NCCL_TRANSPORT) if "P2P" in (p.get("via") or "")]
        timeouts = tl.of(EventKind.COLLECTIVE_TIMEOUT)
        early = [p for p in timeouts if (fint(p.event, F_SEQ) or 99) <= 2]
        init_stuck = [p for p in tl.of(EventKind.NCCL_INIT) if p.get("state") == "start"]
        completed = {
            (p.get("host"), p.get("pid"), p.get("comm"))
            for p in tl.of(EventKind.NCCL_INIT)
            if p.get("state") == "complete"
        }
        init_stuck = [
            p for p in init_stuck if (p.get("host"), p.get("pid"), p.get("comm")) not in completed
        ]
        hang_early = bool(early or init_stuck or tl.of(EventKind.HEARTBEAT_TIMEOUT))
        if not hang_early:
            return
        severity = Severity.ERROR if p2p and pcie else Severity.WARNING
        links = (pcie or blocked)[0].get("links") or ""
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
                limited_refs([*(pcie or blocked)[:1], *p2p[:2], *(early or init_stuck)[:2]])
            ),
            strength=Strength.SIGNAL if severity is Severity.ERROR else Strength.HINT,
        )


RULE = GpuP2pTopology
