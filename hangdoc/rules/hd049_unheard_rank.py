"""A rank of the job said nothing while the others timed out

## What it means
The job's size (WORLD_SIZE, NCCL's `nranks`, a framework's init line, the store-based
barrier's `world_size`) says rank N exists, or the ranks that timed out leave exactly one
gap below the highest of them, but nothing at all came from rank N: no log line, no
stack, no flight recorder dump, no launcher's report of it, no dump signal naming it.
The others timed out in a collective. The rank that cannot report is often the one to
look at: a rank that never entered the collective has nothing to time out in, and a rank
that died or hangs below Python prints nothing.

A rank of which nothing came but NCCL's lines of its communicator coming up (`Init
COMPLETE`, its channels and transports: an `NCCL_DEBUG=INFO` console prints every rank's
set-up, then the timeouts) counts the same: those lines are printed once, at the start,
and place it nowhere when the others timed out.

This is the weakest of the silences: the rank's output may simply be missing from what
was pasted. hangdoc names it only when nothing else explains the timeouts (no death, no
mismatch, no rank behind in the watchdog's numbers), and only where the gap is small
(one rank, or few of many); the verdict stays inconclusive and the finding says where to
look, not why. Its strength is a hint when a source states the job's size and the rank
is the only silent one; an absence when the rank is only a gap among those that reported
(no size stated) or when several ranks are silent (rules/strength.py: `SIZE_NOT_STATED`,
`SEVERAL_SILENT`). A rank that printed lines but no timeout is HD032's (a quiet rank),
and one a flight recorder or live stacks miss is HD015's or HD003's.

## Why it hangs
A collective completes only when every member of the group joins. The rank that was
elsewhere (evaluating, saving, loading data, stuck in its own code) or dead never joined,
so the others waited until the timeout; its own watchdog had no collective of its own to
time out in.

## Evidence used
The ranks' own timeouts (the watchdog, a blocking wait, gloo, a status line, a dump it
signalled itself, a monitored barrier it reached), every other voice of each rank (log
lines, stacks, flight recorder dumps, notices of another rank's timeout, a launcher's or
another rank's report of it), and the job's size from every source that gives it
(views/silence.py). Not used when a rank's death is in the logs, when another rule found
a cause, or when live stacks or flight recorder dumps speak for the missing ranks (HD003,
HD010, HD015).

## How to confirm
Find rank N's own output: its stderr (`torchrun --log-dir … --tee 3`, or the scheduler's
per-task log), the node's `dmesg -T` (the OOM killer), and, while the job hangs, its
stack (`hangdoc collect --all` or `py-spy dump --pid …`).

## How to fix
What rank N was doing is the cause: make every rank issue the same collectives in the
same order (no collective under a rank-dependent branch, no early exit on some ranks),
or fix what killed it. Log every rank's output next time, so silence cannot hide it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.torch_pg import Work
from hangdoc.analyzer.views.silence import Silence
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted

# At most one unheard rank per this many ranks that timed out: a paste that lacks more
# than that is partial, and its gaps say nothing about who was elsewhere.
_TIMED_OUT_PER_UNHEARD = 4

_FIX = (
    "Get the silent rank's own output: its stderr (torchrun --log-dir … --tee 3, or the "
    "scheduler's per-task log), dmesg -T of its node (the OOM killer), and its stack while "
    "the job hangs (hangdoc collect --all, or py-spy dump). If it was alive, what it was "
    "doing is the cause: make every rank issue the same collectives in the same order; if "
    "it died, fix what killed it."
)


@dataclass(frozen=True, slots=True)
class Suspects:
    """The unheard ranks worth naming, and the named reasons that weaken their silence
    from a hint (one rank of a job whose size a source states, every other rank heard
    timing out or notified) to an absence."""

    ranks: tuple[int, ...]
    weakened_by: tuple[Shift, ...]

    @property
    def strength(self) -> Strength:
        return shifted(Strength.HINT, *self.weakened_by)


def unheard_suspects(view: Silence) -> Suspects | None:
    """The unheard ranks worth naming, or None: at least two ranks timed out, and the
    unheard are one rank (a gap below the highest rank heard, when no source gives the
    job's size) or few of many (a paste that lacks more is partial, and its gaps say
    nothing about who was elsewhere)."""
    timed_out = view.timed_out
    unheard = tuple(sorted({*view.unheard, *view.setup_only}))
    if len(timed_out) < 2 or not unheard or not view.silence_sure:
        return None  # (a timeout whose rank the text lost may be the unheard rank's own)
    world_known = view.job.world is not None
    if not world_known and len(unheard) != 1:
        return None
    if len(unheard) > max(1, len(timed_out) // _TIMED_OUT_PER_UNHEARD):
        return None
    weakened_by: list[Shift] = []
    if not world_known:
        weakened_by.append(Shift.SIZE_NOT_STATED)
    if len(unheard) + len(view.quiet) > 1:
        weakened_by.append(Shift.SEVERAL_SILENT)  # quiet ranks said nothing of it either
    return Suspects(unheard, tuple(weakened_by))


class UnheardRank(Rule):
    __doc__ = __doc__
    id = "HD049"
    name = "unheard-rank"
    summary = "a rank of the job said nothing while the others timed out: the one to look at"
    categories = (Category.UNKNOWN,)
    severity = Severity.WARNING
    requires = frozenset({Need.LOGS})
    after = True

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        if any(
            f.severity in (Severity.CRITICAL, Severity.ERROR) or f.says_not_hung for f in ctx.prior
        ):
            return  # a cause (or progress) is on record: silence does not override it
        ev = ctx.evidence
        if any(p.stack_samples or p.collectives for p in ev.processes):
            return  # live stacks and flight recorders speak for missing ranks: HD003, HD015
        view = ctx.silence
        if view.dead:
            return  # a death in the logs is direct evidence of another rank
        found = unheard_suspects(view)
        if found is None:
            return
        yield self._finding(view, found)

    def _finding(self, view: Silence, found: Suspects) -> Finding:
        waiting = view.timed_out
        unheard = found.ranks
        set_up = [r for r in unheard if r in view.setup_only]
        firsts = [v.timeouts[0] for r in waiting if (v := view.voices.get(r)) is not None]
        works = [w for p in firsts if (w := p.event.payload_as(Work)) is not None and w.op]
        ops = Counter(f"{w.op} #{w.seq}" if w.seq is not None else w.op for w in works)
        what = ops.most_common(1)[0][0] if ops else "a collective"
        them = ranks_text(unheard)
        one = len(unheard) == 1
        if view.job.world is not None:
            sources = ", ".join(str(s) for s in view.job.said_by)
            size = f"{'one' if one else 'some'} of the job's {view.job.world} ranks ({sources})"
        else:
            size = f"the one gap below rank {max(waiting)} among the ranks that reported"
        left = (
            "nothing after NCCL's lines of its communicator coming up (printed once, at the "
            f"start: {ranks_text(set_up)})"
            if set_up
            else "nothing at all"
        )
        explanation = (
            f"{ranks_text(waiting).capitalize()} timed out in {what}; {them}, {size}, left "
            f"{left}: no other log line, no stack, no flight recorder dump, and no other "
            "process reported on " + ("it" if one else "them") + ". A rank that never "
            "entered the collective cannot time out in it, and a rank that died or hangs "
            f"elsewhere cannot report: {them} {'is' if one else 'are'} the one"
            f"{'' if one else 's'} to look at. Silence is weak evidence: the output may "
            "just be missing from what was given"
        )
        explanation += (
            "; weaker still: " + "; ".join(s.why for s in found.weakened_by) + "."
            if found.weakened_by
            else "."
        )
        if view.notified_only:
            explanation += (
                f" {ranks_text(view.notified_only).capitalize()} did not time out themselves: "
                "another rank's timeout reached them."
            )
        return Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=Severity.WARNING,
            title=f"{them} said nothing while {ranks_text(waiting)} timed out in {what}",
            explanation=explanation,
            fix=_FIX,
            culprit_ranks=unheard,
            waiting_ranks=waiting,
            evidence=tuple(limited_refs(firsts, limit=6)),
            strength=found.strength,
        )


RULE = UnheardRank
