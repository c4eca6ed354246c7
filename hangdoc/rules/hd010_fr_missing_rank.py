"""The flight recorder shows ranks that never issued the collective the others wait in

## What it means
On one process group, some ranks issued collective #n and wait in it, while others
stopped before it: their flight recorder ends at an earlier sequence number of that
group. The finding says where the missing ranks are instead (their stacks, or the op
their own flight recorder shows them blocked in).

## Why it hangs
A collective completes only when every member of the group joins. The missing ranks are
doing something else — saving a checkpoint, waiting for data, evaluating, blocked in a
collective of another group — so the others wait until the timeout. When the missing
ranks are themselves blocked in another collective, that other problem is the root and
this one is reported as its consequence.

## Evidence used
Every rank's flight recorder dump: per process group, the last collective_seq_id each
rank recorded and the entries still in flight; group members from pg_config (or, for
gloo's empty pg_config, the ranks that used the group; every rank for the default
group); ring buffers that lost their oldest entries are compared only where they
overlap. Stacks, when collected, say what the missing ranks are doing.

## How to confirm
Look at the missing ranks' stacks (py-spy, faulthandler): the frame they are in is the
reason. Their flight recorder's last entries show the last collective they completed.

## How to fix
Fix what holds the missing ranks (see the category), and make every rank reach the same
collectives: no collective inside a branch only some ranks take, equal amounts of data
per rank, and a process-group timeout that fits legitimately long steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.fr_matching import Kind, MatchResult, Problem
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import (
    blame,
    consequence_category,
    consequence_text,
    doings,
    its,
    op_text,
    problem_finding,
    root_category,
    seq_text,
    where_text,
)

GENERIC_FIX = (
    "Find what keeps the missing ranks from reaching this collective (their stacks say "
    "where they are) and make every rank issue the same collectives in the same order."
)


class FrMissingRank(Rule):
    __doc__ = __doc__
    id = "HD010"
    name = "fr-missing-rank"
    summary = "flight recorder: ranks never issued the collective the others wait in"
    categories = (
        Category.RANK_DIVERGENCE,
        Category.CHECKPOINT_SAVE,
        Category.DATALOADER,
        Category.EVAL_SOME_RANKS,
        Category.COLLECTIVE_TYPE_MISMATCH,
        Category.RANK_DEAD,
    )
    severity = Severity.CRITICAL
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        for problem in result.of_kind(Kind.MISSING):
            if not problem.cycle:
                yield self._finding(problem, result, ctx)

    def _finding(self, problem: Problem, result: MatchResult, ctx: RuleContext) -> Finding:
        where = where_text(problem, result)
        blamed, waiting = plural_ranks(problem.blamed), plural_ranks(problem.waiting)
        wait = its(problem.waiting, "waits", "wait")
        rec = problem.record
        detail = op_text(rec) if rec is not None else problem.op
        ranks = problem.blamed
        explanation = (
            f"{waiting.capitalize()} issued {detail} as collective "
            f"{seq_text(problem, result)} and {wait} in it; {blamed} never issued it "
            f"({its(ranks, 'its flight recorder stops', 'their flight recorders stop')} "
            f"before it on this group). Where {its(ranks, 'it is', 'they are')} instead: "
            f"{doings(result, ctx, ranks)}."
        )
        found = blame(result, ctx, problem.blamed)
        if problem.root:
            category = root_category(problem, result, ctx)
            severity, fix = Severity.CRITICAL, found.fix or GENERIC_FIX
            title = f"{blamed} never issued {where} that {waiting} {wait} in"
            if found.known:
                them = "it" if len(problem.blamed) == 1 else "them"
                title = f"{blamed} {found.doing}; {waiting} {wait} in {where} without {them}"
            stuck_elsewhere = any(
                result.ranks.get(r) is not None and result.ranks[r].stuck is not None
                for r in problem.blamed
            )
            # The records say the ranks never issued it; what they do instead, when known,
            # agrees; a rank stuck in another recorded op may only be late.
            strength = (
                Strength.CORROBORATED
                if found.known
                else (Strength.SIGNAL if stuck_elsewhere else Strength.STATED)
            )
        else:
            category = consequence_category(problem, result, ctx)
            severity, fix = Severity.WARNING, "Fix the root problem first."
            strength = Strength.ABSENCE  # a consequence: names no cause of its own
            stuck = its(problem.blamed, "it is", "they are")
            title = f"{blamed} never issued {where} (a consequence: {stuck} stuck elsewhere)"
            explanation += " " + consequence_text(problem, result)
        return problem_finding(
            self.id,
            problem,
            result,
            ctx,
            category=category,
            severity=severity,
            title=title,
            explanation=explanation,
            fix=fix,
            strength=strength,
        )


RULE = FrMissingRank
