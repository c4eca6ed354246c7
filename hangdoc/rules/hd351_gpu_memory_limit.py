"""One rank's GPU memory is at the limit

## What it means
The GPU of one rank (or a few) is full — 97 % or more of its memory in use — while the
other ranks' GPUs have room. That rank is out of memory or nearly so: an allocation
failed or is being retried, the caching allocator is thrashing, or the rank took a path
that allocates more (a longer sequence, a bigger batch, an evaluation without
``no_grad``).

## Why it hangs
A CUDA out-of-memory error on one rank kills or derails that rank while the others wait
for it in their next collective; an allocator that keeps freeing and retrying makes the
rank so slow that the others hit the collective timeout. With NCCL, a rank that cannot
allocate its communication buffers never launches the collective at all.

## Evidence used
Per-GPU used and total memory and per-process memory (nvidia-smi CSV or NVML) matched to
ranks by process id; the rank's stack (outside the collective the others wait in, or
not) raises or lowers the confidence.

## How to confirm
The rank's stderr for ``CUDA out of memory`` / ``OutOfMemoryError`` (HD031 reads it);
``torch.cuda.memory_summary()`` or a memory snapshot (``torch.cuda.memory._snapshot``) on
that rank; its batch and sequence lengths compared with the others'.

## How to fix
Reduce that rank's peak memory (batch size, sequence bucketing that caps the longest
batch, activation checkpointing, ``no_grad`` in evaluation), set
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` against fragmentation, and make
sure no stray process or context shares the GPU.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.rules.base import Rule, RuleContext
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted

FULL = 0.97
ROOMY = 0.85


class GpuMemoryLimit(Rule):
    __doc__ = __doc__
    id = "HD351"
    name = "gpu-memory-at-limit"
    summary = "one rank's GPU memory is at the limit while the others have room"
    categories = (Category.CUDA_OOM,)
    severity = Severity.ERROR
    requires = frozenset()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        views = {r: v for r, v in ctx.gpu_views.items() if v.used_fraction is not None}
        if len(views) < 2:
            return
        full = sorted(r for r, v in views.items() if (v.used_fraction or 0.0) >= FULL)
        rest = [views[r].used_fraction or 0.0 for r in views if r not in full]
        if not full or not rest or len(full) > len(rest) or median(rest) > ROOMY:
            return
        outside = [r for r in full if r in ctx.activities and not ctx.activities[r].in_collective]
        waiting = tuple(
            sorted(r for r, a in ctx.activities.items() if a.in_collective and r not in full)
        )
        corroborated = bool(outside) and bool(waiting)
        first = views[full[0]]
        explanation = (
            f"{plural_ranks(full).capitalize()} {verb(full, 'has', 'have')} a full GPU "
            f"(rank {full[0]}: {first.text()}), while the other ranks use at most "
            f"{max(rest) * 100:.0f} % of theirs. A rank at the memory limit fails or "
            "retries allocations (CUDA out of memory) while its peers wait for it."
        )
        if corroborated:
            explanation += (
                f" Its stack agrees: it is outside the collective that "
                f"{plural_ranks(waiting)} wait in ({ctx.activities[outside[0]].description()})."
            )
        refs = [
            EvidenceRef(source=views[r].source, detail=f"rank {r}: {views[r].text()}", rank=r)
            for r in full[:4]
        ]
        refs.extend(stack_refs([ctx.activities[r] for r in outside], limit=2))
        yield Finding(
            rule=self.id,
            category=Category.CUDA_OOM,
            severity=Severity.ERROR if corroborated else Severity.WARNING,
            title=(
                f"the GPU memory of {plural_ranks(full)} is at the limit while the other "
                "ranks have room"
            ),
            explanation=explanation,
            fix=(
                "Look for 'CUDA out of memory' in that rank's stderr; reduce its peak memory "
                "(batch or sequence length, activation checkpointing, no_grad in "
                "evaluation), try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, and "
                "check that no other process shares its GPU."
            ),
            culprit_ranks=tuple(full),
            waiting_ranks=waiting,
            evidence=tuple(refs),
            strength=shifted(Strength.SIGNAL, Shift.AGREES) if corroborated else Strength.SIGNAL,
        )


RULE = GpuMemoryLimit
