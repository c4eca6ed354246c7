"""Every member of a group issued the same collective, and it did not finish

## What it means
The flight recorder shows all members of a process group issued collective #n with the
same op, sizes and dtypes, and it is still in flight on (some of) them. As far as the
flight recorder can tell, the ranks agree: the collective itself does not progress.

## Why it hangs
When every rank is in the right collective, what blocks it is below the application: a
network or transport failure (an InfiniBand link, a socket reset, a firewall), a GPU
that stopped making progress (an Xid error, a kernel stuck before the collective on the
same stream), or a rank that is slow inside the collective. The flight recorder alone
cannot say which.

## Evidence used
Every member's flight recorder dump: the sequence number, op, sizes, dtypes and state
of the entries in flight on this group, with no member missing and none differing.

## How to confirm
Read the NCCL logs (NCCL_DEBUG=INFO / WARN lines: transport errors, "Connection closed"),
the GPU state (nvidia-smi: utilisation pinned at 100 % on all ranks, Xid errors in
dmesg), and the watchdog messages in each rank's stderr.

## How to fix
Fix the transport or the GPU fault the logs name; restart on healthy nodes. For a slow
rank, find what slows it (thermal throttling, a noisy neighbour) or raise the timeout.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_matching import Kind
from hangdoc.rules.fr_text import fr_match, op_text, problem_refs, wavefront, where_text


class FrAllWaiting(Rule):
    __doc__ = __doc__
    id = "HD017"
    name = "fr-all-waiting"
    summary = "flight recorder: every member issued the same collective and it did not finish"
    categories = (Category.UNKNOWN,)
    severity = Severity.INFO
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = fr_match(ctx)
        for problem in result.of_kind(Kind.STALLED):
            where = where_text(problem, result)
            detail = op_text(problem.record) if problem.record is not None else problem.op
            explanation = (
                f"{plural_ranks(problem.waiting).capitalize()} — every member of the group — "
                f"issued {detail} as collective {where}, consistently, and it is still in "
                "flight. The flight recorder shows no divergence: look below the "
                "application (network, GPU, a slow rank)."
            )
            lines = wavefront(result, problem.group)
            if lines:
                explanation += "\n" + "\n".join(lines)
            yield Finding(
                rule=self.id,
                category=Category.UNKNOWN,
                severity=self.severity,
                title=f"all {len(problem.waiting)} members wait in {where}; no divergence",
                explanation=explanation,
                fix="Read the NCCL logs and GPU state: the cause is below the application.",
                waiting_ranks=problem.waiting,
                evidence=tuple(problem_refs(result, ctx, problem)),
                confidence=0.3,
            )


RULE = FrAllWaiting
