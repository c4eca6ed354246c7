"""A CUDA call reported an ECC/NVLink error or a lost GPU

## What it means
The job's own log shows the GPU failing, without a kernel log: `CUDA error:
uncorrectable ECC error encountered`, `uncorrectable NVLink error was detected`, `GPU
has fallen off the bus`, `cudaErrorECCUncorrectable`, nvidia-smi rows with non-zero
volatile uncorrected ECC counts, or NCCL's `ncclUnhandledCudaError` with such a
reason.

Also a CUDA multicast call failing in NCCL's NVLS (NVLink SHARP) set-up:
`transport/nvls.cc:158 NCCL WARN Cuda failure 1 'invalid argument'` where that line is a
`CUCHECK(cuMulticastBindMem(…))` (or cuMulticastCreate, cuMulticastAddDevice…) in every
NCCL release the WARN's return-code chain and the printed version allow. On NVSwitch
systems the multicast object is the fabric's, set up by the fabric manager: NCCL's
maintainers read such a failure as the fabric manager's or the GPUs' state (a fabric
manager restarted without resetting the GPUs, not running, or at another driver version),
and NCCL 2.27 says so itself when the bind fails ("This is usually caused by a system or
configuration error in the Fabric Manager or NVSwitches"). The other CUDA failures of NVLS
set-up (its context query `cuCtxGetDevice` failing with `initialization error`, a
`cudaMemset`) stay HD206's, the communicator's set-up. CUDA's error 802, `system not yet
initialized` (cudaErrorSystemNotReady: "verify … all required driver daemons are actively
running"), names the same state and gets the same explanation and fix.

Also the node's fabric manager shown down: `systemctl status nvidia-fabricmanager` with
`Active: failed (Result: exit-code)`, `inactive (dead)` or `activating (auto-restart)`. On
NVSwitch systems (HGX/DGX A100, H100, H200) NVIDIA's Fabric Manager guide requires the
service running at the driver's version for CUDA and NVLink traffic; without it NCCL's
P2P/NVLS traffic fails or hangs on the node's ranks (a driver update that left the fabric
manager at the old version stops it at start). The node's state, not a rank's: no
culprit rank. NVIDIA's other services (nvidia-persistenced: start-up time only; DCGM's
nv-hostengine: monitoring) are not read as causes (analyzer/views/services.py).

## Why it hangs
The rank whose GPU failed cannot run kernels any more; it crashes or blocks, and its
peers wait in their next collective until the timeout.

## Evidence used
CUDA error messages in tracebacks and NCCL WARN lines (`Cuda failure '…'`), NCCL error
classes surfaced by torch, the watchdog's teardown line when the exception it names is such
a CUDA error (it names the rank), and the ECC column of nvidia-smi (table or CSV). For
NVLS, the WARN's place looked up in the table generated from every NCCL release's
`src/transport/nvls.cc` (scripts/catalog/nvls_multicast.py: the lines whose CUDA check
wraps a `cuMulticast*` call), narrowed by its "-> rc" chain (the stage table of
scripts/catalog/stages.py) and the NCCL version the log prints.

A weaker reading, from the message catalog's meaning of a CUDA error (meanings.toml, its
cuda families, from CUDA's cudaError_t documentation): a rank that died first of an error
documented as the device's or the driver's but not only theirs —
`the launch timed out and was terminated` (cudaErrorLaunchTimeout: a kernel ran past the
run-time limit the driver imposes where kernel timeouts are enabled; a signal) or
`unknown error` (cudaErrorUnknown: an internal error with no documented cause; a hint).
Not a launch timeout whose stack, printed with it (c10::Error's `frame #N` backtrace under
its what(), or the Python traceback it ends), waits in a collective (a barrier's
`work.wait()`, a `WorkNCCL` synchronised or released): NCCL's kernel spins on the GPU until
every peer arrives, so that kernel was the collective's, cut while it waited past the
device's limit; the peers' lateness, which names neither the GPU nor its driver
(views/kernel_limit.py).

The unit's `Active:` line of `systemctl status`, paired with the unit its header or
`Loaded:` line named just above it (analyzer/parsers/logs/services.py; systemd's
systemctl-show.c prints them so).

## How to confirm
`nvidia-smi -q -d ECC,ROW_REMAPPER` and `dmesg -T | grep -i xid` on that node.

For an NVLS multicast failure or error 802: `systemctl status nvidia-fabricmanager` and its log
(`/var/log/fabricmanager.log`), `nvidia-smi -q | grep -i -A2 fabric` (the GPUs' fabric
state), and whether the fabric manager's version matches the driver's.

## How to fix
Drain the node and have the GPU reset or replaced; resume from the last checkpoint.
For an NVLS multicast failure or error 802: start the fabric manager (at the driver's version), and
after it was restarted reset the GPUs (`nvidia-smi -r`) or reboot the node; meanwhile
`NCCL_NVLS_ENABLE=0` runs NCCL without NVLS.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Evidence, Finding, Severity, Strength
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.host import GpuStatus
from hangdoc.analyzer.payloads.nccl import CudaFailure, NcclError
from hangdoc.analyzer.views.deaths import Death, first_deaths
from hangdoc.analyzer.views.gpu_faults import ranks_for
from hangdoc.analyzer.views.kernel_limit import cut_while_waiting
from hangdoc.analyzer.views.services import NvidiaService, ServiceState, service_states
from hangdoc.analyzer.views.timeline import Placed, Timeline, precedes_wave, wave
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

# The kinds whose error the parser reads for GPU-hardware words (parsers/logs/errors.py):
# exceptions, CUDA errors, NCCL's "Last error:", and the watchdog's own teardown, which
# names the CUDA error its rank's GPU raised (ProcessGroupNCCL.cpp: "[Rank 1] NCCL watchdog
# thread terminated with exception: CUDA error: uncorrectable ECC error encountered").
_ERROR_KINDS = (
    EventKind.EXCEPTION,
    EventKind.ERROR_FILE,
    EventKind.CHILD_FAILURE,
    EventKind.CUDA_ERROR,
    EventKind.NCCL_ERROR,
    EventKind.WATCHDOG_TEARDOWN,
)


class GpuEccOrLost(Rule):
    __doc__ = __doc__
    id = "HD301"
    name = "gpu-ecc-or-lost"
    summary = "CUDA reported an ECC/NVLink error or a lost GPU"
    categories = (Category.GPU_HARDWARE,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        hard = [p for p in tl.of(*_ERROR_KINDS) if p.event.payload.hardware is not None]
        ecc = [
            (p, gpu)
            for p in tl.of(EventKind.GPU_STATUS)
            if (gpu := p.event.payload_as(GpuStatus)) is not None and (gpu.ecc_uncorrected or 0) > 0
        ]
        fabric = [p for p in hard if _FABRIC_SIGNS & set(p.event.payload.signs)]
        if fabric and len(fabric) == len(hard):
            yield _fabric(fabric)
        elif hard:
            ranks = sorted({p.rank for p in hard if p.rank is not None})
            what = sorted({_what(p)[:80] for p in hard})
            yield Finding(
                rule=self.id,
                category=Category.GPU_HARDWARE,
                severity=Severity.CRITICAL,
                title=f"GPU hardware error on {ranks_text(ranks) if ranks else 'a rank'}: "
                f"{what[0]}",
                explanation=(
                    "CUDA reported a hardware-level failure of the GPU ("
                    + "; ".join(what[:3])
                    + "): the rank cannot run kernels, so its collectives never complete."
                ),
                fix="Drain the node and have the GPU reset or replaced; resume from the last "
                "checkpoint.",
                culprit_ranks=tuple(ranks),
                evidence=tuple(limited_refs(hard, limit=5)),
                strength=Strength.STATED,
            )
        elif down := [s for s in service_states(tl) if s.down and s.nvidia == _FM]:
            yield _fabric_manager_down(down)
        elif suspects := _gpu_suspects(tl, ctx.evidence):
            yield self._suspected(suspects)
        elif ecc:
            gpus = sorted(
                {str(gpu.index) if gpu.index is not None else gpu.bus_id or "?" for _, gpu in ecc}
            )
            ranks = ranks_for(tl, [p for p, _ in ecc])
            yield Finding(
                rule=self.id,
                category=Category.GPU_HARDWARE,
                severity=Severity.WARNING,
                title=f"nvidia-smi shows uncorrected ECC errors on GPU {', '.join(gpus)}",
                explanation=(
                    "Volatile uncorrected ECC errors were counted on these GPUs since the "
                    "last driver load; a job on them can fail or hang."
                ),
                fix="Check nvidia-smi -q -d ECC,ROW_REMAPPER; reset or replace the GPU before "
                "reuse.",
                culprit_ranks=tuple(ranks),
                evidence=tuple(limited_refs([p for p, _ in ecc], limit=4)),
                strength=Strength.HINT,  # uncorrected ECC errors count since the last reset
            )

    def _suspected(self, suspects: list[Death]) -> Finding:
        first = suspects[0]
        likely = any(d.gpu_suspect == Sign.GPU_DRIVER_LIKELY for d in suspects)
        ranks = sorted({d.rank for d in suspects if d.rank is not None})
        who = ranks_text(ranks) if ranks else "a process (rank unknown)"
        return Finding(
            rule=self.id,
            category=Category.GPU_HARDWARE,
            severity=Severity.ERROR,
            title=f"{who} died of a CUDA error documented as the GPU's or its driver's: "
            f"{first.summary}",
            explanation=(
                f"{first.summary} ended {who} before the others failed. CUDA's documentation "
                "of this error points at the device, its driver or the platform's settings "
                "(a kernel cut by the run-time limit the driver imposes, or an internal "
                "error with no documented cause) rather than the program's code; it does "
                "not rule the program out."
            ),
            fix=(
                "Look at the node's kernel log (`dmesg -T | grep -i xid`) and `nvidia-smi -q` "
                "for that GPU; check whether kernel execution timeouts are enabled on it "
                "(`nvidia-smi -q | grep -i timeout`, a GPU that drives a display); rerun on "
                "another node to tell the machine from the job."
            ),
            culprit_ranks=tuple(ranks),
            evidence=tuple(limited_refs([d.placed for d in suspects], limit=4)),
            # The catalog's strength: moderate (signal) or weak (hint).
            strength=Strength.SIGNAL if likely else Strength.HINT,
        )


_FM = NvidiaService.FABRIC_MANAGER


def _fabric_manager_down(down: list[ServiceState]) -> Finding:
    """``systemctl status`` shows the fabric manager failed or stopped: the node's NVSwitch
    fabric is not set up, whatever rank runs there (views/services.py)."""
    first = down[0]
    state = first.active + (f" ({first.sub})" if first.sub else "")
    return Finding(
        rule=GpuEccOrLost.id,
        category=Category.GPU_HARDWARE,
        severity=Severity.ERROR,
        title=f"the node's NVSwitch fabric manager is not running: {first.unit} is {state}",
        explanation=(
            f"systemctl shows the {first.unit} service {state}. On NVSwitch systems "
            "(HGX/DGX A100, H100, H200) the fabric manager sets up the NVSwitches and the "
            "GPUs' NVLink fabric; NVIDIA's Fabric Manager guide says CUDA and NVLink traffic "
            "need it running at the driver's own version. Without it CUDA fails to start "
            "('system not yet initialized') or peer-to-peer traffic over NVLink (NCCL's P2P "
            "and NVLS transports) fails or hangs on every rank of this node; a fabric "
            "manager that no longer matches an updated driver exits at start so."
        ),
        fix=(
            "On the node: `journalctl -u nvidia-fabricmanager` (or /var/log/fabricmanager.log) "
            "for why it exited; `nvidia-smi -q | grep -i -A2 fabric` (the GPUs' fabric state "
            "should read Completed); compare the fabric manager's version "
            "(`nv-fabricmanager --version`) with the driver's (`nvidia-smi`) and install the "
            "matching package, then `systemctl restart nvidia-fabricmanager` (reset the GPUs "
            "or reboot if it was restarted under running GPUs). `NCCL_P2P_DISABLE=1` only "
            "works around it, slowly."
        ),
        evidence=tuple(limited_refs([p for s in down for p in s.placed], limit=4)),
        # the service's state is shown; that this job's hang went through the fabric is not
        strength=Strength.SIGNAL,
    )


# The failures that name the NVSwitch fabric's state rather than a GPU's silicon: a CUDA
# multicast call of NCCL's NVLS set-up failing, CUDA's 802 "system not yet initialized".
_FABRIC_SIGNS = frozenset({Sign.NVLS_MULTICAST, Sign.FABRIC_NOT_READY})


def _fabric(failed: list[Placed]) -> Finding:
    """The GPUs' fabric is not usable: NCCL's NVLS set-up failed in a CUDA multicast call,
    or CUDA said the system is not ready (802): the fabric manager's or the GPUs' fabric
    state, not the GPU's silicon, and not the job's configuration."""
    ranks = sorted({p.rank for p in failed if p.rank is not None})
    who = ranks_text(ranks) if ranks else "a rank"
    what = sorted({p.event.payload.hardware or "" for p in failed})
    multicast = any(Sign.NVLS_MULTICAST in p.event.payload.signs for p in failed)
    said = (
        "NCCL's NVLink SHARP (NVLS) transport failed a CUDA multicast call while it set the "
        "communicator up"
        if multicast
        else "CUDA reported that the system is not ready for CUDA work (error 802: a driver "
        "daemon the system needs is not running)"
    )
    return Finding(
        rule=GpuEccOrLost.id,
        category=Category.GPU_HARDWARE,
        severity=Severity.CRITICAL,
        title=(
            f"NCCL's NVLS multicast set-up failed on {who}: {what[0][:80]}"
            if multicast
            else f"the GPUs' fabric is not ready on {who}: {what[0][:80]}"
        ),
        explanation=(
            f"{said} ({'; '.join(what[:3])}). On NVSwitch systems the GPUs' NVLink fabric and "
            "its multicast objects are set up by the fabric manager: this is usually the "
            "fabric manager not running, restarted without a GPU reset, or at another version "
            "than the driver, not the job's configuration."
        ),
        fix=(
            "Check `systemctl status nvidia-fabricmanager` and `nvidia-smi -q | grep -i -A2 "
            "fabric`; after a fabric-manager restart reset the GPUs (`nvidia-smi -r`) or "
            "reboot the node"
            + (
                "; run with NCCL_NVLS_ENABLE=0 to go on without NVLS meanwhile."
                if multicast
                else "."
            )
        ),
        culprit_ranks=tuple(ranks),
        evidence=tuple(limited_refs(failed, limit=5)),
        strength=Strength.STATED,
    )


def _gpu_suspects(tl: Timeline, evidence: Evidence) -> list[Death]:
    """The first deaths whose CUDA error's documented meaning points at the GPU or its
    driver (Death.gpu_suspect), when they came before the others' timeouts (or there are
    none): after them, a rank's error may be the teardown. Peer access refused between two
    GPUs is HD302's (the platform's topology), not said twice. A kernel cut by the
    device's run-time limit while the stack printed with it waits in a collective is that
    collective's kernel waiting for its peers (views/kernel_limit.py): the wait outlasted
    the limit, which names neither the GPU nor the driver failing."""
    wave_events = wave(tl)
    return [
        d
        for d in first_deaths(tl)
        if d.gpu_suspect is not None
        and Sign.PEER_ACCESS_UNSUPPORTED not in d.payload.signs  # HD302's, the platform's
        and precedes_wave(d.placed, wave_events) is not False
        and not cut_while_waiting(evidence, d.placed)
    ]


def _what(p: Placed) -> str:
    """The failure as the line said it: the CUDA error, the exception's message, NCCL's
    last error, else the line from the hardware words on."""
    payload = p.event.payload
    failure = p.event.payload_as(CudaFailure)
    nccl = p.event.payload_as(NcclError)
    return (
        (failure.error if failure is not None else None)
        or payload.message
        or (nccl.last_error if nccl is not None else None)
        or payload.hardware
        or ""
    )


RULE = GpuEccOrLost
