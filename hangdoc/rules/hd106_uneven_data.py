"""Ranks ran out of batches at different steps

## What it means
Some ranks are still inside a training step, blocked in its gradient all-reduce (DDP's
reducer inside ``backward``, a hand-written ``average_gradients``, FSDP's
reduce-scatter), while the others have already left the epoch loop and wait in a
different collective: evaluation, an end-of-epoch barrier, a save, the next epoch. The
ranks did not run the same number of steps: one got fewer (or more) batches, or computed
the number of steps per epoch differently.

## Why it hangs
Every training step issues the same gradient collectives on every rank. A rank with
fewer batches leaves the loop early and issues the next collective of the program
instead; the ranks still training wait for a gradient all-reduce it will never join,
and it waits for a collective they have not reached. Common causes: a sampler that
does not split the data evenly (no ``DistributedSampler``, ``drop_last=False`` with an
iterable dataset, per-rank filtering or bucketing), and a steps-per-epoch computed
without the world size on one rank.

## Evidence used
The main thread's stack of every rank: the collective each is blocked in, whether it is
called from a training step (catalog: autograd ``backward``, trainer and loop frames,
gradient-sync helpers) or from somewhere past the loop; integer counters in the user
frames' locals (``step``, ``batch_idx``, ``steps_per_epoch``...) when the dump has
``--locals``; whether anything moved between samples. The smaller group is named as the
odd one. The ranks' own logs: a line in which every rank printed how much data it got
("rank 2: 2 of 10 shards", views/log_compare.py ``length_splits``) whose count parts the
ranks as their stacks do, the ranks that left the loop holding less, says the data was
uneven (a source of its own agrees); progress lines that end on the same step on every
rank then say nothing against it (a step that prints after its collective: the ranks with
more data finished as many steps and wait inside the next one), where otherwise they
weaken the finding. Where the odd ranks' own logs hold an error of a step that they lived
through (still alive, in a collective) and the others never met (an out-of-memory error
caught and the batch skipped), the counts differ by the skipped step, not by the data: the
finding is weakened, and HD002 names the collectives that no longer match.
Outside gradient syncs, a few ranks in one collective and the others in another (HD002's
shape) are uneven data when the few ranks' logs say they finished an iteration the others
are still in (they printed its line once more than any other rank) with less data than
every iteration before (views/short_last.py: "rollout 2: completion lengths [1, 2]"
after "[8, 11]"), and their stacks are past the others' call in the same function (a
later line): they ran out of work, left the loop, and wait in the collective after it,
while the others wait in the loop's collective of their next iteration.

## How to confirm
Print ``len(dataloader)`` (and the steps per epoch) on every rank at the start of the
epoch: they differ. `py-spy dump --locals` on one rank of each group shows the step
counters.

## How to fix
Give every rank the same number of steps: ``DistributedSampler(..., drop_last=True)``
for training and evaluation, compute steps per epoch from the per-rank length
(``len(dataset) // (batch_size * world_size)``) identically everywhere, or let DDP
handle uneven inputs with its ``join()`` context manager
(``torch.distributed.algorithms.Join``).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import format_ranks, plural_ranks, verb
from hangdoc.analyzer.views.activity import RankActivity, live_activities
from hangdoc.analyzer.views.log_compare import LengthSplit
from hangdoc.analyzer.views.short_last import ShortLast, short_last_lines
from hangdoc.analyzer.views.training import (
    counter_differences,
    in_gradient_sync,
    past_the_loop,
    survived_errors,
)
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import nobody_moved, span_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted

_FIX = (
    "Give every rank the same number of steps: DistributedSampler(..., drop_last=True) for "
    "training and evaluation, steps per epoch computed from the per-rank length "
    "(len(dataset) // (batch_size * world_size)) identically on every rank, or DDP's "
    "uneven-input handling (with model.join(): ... / torch.distributed.algorithms.Join)."
)


class UnevenData(Rule):
    __doc__ = __doc__
    id = "HD106"
    name = "uneven-data"
    summary = "some ranks wait in a step's gradient all-reduce, others left the epoch loop"
    categories = (Category.UNEVEN_DATA,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = live_activities(ctx.activities)
        if len(live) < 2 or not all(a.in_collective for a in live):
            return  # a rank outside any collective is HD001's (its activity says why)
        training = [a for a in live if in_gradient_sync(a)]
        left = [a for a in live if not in_gradient_sync(a)]
        if not training or not left:
            yield from self._ran_short(ctx, live)
            return
        moved = nobody_moved(ctx, (a.rank for a in live))
        if moved is False:
            return
        yield self._finding(ctx, training, left, stuck=moved is True)

    def _finding(
        self,
        ctx: RuleContext,
        training: list[RankActivity],
        left: list[RankActivity],
        *,
        stuck: bool,
    ) -> Finding:
        t_ranks = tuple(a.rank for a in training)
        l_ranks = tuple(a.rank for a in left)
        odd_left = len(left) <= len(training)
        tie = len(left) == len(training)
        sync_op = training[0].waiting_call.op if training[0].waiting_call else "all_reduce"
        past = past_the_loop(left[0])
        if odd_left:
            culprits, waiting = l_ranks, t_ranks
            title = (
                f"ranks ran different numbers of batches: {plural_ranks(l_ranks)} "
                f"{verb(l_ranks, 'is', 'are')} {past} while {plural_ranks(t_ranks)} "
                f"{verb(t_ranks, 'waits', 'wait')} in the gradient {sync_op} of a training step"
            )
        else:
            culprits, waiting = t_ranks, l_ranks
            title = (
                f"ranks ran different numbers of steps: {plural_ranks(t_ranks)} "
                f"{verb(t_ranks, 'is', 'are')} still in a training step (gradient {sync_op}) "
                f"while {plural_ranks(l_ranks)} left the epoch loop ({past})"
            )
        explanation = (
            f"{plural_ranks(t_ranks).capitalize()} {verb(t_ranks, 'is', 'are')} blocked in "
            f"a training step's gradient {sync_op} (e.g. rank {training[0].rank}: "
            f"{training[0].description()}), while {plural_ranks(l_ranks)} "
            f"{verb(l_ranks, 'is', 'are')} elsewhere in the program (e.g. rank {left[0].rank}: "
            f"{left[0].description()}). The two groups are at different points of the epoch: "
            "the ranks did not get the same number of batches (a sampler that does not split "
            "the data evenly, per-rank filtering, an evaluation set split without padding) or "
            "did not compute the same number of steps, and each group now waits for a "
            f"collective the other will not issue. The smaller group ({plural_ranks(culprits)}) "
            "is the odd one."
        )
        diffs = counter_differences(training, left)
        if diffs:
            shown = "; ".join(
                f"{name}: " + ", ".join(f"rank {r}={v}" for r, v in sorted(vals.items()))
                for name, vals in diffs[:3]
            )
            explanation += f" Loop counters in the stacks' locals differ: {shown}."
        if tie:
            explanation += (
                " Both groups have the same size, so which one is odd is a guess: compare "
                f"ranks {format_ranks(t_ranks)} with {format_ranks(l_ranks)}."
            )
        explanation += (
            f" Nothing moved{span_text(ctx, t_ranks + l_ranks)}." if stuck else " One sample only."
        )
        # The stacks show both groups, and nothing moved between samples.
        strength = Strength.CORROBORATED
        if not stuck:
            strength = shifted(strength, Shift.ONE_SAMPLE)
        if tie:
            strength = shifted(strength, Shift.TIE)
        if diffs:  # the loop counters in the locals agree
            strength = shifted(strength, Shift.AGREES)
        printed = _lengths_split_alike(ctx, t_ranks, l_ranks)
        if printed is not None:
            # The ranks' own count of their data parts them as their stacks do, the ranks
            # still training holding more: a source of its own says the data was uneven.
            strength = shifted(strength, Shift.AGREES)
            few, more = printed.lines[0], printed.lines[-1]
            explanation += (
                f" The ranks' logs say so: each printed how much data it got, and the counts "
                f"part them as their stacks do ({few.line.text.strip()!r} on rank {few.rank} "
                f"against {more.line.text.strip()!r} on rank {more.rank})."
            )
            if ctx.log_comparison.progress_agrees:
                explanation += (
                    " That every rank's progress lines end on the same step is what uneven "
                    "data shows where a step prints after its collective: the ranks with "
                    "more data finished as many steps and wait inside the next one."
                )
        elif ctx.log_comparison.progress_agrees:
            # The ranks' own progress lines end on the same step, as often on every rank:
            # they ran the same number of batches, and something else split them.
            strength = shifted(strength, Shift.CONTRADICTED)
            explanation += (
                " But the ranks' logs print the same progress, ending on the same step, on "
                "every rank: they ran the same number of batches, so another branch (a "
                "callback, a rank-dependent condition) may have split them."
            )
        culprit_acts = [a for a in training + left if a.rank in culprits]
        others = [a for a in training + left if a.rank not in culprits]
        survived = survived_errors(culprit_acts)
        if len(survived) == len(culprit_acts) and not survived_errors(others):
            # The odd ranks lived through an error of a step that the others never met (an
            # out-of-memory error caught and the batch skipped): they ran another number of
            # collectives because a handler skipped a step's, not because of their data.
            strength = shifted(strength, Shift.CONTRADICTED)
            first = survived[culprits[0]]
            explanation += (
                f" But {plural_ranks(culprits)} lived through an error the others never met "
                f"(rank {culprits[0]}: {first.text.strip()[:160]!r}) and went on: a handler "
                "that caught it skipped the rest of that step, its collectives with it, so "
                "the counts differ by the skipped step, not by the data."
            )
        return Finding(
            rule=self.id,
            category=Category.UNEVEN_DATA,
            severity=self.severity if stuck else Severity.ERROR,
            title=title,
            explanation=explanation,
            fix=_FIX,
            culprit_ranks=culprits,
            waiting_ranks=waiting,
            evidence=tuple(stack_refs(culprit_acts, limit=4) + stack_refs(others, limit=2)),
            strength=strength,
        )

    def _ran_short(self, ctx: RuleContext, live: list[RankActivity]) -> Iterable[Finding]:
        """Issue 21 (live-2026-11-29g, rollout-eos): a few ranks wait in one collective,
        the others in another, and the few ranks' own logs say they finished an iteration
        the others are still in (they printed its line once more than any other rank),
        with less data than every iteration before (``short_last_lines``): they ran out
        of work in the loop, left it, and wait in the collective after it, while the
        others wait in the loop's own collective of the next iteration. The collectives
        differ because the data did, not because of a branch (HD002 names the ops)."""
        short = short_last_lines(ctx.evidence)
        odd = [a for a in live if a.rank in short and _ahead(short[a.rank])]
        rest = [a for a in live if a not in odd]
        if not odd or not rest or len(odd) >= len(rest):
            return
        if not all(_past(a, b) for a in odd for b in rest):
            return  # the stacks do not show the few ranks past the others' call
        families = {a.waiting_call.family for a in odd if a.waiting_call is not None}
        theirs = {a.waiting_call.family for a in rest if a.waiting_call is not None}
        if len(families) != 1 or families & theirs or len(theirs) != 1:
            return  # not two groups, each in its own collective
        moved = nobody_moved(ctx, (a.rank for a in live))
        if moved is False:
            return
        culprits = tuple(a.rank for a in odd)
        waiting = tuple(a.rank for a in rest)
        first = short[culprits[0]]
        op = odd[0].waiting_call.op if odd[0].waiting_call else "a collective"
        their_op = rest[0].waiting_call.op if rest[0].waiting_call else "a collective"
        title = (
            f"{plural_ranks(culprits)} ran out of work first: "
            f"{verb(culprits, 'its', 'their')} last iteration had less data and "
            f"{verb(culprits, 'it waits', 'they wait')} in {op} past the loop while "
            f"{plural_ranks(waiting)} {verb(waiting, 'waits', 'wait')} in the next "
            f"iteration's {their_op}"
        )
        explanation = (
            f"{plural_ranks(waiting).capitalize()} {verb(waiting, 'is', 'are')} blocked in "
            f"{their_op} (e.g. rank {rest[0].rank}: {rest[0].description()}), while "
            f"{plural_ranks(culprits)} {verb(culprits, 'is', 'are')} blocked in {op} "
            f"(e.g. rank {odd[0].rank}: {odd[0].description()}). The logs say why: "
            f"{first.detail()}, and rank {first.rank} printed that line {first.prints} "
            f"times, the others at most {first.others_prints}: it finished an iteration "
            "the others are still in, with less work in it, left the loop and waits in the "
            "collective after it, while the others wait in the loop's own collective of "
            "their next iteration, which it will never issue. The ranks' amounts of work "
            "differ (uneven data: fewer items, shorter sequences, an early stop on one "
            "rank's data), not the code they run."
        )
        explanation += (
            f" Nothing moved{span_text(ctx, culprits + waiting)}." if moved else " One sample only."
        )
        strength = Strength.CORROBORATED  # the stacks part the ranks, the logs say why
        if not moved:
            strength = shifted(strength, Shift.ONE_SAMPLE)
        yield Finding(
            rule=self.id,
            category=Category.UNEVEN_DATA,
            severity=self.severity if moved else Severity.ERROR,
            title=title,
            explanation=explanation,
            fix=(
                "Let every rank run the loop's collectives as often as the others: keep "
                "the ranks that finish early in the loop until every rank is done (run "
                "the collective with a dummy input, as generate(synced_gpus=True) does; "
                "agree on the count with an all_reduce of a 'done' flag each iteration), "
                "or give every rank the same amount of work."
            ),
            culprit_ranks=culprits,
            waiting_ranks=waiting,
            evidence=tuple(stack_refs(odd, limit=4) + stack_refs(rest, limit=2)),
            strength=strength,
        )


RULE = UnevenData


def _ahead(short: ShortLast) -> bool:
    """The rank printed the line of its short iteration more often than any other rank
    that prints it: it finished an iteration the others are still in."""
    return short.prints > short.others_prints > 0


def _past(ahead: RankActivity, behind: RankActivity) -> bool:
    """Both main threads run the same outer frames, and where they first part, in one and
    the same function, ``ahead`` is at a later line: it returned from (or never made) the
    call that ``behind`` is still in."""
    if ahead.main is None or behind.main is None:
        return False
    outer_a = list(reversed(ahead.main.thread.frames))
    outer_b = list(reversed(behind.main.thread.frames))
    for fa, fb in zip(outer_a, outer_b, strict=False):
        if (fa.file, fa.function) != (fb.file, fb.function):
            return False
        if fa.line != fb.line:
            return fa.line is not None and fb.line is not None and fa.line > fb.line
    return False


def _lengths_split_alike(
    ctx: RuleContext, training: tuple[int, ...], left: tuple[int, ...]
) -> LengthSplit | None:
    """A line of the job's own in which every rank printed an amount of data (``lengths``
    of the log comparison) whose count parts the ranks into exactly the two groups of the
    stacks, the ranks that left the loop printing the smaller count: they were given less
    data and ran out of batches first."""
    for split in ctx.log_comparison.lengths:
        if len(split.groups) == 2 and split.groups == (
            tuple(sorted(left)),
            tuple(sorted(training)),
        ):
            return split
    return None
