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

## Evidence used
The main-thread stacks of every rank (same collective family on all), the absence of
ranks outside collectives, and — with two or more samples — no movement between them.

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

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import stack_refs


class AllInSameCollective(Rule):
    __doc__ = __doc__
    id = "HD005"
    name = "all-in-same-collective"
    summary = "every rank waits in the same collective; the cause is below Python"
    categories = (Category.UNKNOWN,)
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
        yield Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=Severity.ERROR if stuck_for_sure else Severity.WARNING,
            title=f"every collected rank waits in {op}; the stacks do not show why",
            explanation=explanation,
            fix=(
                "Collect the rest of the evidence: every node (`hangdoc collect --all` on "
                "each), the flight recorder (TORCH_FR_BUFFER_SIZE=2000 and `import "
                "hangdoc.hook`), NCCL_DEBUG=INFO logs, and `dmesg` for GPU Xid errors; then "
                "analyze them together."
            ),
            culprit_ranks=(),
            waiting_ranks=ranks,
            evidence=tuple(stack_refs(live, limit=3)),
            strength=Strength.ABSENCE,  # where every rank waits, not why
        )


RULE = AllInSameCollective
