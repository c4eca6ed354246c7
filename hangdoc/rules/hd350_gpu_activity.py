"""GPU utilisation corroborates the hang, or splits the ranks

## What it means
Either every rank's GPU is idle (about 0 % utilisation) while still holding memory —
nothing is computing anywhere, which is what a job stuck in Python, I/O or a CPU-side
wait looks like — or the ranks split: most GPUs are busy near 100 % while some sit at
0 %. NCCL kernels busy-wait on the GPU while they wait for a peer, so in a split the
busy ranks are usually the waiters and the idle ones are the ranks that never launched
the collective.

## Why it hangs
It says how, not why: an idle GPU with memory held means the process is alive but
blocked before its next kernel; a GPU spinning at 100 % in a collective waits for a
peer that never joins.

## Evidence used
Per-GPU utilisation and memory and per-process memory (nvidia-smi CSV or NVML, collected
into ``gpu/nvidia-smi.csv`` or attached), matched to ranks by process id.

## How to confirm
`nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv -l 1` for a few
seconds: the pattern holds. The ranks' stacks (py-spy) show where the idle ones are.

## How to fix
Follow the primary finding; for an idle rank in a split, look at that rank's stack
first.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.gpu_state import GpuView
from hangdoc.rules.base import Rule, RuleContext

IDLE_PCT = 5.0
BUSY_PCT = 90.0
HELD_FRACTION = 0.05  # memory still held: more than 5 % of the device in use


def _refs(views: dict[int, GpuView], ranks: Iterable[int]) -> list[EvidenceRef]:
    return [
        EvidenceRef(source=views[r].source, detail=f"rank {r}: {views[r].text()}", rank=r)
        for r in sorted(ranks)[:8]
    ]


class GpuActivity(Rule):
    __doc__ = __doc__
    id = "HD350"
    name = "gpu-activity"
    summary = "GPUs idle with memory held on every rank, or busy on some and idle on others"
    categories = (Category.UNKNOWN, Category.RANK_DIVERGENCE)
    severity = Severity.WARNING
    requires = frozenset()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        views = {r: v for r, v in ctx.gpu_views.items() if v.util_pct is not None}
        if not views:
            return
        idle = sorted(r for r, v in views.items() if (v.util_pct or 0.0) <= IDLE_PCT)
        busy = sorted(r for r, v in views.items() if (v.util_pct or 0.0) >= BUSY_PCT)
        held = [r for r in idle if (views[r].used_fraction or 0.0) >= HELD_FRACTION]
        if len(idle) == len(views) and held == idle:
            yield Finding(
                rule=self.id,
                category=Category.UNKNOWN,
                severity=Severity.INFO,
                title=(
                    f"the GPUs of {plural_ranks(idle)} are idle with memory held: "
                    "nothing is computing"
                ),
                explanation=(
                    f"Every collected rank's GPU is at most {IDLE_PCT:.0f} % busy while its "
                    f"memory is still in use (rank {idle[0]}: {views[idle[0]].text()}). The "
                    "processes are alive but no kernel runs: consistent with a hang in "
                    "Python, I/O or a CPU-side wait (with NCCL, a rank waiting in a "
                    "collective would keep its GPU busy)."
                ),
                fix="Look at the primary finding and the ranks' stacks for where they wait.",
                culprit_ranks=(),
                evidence=tuple(_refs(views, idle)),
                strength=Strength.ABSENCE,  # names no cause: where to look
            )
        elif busy and idle and len(busy) + len(idle) == len(views) and len(idle) < len(busy):
            yield Finding(
                rule=self.id,
                category=Category.RANK_DIVERGENCE,
                severity=Severity.WARNING,
                title=(
                    f"the GPUs of {plural_ranks(idle)} are idle while those of "
                    f"{plural_ranks(busy)} spin near 100 %"
                ),
                explanation=(
                    f"{plural_ranks(busy).capitalize()} keep their GPUs busy (rank {busy[0]}: "
                    f"{views[busy[0]].text()}) — NCCL kernels busy-wait for missing peers — "
                    f"while {plural_ranks(idle)} {verb(idle, 'does', 'do')} not run any "
                    f"kernel (rank {idle[0]}: {views[idle[0]].text()}). The idle "
                    f"{verb(idle, 'rank is', 'ranks are')} most likely the one(s) that never "
                    "joined the collective."
                ),
                fix=(
                    f"Look at the stacks of {plural_ranks(idle)}: what they do instead of "
                    "the collective is the cause."
                ),
                culprit_ranks=tuple(idle),
                waiting_ranks=tuple(busy),
                evidence=tuple(_refs(views, idle) + _refs(views, busy[:2])),
                strength=Strength.SIGNAL,
            )


RULE = GpuActivity
