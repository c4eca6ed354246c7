"""Horovod's stall report read across its ops: ranks waiting in different ops.

Horovod's coordinator lists the ops (tensors) some ranks submitted and others did not
(parsers/logs/horovod.py). One report that names rank A in op X but not in op Y, and rank
B in op Y but not in op X, shows the ranks submitted *different* ops: each waits in an op
the other never submits, the first of the two readings Horovod's own warning offers
("different ranks are trying to submit different tensors"). Without such a crossing the
report says only who is missing (HD037). Only the ops of one report are compared: two
reports a minute apart may catch different slow ranks.

Two ops Horovod named itself, of one kind ("broadcast.noname.3765" and
"broadcast.noname.3873": the kind and the process's running count of ops, GetOpName in
horovod/torch/mpi_ops_v2.cc), are not different ops: the ranks are in the same kind of op
at different counts, having issued different numbers of ops before (out of step, the second
reading Horovod's warning offers, a subset of ranks submitting), which the crossing says
with ``out_of_step``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.payloads.torch_pg import MissingRanks, StalledOp


@dataclass(frozen=True, slots=True)
class Crossing:
    """Ranks of one stall report that wait in different ops."""

    culprits: tuple[int, ...]  # the smaller side (every listed rank when the sides are even)
    others: tuple[int, ...]  # the other side (empty when the sides are even)
    culprit_op: str  # an op the culprits submitted and the others did not
    other_op: str  # an op the others submitted and the culprits did not
    # Both ops auto-named by Horovod, of one kind, at different counts: the ranks are out
    # of step in the same kind of op, not in different ops.
    out_of_step: bool = False


def _one_kind_apart(stalled: tuple[StalledOp, ...], x: str, y: str) -> bool:
    """Whether ops ``x`` and ``y`` are Horovod's own names for one kind of op."""
    by_op = {e.op: e for e in stalled}
    a, b = by_op[x], by_op[y]
    return a.kind is not None and a.kind == b.kind and a.handle != b.handle


def _submitted(stalled: tuple[StalledOp, ...], universe: set[int]) -> dict[int, frozenset[str]]:
    """The ops of the report each rank had submitted."""
    out: dict[int, set[str]] = {r: set() for r in universe}
    for entry in stalled:
        named = set(entry.ranks)
        for rank in universe:
            if (rank in named) == entry.ready:
                out[rank].add(entry.op)
    return {r: frozenset(ops) for r, ops in out.items()}


def crossing(report: MissingRanks) -> Crossing | None:
    """The ranks of ``report`` that submitted different ops, or None. A pair of ops of
    different kinds (or named by the caller) is preferred to a pair of one auto-named kind
    at different counts (``out_of_step``)."""
    stalled = report.stalled
    if len({e.op for e in stalled}) < 2:
        return None
    universe = {r for e in stalled for r in e.ranks}
    submitted = _submitted(stalled, universe)
    ops = sorted({e.op for e in stalled})
    first: Crossing | None = None
    for x in ops:
        for y in ops:
            if x == y:
                continue
            found = _crossed(stalled, submitted, universe, x, y)
            if found is None:
                continue
            if not found.out_of_step:
                return found
            first = first or found
    return first


def _crossed(
    stalled: tuple[StalledOp, ...],
    submitted: dict[int, frozenset[str]],
    universe: set[int],
    x: str,
    y: str,
) -> Crossing | None:
    """The crossing of ops ``x`` and ``y``: ranks that submitted one and not the other."""
    in_x_only = sorted(r for r, s in submitted.items() if x in s and y not in s)
    in_y_only = sorted(r for r, s in submitted.items() if y in s and x not in s)
    if not in_x_only or not in_y_only:
        return None
    apart = _one_kind_apart(stalled, x, y)
    if all(e.ready for e in stalled) or len(in_x_only) != len(in_y_only):
        # The side that went the other way is the smaller one. A "missing" report
        # (horovod/common/stall_inspector.cc: "Missing ranks:" then "3: [op, …]"
        # per rank that has not submitted them) leaves out the ranks that
        # submitted every op, which are on neither side: its two sides are read
        # as a "ready" report's are.
        small, large = sorted((in_x_only, in_y_only), key=len)
        cul_op, oth_op = (x, y) if small is in_x_only else (y, x)
        return Crossing(tuple(small), tuple(large), cul_op, oth_op, apart)
    # As many ranks on each side of a "missing" report: each lags in some op, and
    # which side went the other way, the report does not say.
    return Crossing(tuple(sorted(universe)), (), x, y, apart)
