"""PyTorch flight recorder (FR) dumps, pickle or JSON, every version (FORMATS.md §5).

One file is one rank's ring buffer of collectives. Pickles go through the restricted
unpickler (plain data only; a pickle naming any global is refused and reported, and
nothing in it runs). Both forms become :class:`CollectiveRecord` rows on the rank.

Scale shapes the reduction (16,384 ranks × 2,000 entries is 32 M entries; as dicts
they would need 50+ GB): each file is reduced as it is read and its dicts dropped.
Entries far from the rank's frontier are *interned*: a record without time, frames or
file name, shared by every rank that recorded the same op at the same sequence number
and record id (SPMD ranks mostly do), so a rank's history costs one pointer per entry.
Entries at the frontier (the last of each process group, and every one not finished)
keep their creation time, call stack and file. Matching needs no more than that.

Rank: FR files do not say which rank wrote them; the name does (``<prefix><rank>``,
``rank<R>/`` folders of a hangdoc dump), exactly as torch's own analyzer reads them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from hangdoc.analyzer.model import (
    CollectiveRecord,
    Frame,
    InputKind,
    ProcessEvidence,
    ProcessGroupInfo,
)
from hangdoc.analyzer.parsers.base import ParsedFile
from hangdoc.analyzer.safe_unpickle import describe_load_error, safe_load

# Backends whose work never leaves "scheduled": completion shows only as ``retired``.
_RETIRE_ONLY_BACKENDS = frozenset({"gloo"})
_P2P_OPS = frozenset({"send", "recv"})
# The fields of an entry of torch ≥ 2.3, fetched in one C call by the reducer's fast path.
_FAST = itemgetter(
    "process_group", "collective_seq_id", "p2p_seq_id", "profiling_name", "record_id", "state",
    "retired", "is_p2p", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes",
)  # fmt: skip
_PICKLE_MARKERS = (b"profiling_name", b"pg_config", b"collective_seq_id", b"record_id")
_JSON_MARKERS = (b'"profiling_name"', b'"pg_config"', b'"collective_seq_id"')
_RANK_DIR = re.compile(r"^rank(\d+)$")
_RANK_SUFFIX = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle|bin|dump))?$")
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


def rank_from_path(path: Path) -> int | None:
    """``…/rank3/flight_recorder.json`` → 3; ``comm_lib_trace_rank_12`` → 12."""
    for part in (path.parent.name, path.parent.parent.name):
        match = _RANK_DIR.match(part)
        if match:
            return int(match[1])
    match = _RANK_SUFFIX.search(path.name)
    return int(match[1]) if match else None


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
    fast: dict[tuple[object, ...], list[tuple[CollectiveRecord, Any, Any, Any, Any]]] = field(
        default_factory=dict
    )
    names: dict[str, OpName] = field(default_factory=dict)
    rank_lists: dict[str, tuple[int, ...]] = field(default_factory=dict)

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

        The hot loop of a 16,384-rank analysis (32 M entries), so it is tuned: one
        C-level itemgetter per entry, a key of the entry's scalars, and the size and
        dtype lists compared (C-level list equality) with those of the record already
        interned under that key; only a miss, a p2p op or an entry of another shape
        (older versions, JSON) takes the tolerant path, ``_history``.
        """
        if len(self.table) > _INTERN_CAP:
            self.table.clear()
            self.fast.clear()
        table, fast, fast_get = self.table, self.fast, self.fast.get
        out: list[CollectiveRecord] = []
        append = out.append
        keep: list[int] = []
        last: dict[str, int] = {}
        bad = index = 0
        kept: list[Any] = []
        for entry in entries:
            try:
                pg, seq, p2p, name, rid, state, retired, is_p2p, ins, outs, idt, odt = _FAST(entry)
                if pg.__class__ is list:  # JSON
                    pg = tuple(pg)
                key = (pg, seq, p2p, name, rid, state, retired, is_p2p)
                candidates = None if is_p2p else fast_get(key)
            except (KeyError, TypeError):
                key, candidates = None, None
            record = None
            if candidates is not None:
                for cand in candidates:
                    if cand[1] == ins and cand[2] == outs and cand[3] == idt and cand[4] == odt:
                        record = cand[0]
                        break
            if record is None:
                try:
                    record = self._history(entry, members, table)
                except (AttributeError, KeyError, TypeError, ValueError, IndexError):
                    if not bad:
                        kept = entries[:index]  # from now on, track the entries kept
                    bad += 1
                    continue
                if key is not None and not is_p2p:
                    fast.setdefault(key, []).append((record, ins, outs, idt, odt))
            append(record)
            if bad:
                kept.append(entry)
            last[record.group] = index
            if record.state != "completed":
                keep.append(index)
            index += 1
        raw = kept if bad else entries
        for i in sorted({*keep, *last.values()}):
            out[i] = _with_details(out[i], raw[i], source)
        return out, bad

    def _history(
        self,
        e: dict[str, Any],
        members: dict[str, tuple[int, ...]],
        table: dict[tuple[object, ...], CollectiveRecord],
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
        found = table.get(key)
        if found is not None:
            return found
        if not isinstance(seq, int):
            raise ValueError("no sequence number")
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
        table[key] = record
        return record


def normalize_state(raw: object, retired: object, backend: str | None) -> str:
    """FR state → completed | started | scheduled | timed_out | unknown.

    gloo never leaves ``scheduled``: there ``retired`` means finished. Elsewhere a
    retired entry that is not ``completed`` was retired by the watchdog on an error or
    timeout (FORMATS §5).
    """
    if raw == "completed":
        return "completed"
    if retired is True:
        return "completed" if backend in _RETIRE_ONLY_BACKENDS else "timed_out"
    if raw in ("scheduled", "started"):
        return str(raw)
    return "unknown"


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


def _frames(raw: object) -> tuple[Frame, ...]:
    if not isinstance(raw, list):
        return ()
    out: list[Frame] = []
    for item in raw:
        if isinstance(item, dict):
            line = item.get("line")
            out.append(
                Frame(
                    function=str(item.get("name", "?")),
                    file=str(item.get("filename", "")),
                    line=line if isinstance(line, int) and line > 0 else None,
                )
            )
    return tuple(out)


def read_document(path: Path) -> object:
    """The decoded FR dump: restricted unpickling or JSON. Raises on unreadable input.

    The file is opened with a buffer as large as the file (up to 64 MiB): the C
    unpickler prefetches through ``peek``, which a default 8 KiB buffer caps, and that
    alone made unpickling three times slower than ``pickle.loads``.
    """
    size = path.stat().st_size
    with path.open("rb", buffering=min(max(size + 1, 1 << 16), 1 << 26)) as handle:
        if handle.peek(1)[:1] == b"\x80":
            return safe_load(handle)
        return json.loads(handle.read().decode("utf-8", errors="replace"))


def document_to_parsed(doc: object, rank: int | None, display: str, reducer: Reducer) -> ParsedFile:
    """One decoded dump → records on one rank, its process groups, notes."""
    parsed = ParsedFile(kind=InputKind.FLIGHT_RECORDER)
    if isinstance(doc, list):  # the early form: a bare list of entries
        entries: object = doc
        version, pg_config = "early (bare list)", None
    elif isinstance(doc, dict):
        entries = doc.get("entries", [])
        version, pg_config = str(doc.get("version", "?")), doc.get("pg_config")
    else:
        parsed.error = f"not a flight recorder dump: top level is {type(doc).__name__}"
        return parsed
    if not isinstance(entries, list):
        parsed.error = "flight recorder dump: 'entries' is not a list"
        return parsed
    members: dict[str, tuple[int, ...]] = {}
    if isinstance(pg_config, dict):
        for key, info in pg_config.items():
            if not isinstance(info, dict):
                continue
            name = str(info.get("name", key))
            try:
                ranks = reducer.members(info.get("ranks"))
            except ValueError:
                ranks = ()
            if not name:  # gloo's dummy {'': {'name': '', 'ranks': '[]'}}
                continue
            members[name] = ranks
            desc = info.get("desc")
            parsed.process_groups.append(
                ProcessGroupInfo(name=name, desc=str(desc) if desc else None, ranks=ranks)
            )
    records, bad = reducer.reduce(entries, members, display)
    known = set(members)
    for record in records:
        if record.group not in known:
            known.add(record.group)
            parsed.process_groups.append(
                ProcessGroupInfo(name=record.group, desc=record.group_desc)
            )
    if bad:
        parsed.notes.append(f"{display}: skipped {bad} malformed flight recorder entries")
    if rank is None:
        parsed.notes.append(
            f"{display}: flight recorder dump (version {version}) but no rank in its name; "
            "name it <prefix><rank> or put it in a rank<R>/ folder to match it"
        )
    parsed.processes.append(ProcessEvidence(rank=rank, collectives=records, sources=[display]))
    return parsed


class FlightRecorderParser:
    """Recognises FR pickles (protocol 2+ with FR keys) and FR JSON by content."""

    kind = InputKind.FLIGHT_RECORDER

    def __init__(self) -> None:
        self.reducer = Reducer()

    def sniff(self, head: bytes) -> bool:
        if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
            return any(marker in head for marker in _PICKLE_MARKERS)
        text = head.lstrip()
        if text[:1] not in (b"{", b"["):
            return False
        return any(marker in head for marker in _JSON_MARKERS) or (
            b'"pg_status"' in head and b'"version"' in head
        )

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        try:
            doc = read_document(path)
        except (OSError, ValueError, EOFError, MemoryError, RecursionError) as exc:
            return ParsedFile(kind=InputKind.FLIGHT_RECORDER, error=_describe(exc))
        except Exception as exc:  # the C unpickler raises many kinds on corrupt input
            return ParsedFile(kind=InputKind.FLIGHT_RECORDER, error=_describe(exc))
        return document_to_parsed(doc, rank_from_path(path), display_path, self.reducer)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"flight recorder JSON is not valid JSON: {exc}"
    if isinstance(exc, OSError):
        return f"cannot read flight recorder file: {exc.strerror or exc}"
    return describe_load_error(exc)


def records_by_rank(parsed: Iterable[ParsedFile]) -> dict[int, list[CollectiveRecord]]:
    """Convenience for tests and tools: rank → records of several parsed files."""
    out: dict[int, list[CollectiveRecord]] = {}
    for item in parsed:
        for proc in item.processes:
            if proc.rank is not None:
                out.setdefault(proc.rank, []).extend(proc.collectives)
    return out
