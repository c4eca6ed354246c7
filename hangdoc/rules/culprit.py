"""Shared wording of the stacks-and-node rules (HD1xx): who waits for the culprit, and
where a kernel fact came from. One place, so every finding says it the same way."""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import ProcessEvidence
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.rules.base import RuleContext


def victims(ctx: RuleContext, culprits: Iterable[int]) -> tuple[int, ...]:
    """Live ranks (not culprits) blocked in a collective: they wait for the culprits."""
    out = set(culprits)
    return tuple(
        sorted(
            a.rank
            for a in ctx.activities.values()
            if a.in_collective and not a.process.exited and a.rank not in out
        )
    )


def victims_text(ctx: RuleContext, ranks: tuple[int, ...]) -> str:
    """' while ranks 0-2 wait in all_reduce' (empty when nobody waits)."""
    if not ranks:
        return ""
    ops = sorted({call.op for r in ranks if (call := ctx.activities[r].waiting_call) is not None})
    return f" while {plural_ranks(ranks)} {verb(ranks, 'waits', 'wait')} in {' / '.join(ops)}"


def proc_source(process: ProcessEvidence) -> str:
    """The file that holds a rank's /proc facts (process.json), else its stacks."""
    found = next((s for s in process.sources if s.endswith("process.json")), None)
    return found or process.primary_source()


def nobody_moved(ctx: RuleContext, ranks: Iterable[int]) -> bool | None:
    """True when every given rank was sampled twice and none moved; None when some rank
    was sampled once (movement unknown); False when one moved."""
    progress = [ctx.progress(ctx.activities[r].process) for r in ranks if r in ctx.activities]
    if any(p.progressed for p in progress):
        return False
    if progress and all(p.comparable for p in progress):
        return True
    return None


def span_text(ctx: RuleContext, ranks: Iterable[int]) -> str:
    """' in the 3.0 s between samples' or ' between samples'."""
    spans = [
        p.span_s
        for r in ranks
        if r in ctx.activities and (p := ctx.progress(ctx.activities[r].process)).span_s
    ]
    return f" in the {min(spans):.1f} s between samples" if spans else " between samples"
