"""Ranks failed to reach a monitored barrier

## What it means
`torch.distributed.monitored_barrier` (gloo) makes rank 0 wait for every other rank
with a timeout and report the ones that did not arrive: "Rank 3 failed to pass
monitoredBarrier in 30000 ms", or with `wait_all_ranks=True` "Ranks 1, 3 failed to pass
monitoredBarrier". Those ranks were somewhere else when the others reached the barrier.

## Why it hangs
A plain barrier would have waited for them until the collective timeout; the monitored
barrier names them instead.

## Evidence used
The monitored-barrier failure messages (the rank-0 report names the missing ranks).
"Rank N successfully reached monitoredBarrier, but received errors…" lines name the
reporter, not a culprit, and are ignored.

## How to confirm
Look at the last lines the named ranks printed and take their stacks; they are stuck or
slow in code the others have passed.

## How to fix
Find what keeps the named ranks from the barrier (I/O, a dataloader, a rank-dependent
branch) and make all ranks reach it; raise the barrier timeout if they are only slow.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity
from hangdoc.analyzer.ranges import parse_ranks
from hangdoc.analyzer.vocabulary import F_RANKS, EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text


class MonitoredBarrier(Rule):
    __doc__ = __doc__
    id = "HD037"
    name = "monitored-barrier-failure"
    summary = "a monitored barrier named the ranks that did not arrive"
    categories = (Category.RANK_DIVERGENCE,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        events = tl.of(EventKind.MONITORED_BARRIER)
        if not events:
            return
        culprits = sorted({r for p in events for r in parse_ranks(p.get(F_RANKS) or "")})
        reporters = sorted({p.rank for p in events if p.rank is not None} - set(culprits))
        yield Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=f"{ranks_text(culprits)} failed to reach the monitored barrier",
            explanation=(
                f"The monitored barrier reported that {ranks_text(culprits)} did not arrive "
                "within its timeout while the other ranks did."
            ),
            fix=(
                "Find what the named ranks were doing instead (their last log lines, their "
                "stacks) and make them reach the barrier; raise its timeout if they are slow."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(reporters),
            evidence=tuple(limited_refs(events, limit=4)),
            confidence=0.8,
        )


RULE = MonitoredBarrier
