"""Ranks timed out in different collectives at different sequence numbers

## What it means
Each rank's watchdog names the collective it is stuck in: its `SeqNum` in the process
group, its `OpType` and its `NumelIn`. Here the ranks of one group are stuck at different
SeqNums, and the collectives themselves differ: another OpType (one side in BROADCAST,
the other in _ALLGATHER_BASE), or the same OpType with another number of elements. A
collective completes on a rank only once every rank of the group joined it, so ranks can
only stand at different SeqNums when their sequences of collectives differ: one side
issued collectives the other did not, and at the point they met each waits in a
collective the other never matches.

## Why it hangs
NCCL pairs collectives by their order on the communicator, not by name. Once the ranks'
sequences part (a collective under a rank-dependent branch, a different number of
gradient buckets, a save or a metric only some ranks reach), the next collectives are
paired with the wrong partners: a different operation or a different size waits forever,
or exchanges garbage until something blocks.

## Evidence used
`Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…, OpType=…, NumelIn=…)`
of at least two ranks of one process group (the group from the line's prefix or the
rank's status line), at different SeqNums, with different OpTypes or, for operations
whose sizes must agree, different `NumelIn`. Not: point-to-point operations (a pipeline's
SEND and RECV are apart by design), the same collective at different SeqNums (HD032), a
rank that died first (HD030), ranks one SeqNum past a rooted collective (BROADCAST,
REDUCE, GATHER, SCATTER) that the others are still inside (its root or senders finish it
without the receivers, then wait in the program's next collective, whatever it is: one
sequence, accelerate #934's BROADCAST #1 and ALLGATHER #2), and, when the lines name no
group, SeqNums more than a few apart (they may count different groups). A timeout that
names no group, of a rank the one group named in the text does not hold, at a SeqNum near
that group's, is read as that group's (torch ≥ 2.3 names the group in the status line
after the timeout, which a paste may cut). With the group unknown the finding is weaker.

## How to confirm
Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL`: the first mismatched collective raises
"Detected mismatch between collectives on ranks" with both fingerprints. A flight
recorder dump (`TORCH_FR_BUFFER_SIZE=2000`) analysed with `torchfrtrace` shows where the
ranks' sequences part.

## How to fix
Make every rank issue the same collectives in the same order, with the same sizes: no
collective under `if rank == 0` or a rank-local condition (a clock, a metric, a data
dependent branch), the same parameters and buckets on every rank (no parameter unused on
some ranks only: `find_unused_parameters=True` or a dummy use), a barrier or broadcast of
any rank-local decision before acting on it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.deaths import first_deaths
from hangdoc.analyzer.views.watchdog import (
    DEFAULT_PG,
    Apart,
    ApartBy,
    WatchRecord,
    apart,
    unnamed_timeouts,
    watch_records,
)
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted


def _side(key: tuple[int, str, int | None], by: ApartBy) -> str:
    seq, op, numel = key
    return f"{op} #{seq}" + (f" ({numel} elements)" if by is ApartBy.SIZE else "")


class TimeoutsApart(Rule):
    __doc__ = __doc__
    id = "HD041"
    name = "timeouts-apart"
    summary = "ranks timed out in different collectives at different SeqNums of one group"
    categories = (Category.COLLECTIVE_TYPE_MISMATCH, Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        if any(d.certain for d in first_deaths(tl)):
            return  # a rank that died first leaves the others wherever they were (HD030)
        unnamed = unnamed_timeouts(tl)
        for pg, records in sorted(watch_records(tl).items()):
            found = apart(pg, records, unnamed.get(pg, ()))
            if found is not None:
                yield self._finding(found, records)

    def _finding(self, found: Apart, records: dict[int, WatchRecord]) -> Finding:
        where = "the default process group" if found.pg == DEFAULT_PG else f"group {found.pg}"
        sides = "; ".join(f"{ranks_text(r)} in {_side(k, found.by)}" for k, r in found.sides)
        culprit_key = found.sides[0][0]
        other_key = found.sides[1][0]
        if found.by is ApartBy.OP:
            category = Category.COLLECTIVE_TYPE_MISMATCH
            what = "different collectives"
        else:
            category = Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH
            what = "the same collective with different sizes"
        refs = [p for r in [*found.culprits[:4], *found.waiting[:3]] for p in records[r].events[:1]]
        return Finding(
            rule=self.id,
            category=category,
            severity=Severity.ERROR,
            title=(
                f"{ranks_text(found.culprits)} stuck in {_side(culprit_key, found.by)} while "
                f"{ranks_text(found.waiting)} wait in {_side(other_key, found.by)} ({where}): "
                f"out of step, in {what}"
            ),
            explanation=(
                f"The watchdog timeouts of {where} put the ranks at different points: {sides}. "
                "A collective completes only once every rank of the group joined it, so the "
                "ranks' sequences of collectives differ, and where they met each side waits "
                f"in {what} than the other issued. Collectives are paired by order, so "
                "neither side can finish."
                + (
                    ""
                    if found.pg_known
                    else " (The lines do not name their process group; if they belong to "
                    "different groups, their SeqNums do not compare.)"
                )
            ),
            fix=(
                "Make every rank issue the same collectives in the same order with the same "
                "sizes: find the rank-dependent branch (a save, a metric, a clock, unused "
                "parameters) before this point; TORCH_DISTRIBUTED_DEBUG=DETAIL names both "
                "call sites."
            ),
            culprit_ranks=found.culprits,
            waiting_ranks=found.waiting,
            evidence=tuple(limited_refs(refs)),
            strength=Strength.STATED
            if found.pg_known
            else shifted(Strength.STATED, Shift.GROUP_UNKNOWN),
        )


RULE = TimeoutsApart
