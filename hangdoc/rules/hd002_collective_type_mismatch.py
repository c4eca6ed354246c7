"""Ranks are blocked in different collectives

## What it means
All ranks are inside collectives, but not the same one: for example ranks 0-6 wait in
all_reduce while rank 7 waits in broadcast or barrier. Collectives of one process group
are matched by their order, so each side waits for a partner that will never come.

## Why it hangs
The ranks issued their collectives in a different order or a different number of times:
a collective inside a branch that only some ranks take (rank-0-only evaluation or
logging that gathers a metric, a save guarded by `if rank == 0` that calls a barrier),
an extra step on ranks that got more data, or an exception handler that calls a
collective. Each group of ranks waits in its own op until the timeout.

## Evidence used
The main thread's stack of every rank at the last sample, classified with the frame
catalog; the collective op (the innermost torch.distributed frame, normalised to its
family: all_gather_object counts as all_gather) and the user frame that called it.
The largest group of ranks is taken as the expected op; the others are the culprits.
When the culprits' own logs hold an error of a step that they lived through (alive, in a
collective after it) and the others never met, a handler that caught it skipped that
step's collectives: the error says why the ops differ, and strengthens the finding.
Point-to-point ``send``/``recv`` are not collectives: ranks in send facing a rank in recv
is the shape of a pipeline (HD105 reads it), so ranks in them are left out here.

Stacks whose rank no input names count too: a paste of several processes' stacks, frames
only or under py-spy's thread lines, told apart by the paste's own structure (a dump of
each, a main thread of each), or a file of each. Where the ranks' stacks alone agree and
such a process waits in another collective, the processes are read as parted, but which
ranks they are, and how many ranks share each stack (a paste often shows one stack for
several), is unknown: no side is odd for sure, no rank is named, and the finding is
weaker (``RANKS_UNKNOWN``). A process that a traceback alone shows (where it raised,
perhaps long before) is not compared.

## How to confirm
Compare the user frames that called the collective on each side (shown in the finding
and the merged stack tree). With the flight recorder enabled (TORCH_FR_BUFFER_SIZE),
the sequence numbers show which rank issued an extra or a missing collective.

## How to fix
Make every rank issue the same collectives in the same order. Move rank-dependent work
out of collectives (compute on rank 0, then broadcast from a call every rank makes),
run evaluation and metric gathering on every rank, and never call a collective from a
branch that depends on the rank or on per-rank data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.activity import UNRANKED, RankActivity, unranked_activities
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.p2p_stacks import P2P_FAMILIES
from hangdoc.analyzer.views.training import survived_errors
from hangdoc.rules.base import Rule, RuleContext
from hangdoc.rules.culprit import nobody_moved
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted


class CollectiveTypeMismatch(Rule):
    __doc__ = __doc__
    id = "HD002"
    name = "collective-type-mismatch"
    summary = "ranks are blocked in different collectives"
    categories = (Category.COLLECTIVE_TYPE_MISMATCH, Category.EVAL_SOME_RANKS)
    severity = Severity.CRITICAL
    # Stacks of ranks, or of processes whose rank is unknown (``_unranked``).
    requires = frozenset()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        groups: dict[str, list[RankActivity]] = {}
        for activity in sorted(ctx.activities.values(), key=lambda a: a.rank):
            call = activity.waiting_call
            if call is not None and not activity.process.exited and call.family not in P2P_FAMILIES:
                groups.setdefault(call.family, []).append(activity)
        if len(groups) < 2:
            yield from self._unranked(ctx, groups)
            return
        # The biggest group is what the job expected; ties go to the group with rank 0 side.
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0].rank))
        expected_family, majority = ordered[0]
        majority_ranks = tuple(a.rank for a in majority)
        expected_op = majority[0].waiting_call.op if majority[0].waiting_call else expected_family
        tie = len(ordered[1][1]) == len(majority)
        # One sample (a pasted dump) cannot show the ranks stuck: the split is then as
        # uncertain as the rules that explain it (HD106, HD107) say it is, so it does not
        # outrank them by staying sure.
        one_sample = nobody_moved(ctx, (a.rank for group in groups.values() for a in group))
        for family, culprits in ordered[1:]:
            finding = self._finding(
                family, culprits, expected_op, majority, majority_ranks, tie, one_sample is None
            )
            yield _with_survived_error(finding, culprits, majority)

    def _finding(
        self,
        family: str,
        culprits: list[RankActivity],
        expected_op: str,
        majority: list[RankActivity],
        majority_ranks: tuple[int, ...],
        tie: bool,
        one_sample: bool,
    ) -> Finding:
        culprit_ranks = tuple(a.rank for a in culprits)
        op = culprits[0].waiting_call.op if culprits[0].waiting_call else family
        in_eval = all(a.main is not None and a.main.has(Activity.EVAL) for a in culprits)
        category = Category.EVAL_SOME_RANKS if in_eval else Category.COLLECTIVE_TYPE_MISMATCH
        culprits_wait = verb(culprit_ranks, "waits", "wait")
        majority_wait = verb(majority_ranks, "waits", "wait")
        title = (
            f"{plural_ranks(culprit_ranks)} {culprits_wait} in {op} while "
            f"{plural_ranks(majority_ranks)} {majority_wait} in {expected_op}"
        )
        explanation = (
            f"{plural_ranks(majority_ranks).capitalize()} are blocked in {expected_op} "
            f"(e.g. rank {majority[0].rank}: {majority[0].description()}), but "
            f"{plural_ranks(culprit_ranks)} are blocked in {op} "
            f"(e.g. rank {culprits[0].rank}: {culprits[0].description()}). "
            "Collectives are matched in the order each rank issues them, so neither side "
            "can complete."
        )
        if in_eval:
            explanation += " The odd ranks are inside evaluation code."
        if tie:
            explanation += (
                " Both sides have the same number of ranks, so which side is 'odd' is a guess;"
                " compare both call sites."
            )
        fix = (
            "Make every rank issue the same collectives in the same order: look at the call "
            f"site of {op} on {plural_ranks(culprit_ranks)} and the one of {expected_op} on "
            "the others, and remove the rank- or data-dependent branch between them."
        )
        if in_eval:
            fix = (
                "Evaluation issues a collective that only some ranks reach: run evaluation "
                "(and its metric gathering) on every rank, or keep the rank-0-only part free "
                "of collectives and follow it with a barrier that every rank enters."
            )
        return Finding(
            rule=self.id,
            category=category,
            severity=Severity.ERROR if one_sample else self.severity,
            title=title,
            explanation=explanation,
            fix=fix,
            culprit_ranks=culprit_ranks,
            waiting_ranks=majority_ranks,
            evidence=tuple(stack_refs(culprits) + stack_refs(majority, limit=2)),
            strength=_strength(tie=tie, one_sample=one_sample),
        )

    def _unranked(
        self, ctx: RuleContext, groups: dict[str, list[RankActivity]]
    ) -> Iterable[Finding]:
        """Processes whose rank is unknown waiting in another collective than the rest:
        parted, but with no side known to be odd and no rank to name."""
        sides: dict[str, list[RankActivity]] = {k: list(v) for k, v in groups.items()}
        unranked = False
        for activity in unranked_activities(ctx.evidence):
            call = activity.waiting_call
            if call is not None and call.family not in P2P_FAMILIES:
                sides.setdefault(call.family, []).append(activity)
                unranked = True
        if len(sides) < 2 or not unranked:
            return
        ordered = sorted(sides.values(), key=lambda side: (-len(side), _first_rank(side)))
        in_eval = [
            all(a.main is not None and a.main.has(Activity.EVAL) for a in side) for side in ordered
        ]
        category = (
            Category.EVAL_SOME_RANKS
            if in_eval.count(True) == 1
            else Category.COLLECTIVE_TYPE_MISMATCH
        )
        ops = [_op(side) for side in ordered]
        described = "; ".join(
            f"{_who(side)} in {op}" for side, op in zip(ordered, ops, strict=True)
        )
        explanation = (
            f"The stacks wait in {len(ordered)} different collectives: {described} (e.g. "
            + "; ".join(f"{side[0].process.label}: {side[0].description()}" for side in ordered)
            + "). Collectives of one process group are matched in the order each rank "
            "issues them, so ranks of one group that wait in different ones wait for each "
            "other until the timeout. No input says which ranks these processes are, nor how "
            "many ranks share each stack (a paste often shows one stack for several), so "
            "which side is odd is unknown and no rank is named; that they are in one "
            "process group is assumed."
        )
        if category is Category.EVAL_SOME_RANKS:
            explanation += " The processes of one side are inside evaluation code."
        still = _all_still(ctx, [a for side in ordered for a in side])
        shifts = [Shift.RANKS_UNKNOWN] + ([Shift.ONE_SAMPLE] if still is None else [])
        yield Finding(
            rule=self.id,
            category=category,
            severity=Severity.ERROR if still is None else self.severity,
            title="processes whose ranks are unknown wait in different collectives: "
            + " vs ".join(ops),
            explanation=explanation,
            fix=(
                "Find out which ranks these stacks are (py-spy dump of each rank under its "
                "rank, or `hangdoc collect --all`), then make every rank issue the same "
                f"collectives in the same order: compare the call sites of {' and '.join(ops)} "
                "and remove the rank- or data-dependent branch between them."
            ),
            evidence=tuple(_ref(side[0]) for side in ordered),
            strength=shifted(Strength.STATED, *shifts),
        )


RULE = CollectiveTypeMismatch


def _with_survived_error(
    finding: Finding, culprits: list[RankActivity], majority: list[RankActivity]
) -> Finding:
    """The finding, stronger where every culprit lived through an error of a step that no
    rank of the majority met: a handler that caught it (fairseq's "attempting to recover
    from OOM", a try/except around the step) skipped the step's collectives, which is why
    the culprits are in another op."""
    survived = survived_errors(culprits)
    if len(survived) != len(culprits) or survived_errors(majority):
        return finding
    rank = culprits[0].rank
    said = survived[rank].text.strip()[:160]
    return replace(
        finding,
        strength=shifted(finding.strength, Shift.AGREES),
        explanation=finding.explanation
        + f" Rank {rank} lived through an error the others never met ({said!r}) and went "
        "on: the handler that caught it skipped the rest of that step and its collectives, "
        "so the ranks no longer issue the same ones.",
    )


def _first_rank(side: list[RankActivity]) -> int:
    """The side's lowest known rank; sides of unknown ranks only come after the others."""
    known = [a.rank for a in side if a.rank != UNRANKED]
    return min(known) if known else 1 << 30


def _op(side: list[RankActivity]) -> str:
    call = side[0].waiting_call
    return call.op if call is not None else "a collective"


def _who(side: list[RankActivity]) -> str:
    """``ranks 0-2 and 1 process of unknown rank``."""
    known = [a.rank for a in side if a.rank != UNRANKED]
    unknown = len(side) - len(known)
    parts = [plural_ranks(known)] if known else []
    if unknown:
        parts.append(f"{unknown} process{'es' if unknown > 1 else ''} of unknown rank")
    return " and ".join(parts)


def _ref(activity: RankActivity) -> EvidenceRef:
    rank = None if activity.rank == UNRANKED else activity.rank
    return EvidenceRef(
        source=activity.process.primary_source(),
        detail=f"{activity.process.label}: {activity.description()}",
        rank=rank,
    )


def _all_still(ctx: RuleContext, activities: list[RankActivity]) -> bool | None:
    """``nobody_moved`` for activities of known and unknown ranks alike."""
    progress = [ctx.progress(a.process) for a in activities]
    if any(p.progressed for p in progress):
        return False
    if progress and all(p.comparable for p in progress):
        return True
    return None


def _strength(*, tie: bool, one_sample: bool) -> Strength:
    """Stated by the stacks; weaker when which side is odd is a guess (a tie), or when a
    single sample cannot show that nobody moved."""
    strength = Strength.STATED
    if tie:
        strength = shifted(strength, Shift.TIE)
    if one_sample:
        strength = shifted(strength, Shift.ONE_SAMPLE)
    return strength
