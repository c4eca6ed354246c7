"""Every rank with a flight recorder waits in one collective; the ranks without one are gone

## What it means
All members of a process group that left a flight recorder dump issued the same
collective and wait in it; the members that left no dump are the ones it waits for.
Usually those ranks are dead: their process is not on the node where it should run (or
was seen exiting), so nothing could be fetched from them.

## Why it hangs
A collective needs every member. A rank that crashed, was OOM-killed or was killed by
the scheduler never joins; with NCCL (or gloo whose connections to the dead process are
still open) the survivors are not told and wait until the timeout.

## Evidence used
The survivors' flight recorder dumps (the op and sequence number they wait in, all the
same), the group's members (pg_config, or every rank for the default group, with the
job's WORLD_SIZE), and what the collection saw of the missing ranks: no process on the
node whose LOCAL_WORLD_SIZE says it should hold them, or a process seen exiting.

## How to confirm
On the missing rank's node: its stderr (a traceback, "Killed"), `dmesg -T | grep -i
'killed process'`, torchrun's ChildFailedError block (exitcode -9 SIGKILL, -6 SIGABRT),
and the scheduler's log. If the rank is alive on a node that was not collected, collect
there too.

## How to fix
Fix what killed the rank (memory, a crash, a node fault). Keep
TORCH_NCCL_ASYNC_ERROR_HANDLING at its default and run under torchrun (or an elastic
agent) so a dead rank tears the job down instead of leaving the others hanging.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.fr_matching import Kind, MatchResult, Problem
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import (
    blame,
    doings,
    expected_on_collected_host,
    its,
    op_text,
    problem_finding,
    seq_text,
    where_text,
)

DEAD_FIX = (
    "Find why the missing ranks died (their stderr, the OOM killer in dmesg, torchrun's "
    "exit codes) and fix that; keep asynchronous error handling on so survivors fail fast."
)


class FrRankWithoutDump(Rule):
    __doc__ = __doc__
    id = "HD015"
    name = "fr-rank-without-dump"
    summary = "flight recorder: every dumped rank waits in one op; the undumped ranks are gone"
    categories = (Category.RANK_DEAD, Category.RANK_DIVERGENCE)
    severity = Severity.CRITICAL
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        for problem in result.of_kind(Kind.NO_DUMP):
            yield self._finding(problem, result, ctx)

    def _finding(self, problem: Problem, result: MatchResult, ctx: RuleContext) -> Finding:
        where = where_text(problem, result)
        blamed, waiting = plural_ranks(problem.blamed), plural_ranks(problem.waiting)
        wait = its(problem.waiting, "waits", "wait")
        procs = ctx.evidence.ranked()
        alive = [r for r in problem.blamed if r in procs and not procs[r].exited]
        gone = [r for r in problem.blamed if r not in procs or procs[r].exited]
        hosts = {r: expected_on_collected_host(ctx, r) for r in gone if r not in procs}
        detail = op_text(problem.record) if problem.record is not None else problem.op
        explanation = (
            f"{waiting.capitalize()} — every member of this group that left a flight "
            f"recorder dump — issued {detail} as collective {seq_text(problem, result)} "
            f"and {wait} in it. {blamed.capitalize()} left no dump"
        )
        explanation += f": {doings(result, ctx, tuple(alive))}." if alive else "."
        if alive and not gone:
            found = blame(result, ctx, tuple(alive))
            category, fix = found.category, found.fix or DEAD_FIX
            title = f"{waiting} {wait} in {where}; {blamed} left no flight recorder dump"
            strength, severity = Strength.STATED, Severity.ERROR
        else:
            category, fix = Category.RANK_DEAD, DEAD_FIX
            exited = [r for r in gone if r in procs]
            on_host = [r for r, h in hosts.items() if h is not None]
            if exited or on_host:
                # Gone from the records, and from the processes: known to have exited, or
                # missing from a node that was collected.
                strength = Strength.CORROBORATED if exited else Strength.STATED
                severity = Severity.CRITICAL
                them = "it" if len(gone) == 1 else "them"
                title = f"{blamed} died; {waiting} {wait} for {them} in {where}"
                if on_host:
                    host = next(h for h in hosts.values() if h is not None)
                    explanation += (
                        f" {plural_ranks(on_host).capitalize()} should run on {host} "
                        "(its LOCAL_WORLD_SIZE), which was collected, and no process of "
                        "it was there: it is gone."
                    )
            else:
                strength, severity = Strength.SIGNAL, Severity.ERROR
                title = f"{waiting} {wait} in {where} for {blamed}, of which nothing was collected"
                explanation += (
                    " Nothing at all was collected from them: they died, or run on a node "
                    "that was not collected (collect there to tell)."
                )
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


RULE = FrRankWithoutDump
