"""The flight recorder shows a send or recv whose peer never posted the matching op

## What it means
A rank's oldest unfinished point-to-point op (a pipeline-parallel send or recv) has no
counterpart on its peer: rank 3 waits to send to rank 4, and rank 4's flight recorder
has no recv from rank 3 in flight. The finding says where the peer is instead.

## Why it hangs
A send completes only when the peer receives (and the reverse). In a pipeline, a stage
waiting on a peer that is itself waiting on the next stage is not a fault — the chain is
followed to its end, and the rank at the end (busy elsewhere, dead, or waiting in a
collective) is the root; the waits along the chain are reported as its consequences. A
chain that closes on itself is a deadlock (see HD016).

## Evidence used
Every rank's flight recorder dump: point-to-point entries (``send a->b``, ``recv b<-a``,
group-local ranks mapped to global ranks with pg_config), their state, and each rank's
oldest unfinished op. Sizes of a matched send and recv are compared too (HD012).

## How to confirm
Look at the peer's stacks: the frame it is in is why it does not post the op. In the
pipeline schedule, check that the peer's schedule has the matching op at the same step
(same microbatch, same order of sends and recvs).

## How to fix
Make both sides of every send/recv pair issue them in the same order (batch them with
``batch_isend_irecv`` to avoid order deadlocks), and fix what holds the peer (see the
category).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.fr_matching import Kind, MatchResult, Problem
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import (
    blame,
    consequence_category,
    consequence_text,
    doings,
    group_text,
    op_text,
    problem_refs,
    root_category,
)

FIX = (
    "Make the peer post the matching op: check that both pipeline stages run the same "
    "schedule (same microbatches, same send/recv order; batch_isend_irecv for pairs), and "
    "fix what holds the peer."
)


class FrP2PUnmatched(Rule):
    __doc__ = __doc__
    id = "HD014"
    name = "fr-p2p-unmatched"
    summary = "flight recorder: a send/recv whose peer never posted the matching op"
    categories = (Category.P2P_DEADLOCK, Category.RANK_DIVERGENCE, Category.RANK_DEAD)
    severity = Severity.CRITICAL
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        for problem in result.of_kind(Kind.P2P):
            if not problem.cycle:
                yield self._finding(problem, result, ctx)

    def _finding(self, problem: Problem, result: MatchResult, ctx: RuleContext) -> Finding:
        rank, peer = problem.waiting[0], problem.blamed[0]
        rec = problem.record
        group = group_text(result.groups.get(problem.group), problem.group)
        verb, want = ("send to", "recv") if problem.op == "send" else ("receive from", "send")
        detail = op_text(rec) if rec is not None else problem.op
        explanation = (
            f"Rank {rank}'s oldest unfinished op is {detail} (p2p #{problem.seq} on {group}): "
            f"it waits to {verb} rank {peer}, whose flight recorder has no matching {want} "
            f"in flight. Rank {peer}: {doings(result, ctx, (peer,))}."
        )
        found = blame(result, ctx, (peer,))
        if problem.root:
            category = root_category(problem, result, ctx)
            severity = Severity.CRITICAL
            strength = Strength.CORROBORATED if found.known else Strength.STATED
            title = f"rank {rank} waits to {verb} rank {peer} on {group}; it never posts the {want}"
            fix = found.fix or FIX
        else:
            category = consequence_category(problem, result, ctx)
            severity, fix = Severity.WARNING, "Fix the root problem first."
            strength = Strength.ABSENCE  # a consequence: names no cause of its own
            title = f"rank {rank} waits to {verb} rank {peer} on {group} (peer itself waiting)"
            explanation += (
                " The peer is itself waiting, so this is a consequence, not a mismatch. "
                + consequence_text(problem, result)
            )
        return Finding(
            rule=self.id,
            category=category,
            severity=severity,
            title=title,
            explanation=explanation,
            fix=fix,
            culprit_ranks=(peer,),
            waiting_ranks=(rank,),
            evidence=tuple(problem_refs(result, ctx, problem)),
            strength=strength,
        )


RULE = FrP2PUnmatched
