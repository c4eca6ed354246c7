"""The log parser: any text file holding recognised log lines, in any mix.

The log side of the one text path (``analyzer/parsers/text.py``, which adds the stacks of
the same text): its sniff accepts any text in which one line is recognised, plus
torchelastic error.json files. Large files are read head + tail (the head holds the NCCL
init lines that map processes to ranks, the tail holds the hang), never whole.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from hangdoc.analyzer.model import GpuState, InputKind, LogEvent, ProcessEvidence
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile, decode_bytes
from hangdoc.analyzer.parsers.catalog.matcher import default_matcher
from hangdoc.analyzer.parsers.logs.attribution import build_maps, mentioned_rank, resolve_rank
from hangdoc.analyzer.parsers.logs.elastic import error_json_stamp, parse_error_json
from hangdoc.analyzer.parsers.logs.gpu import CsvBlock, TopoBlock
from hangdoc.analyzer.parsers.logs.hit import Hit, Origin, log_event
from hangdoc.analyzer.parsers.logs.kernel import HungTaskBlock
from hangdoc.analyzer.parsers.logs.prefilter import block_shapes
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.reports import FrTraceBlock, RasBlock
from hangdoc.analyzer.parsers.logs.scanner import RawEvent, Scanner, match_any
from hangdoc.analyzer.parsers.logs.timefmt import resolve_stamps
from hangdoc.analyzer.payloads.host import GpuRow, GpuStatus
from hangdoc.analyzer.vocabulary import Clock, EventKind, RankFrom
from hangdoc.common.rank_names import Trailing, rank_from_name

_JSON_START = re.compile(r'\s*(?:\{\s*(?:"|\}|$)|\[\s*(?:[{\["\]]|$))')
HEAD_BYTES = 4 * 1024 * 1024
TAIL_BYTES = 28 * 1024 * 1024
_COUNT_LIMIT = 2 * 1024 * 1024 * 1024  # count skipped lines (for line numbers) up to this size
# A log up to this size is split into lines and their shapes at once (_whole_lines).
_WHOLE_BYTES = 4 * 1024 * 1024
# A bigger log is split and shaped in blocks of this size (_block_lines): its lines of
# one block at a time held, not of its 32 MiB.
_BLOCK_BYTES = 1024 * 1024
_SNIFF_WORDS = (
    "error",
    "warn",
    "exception",
    "traceback",
    "timeout",
    "timed out",
    "nccl",
    "rank",
    "cuda",
    "epoch",
    "loss",
    "killed",
    "fault",
)


def recognise_line(text: str) -> Hit | None:
    """One line on its own (no multi-line context): used by sniff and by tests."""
    tag = peel_line(text)
    t = tag.text
    if not t.strip():
        return None
    hit = match_any(t, [])
    if hit is not None and hit.kind is EventKind.NCCL_RETURN:
        return None  # a "-> N" line is evidence only in its chain (Scanner._return_code)
    return hit


def _starts_block(line: str) -> bool:
    """Reports whose first line alone is recognisable (CSV header, topo matrix, RAS, fr_trace)."""
    return bool(
        CsvBlock.header(line)
        or TopoBlock.header(line)
        or RasBlock.start(line)
        or FrTraceBlock.start(line)
        or HungTaskBlock.start(peel_line(line).text)
    )


def _looks_textual(head: bytes) -> bool:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        # UTF-16 with a BOM (Windows tools, some pastes): judge the decoded characters.
        chars = decode_bytes(head[:8192])
        printable = sum(1 for c in chars if c >= " " or c in "\t\n\r\x1b")
        return bool(chars) and printable >= 0.95 * len(chars)
    if not head or b"\x00" in head[:4096]:
        return False
    sample = head[:4096]
    printable = sum(1 for b in sample if b >= 32 or b in (9, 10, 13, 27))
    return printable >= 0.95 * len(sample)


# A longer line is cut here and the rest of it skipped: a 10 GB file with no newline must
# not be read into one string. No log line that matters is longer than this.
MAX_LINE_BYTES = 1024 * 1024


def _capped_lines(handle: BinaryIO) -> Iterator[bytes]:
    """Like iterating a binary file, but never holds more than MAX_LINE_BYTES of a line."""
    while True:
        raw = handle.readline(MAX_LINE_BYTES)
        if not raw:
            return
        if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while True:  # skip the rest of the overlong line
                rest = handle.readline(MAX_LINE_BYTES)
                if not rest or rest.endswith(b"\n"):
                    break
        yield raw


def is_error_json(text: str) -> bool:
    """A torchelastic error file (TORCHELASTIC_ERROR_FILE): one JSON record, not lines."""
    stripped = text.lstrip()
    return (
        stripped.startswith("{")
        and '"message"' in stripped[:2000]
        and ("extraInfo" in stripped or "py_callstack" in stripped or '"timestamp"' in stripped)
    )


class LogParser:
    """Any log text: NCCL, watchdog, torchrun, RAS, nvidia-smi, dmesg, fr_trace, phases."""

    kind = InputKind.LOG

    def __init__(self, line_filter: Callable[[int, str], bool] | None = None) -> None:
        # Shown every line read (number, text) before the scanner; a line it returns True
        # for is another recogniser's alone (a dump's frame) and reaches the scanner blank.
        self.line_filter = line_filter
        # The last log this parser read whole and split at once (None for any other):
        # the stack side reads that text rather than the file again (parsers/text.py).
        self.whole: WholeLog | None = None

    def sniff(self, head: bytes) -> bool:
        if not _looks_textual(head):
            return False
        text = decode_bytes(head[:SNIFF_BYTES])
        if is_error_json(text):
            return True
        if _JSON_START.match(text):
            return False  # other JSON formats (flight recorder, py-spy) are not logs
        lines = text.splitlines()
        if len(head) >= SNIFF_BYTES and len(lines) > 1:
            lines = lines[:-1]  # the last line may be cut
        for line in lines[:3000]:
            if recognise_line(line) is not None:
                return True
            if "ChildFailedError" in line or "NVIDIA-SMI" in line or _starts_block(line):
                return True
        # A message the catalog holds (a framework's own line read from its source, vLLM's
        # worker monitor…) is a log line too, though no hand-written recogniser knows it.
        matcher = default_matcher()
        if any(matcher.match(line) is not None for line in lines[:3000]):
            return True
        if len(head) < SNIFF_BYTES:
            return False  # the whole file was seen and nothing in it is a log line we know
        low = text.lower()  # a big file: what matters may be in its tail
        return any(word in low for word in _SNIFF_WORDS)

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        self.whole = None
        try:
            return self._parse(path, display_path)
        except OSError as exc:
            return ParsedFile(kind=InputKind.LOG, error=f"cannot read: {exc}")

    def _parse(self, path: Path, display_path: str) -> ParsedFile:
        size = path.stat().st_size
        notes: list[str] = []
        if size < 16 * 1024 * 1024:
            with path.open("rb") as handle:
                head = handle.read(4096)
            if is_error_json(decode_bytes(head)):
                hit = parse_error_json(decode_bytes(path.read_bytes()))
                if hit is not None:
                    return _error_file_result(hit, display_path)
        scanner = Scanner()
        whole = _whole_read(path, size)
        self.whole = whole
        if whole is not None:
            scanner.feed_split(whole.lines, whole.shapes, self.line_filter)
        else:
            scanner.feed_lines(_iter_shaped_lines(path, size, notes), self.line_filter)
        events = scanner.finish()
        if scanner.dropped:
            notes.append(f"{display_path}: {scanner.dropped} repetitive log events not kept")
        assumed_year = time.gmtime(path.stat().st_mtime).tm_year
        return _assemble(scanner, events, display_path, assumed_year, notes)


def _whole_lines(path: Path, size: int) -> Iterable[tuple[int, str, bytes | None]] | None:
    """(line number, text, shape) of each line of a log of up to _WHOLE_BYTES, split and
    shaped at once (C-level passes, not a read, decode and shape a line): what
    _iter_lines gives, where that is sure: no UTF-16 mark, no carriage return (which it
    strips from a line's end), no byte that decodes to a replacement (so a line's shape
    is that of its bytes), no line _capped_lines would cut, and _iter_lines reads it all
    (not its head and tail). None for any other log."""
    split = _whole_split(path, size)
    if split is None:
        return None
    return zip(itertools.count(1), *split, strict=False)


def _whole_split(path: Path, size: int) -> tuple[list[str], list[bytes]] | None:
    """_whole_lines' lines and their shapes, as two lists (Scanner.feed_split)."""
    whole = _whole_read(path, size)
    return None if whole is None else (whole.lines, whole.shapes)


@dataclasses.dataclass(frozen=True, slots=True)
class WholeLog:
    """A log read whole and split at once (_whole_lines' case): its text, decoded as
    UTF-8 without a replacement or a carriage return, its lines and their shapes, and
    its size in bytes. The stack side of the same file reads this text and its lines'
    distinct shapes instead of reading and decoding the file again and searching the
    whole text for a stack's words (parsers/text.py, stacks/parser.any_stack)."""

    text: str
    lines: list[str]
    shapes: list[bytes]
    size: int


def _whole_read(path: Path, size: int) -> WholeLog | None:
    """_whole_split's reading, with the text it decoded (WholeLog)."""
    if size > min(_WHOLE_BYTES, HEAD_BYTES + TAIL_BYTES):
        return None
    data = path.read_bytes()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return None
    found = _split_shaped_text(data)
    return None if found is None else WholeLog(*found, len(data))


def _iter_shaped_lines(
    path: Path, size: int, notes: list[str]
) -> Iterator[tuple[int, str, bytes | None]]:
    """_iter_lines' lines (the whole file, or its head and tail), each with its shape
    where a block of lines was split and shaped at once (_block_lines), else None: its
    twin in blocks, which a big log's 32 MiB of head and tail need (3 µs a line read one
    by one)."""
    with path.open("rb") as handle:
        first = handle.read(2)
        handle.seek(0)
        if first in (b"\xff\xfe", b"\xfe\xff"):
            for number, line in _iter_lines(path, size, notes):
                yield number, line, None
            return
        if size <= HEAD_BYTES + TAIL_BYTES:
            yield from _block_lines(handle, 0, None)
            return
        number = 0
        for number, line, shape in _block_lines(handle, 0, HEAD_BYTES):
            yield number, line, shape
        consumed = handle.tell()
        number = _skip_to_tail(handle, path, size, consumed, number, notes)
        yield from _block_lines(handle, number, None)


def _block_lines(
    handle: BinaryIO, number: int, stop_at: int | None
) -> Iterator[tuple[int, str, bytes | None]]:
    """(line number, text, shape) of the lines from the handle's place (numbered after
    ``number``) to the end, or through the line that ends at or past ``stop_at``, as
    _capped_lines and a line's decode give them, leaving the handle after the last.
    Read in blocks of _BLOCK_BYTES cut after their last newline, each split and shaped
    at once where that is sure (no carriage return, no replaced byte, no line
    _capped_lines cuts); any other block is read line by line (shape None), and a block
    without a newline (a line longer than a block, or the one across ``stop_at``) is
    read as one line."""
    while True:
        start = handle.tell()
        want = _BLOCK_BYTES if stop_at is None else min(_BLOCK_BYTES, stop_at - start)
        if want <= 0:
            return
        block = handle.read(want)
        if not block:
            return
        whole_read = len(block) < want  # the end of the file
        cut = len(block) if whole_read or block.endswith(b"\n") else block.rfind(b"\n") + 1
        lines = _split_shaped(block[:cut] if cut < len(block) else block) if cut else None
        if lines is None:  # the block's lines, or the one line a block holds no end of
            handle.seek(start)
            for numbered in _lines_one_by_one(handle, number, stop_at, start + max(cut, 1)):
                yield numbered
                number = numbered[0]
        else:
            handle.seek(start + cut)
            for text, shape in zip(*lines, strict=True):
                number += 1
                yield number, text, shape
        if stop_at is not None and handle.tell() >= stop_at:
            return


def _lines_one_by_one(
    handle: BinaryIO, number: int, stop_at: int | None, block_end: int | None
) -> Iterator[tuple[int, str, bytes | None]]:
    """_iter_lines' reading from the handle's place: to the end, through the line that
    ends at or past ``stop_at``, or to ``block_end`` (a line's end)."""
    for raw in _capped_lines(handle):
        number += 1
        yield number, raw.decode("utf-8", errors="replace").rstrip("\r\n"), None
        position = handle.tell()
        if (stop_at is not None and position >= stop_at) or (
            block_end is not None and position >= block_end
        ):
            return


def _split_shaped(data: bytes) -> tuple[list[str], list[bytes]] | None:
    """The lines of ``data`` (whole lines; the last may lack its newline) with their
    shapes, where _capped_lines and a line's decode give the same; else None."""
    found = _split_shaped_text(data)
    return None if found is None else (found[1], found[2])


def _split_shaped_text(data: bytes) -> tuple[str, list[str], list[bytes]] | None:
    """_split_shaped's lines and shapes, after the text they were split from."""
    if b"\r" in data:
        return None
    text = data.decode("utf-8", errors="replace")
    if "\ufffd" in text:
        return None
    lines, shapes = text.split("\n"), block_shapes(data)
    if lines[-1] == "":
        lines.pop()
        shapes.pop()
    if shapes and max(map(len, shapes)) >= MAX_LINE_BYTES:
        return None
    return text, lines, shapes


def _iter_lines(path: Path, size: int, notes: list[str]) -> Iterator[tuple[int, str]]:
    """(line number, text) for the whole file, or its head and tail when it is large."""
    with path.open("rb") as handle:
        first = handle.read(2)
        handle.seek(0)
        if first in (b"\xff\xfe", b"\xfe\xff"):
            data = handle.read(HEAD_BYTES + TAIL_BYTES)
            for number, line in enumerate(decode_bytes(data).splitlines(), start=1):
                yield number, line
            return
        if size <= HEAD_BYTES + TAIL_BYTES:
            for number, raw in enumerate(_capped_lines(handle), start=1):
                yield number, raw.decode("utf-8", errors="replace").rstrip("\r\n")
            return
        number = 0
        consumed = 0
        for number, raw in enumerate(_capped_lines(handle), start=1):
            consumed = handle.tell()
            yield number, raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if consumed >= HEAD_BYTES:
                break
        number = _skip_to_tail(handle, path, size, consumed, number, notes)
        for raw in _capped_lines(handle):
            number += 1
            yield number, raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _error_file_result(hit: Hit, display_path: str) -> ParsedFile:
    rank = rank_from_name(display_path, Trailing.ONE_PROCESS).rank
    stamp = error_json_stamp(hit)
    event = log_event(
        hit.kind,
        (hit.text or "")[:500],
        display_path,
        1,
        stamp.epoch if stamp is not None else None,
        hit.payload,
        clock=Clock.EPOCH if stamp is not None and stamp.epoch is not None else None,
    )
    if rank is None:
        return ParsedFile(kind=InputKind.LOG, job_log_events=[event])
    proc = ProcessEvidence(rank=rank, log_events=[event], sources=[display_path])
    return ParsedFile(kind=InputKind.LOG, processes=[proc])


def _assemble(
    scanner: Scanner, events: list[RawEvent], display_path: str, year: int, notes: list[str]
) -> ParsedFile:
    maps = build_maps(events, scanner.hostpid_rank, scanner.pid_rank, scanner.local_to_global)
    resolved = resolve_stamps([e.stamp for e in events], year)
    ranks: list[tuple[int | None, RankFrom | None]] = [resolve_rank(e, maps) for e in events]
    # A launcher's failure report, once attributed, names the worker's pid: other reports
    # about that pid (torchelastic's "Signal 9 (SIGKILL) received by PID 812") follow it.
    learned = {
        e.named_pid: rank
        for e, (rank, _how) in zip(events, ranks, strict=True)
        if rank is not None
        and e.kind is EventKind.WORKER_FAILED
        and e.named_pid is not None
        and e.named_pid not in maps.pid_rank
    }
    if learned:
        maps.pid_rank.update(learned)
        ranks = [resolve_rank(e, maps) for e in events]
    attributed = any(r is not None for r, _ in ranks)
    hostpids = {(e.host, e.pid) for e in events if e.pid is not None}
    locals_seen = {e.local_rank for e in events if e.local_rank is not None}
    named = rank_from_name(display_path, Trailing.ONE_PROCESS)
    file_rank, file_local = named.rank, named.local_rank
    if file_local is not None and file_rank is None:
        file_rank = maps.local_to_global.get(
            file_local, file_local if maps.local_is_global else None
        )
    use_file = not attributed and not locals_seen and len(hostpids) <= 1 and file_rank is not None
    if use_file and any(e.pid == file_rank for e in events):
        use_file = False
    # NCCL prints its version bare ("NCCL version 2.19.3+cuda12.3", init.cc showVersion),
    # with no host:pid header: in a file whose NCCL lines all name one host, it is that
    # host's, so that versions can be told apart by node (HD203: mixed NCCL installs).
    header_hosts = {e.host for e in events if e.host is not None}
    only_host = next(iter(header_hosts)) if len(header_hosts) == 1 else None
    processes: dict[int, ProcessEvidence] = {}
    job: list[LogEvent] = []
    for event, (rank, how), when in zip(events, ranks, resolved, strict=True):
        if rank is None and use_file and event.kind not in JOB_KINDS:
            rank, how = file_rank, RankFrom.FILE_NAME
        elif rank is None and event.kind not in JOB_KINDS:
            rank, how = mentioned_rank(event, maps)
        made = log_event(
            event.kind,
            event.text,
            display_path,
            event.line,
            when.time,
            event.payload,
            origin=_version_host(event, only_host),
            rank_from=how,
            clock=when.clock,
            repeats=event.repeats,
            folded_lines=event.folded,
        )
        if rank is None:
            job.append(made)
            continue
        proc = processes.get(rank)
        if proc is None:
            proc = processes[rank] = ProcessEvidence(
                rank=rank, sources=[display_path], world_size=maps.world_size
            )
        proc.log_events.append(made)
        if proc.host is None and event.host is not None and how in _HOST_SAYS:
            proc.host, proc.pid = event.host, event.pid
        if proc.local_rank is None and event.local_rank is not None and how != RankFrom.GROUP_RANK:
            proc.local_rank = event.local_rank
    _attach_gpus(processes, job, maps.pid_rank, display_path)
    if not events:
        notes.append(f"{display_path}: no recognised log lines")
    return ParsedFile(
        kind=InputKind.LOG,
        processes=[processes[r] for r in sorted(processes)],
        job_log_events=job,
        notes=notes,
    )


def _version_host(event: RawEvent, only_host: str | None) -> Origin:
    """The event's origin, a bare NCCL version line given the one host of its file."""
    origin = event.origin()
    if event.kind is EventKind.NCCL_VERSION and origin.host is None and only_host is not None:
        return dataclasses.replace(origin, host=only_host)
    return origin


# The attributions that also tell the process's host and pid.
_HOST_SAYS = frozenset({RankFrom.NCCL_INIT, RankFrom.PREFIX})
# What describes the job, not the process that printed it (a report, a table, the agent's
# signal): neither a file's name nor a rank label over the lines gives these a rank.
JOB_KINDS = frozenset(
    k
    for k in (
        EventKind.RAS_REPORT,
        EventKind.RAS_MISMATCH,
        EventKind.RAS_DEAD,
        EventKind.RAS_INCOMPLETE,
        EventKind.RAS_ERROR,
        EventKind.FR_MISSING_RANKS,
        EventKind.FR_MISMATCH,
        EventKind.GPU_TOPOLOGY,
        EventKind.GPU_STATUS,
        EventKind.AGENT_SIGNAL,
    )
)


def _attach_gpus(
    processes: dict[int, ProcessEvidence],
    job: list[LogEvent],
    pid_rank: dict[int, int],
    source: str,
) -> None:
    """nvidia-smi rows whose pid is a known rank's process become that rank's GpuState."""
    pid_to_rank = dict(pid_rank)
    for rank, proc in processes.items():
        if proc.pid is not None:
            pid_to_rank.setdefault(proc.pid, rank)
    rows = [
        (event, row)
        for event in job
        if event.kind == EventKind.GPU_STATUS and (row := event.payload_as(GpuStatus))
    ]
    by_index = {row.index: row for _, row in rows if row.row == GpuRow.GPU}
    for event, row in rows:
        if row.row != GpuRow.PROCESS or event.pid is None:
            continue
        owner = pid_to_rank.get(event.pid)
        if owner is None or owner not in processes:
            continue
        gpu = by_index.get(row.index) or GpuStatus()
        used = gpu.memory_used_mib if gpu.memory_used_mib is not None else row.memory_used_mib
        processes[owner].gpu.append(
            GpuState(
                index=row.index,
                memory_used_mib=used,
                memory_total_mib=gpu.memory_total_mib,
                utilization_pct=gpu.utilization_pct,
                source=source,
            )
        )


def _skip_to_tail(
    handle: BinaryIO, path: Path, size: int, consumed: int, number: int, notes: list[str]
) -> int:
    """Seek past the middle of a log too big to read whole, to the first whole line of its
    tail; the line number before that line (counted through the middle when it is small
    enough to count, else a number above any head's, so the tail's lines stay ordered)."""
    tail_start = size - TAIL_BYTES
    skipped_lines: int | None = 0
    if tail_start - consumed <= _COUNT_LIMIT:
        remaining = tail_start - consumed
        while remaining > 0:
            chunk = handle.read(min(remaining, 8 * 1024 * 1024))
            if not chunk:
                break
            remaining -= len(chunk)
            skipped_lines = (skipped_lines or 0) + chunk.count(b"\n")
    else:
        skipped_lines = None
    handle.seek(tail_start)
    partial = next(_capped_lines(handle), b"")
    notes.append(
        f"{path.name}: {size / 1e6:.0f} MB log; read the first {HEAD_BYTES >> 20} MiB and the "
        f"last {TAIL_BYTES >> 20} MiB only"
    )
    if skipped_lines is None:
        return 10**9  # line numbers in the tail are unknown; keep them ordered
    return number + skipped_lines + (1 if partial else 0)
