"""PyTorch flight recorder (FR) dumps, pickle or JSON, every version (FORMATS.md §5).

One file is one rank's ring buffer of collectives. Pickles go through the restricted
unpickler (plain data only; a pickle naming any global is refused and reported, and
nothing in it runs). Both forms become :class:`CollectiveRecord` rows on the rank.

Each file is reduced as it is read and its dicts dropped (``fr_reduce``: history
records interned and shared between ranks, only the frontier keeps its details).
torch's own pickles are read by ``fr_scan`` first, which reads history entries off the
bytes instead of unpickling them, and steps aside (the file is then decoded whole)
wherever it is not sure. Many files at once: ``hangdoc.analyzer.flight_recorder.bulk`` (workers).

Rank: FR files do not say which rank wrote them; the name does (``<prefix><rank>``,
``rank<R>/`` folders of a hangdoc dump), exactly as torch's own analyzer reads them.
"""

from __future__ import annotations

import contextlib
import gc
import json
import operator
from collections.abc import Iterable, Iterator
from pathlib import Path

from hangdoc.analyzer.model import (
    CollectiveRecord,
    InputKind,
    ProcessEvidence,
    ProcessGroupInfo,
)
from hangdoc.analyzer.parsers.base import ParsedFile
from hangdoc.analyzer.parsers.fr_reduce import (
    OpName,
    Reducer,
    normalize_state,
    parse_rank_list,
    split_profiling_name,
)
from hangdoc.analyzer.parsers.fr_scan import ScannedDump, scan
from hangdoc.common.rank_names import Trailing, rank_from_name
from hangdoc.common.safe_unpickle import describe_load_error, memory_guard, safe_loads

__all__ = [
    "FlightRecorderParser",
    "OpName",
    "Reducer",
    "document_to_parsed",
    "no_gc",
    "normalize_state",
    "parse_rank_list",
    "read_document",
    "records_by_rank",
    "split_profiling_name",
]

_PICKLE_MARKERS = (b"profiling_name", b"pg_config", b"collective_seq_id", b"record_id")
_JSON_MARKERS = (b'"profiling_name"', b'"pg_config"', b'"collective_seq_id"')
# Below this a dump is read whole: the scanner's set-up would cost more than it saves.
_SCAN_FROM_BYTES = 16_384
_GROUP = operator.attrgetter("group")


def read_document(path: Path) -> object:
    """The decoded FR dump: restricted unpickling or JSON. Raises on unreadable input."""
    return decode_document(path.read_bytes())


def decode_document(data: bytes) -> object:
    """:func:`read_document` of bytes already read."""
    if data[:1] == b"\x80":
        return safe_loads(data)
    return json.loads(data.decode("utf-8", errors="replace"))


def document_to_parsed(doc: object, rank: int | None, display: str, reducer: Reducer) -> ParsedFile:
    """One decoded dump → records on one rank, its process groups, notes.

    A ScannedDump (``fr_scan``) raises where its bytes surprise the reducer; the caller
    then decodes the file whole and calls this again with the document.
    """
    parsed = ParsedFile(kind=InputKind.FLIGHT_RECORDER)
    if isinstance(doc, ScannedDump):
        entries: object = doc
        version, pg_config = str(doc.root.get("version", "?")), doc.root.get("pg_config")
    elif isinstance(doc, list):  # the early form: a bare list of entries
        entries = doc
        version, pg_config = "early (bare list)", None
    elif isinstance(doc, dict):
        entries = doc.get("entries", [])
        version, pg_config = str(doc.get("version", "?")), doc.get("pg_config")
    else:
        parsed.error = f"not a flight recorder dump: top level is {type(doc).__name__}"
        return parsed
    if not isinstance(entries, list | ScannedDump):
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
    if isinstance(entries, ScannedDump):
        records, bad = reducer.reduce_scanned(entries, members, display)
    else:
        records, bad = reducer.reduce(entries, members, display)
    # groups pg_config does not list, in order of first use, with their first record's
    # description (C-level passes: this runs once per rank over every record; the
    # second only when pg_config lacks a group, which torch's own dumps never do)
    used = dict.fromkeys(map(_GROUP, records))
    if not members.keys() >= used.keys():
        first_use = dict(zip(map(_GROUP, reversed(records)), reversed(records), strict=True))
        for name in used:
            if name not in members:
                desc = first_use[name].group_desc
                parsed.process_groups.append(ProcessGroupInfo(name=name, desc=desc))
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
        rank = rank_from_name(path, Trailing.APPENDED).rank
        with no_gc():
            try:
                data = path.read_bytes()
            except OSError as exc:
                return ParsedFile(kind=InputKind.FLIGHT_RECORDER, error=_describe(exc))
            parsed = self._parse_scanned(data, rank, display_path)
            if parsed is not None:
                return parsed
            try:
                doc = decode_document(data)
            except Exception as exc:  # the C unpickler raises many kinds on corrupt input
                return ParsedFile(kind=InputKind.FLIGHT_RECORDER, error=_describe(exc))
            parsed = document_to_parsed(doc, rank, display_path, self.reducer)
            del doc  # freed before the collector runs again, so it never walks it
        return parsed

    def _parse_scanned(self, data: bytes, rank: int | None, display: str) -> ParsedFile | None:
        """The file through ``fr_scan`` (torch's own pickles), or None to decode it whole.

        Whatever goes wrong here, the whole decode is the reference: it reports the
        file's real error, or reads what the scanner would not.
        """
        if data[:4] != b"\x80\x02}(" or len(data) < _SCAN_FROM_BYTES:
            return None
        try:
            with memory_guard(len(data)):
                return document_to_parsed(scan(data), rank, display, self.reducer)
        except Exception:  # ScanRefused, or corrupt input: the whole decode reports it
            return None


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector around allocation-heavy, cycle-free work.

    Unpickling a dump allocates ~100,000 dicts and lists, which triggers collections;
    with millions of interned records alive, each full collection walks them all, and
    that cost dwarfed the parsing itself (4× slower at 1,024 ranks). FR data holds no
    reference cycles, so nothing is lost by pausing; torch's fr_trace does the same.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
