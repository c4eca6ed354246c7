"""Read thousands of flight recorder files fast: one rank per file, reduced where it is read.

At 16,384 ranks the unpickling alone costs minutes of CPU, so the files are spread
over worker processes. A worker reduces each rank (``Reducer``: history records are
interned, only the frontier keeps its details) and sends back, per rank, an array of
row numbers into its own table of records plus the rows it added since its last reply
(new interned records, and the rank's few frontier records); the parent rebuilds each
rank's record list from those with one C-level map. That keeps the traffic at a few
bytes per entry and the parent's memory at one pointer per entry.

``read_flight_recorders`` yields ParsedFiles in input order, exactly what
``FlightRecorderParser.parse`` returns for each file, so a loader can use either.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.context
import operator
import os
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from multiprocessing import forkserver
from pathlib import Path
from typing import cast

from hangdoc.analyzer.model import (
    CollectiveRecord,
    InputKind,
    ProcessEvidence,
    ProcessGroupInfo,
    RecordRows,
)
from hangdoc.analyzer.parsers.base import ParsedFile
from hangdoc.analyzer.parsers.flight_recorder import FlightRecorderParser
from hangdoc.analyzer.parsers.fr_record_build import (
    FIELD_NAMES,
    record_from_fields,
    with_group,
)

_CHUNK = 8
_WORKER_CAP = 100_000  # interned records a worker keeps before it starts afresh
# A rank whose row numbers differ from its worker's last shared ones in at most this share
# of places keeps only those (its frontier records, the ops of its other groups): 6 bytes
# each where its own numbers would take 4 a record, and a pass to put them in when read.
_OWN_SHARE = 0.4
_LOOK_AHEAD = 16  # of a rank's first rows, how many are looked for in the shared ones
_NO_ROWS = array("i")
_FIELDS = operator.attrgetter(*FIELD_NAMES)


@dataclass(slots=True)
class _Reply:
    """One parsed file as it crosses the process boundary."""

    display: str
    worker: int
    epoch: int
    rank: int | None
    error: str | None
    notes: list[str]
    groups: list[ProcessGroupInfo]
    ids: bytes  # array('i') of row numbers in the worker's table
    new_rows: list[tuple[object, ...]]  # rows added since its last reply, as field tuples
    sources: list[str] = field(default_factory=list)


class _WorkerState:
    """A worker's parser and its numbering of the interned records it has sent."""

    def __init__(self, cap: int = _WORKER_CAP) -> None:
        self.cap = cap  # interned records kept before starting afresh
        self.parser = FlightRecorderParser()
        self.parser.reducer.track_copies = True
        self.numbers: dict[int, int] = {}  # id(record) -> row number
        self.rows: list[CollectiveRecord] = []
        self.sent = 0
        self.epoch = 0
        # name -> (desc, ranks) of the groups sent already
        self.groups: dict[str, tuple[str | None, tuple[int, ...]]] = {}

    def reply(self, path: str, display: str) -> _Reply:
        reducer = self.parser.reducer
        if reducer.size() > self.cap:
            # Records of groups whose ranks are done (tp groups) are never met again:
            # forget them all, so a worker's memory stays bounded at any scale. Records
            # that ranks still share (dp, default group) are re-created once per epoch.
            reducer.reset()
            self.numbers.clear()
            self.rows.clear()
            self.sent = 0
            self.epoch += 1
        parsed = _parse_one(self.parser, Path(path), display)
        proc = parsed.processes[0] if parsed.processes else None
        ids = array("i")
        if proc is not None:
            records = proc.collectives
            found: list[int | None] = list(map(self.numbers.get, map(id, records)))  # None = new
            if None in found:
                rows, numbers = self.rows, self.numbers
                new = compress(range(len(found)), map(operator.is_, found, repeat(None)))
                for index in new:
                    record = records[index]
                    row = found[index] = len(rows)
                    rows.append(record)
                    if not record.source:  # interned: other ranks will send it again
                        numbers[id(record)] = row
            ids = array("i", cast(list[int], found))
        new_rows = self._new_rows()
        # A group's info (its member list: 16,384 ranks for the default group) is sent
        # once per worker, not with every rank. Compared by identity first: the parser
        # shares one member tuple per distinct pg_config text, and hashing a tuple of
        # 16,384 ranks for every file cost more than the rest of this method.
        groups = [g for g in parsed.process_groups if not self._sent(g)]
        self.groups.update((g.name, (g.desc, g.ranks)) for g in groups)
        self.sent = len(self.rows)
        return _Reply(
            display=display,
            worker=os.getpid(),
            epoch=self.epoch,
            rank=proc.rank if proc is not None else None,
            error=parsed.error,
            notes=parsed.notes,
            groups=groups,
            ids=ids.tobytes(),
            new_rows=new_rows,
            sources=proc.sources if proc is not None else [],
        )

    def _sent(self, group: ProcessGroupInfo) -> bool:
        known = self.groups.get(group.name)
        if known is None or known[0] != group.desc:
            return False
        return known[1] is group.ranks or known[1] == group.ranks

    def _new_rows(self) -> list[tuple[object, ...]]:
        """The rows added since the last reply, each as compact as the parent can take it.

        A copy of a sibling group's record already sent is ``(its row, group)``: the
        parent rebuilds it from that row, so the copies share its ints and tuples (about
        a quarter of a record's memory at 16,384 ranks) and cross as two values. Any
        other row is its field tuple, not the dataclass: unpickling a dataclass goes
        through Python-level ``__setstate__``, a tuple does not.
        """
        copied, numbers = self.parser.reducer.copied_from, self.numbers
        out: list[tuple[object, ...]] = []
        for record in self.rows[self.sent :]:
            template = copied.get(id(record))
            row = numbers.get(id(template)) if template is not None else None
            out.append((row, record.group) if row is not None else _FIELDS(record))
        return out


def _parse_one(parser: FlightRecorderParser, path: Path, display: str) -> ParsedFile:
    """The parser's result, or its failure as the file's error (a bug must not stop a batch)."""
    try:
        return parser.parse(path, display)
    except Exception as exc:
        return ParsedFile(
            kind=InputKind.FLIGHT_RECORDER, error=f"could not parse: {type(exc).__name__}: {exc}"
        )


_STATE: _WorkerState | None = None


def _start_worker(cap: int) -> None:
    """A worker's state; the cap is passed, not inherited (the workers are not forks of
    the caller, so a value set there after import would not reach them)."""
    global _STATE
    _STATE = _WorkerState(cap)
    gc.disable()  # a worker only reads FR data, which has no cycles (see no_gc)


def _work(chunk: list[tuple[str, str]]) -> list[_Reply]:
    if _STATE is None:  # not started by the pool's initializer (a direct call)
        _start_worker(_WORKER_CAP)
    assert _STATE is not None
    return [_STATE.reply(path, display) for path, display in chunk]


class _Tables:
    """The parent's copy of each worker's rows, by worker pid and epoch.

    A rank's records are its row numbers into its worker's rows (``RecordRows``), sharing
    the numbers of the worker's rank before where most are the same (a tensor-parallel
    group's ranks: the same interned history, their own frontier records and
    data-parallel ops): the parent then keeps about 3 KB a rank where a list of 2,000
    records was 16 KB (the bench job's ranks: a quarter of their entries their own)."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, list[CollectiveRecord]]] = {}
        # worker pid -> (epoch, the row numbers the last rank's were compared with)
        self.last: dict[int, tuple[int, array[int]]] = {}

    def records(self, reply: _Reply) -> RecordRows:
        epoch, rows = self.rows.get(reply.worker, (reply.epoch, []))
        if epoch != reply.epoch:
            rows = []
        for row in reply.new_rows:
            if len(row) == 2:  # (row of the sibling record it copies, its group)
                rows.append(with_group(rows[cast(int, row[0])], cast(str, row[1])))
            else:
                rows.append(record_from_fields(*row))  # type: ignore[arg-type]
        self.rows[reply.worker] = (reply.epoch, rows)
        numbers = array("i")
        numbers.frombytes(reply.ids)
        last_epoch, base = self.last.get(reply.worker, (-1, _NO_ROWS))
        shared = _shared(numbers, base) if last_epoch == reply.epoch else None
        if shared is not None:
            start, own = shared
            return RecordRows(rows, base, own, start, len(numbers))
        self.last[reply.worker] = (reply.epoch, numbers)
        return RecordRows(rows, numbers)


def _start_in(numbers: array[int], base: array[int]) -> int | None:
    """Where in ``base`` this rank's numbers would start: found by its first rows that
    ``base`` holds (its very first may be an op of a group the base's rank is not in)."""
    for ahead in range(min(_LOOK_AHEAD, len(numbers))):
        try:
            start = base.index(numbers[ahead]) - ahead
        except ValueError:
            continue
        return start if start >= 0 else None
    return None


def _shared(
    numbers: array[int], base: array[int]
) -> tuple[int, tuple[array[int], array[int]] | None] | None:
    """Where ``numbers`` are ``base`` from some start on but for at most a fraction
    ``_OWN_SHARE`` of places: (start, (the indices where they differ, the rows there)),
    else None. The start is where the
    base holds this rank's first row (ring buffers of one group's ranks are cut at other
    points of the same history); the comparison is one C-level pass."""
    start = _start_in(numbers, base)
    if start is None:
        return None
    overlap = min(len(numbers), len(base) - start)
    most = int(len(numbers) * _OWN_SHARE)
    if len(numbers) - overlap > most:
        return None
    differ = list(
        compress(range(overlap), map(operator.ne, numbers, islice(base, start, start + overlap)))
    )
    differ.extend(range(overlap, len(numbers)))  # past the base's end: all its own
    if len(differ) > most:
        return None
    if not differ:
        return start, None
    at = array("H" if len(numbers) <= 0xFFFF else "i", differ)
    return start, (at, array("i", map(numbers.__getitem__, differ)))


def _to_parsed(reply: _Reply, tables: _Tables) -> ParsedFile:
    parsed = ParsedFile(kind=InputKind.FLIGHT_RECORDER, error=reply.error, notes=reply.notes)
    parsed.process_groups = reply.groups
    if reply.error is None:
        records = tables.records(reply)
        parsed.processes.append(
            ProcessEvidence(rank=reply.rank, collectives=records, sources=reply.sources)
        )
    return parsed


def read_flight_recorders(
    files: Sequence[tuple[Path, str]], *, jobs: int | None = None
) -> Iterator[ParsedFile]:
    """Parse FR files (path, display name), in order; ``jobs`` worker processes (1: none)."""
    jobs = jobs if jobs is not None else min(len(files) // 64 + 1, os.cpu_count() or 1)
    if jobs <= 1 or len(files) < 2:
        parser = FlightRecorderParser()
        for path, display in files:
            yield _parse_one(parser, path, display)
        return
    chunks = [[(str(p), d) for p, d in files[i : i + _CHUNK]] for i in range(0, len(files), _CHUNK)]
    tables = _Tables()
    enabled = gc.isenabled()
    gc.disable()  # millions of records arrive; collections would walk them all (no_gc)
    try:
        with _clean_workers() as context, context.Pool(jobs, _start_worker, (_WORKER_CAP,)) as pool:
            for replies in pool.imap(_work, chunks):
                for reply in replies:
                    yield _to_parsed(reply, tables)
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def _clean_workers() -> Iterator[multiprocessing.context.BaseContext]:
    """A context whose workers share no page with this process's heap.

    Forked from the loader, the workers would hold its whole heap as it was (the text
    phase's Evidence, at 16,384 ranks over a gigabyte); every page of it that the loader
    then writes (a reference count, a freed block reused for a record) is copied for
    the loader while the workers keep the old one: about 19 KB a rank counted twice,
    measured (docs/performance.md, the speed7 and speed8 runs). A fork server started
    for this pool holds only this module's imports, and its workers share those; it is
    stopped with the pool, so the analysis that follows does not carry it. Where a
    fork server is already running (another pool started it) it is used, not stopped.
    Without fork servers (not POSIX), workers are spawned."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        yield multiprocessing.get_context("spawn")
        return
    server = forkserver._forkserver  # the stdlib's one server of this process
    ours = getattr(server, "_forkserver_pid", None) is None
    if ours:
        forkserver.set_forkserver_preload([__name__])
    try:
        yield multiprocessing.get_context("forkserver")
    finally:
        stop = getattr(server, "_stop", None)  # the stdlib's own tests stop it so
        if ours and callable(stop):
            stop()
