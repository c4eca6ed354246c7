"""Every text input, read by every recogniser: the one text path.

A ticket's text holds what it holds: a py-spy paste with the watchdog's timeout and NCCL's
WARN lines under it, a job's log with a gdb backtrace and a faulthandler dump inside, a
traceback in the middle of a DeepSpeed log, stacks of several ranks under labels typed by
hand. No part of it may be lost because the file as a whole looked like another part. So
a text is not sniffed and handed to one format's parser; it is scanned twice over the
same lines, and what both sides found is composed for the same ranks:

* the log side (``logs.LogParser``): every line to the log recognisers (NCCL, torch's
  process groups and watchdog, the launchers, the kernel, the frameworks, the job's own
  phases), multi-line records followed, ranks from prefixes, NCCL's init lines and the
  file's name. A dump's own lines (py-spy's, faulthandler's and gdb's frames, py-spy's
  headers) are the stacks' alone and reach it as blank lines (``stacks.is_dump_frame``,
  one anchored test of a line's shape: the bulk of a paste of stacks costs the log side
  next to nothing);
* the stack side (``stacks.attach_stacks``): every line to the stack recognisers (py-spy,
  faulthandler, tracebacks, gdb, pstack, pystack, torch's C++ stacks, frames without
  headers), behind its own one-search prefilter, ranks from prefixes, labels and markers
  near each stack; its processes are added to the log side's, a lone one given the rank
  the log or the file's name gives, a traceback's exception event moved to its stack's
  rank, and a line that names a dumped process's pid (a launcher's prefix, NCCL's
  header) given to that process;
* rank labels typed over a rank's paste (``rank 3:``, ``=== Rank 3 ===``, ``Rank 3
  py-spy dump``) open a section for both sides: the stacks under one are that rank's
  (``scan``), and so are the log events under it that nothing else gave a rank; a label
  that names the process by its pid (``node-1:24036 (rank 3)``, ``$ py-spy dump --pid
  24036``) opens the section of the process whose stacks carry that pid.

What the text mostly is (``text_kind``) names the input (a py-spy text, a faulthandler
dump, a paste of stacks, a log) and decides how it is read, never what is read: a paste
of stacks keeps its records of consequences (a timeout's traceback, the watchdog's C++
stack) as stacks, where a log or console leaves them to its events; a file of dumps is
read for stacks as far as any text is read (one dump per rank of a large job), other
texts from their last 4 MiB; a paste of stacks past 8 MiB is read, by both sides, from
the tail its stacks are read from.

Formats that are one structured document (hangdoc's JSON, py-spy's JSON, flight
recorder pickles and JSON) are recognised by content before this, as before; a
torchelastic error file is one JSON record, read by the log side alone.
"""

from __future__ import annotations

import bisect
import multiprocessing
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from hangdoc.analyzer.model import InputKind, LogEvent, ProcessEvidence
from hangdoc.analyzer.parsers.base import (
    MAX_TEXT_BYTES,
    SNIFF_BYTES,
    ParsedFile,
    decode_bytes,
    read_text_capped,
)
from hangdoc.analyzer.parsers.faulthandler import FaulthandlerParser
from hangdoc.analyzer.parsers.logs import LogParser
from hangdoc.analyzer.parsers.logs.parser import JOB_KINDS, is_error_json
from hangdoc.analyzer.parsers.pyspy_text import PyspyTextParser
from hangdoc.analyzer.parsers.stacks import (
    FRAME_FIRSTS,
    STACK_TEXT_BYTES,
    any_stack,
    attach_stacks,
    compose_stacks,
    is_dump_frame,
    mostly_stacks,
    moved_event,
    scan_stacks,
)
from hangdoc.analyzer.parsers.stacks.markers import may_name_process, process_label
from hangdoc.analyzer.parsers.stacks.scan import MAX_BLOCKS
from hangdoc.analyzer.vocabulary import RankFrom
from hangdoc.common.text import looks_binary

# The kinds the text path names its inputs by (``text_kind``).
TEXT_KINDS = frozenset(
    {InputKind.LOG, InputKind.STACK_TEXT, InputKind.PYSPY_TEXT, InputKind.FAULTHANDLER}
)
_NO_LOG_LINES = "no recognised log lines"
# A label line the router noted: its number, the rank and the pid it names (either may be
# None: markers.process_label).
Label = tuple[int, int | None, int | None]
# A rank label is a short line of its own (markers.process_label, as the stack scanner
# and the log-line window read it): its words are looked for first (may_name_process),
# and a line a launcher prefixed is that rank's own, no label.
_MAX_LABEL = 60
_REMEMBERED_FRAMES = 1 << 14
_LAUNCHER_PREFIX = re.compile(r"\s*\[(?:rank|default)\d+\]:")
_ERROR_JSON_HEAD = 4096
# A file of py-spy or faulthandler dumps holds one per process, of every rank of a job
# (a shared console, a debug server's answer): read up to the size any text is read
# (its tail past it), all its dumps, as their own readers read it.
_DUMP_KINDS = frozenset({InputKind.PYSPY_TEXT, InputKind.FAULTHANDLER})
_DUMP_BLOCKS = 1 << 20
# Up to this size a paste of stacks is read whole by the log side (its NCCL lines, its
# tracebacks' events); a larger one is read from the tail its stacks are read from.
WHOLE_STACKS_BYTES = 8 * 1024 * 1024
# From this size a text that holds stacks is read by both sides at once (_LogSideAside):
# below it a worker's start costs more than it saves, and a dump's 1 MB rank logs stay
# in the caller's process (the loader reads many of them).
BOTH_AT_ONCE_BYTES = 2 * 1024 * 1024

_FAULTHANDLER = FaulthandlerParser()
_PYSPY = PyspyTextParser()
_LOG_SNIFF = LogParser()


def text_kind(head: bytes) -> InputKind:
    """What a text mostly is, from its head: a paste of stacks in the formats only the
    stack scanner reads (or several dumps under rank labels), a faulthandler dump, a
    py-spy text dump, else a log. Every kind is read by both sides all the same."""
    if mostly_stacks(head, _LOG_SNIFF.sniff):
        return InputKind.STACK_TEXT
    if _FAULTHANDLER.sniff(head):
        return InputKind.FAULTHANDLER
    if _PYSPY.sniff(head):
        return InputKind.PYSPY_TEXT
    return InputKind.LOG


class TextParser:
    """Any text: its log lines and its stacks, for the same ranks. ``kind`` is the
    registry's name for it; each file it reads is named by ``text_kind`` (TEXT_KINDS)."""

    kind = InputKind.LOG

    def sniff(self, head: bytes) -> bool:
        """Every text (no text is refused); binary data is no text."""
        return not looks_binary(head)

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
        if is_error_json(decode_bytes(head[:_ERROR_JSON_HEAD])):
            return LogParser().parse(path, display_path)
        notes: list[str] = []
        try:
            kind = text_kind(head)
        except Exception as exc:  # a bug there must not cost the text its reading
            notes.append(f"{display_path}: read as a log ({type(exc).__name__}: {exc})")
            kind = InputKind.LOG
        if kind is InputKind.STACK_TEXT and path.stat().st_size > WHOLE_STACKS_BYTES:
            # A large paste of stacks: both sides read the tail the stacks are read from
            # (the stacks that matter are near its end; its head is more of the same).
            with tail_copy(path, STACK_TEXT_BYTES) as tail:
                parsed = _read(tail, display_path, kind)
            parsed.tail_bytes = STACK_TEXT_BYTES
            parsed.notes.append(
                f"{display_path}: a large paste of stacks; read from its last "
                f"{STACK_TEXT_BYTES >> 20} MiB only, lines numbered from there"
            )
        else:
            parsed = _read(path, display_path, kind)
        parsed.notes[:0] = notes
        return parsed


def _read(path: Path, display_path: str, kind: InputKind) -> ParsedFile:
    """Both sides over the file's lines, composed; a big text that holds stacks on two
    cores at once (``_LogSideAside``), with what each side reads and the order of the
    notes of one side after the other."""
    dumps = kind in _DUMP_KINDS
    window = MAX_TEXT_BYTES if dumps else STACK_TEXT_BYTES
    in_log = kind is not InputKind.STACK_TEXT
    max_blocks = _DUMP_BLOCKS if dumps else MAX_BLOCKS
    early = _read_early(path, window)
    if isinstance(early, tuple) and _LogSideAside.worth_it(early[0]):
        text, truncated = early
        with _LogSideAside(path, display_path) as aside:
            scan_notes: list[str] = []
            found = scan_stacks(
                text, display_path, scan_notes, in_log=in_log, max_blocks=max_blocks
            )
            parsed, labels = aside.result()
        parsed.kind = kind
        if parsed.error is not None:
            return parsed
        parsed.notes.extend(scan_notes)
        if found is not None:
            compose_stacks(parsed, found, truncated, display_path)
        return _composed(parsed, truncated, window, display_path, labels)
    router = _LineRouter()
    log_parser = LogParser(line_filter=router)
    parsed = log_parser.parse(path, display_path)
    parsed.kind = kind
    if parsed.error is not None:
        return parsed
    whole = log_parser.whole if early is None else None
    shapes: list[bytes] | None = None
    try:
        if isinstance(early, OSError):
            raise early
        if whole is not None and whole.size <= window and not whole.text.startswith("\ufeff"):
            # what read_text_capped would give (the whole file, UTF-8 without a
            # replacement), read once by the log side: its lines' shapes come with it
            text, truncated, shapes = whole.text, False, whole.shapes
        else:
            text, truncated = early if early is not None else read_text_capped(path, window)
    except OSError as exc:
        parsed.notes.append(f"{display_path}: stacks not read ({exc})")
        return parsed
    del whole, log_parser
    attach_stacks(
        parsed,
        text,
        truncated,
        display_path,
        in_log=in_log,
        max_blocks=max_blocks,
        shapes=shapes,
    )
    return _composed(parsed, truncated, window, display_path, router.labels)


def _read_early(path: Path, window: int) -> tuple[str, bool] | OSError | None:
    """The stack side's text of a file big enough to be read by both sides at once,
    read before the log side (None for a smaller file: read after it, as it always was)."""
    try:
        if path.stat().st_size < BOTH_AT_ONCE_BYTES or not _LogSideAside.possible():
            return None
        return read_text_capped(path, window)
    except OSError as exc:
        return exc


def _cores() -> int:
    """The cores this process may run on (all of the machine's where that is not known)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _log_side(path: str, display_path: str) -> tuple[ParsedFile, list[Label]]:
    """The log side of a file and the rank labels its router noted (in a worker)."""
    router = _LineRouter()
    return LogParser(line_filter=router).parse(Path(path), display_path), router.labels


class _LogSideAside:
    """The log side of a file run in a forked worker while the caller runs the stack side.

    Each side is a pass over the same lines that needs nothing of the other until they
    are composed; a paste of thousands of ranks' dumps and log tails costs each about as
    much (0.9 and 0.6 s for 4 MiB), and one after the other was twice its older readers'
    time. The log side goes to the worker because what it sends back (events, few after
    the scanner's aggregation) pickles cheaply, where the stacks' frames would not. Only
    for a text of ``BOTH_AT_ONCE_BYTES`` or more that holds stacks, on a machine with
    another core, from a process that may fork safely (no other thread, no daemon
    worker); a worker that cannot start or answer leaves the log side to the caller."""

    def __init__(self, path: Path, display_path: str) -> None:
        self._path, self._display = path, display_path
        self._pool: ProcessPoolExecutor | None = None
        self._future: Future[tuple[ParsedFile, list[Label]]] | None = None
        try:
            context = multiprocessing.get_context("fork")
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
            self._future = self._pool.submit(_log_side, str(path), display_path)
        except Exception:  # no worker: the caller reads the log side itself
            self._future = None

    @staticmethod
    def possible() -> bool:
        return (
            _cores() > 1
            and threading.active_count() == 1
            and not multiprocessing.current_process().daemon
            and "fork" in multiprocessing.get_all_start_methods()
        )

    @staticmethod
    def worth_it(text: str) -> bool:
        return any_stack(text)

    def result(self) -> tuple[ParsedFile, list[Label]]:
        if self._future is not None:
            try:
                return self._future.result()
            except Exception:  # the worker died or could not send it back: read it here
                pass
        return _log_side(str(self._path), self._display)

    def __enter__(self) -> _LogSideAside:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _composed(
    parsed: ParsedFile,
    truncated: bool,
    window: int,
    display_path: str,
    labels: list[Label],
) -> ParsedFile:
    """The log side's events given to the processes the stack side found."""
    if truncated and any(p.text_stacks for p in parsed.processes):
        parsed.notes.append(f"{display_path}: stacks read from the last {window >> 20} MiB only")
    _same_processes(parsed)
    _labelled_sections(parsed, labels)
    if any(p.text_stacks for p in parsed.processes):
        # A paste of stacks is no log: that it has no log line is no news.
        parsed.notes = [n for n in parsed.notes if not n.endswith(_NO_LOG_LINES)]
    return parsed


@contextmanager
def tail_copy(path: Path, tail_bytes: int) -> Iterator[Path]:
    """A temporary copy of the file's last ``tail_bytes``, cut at a line, with its name
    (a rank may be in it) and modification time (year-less stamps are dated by it)."""
    text, _ = read_text_capped(path, tail_bytes)
    with tempfile.TemporaryDirectory(prefix="hangdoc-tail-") as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(text, encoding="utf-8")
        st = path.stat()
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        yield copy


class _LineRouter:
    """The one look at each line the log side reads, before its recognisers: a dump's
    frame line is the stacks' alone (the log scanner sees it blank), and a rank label
    typed over one rank's paste is noted, numbered as the log side numbers lines."""

    def __init__(self) -> None:
        self.labels: list[Label] = []
        # The frame lines seen: a paste of a big job's stacks repeats the same few (every
        # rank's "    all_reduce (torch/distributed/distributed_c10d.py:2501)"); a look-up
        # is a tenth of the test of the line's shape.
        self._frames: set[str] = set()

    def __call__(self, number: int, line: str) -> bool:
        if line[:1] in FRAME_FIRSTS:  # a log's own lines start otherwise, most of them
            if line in self._frames:
                return True
            if is_dump_frame(line):
                if len(self._frames) < _REMEMBERED_FRAMES:
                    self._frames.add(line)
                return True
        if len(line) < 2 * _MAX_LABEL and may_name_process(line):
            self._label(number, line)
        return False

    @staticmethod
    def quiet_shape(line: str) -> bool:
        """True when the router says False of ``line`` and notes nothing, and so of every
        line of its shape (its digits 0: prefilter.line_shape): its first character is
        none a frame starts with, and it is too long for a label or holds no "ank"; a
        digit is neither. The log scanner asks it once a shape (Scanner.feed_lines)."""
        return line[:1] not in FRAME_FIRSTS and not (
            len(line) < 2 * _MAX_LABEL and may_name_process(line)
        )

    def _label(self, number: int, line: str) -> None:
        stripped = line.strip()
        if len(stripped) >= _MAX_LABEL or _LAUNCHER_PREFIX.match(line):
            return  # no label: too long, or a launcher's prefix names the line's own rank
        label = process_label(stripped)
        if label is not None:
            self.labels.append((number, *label))


def _same_processes(parsed: ParsedFile) -> None:
    """The log events nothing gave a rank, whose line names the pid (and host) of a
    process whose stacks the text holds (a ``(RayWorker pid=24036)`` prefix, NCCL's
    host:pid header over a py-spy dump's ``Process 24036``): that process's."""
    if not parsed.job_log_events:
        return
    dumped: dict[str, list[ProcessEvidence]] = {}
    for proc in parsed.processes:
        if proc.text_stacks and proc.pid is not None:
            dumped.setdefault(str(proc.pid), []).append(proc)
    if not dumped:
        return
    keep: list[LogEvent] = []
    for event in parsed.job_log_events:
        named = _process_named(event) if event.kind not in JOB_KINDS else None
        owners: list[ProcessEvidence] = []
        if named is not None:
            host, pid = named
            owners = [p for p in dumped.get(pid, []) if None in (host, p.host) or p.host == host]
        if len(owners) != 1:
            keep.append(event)
            continue
        owners[0].log_events.append(moved_event(event, RankFrom.PID))
    parsed.job_log_events = keep


def _labelled_sections(parsed: ParsedFile, labels: list[Label]) -> None:
    """The log events nothing gave a rank, under a label over one process's paste: that
    process's. The stack side reads the same labels (scan's sections); a process's own
    events only (``JOB_KINDS`` describe the job, as for a rank in a file's name). Lines
    that name their process (NCCL's host:pid header) take a section's process only while
    the section names one process: a shared console pasted under one label is several
    processes'.

    A label that names a pid (``node-1:24036 (rank 3)``, ``$ py-spy dump --pid 24036``)
    is the section of the process whose stacks carry that pid (py-spy's ``Process
    24036:`` header under it, or the label itself for frames pasted without it), as a
    person reading the paste ties them; one whose pid no dumped process has is no label
    (``step:100 rank:3`` is a line of the job's)."""
    if not parsed.job_log_events or not labels:
        return
    owned = _label_owners(parsed, labels)
    starts = [number for number, _ in owned]
    sections: dict[int, list[LogEvent]] = {}
    keep: list[LogEvent] = []
    for event in parsed.job_log_events:
        at = bisect.bisect_right(starts, event.line) - 1 if event.line is not None else -1
        if at < 0 or event.kind in JOB_KINDS:
            keep.append(event)
        else:
            sections.setdefault(at, []).append(event)
    by_rank = {p.rank: p for p in parsed.processes if p.rank is not None}
    for at, events in sections.items():
        owner = owned[at][1]
        processes = {_process_named(e) for e in events} - {None}
        for event in events:
            if len(processes) > 1 and _process_named(event) is not None:
                keep.append(event)
                continue
            if isinstance(owner, int):  # a rank label: its rank's process, made if none
                proc = by_rank.get(owner)
                if proc is None:
                    proc = by_rank[owner] = ProcessEvidence(rank=owner, sources=[event.source])
                    parsed.processes.append(proc)
                owner = proc
            owner.log_events.append(moved_event(event, RankFrom.LABEL))
    parsed.job_log_events = sorted(keep, key=lambda e: e.line or 0)


def _label_owners(
    parsed: ParsedFile, labels: list[Label]
) -> list[tuple[int, ProcessEvidence | int]]:
    """Each label's line and whose its section is: the one dumped process whose pid the
    label names, else the rank it names; a label whose pid names no dumped process (or
    two) is dropped."""
    dumped: dict[int, list[ProcessEvidence]] = {}
    for proc in parsed.processes:
        if proc.text_stacks and proc.pid is not None:
            dumped.setdefault(proc.pid, []).append(proc)
    owned: list[tuple[int, ProcessEvidence | int]] = []
    for number, rank, pid in labels:
        if pid is None:
            if rank is not None:
                owned.append((number, rank))
        elif len(procs := dumped.get(pid, [])) == 1:
            owned.append((number, procs[0]))
    return owned


def _process_named(event: LogEvent) -> tuple[str | None, str] | None:
    """The (host, pid) a line names as its writer (an NCCL header), if any."""
    return (event.host, str(event.pid)) if event.pid is not None else None
