"""Every rank waits in the same collective

## What it means
All collected ranks are blocked in the same collective (same op), none is elsewhere,
and none moved between samples. From Python's point of view they did everything right:
the collective itself does not complete.

## Why it hangs
The cause is below Python or outside the collected ranks: a rank on a node that was not
collected is elsewhere or dead; the network or transport fails (NCCL over IB/RoCE,
sockets); a GPU is wedged (Xid errors) so a kernel never finishes; the ranks disagree
on the size or dtype of the same op, or one communicator was never initialised.

One rank's own words may say which (issue 21, item 4): its last log line is the line every
other rank printed last, with another value where they all agree. The same names in
another order (`reducing ['text', 'image']` where every other rank printed
`['image', 'text']`) say the ranks take the same steps in another order: each rank's
collectives of those steps then pair with different ones on the others, which is a
collective mismatch (a hint: the order is the job's, the stacks only show where they
wait). Another value alone names the rank that differs, but not why the collective does
not complete: the category stays unknown.

## Evidence used
The main-thread stacks of every rank (same collective family on all), the absence of
ranks outside collectives, and — with two or more samples — no movement between them.
The ranks' last log lines, numbers masked (losses and timings differ on every rank),
compared word for word: only a value on which every other rank agrees exactly counts,
and only on a minority of ranks (views/log_compare.py ``last_line_values``).

## How to confirm
Collect every node (`hangdoc collect --all` on each), enable the flight recorder
(TORCH_FR_BUFFER_SIZE=2000 and hangdoc's hook) to compare sequence numbers and sizes,
run with NCCL_DEBUG=INFO (WARN lines name transport errors), and check `dmesg` for Xid.

## How to fix
Depends on the cause the additional evidence shows; until then the finding says what
to collect next.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.log_compare import LastValue, ValueKind, last_line_values
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import stack_refs


class AllInSameCollective(Rule):
    __doc__ = __doc__
    id = "HD005"
    name = "all-in-same-collective"
    summary = "every rank waits in the same collective; the cause is below Python"
    categories = (Category.UNKNOWN, Category.COLLECTIVE_TYPE_MISMATCH)
    severity = Severity.WARNING
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = [a for a in ctx.activities.values() if not a.process.exited]
        if len(live) < 2 or not all(a.in_collective for a in live):
            return
        families = {a.waiting_call.family for a in live if a.waiting_call}
        if len(families) != 1:
            return
        ranks = tuple(sorted(a.rank for a in live))
        op = sorted({a.waiting_call.op for a in live if a.waiting_call})[0]
        progress = [ctx.progress(a.process) for a in live]
        if any(p.progressed for p in progress):
            return
        stuck_for_sure = all(p.comparable for p in progress)
        world = ctx.evidence.expected_world_size()
        not_collected = (world or 0) - len(ctx.evidence.ranked())
        explanation = (
            f"{plural_ranks(ranks).capitalize()} are all blocked in {op} "
            f"(rank {live[0].rank}: {live[0].description()}), and no rank is elsewhere."
        )
        if stuck_for_sure:
            explanation += " None of them moved between samples."
        if not_collected > 0:
            explanation += (
                f" {not_collected} rank(s) of WORLD_SIZE={world} were not collected: one of "
                "them is the likeliest culprit."
            )
        else:
            explanation += (
                " The stacks cannot say why the collective does not complete: look below "
                "Python (transport, GPU) or at sizes and sequence numbers (flight recorder)."
            )
        odd = None if not_collected > 0 else last_line_values(ctx.evidence)
        category, strength = Category.UNKNOWN, Strength.ABSENCE  # where they wait, not why
        title = f"every collected rank waits in {op}; the stacks do not show why"
        culprits: tuple[int, ...] = ()
        if odd is not None:
            culprits = odd.ranks
            explanation += (
                f" {plural_ranks(odd.ranks).capitalize()} "
                f"{verb(odd.ranks, 'differs', 'differ')} in what "
                f"{verb(odd.ranks, 'it', 'they')} printed last: {odd.detail}"
            )
            if odd.kind is ValueKind.ORDER:
                # The same names in another order: the ranks take the same steps in
                # another order, so the collectives of those steps pair up wrongly.
                category, strength = Category.COLLECTIVE_TYPE_MISMATCH, Strength.HINT
                title = (
                    f"every collected rank waits in {op}; {plural_ranks(odd.ranks)} printed "
                    "the others' names in another order: collectives issued in another order"
                )
                explanation += (
                    " (the same names in another order, where every other rank agrees): "
                    "if those names decide the order of the collectives, "
                    f"{plural_ranks(odd.ranks)} {verb(odd.ranks, 'issues', 'issue')} them in "
                    "another order than the others, and each waits in a collective the "
                    "others are not in."
                )
            else:
                title = (
                    f"every collected rank waits in {op}; {plural_ranks(odd.ranks)} printed "
                    "another value than the others"
                )
                explanation += (
                    " (a value every other rank agrees on): what differs may be why, which "
                    "the stacks cannot confirm."
                )
        yield Finding(
            rule=self.id,
            category=category,
            severity=Severity.ERROR if stuck_for_sure else Severity.WARNING,
            title=title,
            explanation=explanation,
            fix=(
                "Collect the rest of the evidence: every node (`hangdoc collect --all` on "
                "each), the flight recorder (TORCH_FR_BUFFER_SIZE=2000 and `import "
                "hangdoc.hook`), NCCL_DEBUG=INFO logs, and `dmesg` for GPU Xid errors; then "
                "analyze them together."
            ),
            culprit_ranks=culprits,
            waiting_ranks=tuple(r for r in ranks if r not in culprits),
            evidence=tuple(stack_refs(live, limit=3)) + tuple(_line_refs(ctx, odd)),
            strength=strength,
        )


def _line_refs(ctx: RuleContext, odd: LastValue | None) -> list[EvidenceRef]:
    """The odd ranks' last lines and one of the others'."""
    if odd is None:
        return []
    return [
        EvidenceRef(
            source=c.line.source,
            line=c.line.line or None,
            detail=f"rank {c.rank} last line: {c.line.text.strip()}",
            rank=c.rank,
        )
        for c in odd.lines
    ]


RULE = AllInSameCollective
