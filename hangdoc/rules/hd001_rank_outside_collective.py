"""Some ranks wait in a collective while others are somewhere else

## What it means
Every rank of a process group must enter the same collective for any of them to leave
it. Here some ranks are blocked inside a collective (all_reduce, all_gather, barrier...)
while one or more ranks are not in any collective at all: they are still doing
something else — saving a checkpoint, fetching a batch, evaluating, or running code the
others skipped. Those odd ranks are the culprits; the waiting ranks are victims.

## Why it hangs
A collective completes only when all members have joined. The waiting ranks block
until the culprits arrive; if the culprits are stuck (a filesystem that does not answer,
a dataloader worker that never returns) or never call the collective (a rank-dependent
branch), the job waits until the process-group timeout (10 to 30 minutes) or forever.

## Evidence used
The main thread's Python stack of every rank at the last sample (py-spy or
faulthandler), classified with the frame catalog (analyzer/views/catalog.py): collective frames of
torch.distributed, DeepSpeed, Accelerate, Lightning, Composer; checkpoint, dataloader
and evaluation frames; the innermost frame of the user's own code. With two or more
samples, whether any rank moved between them. A culprit whose own names say it reads
data but whose main thread runs the job's own code on CPU (py-spy active, CPU time
counted, its innermost frame the job's code) with no child process waits on no DataLoader
worker: its own loop does not return, the job's code diverging, not a data loader hang.

## How to confirm
Look at the culprit's stack in the report: the innermost user frame says where it is.
Take another `hangdoc collect` a minute later: if the culprit is still at the same place
it is stuck; if it moved, it is slow (see HD004). For a checkpoint, check the target
filesystem (`df`, `ls -l` of the file growing, `dmesg` for NFS/Lustre errors).

## How to fix
Depends on what the culprit is doing; the finding's fix says it. In general make every
rank issue the same collectives in the same order, and keep long single-rank work
(saving, evaluation) out of the window in which the others wait, or raise the timeout.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.activity import (
    RankActivity,
    live_activities,
    may_wait_in_gradient_sync,
)
from hangdoc.analyzer.views.waits import JobWaits
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.causes import cause_of, key_frame_text, polls
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, agreeing, shifted


def _ops_text(waiting: list[RankActivity]) -> str:
    ops = sorted({a.waiting_call.op for a in waiting if a.waiting_call is not None})
    return " / ".join(ops) if ops else "a collective"


def _stopped_together(
    culprits: list[RankActivity], waiting: list[RankActivity], waits: JobWaits
) -> bool:
    """More ranks stopped at one and the same line of their own code, which names nothing
    (the generic cause), than wait in the collective: they wait together on something the
    frames do not show (a file lock, a shared file: a C call has no frame), and what holds
    them may as well be the few in the collective (a rank that took the lock and went on).
    Which side is odd the frames cannot say, so neither is named. Unless the kernel shows
    each of them asleep in a sleep call (``polls``): a loop that checks a condition
    between sleeps holds and waits on nothing another rank could hold, and the ranks in
    it are the ones outside the collective."""
    if len(culprits) < 2 or len(culprits) <= len(waiting):
        return False
    if all(polls(waits.of(a.process)) for a in culprits):
        return False
    stacks = {
        tuple((f.file, f.function, f.line) for f in a.main.thread.frames) if a.main else ()
        for a in culprits
    }
    return len(stacks) == 1 and () not in stacks


class RankOutsideCollective(Rule):
    __doc__ = __doc__
    id = "HD001"
    name = "rank-outside-collective"
    summary = "ranks wait in a collective while other ranks are elsewhere"
    categories = (
        Category.CHECKPOINT_SAVE,
        Category.DATALOADER,
        Category.EVAL_SOME_RANKS,
        Category.RANK_DIVERGENCE,
        Category.IO_STALL,  # blocked on the network (issue 22)
    )
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = live_activities(ctx.activities)
        waiting = [a for a in live if a.in_collective]
        # A rank the kernel shows blocked on a file lock with a known holder is HD111's:
        # the holder, not the rank, says who is to blame.
        outside = [a for a in live if not a.in_collective and not ctx.waits.on_held_lock(a.process)]
        # A rank in backward() whose frames do not say whether it computes or waits in
        # DDP's gradient all-reduce (no idle mark) is not known to be outside.
        outside = [a for a in outside if not may_wait_in_gradient_sync(a)]
        if not waiting or not outside:
            return
        by_category: dict[Category, list[RankActivity]] = {}
        for activity in outside:
            by_category.setdefault(cause_of(activity, ctx.waits).category, []).append(activity)
        waiting_ranks = tuple(a.rank for a in waiting)
        ops = _ops_text(waiting)
        for category, culprits in sorted(by_category.items(), key=lambda kv: kv[1][0].rank):
            if category is Category.RANK_DIVERGENCE and _stopped_together(
                culprits, waiting, ctx.waits
            ):
                continue
            yield self._finding(ctx, category, culprits, waiting, waiting_ranks, ops)

    def _finding(
        self,
        ctx: RuleContext,
        category: Category,
        culprits: list[RankActivity],
        waiting: list[RankActivity],
        waiting_ranks: tuple[int, ...],
        ops: str,
    ) -> Finding:
        cause = cause_of(culprits[0], ctx.waits)
        culprit_ranks = tuple(a.rank for a in culprits)
        title = (
            f"{plural_ranks(culprit_ranks)} {cause.doing.removeprefix('is ')}"
            if len(culprit_ranks) > 1
            else f"{plural_ranks(culprit_ranks)} {cause.doing}"
        )
        title += (
            f" while {plural_ranks(waiting_ranks)} {verb(waiting_ranks, 'waits', 'wait')} in {ops}"
        )
        first = culprits[0]
        where = key_frame_text(first)
        waiter_where = waiting[0].description()
        explanation = (
            f"{plural_ranks(waiting_ranks).capitalize()} are blocked in {ops} "
            f"(e.g. rank {waiting[0].rank}: {waiter_where}). "
            f"{plural_ranks(culprit_ranks).capitalize()} never joined it: "
            f"rank {first.rank} {cause.doing} ({where}). "
            "A collective finishes only when every rank of the group has entered it, so the "
            "waiting ranks cannot go on until the culprits arrive."
        )
        strength = Strength.STATED  # the stacks show it, in frames the catalog knows
        if cause.signals:
            # Read off the job's own names, not the catalog: one signal is one, each
            # independent one that agrees (frames, files written, last log line) adds.
            strength = agreeing(Strength.SIGNAL, len(cause.signals), Strength.STATED)
        progress = [ctx.progress(a.process) for a in culprits + waiting]
        if all(p.comparable and not p.progressed for p in progress):
            span = min((p.span_s for p in progress if p.span_s), default=None)
            strength = shifted(strength, Shift.NOTHING_MOVED)
            if span:
                explanation += f" No rank moved in the {span:.1f} s between samples."
        elif any(p.progressed for p in progress):
            strength = shifted(strength, Shift.SOME_MOVED)
            explanation += " Some ranks moved between samples, so this may be a slow rank."
        if len(culprits) > len(waiting):
            strength = shifted(strength, Shift.MOSTLY_OUTSIDE)
            explanation += (
                " More ranks are outside the collective than in it, so this may be a "
                "snapshot of normal work rather than a hang."
            )
        return Finding(
            rule=self.id,
            category=category,
            severity=self.severity,
            title=title,
            explanation=explanation,
            fix=cause.fix,
            culprit_ranks=culprit_ranks,
            waiting_ranks=waiting_ranks,
            evidence=tuple(stack_refs(culprits) + stack_refs(waiting, limit=2)),
            strength=strength,
        )


RULE = RankOutsideCollective
