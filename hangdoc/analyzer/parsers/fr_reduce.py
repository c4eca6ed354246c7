"""Reducing one rank's flight recorder entries to records, as it is read.

At 16,384 ranks × 2,000 entries the entries themselves would need 50+ GB, so each
file's entries become :class:`CollectiveRecord` rows at once and the dicts are dropped.
History far from the rank's frontier is *interned*: one record object shared by every
rank that recorded the same op at the same sequence number and record id (SPMD ranks
mostly do), so a rank's history costs one pointer per entry. Entries at the frontier
(the last of each group, and every unfinished one) keep their creation time, call stack
and file name.

``reduce`` takes decoded entries; ``reduce_scanned`` takes what ``fr_scan`` read, and
interns by its byte keys the same records ``reduce`` would build.
"""

from __future__ import annotations

import operator
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import itemgetter
from typing import Any

from hangdoc.analyzer.model import CollectiveRecord, Frame, OpState
from hangdoc.analyzer.parsers.fr_record_build import with_group
from hangdoc.analyzer.parsers.fr_scan import Run, ScannedDump

# Backends whose work never leaves "scheduled": completion shows only as ``retired``.
_RETIRE_ONLY_BACKENDS = frozenset({"gloo"})
_P2P_OPS = frozenset({"send", "recv"})
# The fields of an entry of torch ≥ 2.3, fetched in C calls by the reducer's fast path:
# the scalars (the intern key) and the size/dtype lists (compared, not hashed).
_KEY = itemgetter(
    "process_group", "collective_seq_id", "p2p_seq_id", "profiling_name", "record_id", "state",
    "retired", "is_p2p",
)  # fmt: skip
_SHAPES = itemgetter("input_sizes", "output_sizes", "input_dtypes", "output_dtypes")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_GROUP = operator.attrgetter("group")
_STATE = operator.attrgetter("state")
_NO_CANDIDATE = (None, None)
_P2P_META = re.compile(r"^(\d+)\s*(->|<-)\s*(\d+)$")
# Past this many distinct interned records the table is reset (memory bound, not a limit
# on correctness: a reset only costs sharing).
_INTERN_CAP = 1_000_000


@dataclass(frozen=True, slots=True)
class OpName:
    """``profiling_name`` split: ``nccl:send 0->1`` → backend nccl, op send, peers."""

    backend: str | None
    op: str
    src: int | None = None  # group-local ranks, for p2p
    dst: int | None = None


def split_profiling_name(name: str) -> OpName:
    backend, sep, rest = name.partition(":")
    if not sep:
        backend, rest = "", name
    parts = rest.strip().split(" ", 1)
    op = parts[0]
    src = dst = None
    if len(parts) == 2:
        match = _P2P_META.match(parts[1].strip())
        if match:
            a, arrow, b = int(match[1]), match[2], int(match[3])
            src, dst = (a, b) if arrow == "->" else (b, a)
    return OpName(backend or None, op, src, dst)


def parse_rank_list(text: object) -> tuple[int, ...]:
    """pg_config ``ranks``: a STRING ``"[0, 1, 2]"`` in pickles, maybe a list in JSON."""
    if isinstance(text, list | tuple):
        return tuple(int(r) for r in text if isinstance(r, int))
    if not isinstance(text, str):
        return ()
    body = text.strip().strip("[]").strip()
    if not body:
        return ()
    return tuple(int(part) for part in body.split(","))


@dataclass(slots=True)
class Reducer:
    """Turns one rank's FR entries into records, sharing identical history records.

    One instance serves many files (a worker process keeps one); ``table`` is the
    intern table. Not thread-safe; it need not be.
    """

    table: dict[tuple[object, ...], CollectiveRecord] = field(default_factory=dict)
    # scalar key -> (record, (input_sizes, output_sizes, input_dtypes, output_dtypes)): the
    # first record interned under the key; ``more`` holds the others (other shapes).
    fast: dict[tuple[object, ...], tuple[CollectiveRecord, tuple[Any, ...]]] = field(
        default_factory=dict
    )
    more: dict[tuple[object, ...], list[tuple[CollectiveRecord, tuple[Any, ...]]]] = field(
        default_factory=dict
    )
    # The same, keyed without the group's name: an op of a sibling group (tensor-parallel
    # groups differ only in name) is copied from it instead of built from its entry.
    siblings: dict[tuple[object, ...], list[tuple[CollectiveRecord, tuple[Any, ...]]]] = field(
        default_factory=dict
    )
    names: dict[str, OpName] = field(default_factory=dict)
    rank_lists: dict[str, tuple[int, ...]] = field(default_factory=dict)
    shared: dict[Any, Any] = field(default_factory=dict)  # shapes and dtypes, interned
    # With ``track_copies``: id(copy) -> the sibling record it was copied from, so a worker
    # can send "row N in group G" instead of the copy's fields (flight_recorder/bulk.py).
    track_copies: bool = False
    copied_from: dict[int, CollectiveRecord] = field(default_factory=dict)
    # fr_scan's byte keys (an entry's fields as its pickle wrote them) -> interned record.
    by_bytes: dict[bytes, CollectiveRecord] = field(default_factory=dict)
    by_sibling: dict[bytes, CollectiveRecord] = field(default_factory=dict)  # Run.siblings

    def size(self) -> int:
        """How many interned records the tables hold (what bounds their memory)."""
        return len(self.table) + len(self.fast) + len(self.by_bytes)

    def reset(self) -> None:
        """Forget every interned record (bounds memory; later ranks create new ones)."""
        self.table.clear()
        self.by_bytes.clear()
        self.by_sibling.clear()
        self.fast.clear()
        self.more.clear()
        self.siblings.clear()
        self.shared.clear()
        self.copied_from.clear()

    def op_name(self, profiling_name: str) -> OpName:
        found = self.names.get(profiling_name)
        if found is None:
            found = self.names[profiling_name] = split_profiling_name(profiling_name)
        return found

    def members(self, text: object) -> tuple[int, ...]:
        if not isinstance(text, str):
            return parse_rank_list(text)
        found = self.rank_lists.get(text)
        if found is None:
            if len(self.rank_lists) > 10_000:
                self.rank_lists.clear()
            found = self.rank_lists[text] = parse_rank_list(text)
        return found

    def reduce(
        self, entries: list[Any], members: dict[str, tuple[int, ...]], source: str
    ) -> tuple[list[CollectiveRecord], int]:
        """Records in buffer order and the number of malformed entries skipped.

        The hot loop of a 16,384-rank analysis (32 M entries), so the common case runs
        in C-level passes over the whole buffer: one itemgetter per entry, a key of its
        scalars looked up in the intern index, and its size/dtype lists compared (list
        equality) with those of the record interned under that key. Python code runs
        only for the entries that miss (new ops, p2p); any surprise (a missing key,
        JSON's lists, a malformed entry) sends the whole buffer down the tolerant path.
        """
        if self.size() > _INTERN_CAP:
            self.reset()
        try:
            out = self._reduce_fast(entries, members)
        except (AttributeError, KeyError, TypeError, ValueError, IndexError):
            out = None
        if out is None:
            out, entries, bad = self._reduce_each(entries, members)
            return self._frontier(out, entries.__getitem__, source), bad
        return self._frontier(out, entries.__getitem__, source), 0

    def reduce_scanned(
        self, dump: ScannedDump, members: dict[str, tuple[int, ...]], source: str
    ) -> tuple[list[CollectiveRecord], int]:
        """``reduce`` for a dump ``fr_scan`` read: the same records, from its byte keys.

        Raises what ``reduce`` would have caught (a malformed entry, or ScanRefused):
        the caller then reads the file whole and reduces that.
        """
        if self.size() > _INTERN_CAP:
            self.reset()
        out: list[CollectiveRecord] = []
        offsets: list[int] = []  # where each piece's records start in ``out``
        for piece in dump.pieces:
            offsets.append(len(out))
            if isinstance(piece, Run):
                out.extend(self._reduce_run(piece, members))
            else:
                out.extend(self._reduce_fast(piece, members))

        def entry_at(index: int) -> Any:
            at = bisect_right(offsets, index) - 1
            piece = dump.pieces[at]
            if isinstance(piece, Run):
                return piece.entry(index - offsets[at])
            return piece[index - offsets[at]]

        return self._frontier(out, entry_at, source), 0

    def _reduce_run(self, run: Run, members: dict[str, tuple[int, ...]]) -> list[CollectiveRecord]:
        keys = run.byte_keys()
        by_bytes = self.by_bytes
        out: list[CollectiveRecord] = list(map(by_bytes.get, keys))  # type: ignore[arg-type]  # None: missing
        missing = list(compress(range(len(out)), map(operator.not_, out)))
        if not missing:
            return out
        unknown: list[int] = []
        templates = self.by_sibling
        siblings = dict(zip(missing, run.siblings(missing), strict=True))
        for index in missing:
            found = siblings[index]
            template = templates.get(found[0]) if found is not None else None
            if template is None:
                unknown.append(index)
                continue
            record = out[index] = by_bytes[keys[index]] = with_group(template, found[1])  # type: ignore[index]
            if self.track_copies:
                self.copied_from[id(record)] = template
        for index, entry in zip(unknown, run.entries(unknown), strict=True):
            record = out[index] = self._intern(entry, _KEY(entry), _SHAPES(entry), members)
            if not record.is_p2p:  # p2p records depend on pg_config: see _intern
                by_bytes[keys[index]] = record
                found = siblings[index]
                if found is not None and record.group == found[1]:
                    templates.setdefault(found[0], record)
        return out

    def _reduce_fast(
        self, entries: list[Any], members: dict[str, tuple[int, ...]]
    ) -> list[CollectiveRecord]:
        keys = list(map(_KEY, entries))
        shapes = list(map(_SHAPES, entries))
        firsts = list(map(self.fast.get, keys, repeat(_NO_CANDIDATE)))
        out: list[CollectiveRecord] = list(map(_FIRST, firsts))
        same = list(map(operator.eq, map(_SECOND, firsts), shapes))
        if all(same):
            return out
        for index in compress(range(len(same)), map(operator.not_, same)):
            out[index] = self._intern(entries[index], keys[index], shapes[index], members)
        return out

    def _intern(
        self,
        entry: dict[str, Any],
        key: tuple[Any, ...],
        shapes: tuple[Any, ...],
        members: dict[str, tuple[int, ...]],
    ) -> CollectiveRecord:
        """The record of an entry the fast index did not have (raises on malformed input)."""
        first = self.fast.get(key)
        if first is not None:
            if first[1] == shapes:
                return first[0]
            for candidate in self.more.get(key, ()):
                if candidate[1] == shapes:
                    return candidate[0]
        is_p2p = key[7]
        if is_p2p:  # p2p records depend on pg_config (peer ranks): never fast-interned
            return self._history(entry, members, self.table)
        pg = key[0]
        sibling_key = (pg[1], *key[1:]) if pg.__class__ is tuple and len(pg) == 2 else None
        record = None
        if sibling_key is not None:
            for template, canonical in self.siblings.get(sibling_key, ()):
                if canonical == shapes:  # canonical: the shared lists, not this entry's
                    record = with_group(template, str(pg[0]))
                    if self.track_copies:
                        self.copied_from[id(record)] = template
                    break
        if record is None:
            record = self._history(entry, members, None)
            lists = self.shared  # one raw list per distinct shape, not one per record
            canonical = (
                lists.setdefault(("in", record.input_sizes), shapes[0]),
                lists.setdefault(("out", record.output_sizes), shapes[1]),
                lists.setdefault(("dt", record.dtypes), shapes[2]),
                lists.setdefault(("odt", record.output_dtypes), shapes[3]),
            )
            if sibling_key is not None:
                self.siblings.setdefault(sibling_key, []).append((record, canonical))
        if first is None:
            self.fast[key] = (record, canonical)
        else:
            self.more.setdefault(key, []).append((record, canonical))
        return record

    def _frontier(
        self, out: list[CollectiveRecord], entry_at: Callable[[int], Any], source: str
    ) -> list[CollectiveRecord]:
        """Give the last record of each group and every unfinished one its details."""
        states = list(map(_STATE, out))
        unfinished = len(states) - states.count(OpState.COMPLETED)
        keep: set[int] = set()
        for i in range(len(states) - 1, -1, -1):  # unfinished ops are mostly the newest
            if len(keep) == unfinished:
                break
            if states[i] != OpState.COMPLETED:
                keep.add(i)
        keep.update(dict(zip(map(_GROUP, out), range(len(out)), strict=True)).values())
        for i in sorted(keep):
            out[i] = _with_details(out[i], entry_at(i), source)
        return out

    def _reduce_each(
        self, entries: list[Any], members: dict[str, tuple[int, ...]]
    ) -> tuple[list[CollectiveRecord], list[Any], int]:
        """Entry by entry, tolerant: older versions, JSON, malformed entries (skipped)."""
        out: list[CollectiveRecord] = []
        kept: list[Any] = []
        bad = 0
        for entry in entries:
            record = None
            try:
                key = _KEY(entry)
                if key[0].__class__ is list:  # JSON: process_group is a list
                    key = (tuple(key[0]), *key[1:])
                record = self._intern(entry, key, _SHAPES(entry), members)
            except (KeyError, TypeError):
                pass  # not the current shape: the full tolerant parse below
            except (AttributeError, ValueError, IndexError):
                bad += 1
                continue
            if record is None:
                try:
                    record = self._history(entry, members, self.table)
                except (AttributeError, KeyError, TypeError, ValueError, IndexError):
                    bad += 1
                    continue
            out.append(record)
            kept.append(entry)
        return out, kept, bad

    def _history(
        self,
        e: dict[str, Any],
        members: dict[str, tuple[int, ...]],
        table: dict[tuple[object, ...], CollectiveRecord] | None,
    ) -> CollectiveRecord:
        """The interned record of one entry (the hot loop: ~1 µs, no frames touched).

        The entry comes from untrusted data: anything malformed raises one of the
        errors ``reduce`` counts, never anything else.
        """
        profiling_name = e["profiling_name"]
        name = self.op_name(profiling_name)
        pg = e.get("process_group")
        if isinstance(pg, list | tuple) and len(pg) >= 2:
            group, desc = str(pg[0]), str(pg[1])
        else:  # before process_group existed: pg_id only
            group, desc = str(e.get("pg_id", "?")), None
        seq = e.get("collective_seq_id", e.get("seq_id"))
        p2p_seq = e.get("p2p_seq_id")
        is_p2p = e.get("is_p2p")
        if is_p2p is None:
            is_p2p = name.op in _P2P_OPS
        peer = None
        if is_p2p and name.src is not None and name.dst is not None:
            local = name.dst if name.op == "send" else name.src
            group_ranks = members.get(group)
            if group_ranks:
                peer = group_ranks[local] if 0 <= local < len(group_ranks) else None
            elif desc == "default_pg" or group == "0":
                peer = local
        in_sizes: tuple[tuple[int, ...], ...] = tuple(map(tuple, e.get("input_sizes") or ()))
        out_sizes: tuple[tuple[int, ...], ...] = tuple(map(tuple, e.get("output_sizes") or ()))
        in_dtypes: tuple[str, ...] = tuple(e.get("input_dtypes") or ())
        out_dtypes: tuple[str, ...] = tuple(e.get("output_dtypes") or ())
        raw_state, retired, record_id = e.get("state"), e.get("retired"), e.get("record_id")
        key = (
            group,
            desc,
            seq,
            p2p_seq,
            profiling_name,
            record_id,
            in_sizes,
            out_sizes,
            in_dtypes,
            out_dtypes,
            raw_state,
            retired,
            is_p2p,
            peer,
        )
        found = table.get(key) if table is not None else None
        if found is not None:
            return found
        if not isinstance(seq, int):
            raise ValueError("no sequence number")
        # Millions of distinct records share a handful of shapes: share the tuples too.
        shared = self.shared
        seq = shared.setdefault(seq, seq)  # ints past 256 are objects: share them too
        if isinstance(record_id, int):
            record_id = shared.setdefault(record_id, record_id)
        in_sizes = shared.setdefault(in_sizes, in_sizes)
        out_sizes = shared.setdefault(out_sizes, out_sizes)
        in_dtypes = shared.setdefault(in_dtypes, in_dtypes)
        out_dtypes = shared.setdefault(out_dtypes, out_dtypes)
        record = CollectiveRecord(
            group=group,
            seq_id=seq,
            op=name.op,
            state=normalize_state(raw_state, retired, name.backend),
            input_sizes=in_sizes,
            output_sizes=out_sizes,
            dtypes=in_dtypes,
            is_p2p=bool(is_p2p),
            peer=peer,
            record_id=_int_or_none(record_id),
            group_desc=desc,
            p2p_seq_id=_int_or_none(p2p_seq),
            output_dtypes=out_dtypes,
            backend=name.backend,
        )
        if table is not None:
            table[key] = record
        return record


def normalize_state(raw: object, retired: object, backend: str | None) -> OpState:
    """FR state → completed | started | scheduled | timed_out | unknown.

    gloo never leaves ``scheduled``: there ``retired`` means finished. Elsewhere a
    retired entry that is not ``completed`` was retired by the watchdog on an error or
    timeout (FORMATS §5).
    """
    if raw == "completed":
        return OpState.COMPLETED
    if retired is True:
        return OpState.COMPLETED if backend in _RETIRE_ONLY_BACKENDS else OpState.TIMED_OUT
    if raw == "scheduled":
        return OpState.SCHEDULED
    if raw == "started":
        return OpState.STARTED
    return OpState.UNKNOWN


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _with_details(
    record: CollectiveRecord, entry: dict[str, object], source: str
) -> CollectiveRecord:
    created = entry.get("time_created_ns")
    return CollectiveRecord(
        group=record.group,
        seq_id=record.seq_id,
        op=record.op,
        state=record.state,
        input_sizes=record.input_sizes,
        output_sizes=record.output_sizes,
        dtypes=record.dtypes,
        is_p2p=record.is_p2p,
        peer=record.peer,
        record_id=record.record_id,
        time_created_ns=_int_or_none(created),
        source=source,
        group_desc=record.group_desc,
        p2p_seq_id=record.p2p_seq_id,
        output_dtypes=record.output_dtypes,
        backend=record.backend,
        frames=_frames(entry.get("frames")),
    )


_FRAME_CACHE: dict[tuple[str, str, int | None], Frame] = {}


def _frames(raw: object) -> tuple[Frame, ...]:
    """FR ``frames`` → Frame objects, shared: every rank's frontier repeats the same few."""
    if not isinstance(raw, list):
        return ()
    out: list[Frame] = []
    cache = _FRAME_CACHE
    if len(cache) > 100_000:
        cache.clear()
    for item in raw:
        if isinstance(item, dict):
            line = item.get("line")
            key = (
                str(item.get("name", "?")),
                str(item.get("filename", "")),
                line if isinstance(line, int) and line > 0 else None,
            )
            frame = cache.get(key)
            if frame is None:
                frame = cache[key] = Frame(function=key[0], file=key[1], line=key[2])
            out.append(frame)
    return tuple(out)
