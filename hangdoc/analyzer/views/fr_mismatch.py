"""Flight recorder matching, part 2: ranks that recorded different things at one seq.

Per process group and sequence number, the signatures (op, sizes, dtypes) the members
recorded are compared; the majority is taken as intended (a tie is reported as such).
Also the size rules that need no other rank: all_gather outputs its input times the
group size, reduce_scatter the reverse; all_to_all totals must add up.
"""

from __future__ import annotations

import operator
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from itertools import chain, compress, filterfalse, islice, repeat
from typing import cast

from hangdoc.analyzer.model import CollectiveRecord, RecordRows
from hangdoc.analyzer.views.fr_model import (
    GroupView,
    Kind,
    Problem,
    RankFR,
    Sig,
    first_seq,
    signature,
)

_REDUCE_SCATTER = frozenset(
    {
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced",
    }
)
_ALL_GATHER = frozenset(
    {"all_gather", "_all_gather_base", "all_gather_into_tensor", "all_gather_into_tensor_coalesced"}
)
# Ops whose per-rank sizes legitimately differ (vector variants, root-dependent shapes).
_SHAPE_RULED = _ALL_GATHER | _REDUCE_SCATTER
_SIZES_MAY_DIFFER = frozenset({"gather", "scatter", "all_gather_v", "reduce_scatter_v"})
# all_to_all sizes differ per rank; only the totals must agree (what is sent is received).
_ALL_TO_ALL = frozenset({"all_to_all", "all_to_all_single", "alltoall", "alltoall_base"})


def _new_records(per_rank: dict[int, RankFR]) -> Iterator[tuple[int, list[CollectiveRecord]]]:
    """Per rank, the records no earlier rank held (``_new_by_rows`` where every rank's
    records are rows of the bulk reader's tables, else ``_new_by_ids``: the same
    records, in the same order)."""
    if per_rank and all(
        isinstance(fr.records, RecordRows) and fr.records.table is not None
        for fr in per_rank.values()
    ):
        return _new_by_rows(per_rank)
    return _new_by_ids(per_rank)


def _frontier(fr: RankFR) -> list[CollectiveRecord]:
    frontier = [*fr.p2p_pending]
    for pos in fr.groups.values():
        frontier.extend(pos.pending)
        frontier.append(pos.last)
    return frontier


def _new_by_rows(per_rank: dict[int, RankFR]) -> Iterator[tuple[int, list[CollectiveRecord]]]:
    """``_new_by_ids`` with a record's row in its table for its identity
    (``RecordRows.table``): the records seen are a byte per row of each table, where a
    set of every distinct record's id was about 90 bytes a record (about 300 MB at
    16,384 ranks, held at the analysis' peak with all the Evidence), and the rank
    before's records are compared by row number. Only the frontier records (a few a
    rank, which may be any record) are still remembered by id."""
    marks: dict[int, bytearray] = {}  # id(table) -> a byte per row: 1 once seen
    frontier_seen: set[int] = set()
    before_table: list[CollectiveRecord] | None = None
    before: array[int] = array("i")
    for rank, fr in per_rank.items():
        frontier = _frontier(fr)
        frontier_seen.update(map(id, frontier))
        rows = cast(RecordRows, fr.records)
        table = cast(list[CollectiveRecord], rows.table)
        numbers = rows.row_numbers()
        mark = marks.get(id(table))
        if mark is None:
            mark = marks[id(table)] = bytearray(len(table))
        elif len(mark) < len(table):  # (a table only grows: the rows marked stay valid)
            mark.extend(bytes(len(table) - len(mark)))
        count = len(numbers)
        span = min(count, len(before)) if table is before_table else 0
        differs = map(
            operator.ne,
            islice(numbers, count - span, None),
            islice(before, len(before) - span, None),
        )
        at = chain(range(count - span), compress(range(count - span, count), differs))
        candidates = list(map(numbers.__getitem__, at))
        before, before_table = numbers, table
        unmarked = list(compress(candidates, map(operator.not_, map(mark.__getitem__, candidates))))
        held = map(frontier_seen.__contains__, map(id, map(table.__getitem__, unmarked)))
        fresh = list(compress(unmarked, map(operator.not_, held)))
        if not fresh:  # the common case: nothing new
            yield rank, frontier
            continue
        new = set(fresh)
        deque(map(mark.__setitem__, new, repeat(1)), maxlen=0)
        found = list(
            map(table.__getitem__, compress(candidates, map(new.__contains__, candidates)))
        )
        yield rank, found + frontier


def _new_by_ids(per_rank: dict[int, RankFR]) -> Iterator[tuple[int, list[CollectiveRecord]]]:
    """Per rank, the records no earlier rank held, found with C-level set operations.

    Interned history records are shared, so after the first rank of a group only its
    frontier records (unique per rank, known from the scan) are new: the per-record
    Python pass runs only where a rank brings records nobody had before. One probe
    pass finds them (``set(ids) - seen`` built a set of every id, then intersected it
    with millions: twice the work, a third of the match at 16,384 ranks).

    Before that probe, each record is compared by identity with the record at the same
    distance from the end on the rank before: ranks of one tensor-parallel group hold
    the same records in the same order (their buffers end at the same op), so three in
    four are settled by a pointer comparison, and only the rest pay for a probe of
    ``seen`` (millions of ids: a cache miss each).
    """
    seen: set[int] = set()
    before: Sequence[CollectiveRecord] = []  # the records of the rank before (all in ``seen``)
    for rank, fr in per_rank.items():
        frontier = _frontier(fr)
        seen.update(map(id, frontier))
        records = list(fr.records)  # one C-level pass (a RecordRows' row numbers read once)
        count, span = len(records), min(len(records), len(before))
        differs = map(
            operator.is_not,
            islice(records, count - span, None),
            islice(before, len(before) - span, None),
        )
        at = list(chain(range(count - span), compress(range(count - span, count), differs)))
        before = records
        candidates = list(map(records.__getitem__, at))
        ids = list(map(id, candidates))
        fresh = list(filterfalse(seen.__contains__, ids))
        if not fresh:  # the common case: nothing new
            yield rank, frontier
            continue
        new = set(fresh)
        seen |= new
        found = list(compress(candidates, map(new.__contains__, ids)))
        yield rank, found + frontier


def mismatches(groups: dict[str, GroupView], per_rank: dict[int, RankFR]) -> list[Problem]:
    """Sequence numbers where members recorded different ops, sizes or dtypes.

    Each distinct record is looked at once (``_new_records``). A group's table of
    signatures per sequence number is dropped as soon as its last member was read, so
    memory follows the groups in flight, not the job (16,384 ranks make 2,048 tp groups).
    Only for the suspects does a last C-level pass find which ranks hold which record.
    """
    remaining = {name: len(view.positions) for name, view in groups.items()}
    tables: dict[str, dict[int, Sig | None]] = {}  # seq -> its one signature; None: several
    suspects: set[tuple[str, int]] = set()
    shapes_ok: dict[tuple[object, ...], bool] = {}
    for rank, records in _new_records(per_rank):
        for rec in records:
            if rec.is_p2p:
                continue
            sig = signature(rec)
            table = tables.setdefault(rec.group, {})
            known = table.get(rec.seq_id, sig)
            if known != sig:
                suspects.add((rec.group, rec.seq_id))
            table[rec.seq_id] = known
            view = groups.get(rec.group)
            if view is not None and rec.op in _SHAPE_RULED:
                # millions of records (one per tp group and op), a few hundred shapes
                shape = (rec.op, rec.input_sizes, rec.output_sizes, len(view.members))
                ok = shapes_ok.get(shape)
                if ok is None:
                    ok = shapes_ok[shape] = _shape_ok(rec, len(view.members))
                if not ok:
                    suspects.add((rec.group, rec.seq_id))
        for name in per_rank[rank].groups:
            remaining[name] = remaining.get(name, 1) - 1
            if remaining[name] <= 0:
                tables.pop(name, None)
    if not suspects:
        return []
    held: dict[tuple[str, int], dict[int, list[CollectiveRecord]]] = {}
    by_group: dict[str, set[int]] = {}
    for group, seq in suspects:
        by_group.setdefault(group, set()).add(seq)
    for group, seqs in by_group.items():
        oldest = min(seqs)
        view = groups.get(group)
        for rank in view.positions if view is not None else ():
            # newest first: suspects sit near the frontier, so this stops early
            for rec in reversed(per_rank[rank].records):
                if rec.group != group or rec.is_p2p:
                    continue
                if rec.seq_id < oldest:
                    break
                if rec.seq_id in seqs:
                    held.setdefault((group, rec.seq_id), {}).setdefault(rank, []).append(rec)
    problems: list[Problem] = []
    for key in sorted(held):
        view = groups.get(key[0])
        if view is not None:
            problem = _mismatch_at(view, per_rank, key[1], held[key])
            if problem is not None:
                problems.append(problem)
    return problems


def _mismatch_at(
    view: GroupView, per_rank: dict[int, RankFR], seq: int, held: dict[int, list[CollectiveRecord]]
) -> Problem | None:
    by_rank: dict[int, tuple[CollectiveRecord, ...]] = {}
    for rank, recs in held.items():
        fr = per_rank[rank]
        pos = fr.groups.get(view.name)
        if fr.wrapped and pos is not None and first_seq(fr, view.name) == seq:
            continue  # the oldest seq of a wrapped buffer may be cut (coalesced parts)
        by_rank[rank] = tuple(sorted(recs, key=lambda r: r.record_id or 0))
    if not by_rank:
        return None
    size = len(view.members)
    groups: dict[tuple[Sig, ...], list[int]] = {}
    for rank, held_recs in sorted(by_rank.items()):
        groups.setdefault(tuple(signature(r) for r in held_recs), []).append(rank)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    majority_sig, majority = ordered[0]
    variants = [(tuple(ranks), by_rank[ranks[0]][0]) for _, ranks in ordered]
    rec = by_rank[majority[0]][0]
    if len(ordered) == 1:  # all agree: only the shape rule can be broken
        if all(_shape_ok(r, size) for r in by_rank[majority[0]]):
            return None
        return Problem(Kind.SIZE, view.name, seq, rec.op, (), tuple(majority), variants, record=rec)
    kind = _difference(majority_sig, ordered[1][0])
    if kind is Kind.SIZE and len({r[0].op for r in by_rank.values()}) == 1:
        if rec.op in _SIZES_MAY_DIFFER:
            return None
        if rec.op in _ALL_TO_ALL:
            sent = sum(numel(s) for rs in by_rank.values() for r in rs for s in r.input_sizes)
            got = sum(numel(s) for rs in by_rank.values() for r in rs for s in r.output_sizes)
            if sent == got:
                return None
            ranks = tuple(sorted(by_rank))
            return Problem(kind, view.name, seq, rec.op, (), ranks, variants, True, rec)
    tie = len(ordered[1][1]) == len(majority)
    blamed = (
        tuple(sorted(by_rank)) if tie else tuple(sorted(r for _, rs in ordered[1:] for r in rs))
    )
    return Problem(kind, view.name, seq, rec.op, tuple(majority), blamed, variants, tie, rec)


def _difference(a: tuple[Sig, ...], b: tuple[Sig, ...]) -> Kind:
    if len(a) != len(b) or any(x[0] != y[0] for x, y in zip(a, b, strict=False)):
        return Kind.TYPE
    if any(x[1:3] != y[1:3] for x, y in zip(a, b, strict=True)):
        return Kind.SIZE
    return Kind.DTYPE


def numel(shape: tuple[int, ...]) -> int:
    out = 1
    for dim in shape:
        out *= dim
    return out


def _shape_ok(rec: CollectiveRecord, group_size: int) -> bool:
    """all_gather: out numel = in numel × group size; reduce_scatter: the reverse."""
    if rec.op not in _SHAPE_RULED or not rec.input_sizes or not rec.output_sizes:
        return True
    if group_size <= 0:
        return True
    n_in, n_out = sum(map(numel, rec.input_sizes)), sum(map(numel, rec.output_sizes))
    if rec.op in _ALL_GATHER:
        return n_out == n_in * group_size
    if rec.op in _REDUCE_SCATTER:
        return n_in == n_out * group_size
    return True
