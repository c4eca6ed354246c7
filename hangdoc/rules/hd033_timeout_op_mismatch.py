"""Ranks timed out in different collectives at the same sequence number

## What it means
Within one process group the collective sequence number (`SeqNum`) counts the
collectives each rank issued. When the ranks' watchdog timeouts name the same
`SeqNum` but different `OpType` (one rank in ALLREDUCE, another in BROADCAST or
ALLGATHER), the ranks issued different collectives at the same point of the program.

## Why it hangs
NCCL pairs collectives by order, not by name: mismatched collectives wait for each
other forever (or exchange garbage). Typical sources: a collective under a
rank-dependent branch (logging, metrics, `if rank == 0: broadcast(...)`), different
code paths after data-dependent decisions, or a different order of parameters/buckets.

## Evidence used
`WorkNCCL(SeqNum=…, OpType=…)` of the watchdog timeout and blocking-wait messages,
grouped by process group (the PG of the neighbouring status line when the timeout line
lacks one). With the group unknown the finding is an error rather than critical.

## How to confirm
Run once with `TORCH_DISTRIBUTED_DEBUG=DETAIL`: the first mismatched collective raises
"Detected mismatch between collectives on ranks" naming both fingerprints. A flight
recorder dump analysed with `torchfrtrace` reports COLLECTIVE_TYPE_MISMATCH.

## How to fix
Make the collective sequence identical on every rank: move rank-specific work out of
collective calls, call the same collective with a dummy tensor on the other ranks, keep
parameter and bucket order deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.watchdog import (
    DEFAULT_PG,
    WatchRecord,
    minority,
    split_by,
    watch_records,
)
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted

# Point-to-point OpTypes (c10d opTypeToString): the two ends of one transfer log different
# operations at the same SeqNum of their group (HD048 reads these timeouts).
_P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE", "COALESCED"})


class TimeoutOpMismatch(Rule):
    __doc__ = __doc__
    id = "HD033"
    name = "timeout-op-mismatch"
    summary = "ranks timed out in different OpTypes at the same SeqNum"
    categories = (Category.COLLECTIVE_TYPE_MISMATCH,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        for pg, records in sorted(watch_records(tl).items()):
            by_seq: dict[int, dict[int, WatchRecord]] = {}
            for rank, rec in records.items():
                if rec.seq is not None and rec.op is not None:
                    by_seq.setdefault(rec.seq, {})[rank] = rec
            for seq, same in sorted(by_seq.items()):
                ops = Counter(rec.op for rec in same.values())
                if len(ops) < 2:
                    continue
                if all(str(op).upper() in _P2P_OPS for op in ops):
                    continue  # a SEND and its peer's RECV share a SeqNum: a pair, not a mismatch
                culprits, major, minor_op, major_op = minority(split_by(same, "op"))
                known = all(rec.pg_known for rec in same.values())
                where = "the default process group" if pg == DEFAULT_PG else f"process group {pg}"
                refs = [p for r in [*culprits[:4], *major[:3]] for p in same[r].events[:1]]
                yield Finding(
                    rule=self.id,
                    category=Category.COLLECTIVE_TYPE_MISMATCH,
                    severity=Severity.CRITICAL if known else Severity.ERROR,
                    title=(
                        f"{ranks_text(culprits)} issued {_op(minor_op)} where "
                        f"{ranks_text(major)} issued {_op(major_op)} (SeqNum {seq}, {where})"
                    ),
                    explanation=(
                        f"At collective #{seq} of {where} the ranks disagree on the operation: "
                        + "; ".join(
                            f"{_op(value)}: {ranks_text(r)}"
                            for value, r in sorted(
                                split_by(same, "op").items(), key=lambda kv: str(kv[0])
                            )
                        )
                        + ". Collectives are matched by order, so these wait for each other."
                        + (
                            ""
                            if known
                            else " (The process group of these lines is not logged; "
                            "if they belong to different groups this is a coincidence.)"
                        )
                    ),
                    fix=(
                        "Make every rank issue the same collective at this point: find the "
                        "rank-dependent branch around it (run with TORCH_DISTRIBUTED_DEBUG=DETAIL "
                        "to get both call sites)."
                    ),
                    culprit_ranks=tuple(culprits),
                    waiting_ranks=tuple(major),
                    evidence=tuple(limited_refs(refs)),
                    strength=(
                        Strength.STATED if known else shifted(Strength.STATED, Shift.GROUP_UNKNOWN)
                    ),
                )


def _op(value: object) -> str:
    if isinstance(value, tuple) and len(value) == 2:
        return str(value[1])
    return str(value)


RULE = TimeoutOpMismatch
