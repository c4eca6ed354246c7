"""NCCL RAS: ranks at different operation counts, or dead processes

## What it means
NCCL ≥ 2.24 runs a RAS thread in every process; `ncclras` (or the RAS socket) prints a
job-wide status. A communicator marked MISMATCH with "Communicator ranks have different
AllReduce operation counts — 30 ranks have launched up to operation 640, 2 ranks have
launched up to operation 641" shows ranks that launched fewer operations: they are the
laggards (RAS lists the *minority* by rank, which may be the ranks that are ahead —
gh:NVIDIA/nccl/issues/1911). "DEAD … job processes are considered dead" or the INFO line
"RAS declaring peer … as DEAD" names processes that disappeared. A report where every
communicator is OK while torch times out is *not* proof of a dead rank: the culprit is
alive and simply not in NCCL (Python code, I/O, a dataloader).

## Why it hangs
A lagging rank leaves the others waiting inside the next collective; a dead process
can never join it.

## Evidence used
The text report of `ncclras` (summary table, Errors/Warnings sections: MISMATCH,
INCOMPLETE, DEAD, ERROR) and RAS INFO lines. RAS ranks are communicator ranks: global
ranks for the job-wide communicator.

## How to confirm
Query RAS again a minute later (`ncclras -v`): counts that do not move confirm the hang.
Take the stacks of the lagging ranks.

## How to fix
For laggards: find what they do instead of the collective (their stacks). For dead
processes: look at that node's logs and dmesg (OOM killer, segfault, node failure).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.nccl import RasComm, RasReport, RasState
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text


def _comm(p: Placed) -> RasComm:
    found = p.event.payload_as(RasComm)
    return found if found is not None else RasComm()


def _groups(p: Placed) -> list[tuple[int, int, list[int]]]:
    """(operation count, number of ranks, listed ranks) from a RAS_MISMATCH event."""
    return [(g.opcount, g.count, list(g.ranks)) for g in _comm(p).groups]


class NcclRasReport(Rule):
    __doc__ = __doc__
    id = "HD205"
    name = "nccl-ras-report"
    summary = "NCCL RAS names lagging ranks (MISMATCH) or dead processes"
    categories = (Category.RANK_DIVERGENCE, Category.RANK_DEAD, Category.UNKNOWN)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        for p in tl.of(EventKind.RAS_MISMATCH):
            finding = self._mismatch(p)
            if finding is not None:
                yield finding
        dead = tl.of(EventKind.RAS_DEAD)
        if dead:
            who = sorted(
                {
                    x
                    for p in dead
                    for x in (_comm(p).processes or (_comm(p).peer or "",))
                    if x and not x.startswith("count=")
                }
            )
            yield Finding(
                rule=self.id,
                category=Category.RANK_DEAD,
                severity=Severity.ERROR,
                title=f"NCCL RAS considers {len(who) or 'some'} process(es) dead: "
                f"{', '.join(who[:4])}",
                explanation=(
                    "The RAS network lost contact with these processes (host:pid:GPU or peer "
                    "address): they crashed, were killed, or their node went down."
                ),
                fix="Look at the named node's logs and dmesg (OOM killer, segfault, node failure).",
                evidence=tuple(limited_refs(dead, limit=4)),
                strength=Strength.SIGNAL,  # RAS considers them dead: unresponsive looks alike
            )
        reports = tl.of(EventKind.RAS_REPORT)
        timeouts = tl.of(EventKind.COLLECTIVE_TIMEOUT)
        if reports and timeouts and all(_ok(p) for p in reports) and not dead:
            yield Finding(
                rule=self.id,
                category=Category.UNKNOWN,
                severity=Severity.INFO,
                title="NCCL RAS saw every communicator OK while torch timed out",
                explanation=(
                    "RAS reported all ranks alive and at the same operation counts, so no "
                    "rank is dead or behind inside NCCL. The rank that blocks the job is alive "
                    "and outside NCCL (Python code, I/O, a dataloader) or the hang is in a "
                    "process group RAS does not see."
                ),
                fix="Take py-spy stacks of all ranks (hangdoc collect) to find the rank outside "
                "the collective.",
                evidence=tuple(limited_refs([*reports[:2], *timeouts[:2]])),
                strength=Strength.ABSENCE,  # names no cause: the network is not it
            )

    def _mismatch(self, p: Placed) -> Finding | None:
        groups = _groups(p)
        if len(groups) < 2:
            status = _comm(p).status_ranks
            if not status:
                return None
            ranks = sorted({s.rank for s in status})
            return self._finding(
                p,
                f"NCCL RAS: communicator ranks in a different state: {ranks_text(ranks)}",
                ranks,
                [],
                Strength.HINT,
            )
        low = min(g[0] for g in groups)
        lagging = [g for g in groups if g[0] == low]
        ahead = [g for g in groups if g[0] != low]
        op = _comm(p).op or "collective"
        lag_ranks = sorted(r for g in lagging for r in g[2])
        lag_count = sum(g[1] for g in lagging)
        ahead_ranks = sorted(r for g in ahead for r in g[2])
        if lag_ranks:
            title = (
                f"NCCL RAS: {ranks_text(lag_ranks)} launched {op} only up to operation {low}; "
                f"{sum(g[1] for g in ahead)} rank(s) went further"
            )
            return self._finding(p, title, lag_ranks, ahead_ranks, Strength.STATED)
        title = (
            f"NCCL RAS: {lag_count} ranks launched {op} up to operation {low} while "
            f"{ranks_text(ahead_ranks)} launched further"
        )
        return self._finding(p, title, [], ahead_ranks, Strength.SIGNAL)

    def _finding(
        self, p: Placed, title: str, culprits: list[int], waiting: list[int], strength: Strength
    ) -> Finding:
        return Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=title,
            explanation=(
                "RAS compared the operation counts of every rank of the communicator. The "
                "ranks with the lower count have not launched the operation the others "
                "wait in; when they are not listed, they are the majority and the listed "
                "ranks are ahead (they issued one collective more)."
            ),
            fix="Take the stacks of the lagging ranks and make every rank launch the same "
            "collectives.",
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=(p.ref(),),
            strength=strength,
        )


def _ok(p: Placed) -> bool:
    report = p.event.payload_as(RasReport)
    return report is not None and report.state == RasState.OK


RULE = NcclRasReport
