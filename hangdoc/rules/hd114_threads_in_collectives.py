"""Two threads of each rank are inside a collective at once

## What it means
On the ranks, two threads of one process are each blocked in a collective at the same
time: the main thread in one (a barrier, the next step's all-reduce), a thread of the
job's own (a checkpoint executor, a background metrics or upload thread) in another
(``all_gather_object`` of a save, a broadcast). Nothing moved between the samples.

## Why it hangs
A process group matches collectives by the order each rank issues them: the n-th call on
one rank pairs with the n-th call on every other. Calls from two threads of one process
have no order of their own: which of the two a rank issues first depends on how its
threads were scheduled, and nothing makes it the same on every rank. A rank that took
another path before one of them (it pruned old checkpoints, logged, waited on a file)
issues the pair in the other order; its first call then pairs with the others' second,
and each side waits for a collective the other has already entered. PyTorch documents it
for ``new_group`` (collectives of one group from several threads, or of several NCCL
groups at once, need explicit synchronization), and NCCL's user guide says the same of
one communicator used from several threads.

## Evidence used
Every thread of each rank's latest stacks: the collective each thread is blocked in
(group creation and point-to-point calls left out), on at least two ranks and on most of
the ranks that were collected; whether anything moved between samples; what the threads
do above their collectives (a save: the category is checkpoint_save_hang; evaluation:
eval_loop_only_some_ranks; else the order of the collectives does not match,
collective_type_mismatch). The stacks do not name the process group of each call: two
groups may be different and one of them stuck for another reason, so the evidence is a
step weaker. The odd rank is named only where its own log shows it took another path
first (a line only it printed near the end of its log, or an action it began and never
finished: views/log_compare.py); else no rank is named.

## How to confirm
`py-spy dump` of one rank: two threads in ``torch.distributed`` calls. The flight
recorder (TORCH_FR_BUFFER_SIZE) shows the two collectives with the same sequence numbers
but other ops on the odd rank.

## How to fix
Issue every collective of a group from one thread, or give the background thread a
group of its own (``dist.new_group(backend="gloo")`` for an object gather), and wait for
the background work (``future.result()``) before the main thread's next collective on
the shared group.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.activity import RankActivity, ThreadActivity, live_activities
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.log_compare import Divergence, DivergenceKind
from hangdoc.analyzer.views.p2p_stacks import P2P_FAMILIES
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import nobody_moved, span_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted

_FIX = (
    "Issue every collective of a process group from one thread: wait for the background "
    "work (its future's result()) before the main thread's next collective on that group, "
    "or give the background thread a group of its own (dist.new_group(backend='gloo') for "
    "an object gather)."
)
# Log divergences in which a rank shows it took another path before the others.
_PARTED = frozenset({DivergenceKind.ONLY_SOME, DivergenceKind.UNFINISHED})


def collective_threads(activity: RankActivity) -> list[ThreadActivity]:
    """The threads of a rank blocked in a collective call (not a group creation, not a
    point-to-point send or receive, whose order is its own pairing)."""
    return [
        t
        for t in activity.threads
        if t.collective is not None
        and not t.has(Activity.RENDEZVOUS)
        and t.collective.family not in P2P_FAMILIES
    ]


class ThreadsInCollectives(Rule):
    __doc__ = __doc__
    id = "HD114"
    name = "threads-in-collectives"
    summary = "two threads of each rank are inside a collective at once"
    categories = (
        Category.CHECKPOINT_SAVE,
        Category.EVAL_SOME_RANKS,
        Category.COLLECTIVE_TYPE_MISMATCH,
    )
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = live_activities(ctx.activities)
        concurrent = {a.rank: threads for a in live if len(threads := collective_threads(a)) >= 2}
        if len(concurrent) < 2 or len(concurrent) * 2 < len(live):
            return
        moved = nobody_moved(ctx, (a.rank for a in live))
        if moved is False:
            return
        ranks = tuple(sorted(concurrent))
        threads = [t for found in concurrent.values() for t in found]
        category = _category(threads)
        example = concurrent[ranks[0]]
        calls = " and ".join(
            f"{t.thread.name or 'a thread'} in {t.collective.op}"
            for t in example
            if t.collective is not None
        )
        title = (
            f"two threads of {plural_ranks(ranks)} {verb(ranks, 'is', 'are')} each inside a "
            "collective at once, and such calls have no order across ranks"
        )
        explanation = (
            f"On {plural_ranks(ranks)}, two threads are each blocked in a collective at the "
            f"same time (rank {ranks[0]}: {calls}). A process group pairs collectives by the "
            "order each rank issues them, and calls from two threads of one process have no "
            "order across ranks: a rank whose threads issued them the other way round pairs "
            "its first with the others' second, and both sides wait for ever."
        )
        if category is Category.CHECKPOINT_SAVE:
            explanation += " One of them is inside a save: the checkpoint's own collective."
        elif category is Category.EVAL_SOME_RANKS:
            explanation += " One of them is inside evaluation."
        explanation += (
            " The stacks do not name each call's process group: two groups would not pair."
        )
        strength = shifted(Strength.STATED, Shift.GROUP_UNKNOWN)
        if moved is not True:
            strength = shifted(strength, Shift.ONE_SAMPLE)
            explanation += " One sample only."
        else:
            explanation += f" Nothing moved{span_text(ctx, tuple(a.rank for a in live))}."
        parted = _parted_first(ctx, ranks)
        culprits: tuple[int, ...] = ()
        if parted is not None:
            culprits = parted.ranks
            strength = shifted(strength, Shift.AGREES)
            line = parted.lines[0]
            explanation += (
                f" {plural_ranks(culprits).capitalize()} took another path first: "
                f"{verb(culprits, 'its', 'their')} log says "
                f"{line.line.text.strip()[:160]!r} (rank {line.rank}), which the others never "
                "printed, so "
                f"{verb(culprits, 'it', 'they')} issued the two collectives in the other order."
            )
        else:
            explanation += " No rank's log shows which one issued them in the other order."
        waiting = tuple(r for r in ranks if r not in culprits)
        refs = [a for a in live if a.rank in ranks]
        yield Finding(
            rule=self.id,
            category=category,
            severity=self.severity if moved is True else Severity.ERROR,
            title=title,
            explanation=explanation,
            fix=_FIX,
            culprit_ranks=culprits,
            waiting_ranks=waiting,
            evidence=tuple(stack_refs(refs, limit=4)),
            strength=strength,
        )


RULE = ThreadsInCollectives


def _category(threads: list[ThreadActivity]) -> Category:
    """What the threads in collectives are doing: a save, else evaluation, else a
    mismatch of the collectives' order."""
    if any(t.has(Activity.CHECKPOINT_SAVE) for t in threads):
        return Category.CHECKPOINT_SAVE
    if any(t.has(Activity.EVAL) for t in threads):
        return Category.EVAL_SOME_RANKS
    return Category.COLLECTIVE_TYPE_MISMATCH


def _parted_first(ctx: RuleContext, ranks: tuple[int, ...]) -> Divergence | None:
    """A log divergence in which a minority of these ranks shows it took another path (a
    line only it printed near its log's end, not followed by the others' lines again; an
    action it began and never finished)."""
    for divergence in ctx.log_comparison.divergences:
        if divergence.kind not in _PARTED or divergence.rejoined:
            continue
        odd = set(divergence.ranks)
        if odd and odd < set(ranks) and len(odd) * 2 < len(ranks):
            return divergence
    return None
