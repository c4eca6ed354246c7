"""The data of flight recorder matching: per-rank positions, problems, the result.

Shared by the matching steps (``fr_matching``, ``fr_mismatch``, ``fr_links``) and read
by the FR rules. Plain dataclasses over the model's CollectiveRecord; no logic beyond
small accessors.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from hangdoc.analyzer.model import CollectiveRecord


class Kind(enum.StrEnum):
    MISSING = "missing"
    TYPE = "type_mismatch"
    SIZE = "size_mismatch"
    DTYPE = "dtype_mismatch"
    NO_DUMP = "no_dump"
    P2P = "p2p_unmatched"
    STALLED = "stalled"


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
    records: Sequence[CollectiveRecord]


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
