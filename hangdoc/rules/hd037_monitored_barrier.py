"""Ranks failed to reach a monitored barrier

## What it means
`torch.distributed.monitored_barrier` (gloo) makes rank 0 wait for every other rank
with a timeout and report the ones that did not arrive: "Rank 3 failed to pass
monitoredBarrier in 30000 ms", or with `wait_all_ranks=True` "Ranks 1, 3 failed to pass
monitoredBarrier". Those ranks were somewhere else when the others reached the barrier.

## Why it hangs
A plain barrier would have waited for them until the collective timeout; the monitored
barrier names them instead.

The other ranks only talk to rank 0 in it: when rank 0 does not answer, each of them
raises "Rank 2 successfully reached monitoredBarrier, but received errors while waiting
for send/recv from rank 0. Please check rank 0 logs for faulty rank." (ProcessGroupGloo's
monitoredBarrier; seen in xtuner #944 and CosyVoice #1727). Rank 0 then either had not
reached the barrier itself (busy, stuck or dead) or was reporting another rank.
The source says which is likelier: "only enforce timeout on rank 0. This is so that other
ranks aren't timed out first" — the other ranks' send/recv to rank 0 waits without the
barrier's timeout, so their errors come from rank 0's side failing (its process gone or
torn down after it raised), not from a rank 0 still busy. When only that side is in the
paste (rank 0's report, which would name another rank, is not), rank 0 is named as a rank
that died or crashed; a trainer's join check around it (a rank out of data) stays a
divergence, and so does a report whose original exception (printed below it, "Original
exception:") is gloo's timeout of that recv: rank 0 was alive and elsewhere past the
group's timeout.

Horovod's coordinator does the same for any op: its stall check lists each op some ranks
submitted and others did not, "HorovodBroadcast_global_step_0 [missing ranks: 1]"
(horovod/common/operations.cc; horovod issue 1012). That names who is missing, not why:
the check fires for a rank that is slow (a long epoch, a validation pass), stuck in its
own code, dead, or on another path alike, its own text says so ("This may indicate that
different ranks are trying to submit different tensors or that only subset of ranks is
submitting tensors"), and it is a warning the op may yet answer. Alone, it names the
missing ranks and the cause `unknown`; a divergence is named only where the report shows
one, ranks waiting in the same kind of op at different counts (below), or in different
ops (HD042).

## Evidence used
The monitored-barrier failure messages: the rank-0 report names the missing ranks
outright; without `wait_all_ranks` only the first of them: ProcessGroupGloo's
monitoredBarrier throws at the first rank, in rank order, whose answer did not come
("Rank 3 failed to pass monitoredBarrier"), and never checks the ranks after it, so a
singular report names one missing rank of possibly several and the finding says so, a
signal rather than a statement of every culprit (the plural "Ranks 1, 3 failed …" is
`wait_all_ranks`' full list); the other ranks' "received errors … from rank 0" names
rank 0 as the one to look at (weaker: with more than two ranks, rank 0 may have been
reporting another one). The ranks that print it are reporters, never culprits. Horovod's
stall warnings name the missing ranks outright; its oldest ones (before mid-2018) name
only the ranks that were ready, which states no missing rank without the job's size, and
are not read as such. A report whose ranks wait in different ops is HD042's; one whose
ranks wait in ops Horovod named itself, of one kind at different counts
("broadcast.noname.3765" and "broadcast.noname.3873"), is this one's: out of step, not
in different ops. A barrier that is a trainer's per-step join check (its failure printed
inside "Detected uneven workload distribution: …") names the rank out of data: HD040
says so, and this finding follows it as a hint.

## How to confirm
Look at the last lines the named ranks printed and take their stacks; they are stuck or
slow in code the others have passed.

## How to fix
Find what keeps the named ranks from the barrier (I/O, a dataloader, a rank-dependent
branch) and make all ranks reach it; raise the barrier timeout if they are only slow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.torch_pg import Backend, CollectiveTimeout, MissingRanks, Reporter
from hangdoc.analyzer.payloads.torch_pg import MonitoredBarrier as BarrierReport
from hangdoc.analyzer.views.stall_report import Crossing, crossing
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

# The lines between a peer's report and its original exception: " Original exception: "
# then the exception's what() (ProcessGroupGloo's logAndThrow: error + "\n Original
# exception: \n" + e.what()).
_ORIGINAL_WITHIN = 3


def _timed_out_below(events: list[Placed], timeouts: list[Placed], every: Sequence[Placed]) -> bool:
    """A peer's report whose original exception, printed just below it in the same file,
    is gloo's timeout of the recv ("Timed out waiting <ms>ms for recv operation to
    complete"): rank 0 was alive past the group's timeout, not gone. "Just below" is the
    next event of that file within the report's own lines: a paste hard-wrapped at a
    narrow width (20 columns or more) spreads the report over up to a line per 20 of its
    characters, and the original exception still comes next."""
    return any(
        t.event.source == p.event.source
        and p.event.line is not None
        and t.event.line is not None
        and 0 < t.event.line - p.event.line <= _ORIGINAL_WITHIN + len(p.event.text) // 20
        and not any(
            o.event.source == p.event.source
            and o.event.line is not None
            and p.event.line < o.event.line < t.event.line
            for o in every
        )
        for p in events
        for t in timeouts
    )


def _barrier(p: Placed) -> BarrierReport:
    found = p.event.payload_as(BarrierReport)
    return found if found is not None else BarrierReport()


def _missing(p: Placed) -> MissingRanks:
    found = p.event.payload_as(MissingRanks)
    return found if found is not None else MissingRanks()


class MonitoredBarrier(Rule):
    __doc__ = __doc__
    id = "HD037"
    name = "monitored-barrier-failure"
    summary = "a monitored barrier (or Horovod's stall check) named the ranks that did not arrive"
    categories = (Category.RANK_DIVERGENCE, Category.RANK_DEAD, Category.UNKNOWN)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        events = tl.of(EventKind.MONITORED_BARRIER)
        if not events:
            reports = tl.of(EventKind.MISSING_RANKS)
            crossed = [c for p in reports if (c := crossing(_missing(p))) is not None]
            if any(not c.out_of_step for c in crossed):
                return  # ranks waiting in different ops: HD042
            stalled = [p for p in reports if _missing(p).ranks]
            if crossed:
                yield self._out_of_step(stalled or reports, crossed[0])
            elif stalled:
                yield self._stalled(stalled)
            return
        # A trainer's per-step join check around the barrier (wenet's and CosyVoice's
        # "Detected uneven workload distribution: …"): the rank that did not arrive left
        # the loop, out of batches; HD040 names that, this finding only follows it.
        joined = any(_barrier(p).join for p in events)
        direct = [p for p in events if _barrier(p).reporter != Reporter.PEER]
        if direct:
            events = direct  # rank 0's own report names the missing ranks
        culprits = sorted({r for p in events for r in _barrier(p).ranks})
        if direct and not culprits:
            return  # its ranks cut off (a wrap, a cut selection): it names nobody
        reporters = sorted({p.rank for p in events if p.rank is not None} - set(culprits))
        # Only singular reports (no wait_all_ranks list): the first missing rank in rank
        # order; the ranks after it were never checked (the module doc).
        first_only = bool(direct) and all(_barrier(p).first_only for p in events)
        if not direct:
            timeouts = [
                p
                for p in tl.of(EventKind.COLLECTIVE_TIMEOUT)
                if (t := p.event.payload_as(CollectiveTimeout)) is not None
                and t.backend is Backend.GLOO
            ]
            yield self._from_peers(events, culprits, reporters, timeouts, tl.events)
            return
        yield Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=f"{ranks_text(culprits)} failed to reach the monitored barrier",
            explanation=(
                f"The monitored barrier reported that {ranks_text(culprits)} did not arrive "
                "within its timeout while the other ranks did."
                + (
                    " The barrier is the trainer's per-step join check, which reads a rank "
                    "missing from it as a rank out of data (HD040)."
                    if joined
                    else ""
                )
                + (
                    f" Without wait_all_ranks the barrier stops at the first rank that did "
                    f"not arrive, in rank order: ranks above {culprits[-1]} were never "
                    "checked and may be missing too."
                    if first_only
                    else ""
                )
            ),
            fix=(
                "Find what the named ranks were doing instead (their last log lines, their "
                "stacks) and make them reach the barrier; raise its timeout if they are slow."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(reporters),
            evidence=tuple(limited_refs(events, limit=4)),
            # rank 0's report names the missing ranks (a singular one only the first of
            # them); inside a join check, what kept them away is the trainer's reading
            # (uneven data, HD040), not this one's
            strength=Strength.HINT
            if joined
            else Strength.SIGNAL
            if first_only
            else Strength.STATED,
        )

    def _from_peers(
        self,
        events: list[Placed],
        culprits: list[int],
        reporters: list[int],
        timeouts: list[Placed],
        every: Sequence[Placed],
    ) -> Finding:
        """Only the other ranks' side: they heard nothing back from rank 0. Their wait has
        no timeout of its own (the barrier enforces it on rank 0 only), so rank 0's side
        failed: its process ended (the module doc); a join check's is a rank out of data."""
        who = ranks_text(culprits)
        arrived = ranks_text(reporters).capitalize() if reporters else "A rank"
        joined = any(_barrier(p).join for p in events)
        alive = _timed_out_below(events, timeouts, every)
        return Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE if joined or alive else Category.RANK_DEAD,
            severity=Severity.ERROR,
            title=f"{ranks_text(reporters) if reporters else 'a rank'} reached the monitored "
            f"barrier but heard nothing back from {who}",
            explanation=(
                f"In torch's monitored barrier every rank reports to {who}, which answers "
                f"once all have arrived. {arrived} "
                f"arrived and got errors instead of an answer; their wait has no timeout of "
                f"its own, so {who}'s side failed: its process ended or was torn down after "
                "it raised (it may have been reporting another rank that never came)."
            ),
            fix=(
                f"Read the log of {who}: what it was doing instead of the barrier (or which "
                "rank it reported). Make every rank reach the barrier; raise its timeout if "
                "the work before it is only slow."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(reporters),
            evidence=tuple(limited_refs(events, limit=4)),
            strength=Strength.HINT,  # rank 0 may have been reporting another rank
        )

    def _out_of_step(self, events: list[Placed], found: Crossing) -> Finding:
        """Horovod's stall check with the ranks in one auto-named kind of op at different
        counts: out of step by the number of ops each issued before."""
        culprits = found.culprits
        others = found.others
        who = ranks_text(culprits)
        versus = ranks_text(others) if others else "the other ranks"
        return Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=(
                f"{who} and {versus} are out of step: {found.culprit_op[:60]} against "
                f"{found.other_op[:60]} (Horovod's stall check)"
            ),
            explanation=(
                f"Horovod's coordinator reported {who} waiting with {found.culprit_op} "
                f"submitted and {versus} with {found.other_op}. Horovod names an op its "
                "caller left unnamed by its kind and the process's own running count of "
                "ops, so the ranks are in the same kind of op at different counts: they "
                "issued different numbers of ops before (an op under a rank- or "
                "data-dependent branch, a rank that left the loop early or joined), and "
                "Horovod, which matches ops by name, never pairs them."
            ),
            fix=(
                "Take the stacks of the ranks (py-spy dump) to see where each is; make every "
                "rank submit the same ops in the same order, or name the ops so that a "
                "skipped one shows."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(others),
            evidence=tuple(limited_refs(events, limit=4)),
            strength=Strength.SIGNAL,  # a stall warning: the ops may yet come
        )

    def _stalled(self, events: list[Placed]) -> Finding:
        """Horovod's stall check: ops some ranks submitted and the named ranks did not.
        Who is missing, not why (a slow, stuck, dead or diverged rank all read so: the
        module doc): the named ranks are the ones to look at, and the cause is unknown."""
        culprits = sorted({r for p in events for r in _missing(p).ranks})
        reporters = sorted({p.rank for p in events if p.rank is not None} - set(culprits))
        ops = sorted({_missing(p).op or "?" for p in events})
        shown = ", ".join(ops[:3]) + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")
        who = ranks_text(culprits)
        return Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=Severity.WARNING,
            title=f"{who} never submitted {shown} (Horovod's stall check); why is not shown",
            explanation=(
                f"Horovod's coordinator reported ops that the other ranks submitted and {who} "
                f"did not, for longer than its stall-check time: {shown}. {who.capitalize()} "
                "was elsewhere while the others waited for it: slow (a long epoch or "
                "validation), stuck in its own code, gone, or on another path. The report "
                "names who, not which: the cause is unknown until the stacks or the logs "
                f"of {who} show it."
            ),
            fix=(
                f"Take the stack of {who} (py-spy dump) to see where it is; make every rank "
                "submit the same ops in the same order (the same variables broadcast, the "
                "same optimizer on every rank)."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(reporters),
            evidence=tuple(limited_refs(events, limit=4)),
            # who is missing is stated; why is not (the module doc): no cause named
            strength=Strength.SIGNAL,
        )


RULE = MonitoredBarrier
