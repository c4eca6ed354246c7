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

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.fr_matching import Kind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import (
    op_text,
    problem_refs,
    seq_text,
    wavefront,
    where_text,
)


class FrAllWaiting(Rule):
    __doc__ = __doc__
    id = "HD017"
    name = "fr-all-waiting"
    summary = "flight recorder: every member issued the same collective and it did not finish"
    categories = (Category.UNKNOWN,)
    severity = Severity.INFO
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        stalled = result.of_kind(Kind.STALLED)
        if not stalled:
            return
        # One finding for all of them: at scale thousands of groups can be in this state.
        first = stalled[0]
        where = where_text(first, result)
        detail = op_text(first.record) if first.record is not None else first.op
        if len(stalled) == 1:
            title = f"all {len(first.waiting)} members wait in {where}; no divergence"
            lead = (
                f"{plural_ranks(first.waiting).capitalize()} — every member of the group — "
                f"issued {detail} as collective {seq_text(first, result)}, consistently, "
                "and it is still in flight."
            )
        else:
            shown = "; ".join(where_text(p, result) for p in stalled[:4])
            more = f" and {len(stalled) - 4} more" if len(stalled) > 4 else ""
            title = f"{len(stalled)} groups: every member waits in the same op ({shown}{more})"
            ranks = sorted({r for p in stalled for r in p.waiting})
            lead = (
                f"In {len(stalled)} process groups ({plural_ranks(ranks)}), every member "
                f"issued the same collective and it is still in flight: {shown}{more}."
            )
        explanation = (
            lead + " The flight recorder shows no divergence there: look below the "
            "application (network, GPU, a slow rank), or at the problems reported above, "
            "which may hold these ranks' streams."
        )
        lines = wavefront(result, first.group)
        if lines:
            explanation += "\n" + "\n".join(lines)
        refs = [ref for p in stalled[:4] for ref in problem_refs(result, ctx, p)]
        yield Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=self.severity,
            title=title,
            explanation=explanation,
            fix="Read the NCCL logs and GPU state: the cause is below the application.",
            waiting_ranks=tuple(sorted({r for p in stalled for r in p.waiting})),
            evidence=tuple(refs[:8]),
            strength=Strength.ABSENCE,  # where they wait, not why
        )


RULE = FrAllWaiting
