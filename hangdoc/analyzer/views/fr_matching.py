"""Flight recorder matching across ranks: who stopped where, and which problem is the root.

Pure functions over the model (the rules HD010-HD016 read the result). Per process
group, collectives are matched by ``collective_seq_id`` (the n-th collective a rank
issued on that group); the problems found:

* MISSING: some members never issued the collective others wait in;
* TYPE / SIZE / DTYPE mismatch: members issued different things at one sequence number
  (the majority is taken as intended; a tie is reported as such);
* NO_DUMP: members left no dump while every member that did waits in the op;
* P2P: a pending send/recv whose peer posted nothing to match it;
* STALLED: every member issued the op, consistently, and it still did not finish.

Then the *root* analysis: each rank is "stuck at" its earliest unfinished op. A problem
whose blamed ranks are all stuck at another problem is a consequence of it (reported
after it, as a warning); problems that depend on each other in a circle are a deadlock.
So the root cause comes first however many process groups the hang spread to, and
every independent problem is reported, not only the first.

This module: per-rank positions and the missing-rank / no-dump / stall search, and the
orchestration. ``fr_mismatch``: ranks that recorded different things. ``fr_links``:
point-to-point pairing and root-versus-consequence. ``fr_model``: the data.

Cost: a few C-speed passes over each rank's records (``scan_rank``) and one look at each
distinct (interned) record for the mismatch search; the cyclic garbage collector is
paused meanwhile, since walking millions of live records would dominate.
Ring buffers that start mid-stream are aligned per group: a rank's history of a group
starts at its first recorded sequence number when its buffer wrapped (FORMATS §8.11).
"""

from __future__ import annotations

import gc
import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import compress

from hangdoc.analyzer.model import CollectiveRecord, Evidence, InputKind, OpState
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.fr_links import link, p2p_problems, roots_of
from hangdoc.analyzer.views.fr_mismatch import mismatches
from hangdoc.analyzer.views.fr_model import (
    GroupPos,
    GroupView,
    Kind,
    MatchResult,
    Problem,
    RankFR,
    Sig,
    first_seq,
    signature,
)

__all__ = [
    "GroupPos",
    "GroupView",
    "Kind",
    "MatchResult",
    "Problem",
    "RankFR",
    "Sig",
    "first_seq",
    "fr_ranks",
    "latest_dump",
    "match",
    "roots_of",
    "scan_rank",
    "signature",
]

_RECORD_ID = operator.attrgetter("record_id")
_STATE = operator.attrgetter("state")
_NOT_COMPLETED = OpState.COMPLETED.__ne__
_GROUP = operator.attrgetter("group")


def is_done(record: CollectiveRecord) -> bool:
    return record.state == OpState.COMPLETED


def latest_dump(records: Sequence[CollectiveRecord]) -> Sequence[CollectiveRecord]:
    """The records of the newest dump when a rank's records hold several.

    Two dumps of one rank (a file the job wrote and a live dump, or a re-dump) are
    concatenated by the loader; each is in increasing record_id order, so a drop in
    record_id marks the boundary. The dump that reaches the highest record_id is the
    most recent view of the ring buffer; matching reads that one only. A single dump
    is recognised in O(1): its ids are unique and increasing, so there are no more
    records than the span of ids (a repeat or a drop breaks that).
    """
    if not records:
        return records
    first, last = records[0].record_id, records[-1].record_id
    if first is None or last is None:
        return records
    if first <= last and len(records) <= last - first + 1:
        return records  # torch dumps in record_id order: no drop, no repeat
    segments: list[list[CollectiveRecord]] = [[]]
    previous = -1
    for record in records:
        rid = record.record_id if record.record_id is not None else previous + 1
        if rid <= previous:
            segments.append([])
        segments[-1].append(record)
        previous = rid
    return max(segments, key=lambda seg: (seg[-1].record_id or 0, len(seg)))


def scan_rank(rank: int, records: Sequence[CollectiveRecord]) -> RankFR:
    """A rank's positions per group and its unfinished ops, in C-speed passes.

    ``records`` are in buffer order (increasing record_id, so increasing sequence
    numbers per group): the last record per (group, kind) is its position; the first
    sequence number of a group is found only when needed (``first_seq``).
    """
    kept = latest_dump(records)
    # read once as a list for the passes below (a RecordRows is row numbers: each pass
    # would read them again); RankFR keeps the compact sequence, not this list
    records = list(kept)
    # C-level passes: at 16,384 ranks this touches 32 M (shared) records
    pending = list(compress(records, map(_NOT_COMPLETED, map(_STATE, records))))
    # the last record per group (keyed by the name alone: no tuple per record); where
    # that is a send/recv, the group's last collective is looked for backwards
    last = dict(zip(map(_GROUP, records), records, strict=True))
    groups: dict[str, GroupPos] = {}
    for group, rec in last.items():
        if rec.is_p2p:
            found = next((r for r in reversed(records) if r.group == group and not r.is_p2p), None)
            if found is None:
                continue
            rec = found
        groups[group] = GroupPos(None, rec)
    p2p: list[CollectiveRecord] = []
    for rec in pending:
        if rec.is_p2p:
            p2p.append(rec)
        else:
            groups[rec.group].pending.append(rec)
    source = next((r.source for r in reversed(records) if r.source), "")
    first_id = records[0].record_id if records else None
    wrapped = first_id is not None and first_id > 0
    stuck = pending[0] if pending else None
    return RankFR(rank, source, wrapped, groups, p2p, stuck, kept)


def fr_ranks(evidence: Evidence) -> dict[int, Sequence[CollectiveRecord]]:
    """Ranks with a flight recorder: records, or a readable (maybe empty) FR input."""
    out: dict[int, Sequence[CollectiveRecord]] = {
        r: p.collectives for r, p in evidence.ranked().items() if p.collectives
    }
    for item in evidence.inputs:
        if item.kind is InputKind.FLIGHT_RECORDER and item.error is None:
            for rank in item.ranks:
                out.setdefault(rank, [])
    return out


def match(evidence: Evidence, activities: Mapping[int, RankActivity]) -> MatchResult:
    """Match every rank's flight recorder (see the module docstring)."""
    enabled = gc.isenabled()
    gc.disable()  # allocation-heavy and cycle-free: collections would walk every record
    try:
        return _match(evidence, activities)
    finally:
        if enabled:
            gc.enable()


def _match(evidence: Evidence, activities: Mapping[int, RankActivity]) -> MatchResult:
    per_rank = {r: scan_rank(r, recs) for r, recs in sorted(fr_ranks(evidence).items())}
    world = max([evidence.expected_world_size() or 0, *(r + 1 for r in per_rank)])
    groups = _group_views(evidence, per_rank, world)
    problems = mismatches(groups, per_rank)
    for view in groups.values():
        mismatched = {p.seq for p in problems if p.group == view.name}
        problems.extend(_missing(view, per_rank, mismatched))
    problems.extend(p2p_problems(per_rank))
    link(problems, per_rank, activities)
    problems.sort(key=lambda p: (not p.root, p.group, -1 if p.seq is None else p.seq, p.kind))
    return MatchResult(per_rank, groups, problems, world)


def _group_views(
    evidence: Evidence, per_rank: dict[int, RankFR], world: int
) -> dict[str, GroupView]:
    users: dict[str, list[int]] = {}
    descs: dict[str, str | None] = {}
    for rank, fr in per_rank.items():
        for name, pos in fr.groups.items():
            users.setdefault(name, []).append(rank)
            descs.setdefault(name, pos.last.group_desc)
    views: dict[str, GroupView] = {}
    for name in sorted(users, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n)):
        info = evidence.process_groups.get(name)
        desc = (info.desc if info else None) or descs.get(name)
        if info is not None and info.ranks:
            members = tuple(sorted(info.ranks))
        elif desc == "default_pg" or name == "0":
            members = tuple(range(world))
        else:  # gloo's dummy pg_config: members are the ranks that used it
            members = tuple(sorted(users[name]))
        dumped = tuple(r for r in members if r in per_rank)
        positions = {r: per_rank[r].groups[name] for r in dumped if name in per_rank[r].groups}
        views[name] = GroupView(name, desc, members, dumped, positions)
    return views


def _last_seq(fr: RankFR, group: str) -> int | None:
    """Last collective seq a dumped rank issued on ``group``; None when unknowable."""
    pos = fr.groups.get(group)
    if pos is not None:
        return pos.last.seq_id
    return None if fr.wrapped else 0  # a complete buffer without the group: never used it


def _missing(
    view: GroupView, per_rank: dict[int, RankFR], mismatched: set[int | None]
) -> list[Problem]:
    """Per unfinished seq, the members that never issued it (each rank blamed once)."""
    lasts = {r: _last_seq(per_rank[r], view.name) for r in view.dumped}
    pending: dict[int, list[tuple[int, CollectiveRecord]]] = {}
    for rank, pos in view.positions.items():
        for rec in pos.pending:
            pending.setdefault(rec.seq_id, []).append((rank, rec))
    problems: list[Problem] = []
    blamed_so_far: set[int] = set()
    no_dump = tuple(r for r in view.members if r not in per_rank)
    for seq in sorted(pending):
        waiting_recs = pending[seq]
        missing = tuple(r for r, last in lasts.items() if last is not None and last < seq)
        fresh = tuple(r for r in missing if r not in blamed_so_far)
        waiting = tuple(sorted({r for r, _ in waiting_recs}))
        record = _majority_record([rec for _, rec in waiting_recs])
        if fresh:
            blamed_so_far.update(fresh)
            problems.append(
                Problem(Kind.MISSING, view.name, seq, record.op, waiting, fresh, record=record)
            )
        elif no_dump and not missing:
            problems.append(
                Problem(Kind.NO_DUMP, view.name, seq, record.op, waiting, no_dump, record=record)
            )
            no_dump = ()
        elif not problems and not mismatched and not missing and len(waiting) == len(view.dumped):
            # nothing wrong that FR can see: say so once, at the oldest op in flight
            problems.append(
                Problem(Kind.STALLED, view.name, seq, record.op, waiting, (), record=record)
            )
    return problems


def _majority_record(records: list[CollectiveRecord]) -> CollectiveRecord:
    counts = Counter(signature(r) for r in records)
    best = counts.most_common(1)[0][0]
    return next(r for r in records if signature(r) == best)
