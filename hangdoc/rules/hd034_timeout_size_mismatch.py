"""Ranks timed out in the same collective with different tensor sizes

## What it means
The watchdog timeouts of torch ≥ 2.1 print `NumelIn`/`NumelOut`, the number of elements
each rank passed to the collective. At the same `SeqNum` and `OpType` of one process
group these must agree for all-reduce, broadcast, reduce, all-gather and
reduce-scatter; here they differ, so the ranks called the collective with tensors of
different sizes.

## Why it hangs
NCCL moves `count` elements per rank and expects every rank to use the same count:
with different counts a rank waits for data that never comes (or the job corrupts
memory). Typical sources: uneven last batches, padding that depends on the rank's
data, parameters that differ between ranks (a model built differently, frozen on one
rank only), bucket sizes computed from rank-local information.

## Evidence used
`WorkNCCL(SeqNum=…, OpType=…, NumelIn=…, NumelOut=…)` of watchdog timeouts, grouped by
process group and sequence number. Operations whose sizes may legitimately differ
(all-to-all, send/recv, gather/scatter) are skipped.

## How to confirm
`TORCH_DISTRIBUTED_DEBUG=DETAIL` reports the tensor shapes of the mismatched
collective; a flight recorder dump shows `input_sizes` per rank.

## How to fix
Make the tensor shapes identical on every rank at that collective: pad to a common
size (all-gather the sizes first), use `drop_last=True`, build the model identically
everywhere, or use the object/uneven variants (`all_gather_object`, `all_to_all`).
"""

from __future__ import annotations

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

# Sizes may differ across ranks for these without anything being wrong.
_UNEVEN_OK = frozenset(
    {"ALLTOALL", "ALLTOALL_BASE", "SEND", "RECV", "GATHER", "SCATTER", "RECVANYSOURCE", "UNKNOWN"}
)


class TimeoutSizeMismatch(Rule):
    __doc__ = __doc__
    id = "HD034"
    name = "timeout-size-mismatch"
    summary = "ranks timed out in the same collective with different Numel"
    categories = (Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        for pg, records in sorted(watch_records(tl).items()):
            cells: dict[tuple[int, str], dict[int, WatchRecord]] = {}
            for rank, rec in records.items():
                if (
                    rec.seq is None
                    or rec.op is None
                    or rec.op in _UNEVEN_OK
                    or rec.numel_in is None
                ):
                    continue
                cells.setdefault((rec.seq, rec.op), {})[rank] = rec
            for (seq, op), same in sorted(cells.items()):
                sizes = split_by(same, "numel_in")
                if len(sizes) < 2:
                    continue
                culprits, major, minor_v, major_v = minority(sizes, same)
                known = all(rec.pg_known for rec in same.values())
                coalesced = op.endswith("COALESCED")
                strength = Strength.STATED
                if not known:
                    strength = shifted(strength, Shift.GROUP_UNKNOWN)
                if coalesced:  # a batch's total: other batches may differ legitimately
                    strength = shifted(strength, Shift.OTHER_READINGS)
                where = "the default process group" if pg == DEFAULT_PG else f"process group {pg}"
                refs = [p for r in [*culprits[:4], *major[:3]] for p in same[r].events[:1]]
                yield Finding(
                    rule=self.id,
                    category=Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
                    severity=Severity.CRITICAL if known and not coalesced else Severity.ERROR,
                    title=(
                        f"{ranks_text(culprits)} passed {_n(minor_v)} elements to {op} #{seq} "
                        f"where {ranks_text(major)} passed {_n(major_v)} ({where})"
                    ),
                    explanation=(
                        f"At {op} #{seq} of {where} the ranks used different tensor sizes: "
                        + "; ".join(
                            f"NumelIn={v[1] if isinstance(v, tuple) else v}: {ranks_text(r)}"
                            for v, r in sorted(sizes.items(), key=lambda kv: str(kv[0]))
                        )
                        + ". Every rank must pass the same number of elements to this collective."
                    ),
                    fix=(
                        "Make the tensor shapes identical on every rank at this collective "
                        "(pad to a common size, drop_last=True, identical model construction)."
                    ),
                    culprit_ranks=tuple(culprits),
                    waiting_ranks=tuple(major),
                    evidence=tuple(limited_refs(refs)),
                    strength=strength,
                )


def _n(value: object) -> str:
    if isinstance(value, tuple) and len(value) == 2:
        return str(value[1])
    return str(value)


RULE = TimeoutSizeMismatch
