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

Cost: one pass over each rank's records plus a C-speed count of shared (interned)
records for the mismatch search; no per-sequence table of all ranks is ever built.
Ring buffers that start mid-stream are aligned per group: a rank's history of a group
starts at its first recorded sequence number when its buffer wrapped (FORMATS §8.11).
"""

from __future__ import annotations

import enum
import itertools
import operator
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from hangdoc.analyzer.model import CollectiveRecord, Evidence, InputKind
from hangdoc.rules.activity import RankActivity

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
_SIZES_MAY_DIFFER = frozenset({"gather", "scatter", "all_gather_v", "reduce_scatter_v"})
# all_to_all sizes differ per rank; only the totals must agree (what is sent is received).
_ALL_TO_ALL = frozenset({"all_to_all", "all_to_all_single", "alltoall", "alltoall_base"})


class Kind(enum.StrEnum):
    MISSING = "missing"
    TYPE = "type_mismatch"
    SIZE = "size_mismatch"
    DTYPE = "dtype_mismatch"
    NO_DUMP = "no_dump"
    P2P = "p2p_unmatched"
    STALLED = "stalled"


_RECORD_ID = operator.attrgetter("record_id")
_GROUP_KIND = operator.attrgetter("group", "is_p2p")

Sig = tuple[
    str, tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], tuple[str, ...], tuple[str, ...]
]


def signature(record: CollectiveRecord) -> Sig:
    return (record.op, record.input_sizes, record.output_sizes, record.dtypes, record.output_dtypes)


@dataclass(slots=True)
class GroupPos:
    """One rank in one group: its first and last recorded collective, the unfinished ones."""

    first_seq: int | None  # None until asked for (first_seq())
    last: CollectiveRecord
    pending: list[CollectiveRecord] = field(default_factory=list)


@dataclass(slots=True)
class RankFR:
    rank: int
    source: str
    wrapped: bool  # the ring buffer lost its oldest entries (history starts mid-stream)
    groups: dict[str, GroupPos]
    p2p_pending: list[CollectiveRecord]
    stuck: CollectiveRecord | None  # earliest unfinished op: where this rank is blocked
    records: list[CollectiveRecord]


@dataclass(slots=True)
class Problem:
    kind: Kind
    group: str
    seq: int | None
    op: str  # the op the waiting ranks are in (majority op for mismatches)
    waiting: tuple[int, ...]
    blamed: tuple[int, ...]
    variants: list[tuple[tuple[int, ...], CollectiveRecord]] = field(default_factory=list)
    tie: bool = False
    record: CollectiveRecord | None = None  # the waiting side's record (for its stack)
    after: list[Problem] = field(default_factory=list)  # the problems this one follows from
    cycle: bool = False

    @property
    def root(self) -> bool:
        return not self.after or self.cycle

    def key(self) -> tuple[str, str, int]:
        return (self.kind.value, self.group, -1 if self.seq is None else self.seq)


@dataclass(slots=True)
class GroupView:
    name: str
    desc: str | None
    members: tuple[int, ...]
    dumped: tuple[int, ...]  # members with a readable flight recorder dump
    positions: dict[int, GroupPos]  # rank -> position (dumped members that used the group)


@dataclass(slots=True)
class MatchResult:
    ranks: dict[int, RankFR]
    groups: dict[str, GroupView]
    problems: list[Problem]
    world: int

    def of_kind(self, *kinds: Kind) -> list[Problem]:
        return [p for p in self.problems if p.kind in kinds]


def is_done(record: CollectiveRecord) -> bool:
    return record.state == "completed"


def latest_dump(records: list[CollectiveRecord]) -> list[CollectiveRecord]:
    """The records of the newest dump when a rank's records hold several.

    Two dumps of one rank (a file the job wrote and a live dump, or a re-dump) are
    concatenated by the loader; each is in increasing record_id order, so a drop in
    record_id marks the boundary. The dump that reaches the highest record_id is the
    most recent view of the ring buffer; matching reads that one only. A single dump
    is recognised in O(1): its ids are unique and increasing, so there are no more
    records than the span of ids.
    """
    if not records:
        return records
    first, last = records[0].record_id, records[-1].record_id
    if first is None or last is None:
        return records
    if first <= last and len(records) <= last - first + 1:
        ids = list(map(_RECORD_ID, records))
        if None in ids or all(map(operator.lt, ids, itertools.islice(ids, 1, None))):
            return records
    segments: list[list[CollectiveRecord]] = [[]]
    previous = -1
    for record in records:
        rid = record.record_id if record.record_id is not None else previous + 1
        if rid <= previous:
            segments.append([])
        segments[-1].append(record)
        previous = rid
    return max(segments, key=lambda seg: (seg[-1].record_id or 0, len(seg)))


def scan_rank(rank: int, records: list[CollectiveRecord]) -> RankFR:
    """A rank's positions per group and its unfinished ops, in C-speed passes.

    ``records`` are in buffer order (increasing record_id, so increasing sequence
    numbers per group): the last record per (group, kind) is its position; the first
    sequence number of a group is found only when needed (``first_seq``).
    """
    records = latest_dump(records)
    pending = [r for r in records if r.state != "completed"]
    last = dict(zip(map(_GROUP_KIND, records), records, strict=True))
    groups: dict[str, GroupPos] = {}
    for (group, is_p2p), rec in last.items():
        if not is_p2p:
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
    return RankFR(rank, source, wrapped, groups, p2p, stuck, records)


def first_seq(fr: RankFR, group: str) -> int | None:
    """The oldest sequence number of ``group`` in a rank's buffer (cached on the position)."""
    pos = fr.groups.get(group)
    if pos is None:
        return None
    if pos.first_seq is None:
        pos.first_seq = next(
            (r.seq_id for r in fr.records if r.group == group and not r.is_p2p), pos.last.seq_id
        )
    return pos.first_seq


def fr_ranks(evidence: Evidence) -> dict[int, list[CollectiveRecord]]:
    """Ranks with a flight recorder: records, or a readable (maybe empty) FR input."""
    out = {r: p.collectives for r, p in evidence.ranked().items() if p.collectives}
    for item in evidence.inputs:
        if item.kind is InputKind.FLIGHT_RECORDER and item.error is None:
            for rank in item.ranks:
                out.setdefault(rank, [])
    return out


def match(evidence: Evidence, activities: Mapping[int, RankActivity]) -> MatchResult:
    per_rank = {r: scan_rank(r, recs) for r, recs in sorted(fr_ranks(evidence).items())}
    world = max([evidence.expected_world_size() or 0, *(r + 1 for r in per_rank)])
    groups = _group_views(evidence, per_rank, world)
    problems = _mismatches(groups, per_rank)
    for view in groups.values():
        mismatched = {p.seq for p in problems if p.group == view.name}
        problems.extend(_missing(view, per_rank, mismatched))
    problems.extend(_p2p(per_rank))
    _link(problems, per_rank, activities)
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


def _mismatches(groups: dict[str, GroupView], per_rank: dict[int, RankFR]) -> list[Problem]:
    """Sequence numbers where members recorded different ops, sizes or dtypes.

    Records are interned (shared between ranks), so the distinct records are few: collect
    them at C speed, find the (group, seq) holding more than one signature or a record
    breaking the all_gather/reduce_scatter size rule, and only then look at which ranks
    hold which record (one more C-speed pass).
    """
    objects: dict[int, CollectiveRecord] = {}
    for fr in per_rank.values():
        objects.update(zip(map(id, fr.records), fr.records, strict=True))
    sigs: dict[tuple[str, int], set[Sig]] = {}
    suspects: set[tuple[str, int]] = set()
    for rec in objects.values():
        if rec.is_p2p:
            continue
        key = (rec.group, rec.seq_id)
        sigs.setdefault(key, set()).add(signature(rec))
        view = groups.get(rec.group)
        if view is not None and not _shape_ok(rec, len(view.members)):
            suspects.add(key)
    suspects.update(key for key, found in sigs.items() if len(found) > 1)
    if not suspects:
        return []
    suspect_ids = {
        oid for oid, r in objects.items() if not r.is_p2p and (r.group, r.seq_id) in suspects
    }
    held: dict[tuple[str, int], dict[int, list[CollectiveRecord]]] = {}
    for rank, fr in per_rank.items():
        for oid in suspect_ids.intersection(map(id, fr.records)):
            rec = objects[oid]
            held.setdefault((rec.group, rec.seq_id), {}).setdefault(rank, []).append(rec)
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
    if not rec.input_sizes or not rec.output_sizes or group_size <= 0:
        return True
    n_in, n_out = sum(map(numel, rec.input_sizes)), sum(map(numel, rec.output_sizes))
    if rec.op in _ALL_GATHER:
        return n_out == n_in * group_size
    if rec.op in _REDUCE_SCATTER:
        return n_in == n_out * group_size
    return True


def _blocking_p2p(fr: RankFR) -> list[CollectiveRecord]:
    """A rank's oldest pending p2p launch: ops batched together share one p2p_seq_id."""
    if not fr.p2p_pending:
        return []
    first = fr.p2p_pending[0]
    return [
        o for o in fr.p2p_pending if o.group == first.group and o.p2p_seq_id == first.p2p_seq_id
    ]


def _p2p(per_rank: dict[int, RankFR]) -> list[Problem]:
    """Per rank, the first op of its oldest pending p2p launch that its peer cannot match.

    Ops on one stream run in order, so only the peer's own oldest launch can be the
    partner: a recv the peer queued behind its own blocked send does not help (that is
    how two "send first" ranks deadlock).
    """
    problems: list[Problem] = []
    blocking = {rank: _blocking_p2p(fr) for rank, fr in per_rank.items()}
    for rank, ops in blocking.items():
        for op in ops:
            peer = op.peer
            if peer is None:
                continue
            want = "recv" if op.op == "send" else "send"
            partner = next(
                (
                    o
                    for o in blocking.get(peer, [])
                    if o.op == want and o.peer == rank and o.group == op.group
                ),
                None,
            )
            if partner is None:
                problems.append(
                    Problem(Kind.P2P, op.group, op.p2p_seq_id, op.op, (rank,), (peer,), record=op)
                )
                break
            if _p2p_bytes(op) != _p2p_bytes(partner):
                variants: list[tuple[tuple[int, ...], CollectiveRecord]] = [
                    ((rank,), op),
                    ((peer,), partner),
                ]
                if op.op == "send":  # report each mismatched pair once, from the sender
                    problems.append(
                        Problem(
                            Kind.SIZE,
                            op.group,
                            op.p2p_seq_id,
                            op.op,
                            (rank,),
                            (peer,),
                            variants,
                            tie=True,
                            record=op,
                        )
                    )
                break
    return problems


def _p2p_bytes(rec: CollectiveRecord) -> int:
    sizes = rec.input_sizes if rec.op == "send" else rec.output_sizes or rec.input_sizes
    return sum(map(numel, sizes))


ProblemKey = tuple[str, int | None, int]  # group, seq, waiting rank for p2p (-1 otherwise)


def _key(group: str, seq: int | None, rank: int | None) -> ProblemKey:
    return (group, seq, -1 if rank is None else rank)


def _link(
    problems: list[Problem], per_rank: dict[int, RankFR], activities: Mapping[int, RankActivity]
) -> None:
    """Consequence edges (a blamed rank is itself stuck at another problem) and cycles."""
    at: dict[ProblemKey, Problem] = {}
    for problem in problems:
        p2p = problem.record is not None and problem.record.is_p2p
        key = _key(problem.group, problem.seq, problem.waiting[0] if p2p else None)
        if key not in at or at[key].kind is Kind.STALLED:
            at[key] = problem
    for problem in problems:
        if problem.kind not in (Kind.MISSING, Kind.P2P):
            continue
        after: list[Problem] = []
        for rank in problem.blamed:
            target = _stuck_problem(rank, per_rank, activities, at)
            if target is None:
                after = []  # this blamed rank is stuck outside any problem: a root
                break
            if target is not problem and target not in after:
                after.append(target)
        problem.after = after
    for problem in problems:
        if problem.after and _reaches(problem, problem):
            problem.cycle = True


def _stuck_problem(
    rank: int,
    per_rank: dict[int, RankFR],
    activities: Mapping[int, RankActivity],
    at: dict[ProblemKey, Problem],
) -> Problem | None:
    fr = per_rank.get(rank)
    if fr is None or fr.stuck is None:
        return None
    activity = activities.get(rank)
    if activity is not None and activity.main is not None and not activity.in_collective:
        return None  # its stacks say it is doing something else: FR's pending op is stale
    rec = fr.stuck
    if rec.is_p2p:
        return at.get(_key(rec.group, rec.p2p_seq_id, rank))
    return at.get(_key(rec.group, rec.seq_id, None))


def _reaches(start: Problem, goal: Problem) -> bool:
    seen: set[int] = set()
    todo = list(start.after)
    while todo:
        node = todo.pop()
        if node is goal:
            return True
        if id(node) not in seen:
            seen.add(id(node))
            todo.extend(node.after)
    return False


def roots_of(problem: Problem) -> list[Problem]:
    """The root problems a consequence leads back to."""
    out: list[Problem] = []
    seen: set[int] = set()
    todo = list(problem.after)
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.root and node is not problem:
            out.append(node)
        else:
            todo.extend(node.after)
    return out
