"""A CUDA call reported an ECC/NVLink error or a lost GPU

## What it means
The job's own log shows the GPU failing, without a kernel log: `CUDA error:
uncorrectable ECC error encountered`, `uncorrectable NVLink error was detected`, `GPU
has fallen off the bus`, `cudaErrorECCUncorrectable`, nvidia-smi rows with non-zero
volatile uncorrected ECC counts, or NCCL's `ncclUnhandledCudaError` with such a
reason.

## Why it hangs
The rank whose GPU failed cannot run kernels any more; it crashes or blocks, and its
peers wait in their next collective until the timeout.

## Evidence used
CUDA error messages in tracebacks and NCCL WARN lines (`Cuda failure '…'`), NCCL error
classes surfaced by torch, the watchdog's teardown line when the exception it names is such
a CUDA error (it names the rank), and the ECC column of nvidia-smi (table or CSV).

## How to confirm
`nvidia-smi -q -d ECC,ROW_REMAPPER` and `dmesg -T | grep -i xid` on that node.

## How to fix
Drain the node and have the GPU reset or replaced; resume from the last checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.gpu_faults import HARDWARE, ranks_for
from hangdoc.analyzer.views.timeline import fint
from hangdoc.analyzer.vocabulary import F_ERROR, F_MESSAGE, EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_TEXT_KINDS = (
    EventKind.EXCEPTION,
    EventKind.ERROR_FILE,
    EventKind.CHILD_FAILURE,
    EventKind.CUDA_ERROR,
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
        hard = [
            p
            for p in tl.of(*_TEXT_KINDS)
            if HARDWARE.search(p.get(F_ERROR) or "") or HARDWARE.search(p.get(F_MESSAGE) or "")
        ]
        hard += [
            p for p in tl.of(EventKind.NCCL_ERROR) if HARDWARE.search(p.get("last_error") or "")
        ]
        # The watchdog's own teardown names the CUDA error its rank's GPU raised
        # (ProcessGroupNCCL.cpp: "[Rank 1] NCCL watchdog thread terminated with exception:
        # CUDA error: uncorrectable ECC error encountered"), and with it the rank.
        hard += [p for p in tl.of(EventKind.WATCHDOG_TEARDOWN) if HARDWARE.search(p.event.text)]
        ecc = [
            p for p in tl.of(EventKind.GPU_STATUS) if (fint(p.event, "ecc_uncorrected") or 0) > 0
        ]
        if hard:
            ranks = sorted({p.rank for p in hard if p.rank is not None})
            what = sorted(
                {
                    (
                        p.get(F_ERROR)
                        or p.get(F_MESSAGE)
                        or p.get("last_error")
                        or _hardware_words(p.event.text)
                    )[:80]
                    for p in hard
                }
            )
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
        elif ecc:
            gpus = sorted({p.get("index") or p.get("bus_id") or "?" for p in ecc})
            ranks = ranks_for(tl, [p for p in ecc])
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
                evidence=tuple(limited_refs(ecc, limit=4)),
                strength=Strength.HINT,  # uncorrected ECC errors count since the last reset
            )


def _hardware_words(text: str) -> str:
    """From the hardware words on: "uncorrectable ECC error encountered"."""
    m = HARDWARE.search(text)
    return text if m is None else text[m.start() :]


RULE = GpuEccOrLost
