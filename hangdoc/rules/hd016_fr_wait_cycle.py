"""The flight recorder shows ranks waiting on each other in a circle: a deadlock

## What it means
Following "who waits for whom" through the flight recorder closes a loop: rank 0 waits
to send to rank 1, which waits to send to rank 0 (both send first); or ranks 0-3 wait in
a collective on group A for ranks 4-7, which wait in a collective on group B for ranks
0-3. Nobody in the loop can move first.

## Why it hangs
Blocking point-to-point ops posted in the same order on both sides of a pair (send
then recv on both) wait for each other; pipeline schedules that disagree on the order
of microbatches do the same across stages. Collectives issued on two process groups in
a different order on different ranks (group A then B on some ranks, B then A on others)
deadlock the same way.

## Evidence used
Every rank's flight recorder dump: each rank's oldest unfinished op, the members that
never issued a pending collective, and the peers of pending sends and recvs that posted
no matching op; the loop is found in the resulting wait-for graph.

## How to confirm
Check the order of the ops in the loop on each rank (the entries are listed): the same
pair or the same two groups appear in opposite orders.

## How to fix
Post both directions of an exchange together (``batch_isend_irecv``, or isend/irecv then
wait), make pipeline stages agree on the schedule, and issue collectives on several
groups in one global order on every rank.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.fr_matching import Kind, Problem
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import its, problem_refs, where_text


def _reach(start: Problem) -> list[Problem]:
    seen: dict[int, Problem] = {}
    todo = list(start.after)
    while todo:
        node = todo.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            todo.extend(node.after)
    return list(seen.values())


def cycles(problems: list[Problem]) -> list[list[Problem]]:
    """Each loop once, as the problems on it (in the order they were found)."""
    out: list[list[Problem]] = []
    taken: set[int] = set()
    for problem in problems:
        if not problem.cycle or id(problem) in taken:
            continue
        loop = [problem] + [q for q in _reach(problem) if q is not problem and problem in _reach(q)]
        taken.update(id(q) for q in loop)
        out.append(loop)
    return out


class FrWaitCycle(Rule):
    __doc__ = __doc__
    id = "HD016"
    name = "fr-wait-cycle"
    summary = "flight recorder: ranks wait on each other in a circle (deadlock)"
    categories = (Category.P2P_DEADLOCK, Category.COLLECTIVE_TYPE_MISMATCH)
    severity = Severity.CRITICAL
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        for loop in cycles(result.problems):
            p2p = any(p.kind is Kind.P2P for p in loop)
            ranks = sorted({r for p in loop for r in (*p.waiting, *p.blamed)})
            steps = [
                f"{plural_ranks(p.waiting)} {its(p.waiting, 'waits', 'wait')} in "
                f"{where_text(p, result)} for " + plural_ranks(p.blamed)
                for p in loop
            ]
            refs = [ref for p in loop for ref in problem_refs(result, ctx, p)]
            kind = "point-to-point" if p2p else "collectives on different groups"
            yield Finding(
                rule=self.id,
                category=Category.P2P_DEADLOCK if p2p else Category.COLLECTIVE_TYPE_MISMATCH,
                severity=self.severity,
                title=f"deadlock: {plural_ranks(ranks)} wait on each other ({kind})",
                explanation="The waits form a circle: "
                + "; ".join(steps)
                + ". Nobody in it can move first.",
                fix=(
                    "Post both directions of each exchange together (batch_isend_irecv) and "
                    "issue ops on several groups in the same order on every rank."
                ),
                culprit_ranks=tuple(ranks),
                evidence=tuple(refs[:12]),
                strength=Strength.CONCLUSIVE,  # the circle of waits is on record
            )


RULE = FrWaitCycle
