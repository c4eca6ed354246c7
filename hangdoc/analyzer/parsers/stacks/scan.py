"""Split any text into the processes and threads whose stacks it holds.

Three passes: launcher prefixes split the text into streams (``[rank3]:``,
``[default3]:``, ``(RayWorker pid=…)``, ``srun --label``'s ``3:``), each stream is cut
into blocks by the recognisers (first line decides), and blocks are grouped into
processes by the rank and pid they carry or that a marker near them names. Lines no
recogniser claims are only read for markers; nothing here raises on odd text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from hangdoc.analyzer.model import (
    ChildStacks,
    LogEvent,
    ProcessEvidence,
    StackTextKind,
    TextStack,
    ThreadStack,
)
from hangdoc.analyzer.parsers.prefixes import Stream, split_sections, split_streams
from hangdoc.analyzer.parsers.stacks import markers
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines, strip_pager
from hangdoc.analyzer.parsers.stacks.headless import FRAME_LINE as HEADLESS_FRAME
from hangdoc.analyzer.parsers.stacks.headless import parse_headless
from hangdoc.analyzer.parsers.stacks.interleave import split_interleaved, traceback_body
from hangdoc.analyzer.parsers.stacks.native import (
    CPP_FRAME_START,
    CPP_START,
    GDB_FRAME,
    GDB_THREAD,
    cpp_message,
    parse_cpp,
    parse_gdb,
)
from hangdoc.analyzer.parsers.stacks.pyspy_frames import parse_pyspy_frames, starts_frames
from hangdoc.analyzer.parsers.stacks.pystack import (
    PYSTACK_FRAME_START,
    PYSTACK_START,
    parse_pystack,
)
from hangdoc.analyzer.parsers.stacks.python_tb import (
    PYBT_OLD_START,
    PYBT_START,
    TB_START,
    launcher_traceback,
    parse_pybt,
    parse_traceback,
)
from hangdoc.analyzer.parsers.stacks.segments import (
    parse_fault_segment,
    parse_pyspy_segment,
    starts_faulthandler,
    starts_pyspy,
)
from hangdoc.analyzer.parsers.stacks.stack_print import parse_stack_print, starts_stack_print
from hangdoc.analyzer.vocabulary import CONSEQUENCE_TEXT, EventKind

# A file with more blocks than this is cut there (a note says so): past it a stack
# repeats what the rules have already seen, and each block costs time and memory.
MAX_BLOCKS = 4000
# The latest text stacks kept per process: the last says what it was doing, the thread
# rules follow a thread through the rest.
MAX_SAMPLES = 32
# faulthandler's timer header over a dump ("Timeout (0:00:05)!"): an event of the dump's
# process, made here as no log recogniser reads the dump's own lines.
_FAULTHANDLER_TIMEOUT = EventKind.FAULTHANDLER_TIMEOUT
# Cheap test run on every line before the recognisers' own patterns.
_MAYBE_START = re.compile(
    r"\s*(?:Traceback |Thread \d|Thread 0x|#\d+ |Exception raised from|Process \d|Current thread|"
    r"Stack \(|Fatal Python error|Windows fatal|Timeout \(|frame #\d|\((?:Python|C)\) File|File \")"
)


# tqdm's meter ("{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining},
# {rate_fmt}{postfix}]", tqdm/std.py format_meter) is redrawn in place: tqdm writes a "\r"
# before each state and no newline after it, so what the process writes next (an uncaught
# exception's traceback header, printed as the bar stood) is glued after the meter's
# closing bracket on the same line.
_METER = re.compile(r"\d%\|[^|\n]{0,200}\|[^\[\n]{0,60}\[[^\]\n]{0,120}\]")


def glued_after_meter(text: str) -> str | None:
    """The start of a stack written right after a tqdm meter's last state on the same
    line (from its header on), or None when nothing that starts a stack follows a meter."""
    end = None
    for m in _METER.finditer(text):
        end = m.end()
    if end is None:
        return None
    rest = text[end:]
    return rest if rest.strip() and _MAYBE_START.match(rest) else None


@dataclass(slots=True)
class Span:
    """Where a traceback sits and whom it was given to (for the log events of it)."""

    first: int
    last: int
    rank: int | None
    exc_type: str | None = None
    message: str | None = None


@dataclass(slots=True)
class ScanResult:
    processes: list[ProcessEvidence] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    blocks: int = 0
    stack_lines: int = 0  # lines inside blocks, to tell a stacks file from a log
    kinds: set[str] = field(default_factory=set)
    marker_ranked: int = 0  # blocks whose rank came from a marker line, not a prefix


# Dumps that show the Python frames of a process's threads: two of them in one sample are two
# moments (py-spy's text and, after it, the job's own faulthandler dump of the same threads),
# where a native view and a Python view (gdb's ``bt`` then ``py-bt``) are one.
_PYTHON_VIEWS = frozenset({"pyspy", "faulthandler", "pystack"})


def _new_moment(block: Block, dump_kinds: set[str]) -> bool:
    """Does this snapshot start a new sample after one whose snapshots are ``dump_kinds``?
    A second snapshot of a kind, or a second Python view of the threads, does."""
    if not block.dump:
        return False
    if block.kind in dump_kinds:
        return True
    return block.kind in _PYTHON_VIEWS and not dump_kinds.isdisjoint(_PYTHON_VIEWS)


def _where(thread: ThreadStack) -> tuple[tuple[str, int | None, str], ...]:
    """A thread's Python frames as (file name, line, leaf function): what py-spy's text and
    faulthandler print alike of the same thread."""
    return tuple((f.short_file, f.line, f.function_leaf) for f in thread.python_frames())


def _same_threads(block: Block, sample: _Sample) -> bool:
    """Another view of the sample's threads: a thread of the block has the Python frames of
    one of the sample's (the job's faulthandler dump after py-spy's text of one rank)."""
    seen = {_where(t) for t in sample.threads if t.frames}
    return any(_where(t) in seen for t in block.threads if t.frames)


@dataclass(slots=True)
class _Sample:
    """Blocks read as one moment of a process: a dump and the records printed near it."""

    threads: list[ThreadStack] = field(default_factory=list)
    children: list[ChildStacks] = field(default_factory=list)
    dump_kinds: set[str] = field(default_factory=set)
    kinds: list[str] = field(default_factory=list)  # every block's kind, in order
    line: int | None = None  # the first block's first line
    cut: bool = False  # a traceback cut before its exception line (Block.cut)


@dataclass(slots=True)
class _Proc:
    rank: int | None
    pid: int | None
    host: str | None
    local_rank: int | None = None
    cmdline: str | None = None
    exited: bool = False
    samples: list[_Sample] = field(default_factory=list)
    timeouts: list[tuple[int, str]] = field(default_factory=list)  # (line, header)

    def add(self, block: Block) -> None:
        """A snapshot starts a new sample unless the current one has no snapshot of
        this kind or view yet (``bt`` then ``py-bt`` of one process is one moment;
        ``_new_moment``); a post-mortem record joins the current sample."""
        last = self.samples[-1] if self.samples else None
        if (
            last is None
            or _new_moment(block, last.dump_kinds)
            or _cut_apart(block, last)
            or _record_apart_from_view(block, last)
        ):
            last = _Sample()
            self.samples.append(last)
        last.cut = last.cut or block.cut
        if block.dump:
            last.dump_kinds.add(block.kind)
        if block.kind not in last.kinds:
            last.kinds.append(block.kind)
        if last.line is None:
            last.line = block.start
        last.threads.extend(block.threads)
        last.children.extend(block.children)


def _main_traceback(threads: list[ThreadStack]) -> bool:
    return any(t.is_main and t.name is None for t in threads)


def _cut_apart(block: Block, sample: _Sample) -> bool:
    """A traceback cut before its exception line after a sample that already holds a
    main thread's traceback or a dump: another moment of the process (a main thread
    raises once), kept apart so that its frames are never read as the sample's."""
    if not block.cut:
        return False
    if sample.dump_kinds:
        return True
    return "traceback" in sample.kinds and _main_traceback(sample.threads)


def _record_apart_from_view(block: Block, sample: _Sample) -> bool:
    """A traceback and a Python view of the process's threads (py-spy's text, a
    faulthandler or pystack dump) that cannot be one moment. Such a view prints every
    live thread once (py-spy one ``Thread`` line per thread), so a traceback printed
    after it is no thread of it: a dead thread's last moment (before the view was taken)
    or a log record (the rank's log tail pasted under its dump), another moment either
    way, as a live dump keeps its log's tracebacks apart from its samples. Before a
    view, a dead thread's traceback joins it (records near a snapshot: thread-died's
    excepthook output over its faulthandler dump), but not the main thread's: a moment
    has one main thread, and the view shows where it is now. (A native view, gdb's
    ``bt``, has no Python frames to clash with; a C++ exception stack joins the
    traceback it sits under.)"""
    if block.kind == "traceback":
        return not sample.dump_kinds.isdisjoint(_PYTHON_VIEWS)
    if not (block.dump and block.kind in _PYTHON_VIEWS) or sample.dump_kinds:
        return False
    return "traceback" in sample.kinds and _main_traceback(sample.threads)


def _died_of(block: Block) -> bool:
    """An uncaught exception of the main thread that is not a consequence of another
    rank's failure (HD030's own test): that process died of it. ``exited`` is what
    HD003 reports as a dead rank, so a timeout every rank raises does not set it."""
    if block.kind != "traceback" or not block.threads or not block.threads[0].is_main:
        return False
    text = f"{block.exc_type or ''} {block.exc_message or ''}"
    return bool(block.exc_type) and not CONSEQUENCE_TEXT.search(text)


def _identity(stream: Stream) -> tuple[str | None, int | None, int | None]:
    """What a stream's prefix says of its process besides a rank: host, local rank, pid."""
    return (stream.host, stream.local_rank, stream.pid)


def logged_elsewhere(block: Block) -> bool:
    """In a log, a record the log parser already turns into an event and that would
    only add a misleading stack: the watchdog's own C++ stack, and a traceback of a
    consequence (a timeout, an NCCL error). Kept as a stack, either would be read as
    what its rank was doing where no live sample says (a log given alone), and its
    ``exited`` would hide that rank's live dump from the stack rules. A traceback of a
    cause is kept: that rank died of it."""
    if block.kind == "cpp":
        return True
    if block.kind != "traceback" or not block.exc_type:
        return False
    return bool(CONSEQUENCE_TEXT.search(f"{block.exc_type} {block.exc_message or ''}"))


class _Scanner:
    """Attributes the blocks of one file to processes."""

    def __init__(self, source: str, notes: list[str], streams: list[Stream]) -> None:
        # Every line of the file by number, with the rank its prefix named: a marker
        # "near" a block is near it in the file, even when it sits in another stream
        # (torch prefixes the watchdog's log line with [rankN]: but not its C++ stack).
        self.by_number: dict[int, tuple[int | None, str]] = {
            number: (stream.rank, text) for stream in streams for number, text in stream.lines
        }
        # The stream each line is in, for the streams a prefix names a process of (a local
        # rank, a pid): their blocks take no rank from another stream's lines.
        self.stream_of: dict[int, tuple[str | None, int | None, int | None]] = {
            number: _identity(stream)
            for stream in streams
            if _identity(stream) != (None, None, None)
            for number, _ in stream.lines
        }
        self.source = source
        self.notes = notes
        self.result = ScanResult()
        self.capped = False
        self.max_blocks = MAX_BLOCKS
        self.in_log = False
        self.procs: list[_Proc] = []
        self.by_rank: dict[tuple[str | None, int], _Proc] = {}
        self.by_pid: dict[tuple[str | None, int], _Proc] = {}
        # The process each stream last added to: a block that names no rank and no pid
        # continues it (gdb's ``bt`` then ``py-bt`` of the same process).
        self.current: dict[tuple[str | None, int | None, int | None], _Proc] = {}
        # The last lines of the tracebacks read so far: a rank their exception names
        # ("rank 0: bad shard index") is not the next traceback's.
        self.ended: set[int] = set()
        # Every stream's traceback lines by CPython's printing grammar (a source line under
        # a frame, the exception line under a source line), read before any block: code
        # and another traceback's end, whatever stream is read first (an unprefixed
        # launcher's traceback under a [default2]: stream's exception).
        self.tb_lines: set[int] = {
            number for stream in streams for number in traceback_body(stream.lines)
        }

    def _recognise(self, lines: Lines, i: int) -> tuple[list[Block], int] | None:
        text = strip_pager(lines[i][1]).strip()
        if "%|" in text and (glued := glued_after_meter(text)) is not None:
            # (the stack starts after the bar's last state: read from there on)
            return self._recognise([*lines[:i], (lines[i][0], glued), *lines[i + 1 :]], i)
        if not _MAYBE_START.match(text):
            if text.endswith(")") and starts_frames(lines, i):
                block, j = parse_pyspy_frames(lines, i)  # py-spy frames, no thread line
                return ([block] if block is not None else []), max(j, i + 1)
            return None
        single: Callable[[Lines, int], tuple[Block | None, int]] | None = None
        if TB_START.match(text):
            single = parse_traceback
        elif PYBT_START.match(text) or PYBT_OLD_START.match(text):
            single = parse_pybt
        elif PYSTACK_START.match(text) or PYSTACK_FRAME_START.match(text):
            single = parse_pystack
        elif GDB_THREAD.match(text) or (text.startswith("#0 ") and GDB_FRAME.match(text)):
            single = parse_gdb
        elif CPP_START.match(text) or CPP_FRAME_START.match(text):
            single = parse_cpp
        elif starts_faulthandler(lines, i):
            return parse_fault_segment(lines, i, self.source, self.notes)
        elif starts_pyspy(lines, i):
            return parse_pyspy_segment(lines, i, self.source, self.notes)
        elif starts_stack_print(lines, i):
            single = parse_stack_print  # frames under a thread line (stack_print.py)
        elif HEADLESS_FRAME.match(text):
            single = parse_headless  # frames with no header at all (headless.py)
        if single is None:
            return None
        block, j = single(lines, i)
        return ([block] if block is not None else []), max(j, i + 1)

    def stream(self, stream: Stream) -> None:
        for section in split_sections(stream.lines):
            base = section.rank if section.rank is not None else stream.rank
            before = self.result.blocks
            self._section(section.lines, stream, base)
            if section.rank is not None and self.result.blocks == before:
                # torch.debug's section of a rank it could not reach: say why.
                self.notes.extend(
                    f"{self.source}:{number}: rank {section.rank}: {text.strip()}"
                    for number, text in section.lines
                    if text.startswith("Error:")
                )

    def _section(self, lines: Lines, stream: Stream, base: int | None) -> None:
        lines = split_interleaved(lines)  # several ranks' tracebacks, line by line
        sticky: int | None = None
        sticky_local: int | None = None
        pid_hint: int | None = None
        i = 0
        while i < len(lines):
            if self.result.blocks >= self.max_blocks:
                if not self.capped:
                    self.capped = True
                    self.notes.append(
                        f"{self.source}: more than {self.max_blocks} stacks; the rest were not read"
                    )
                return
            found = self._recognise(lines, i)
            if found is None or not found[0]:
                text = lines[i][1]
                if (r := markers.label_rank(text)) is not None:
                    sticky, pid_hint = r, None
                elif (r := markers.header_local_rank(text)) is not None:
                    sticky_local = r
                if (p := markers.pid_marker(text)) is not None:
                    pid_hint = p
                elif (label := markers.pid_label(text)) is not None:
                    # a label that names the process by its pid (``node-1:24036 (rank
                    # 3)``): the pid of the dump under it, when py-spy's header is not
                    # pasted; the text's log lines under the label are tied to it by it
                    pid_hint = label[1]
                i = found[1] if found is not None else i + 1
                continue
            blocks, j = found
            rank = base
            if rank is None and any(launcher_traceback(b) for b in blocks):
                # torchrun's own traceback (its ChildFailedError): the launcher's, no rank's,
                # whatever its report above names (the failure table names the rank)
                for block in blocks:
                    if self.in_log and logged_elsewhere(block):
                        continue
                    self._place(block, None, stream, None, None, launcher=True)
                    self.result.stack_lines += max(1, block.end - block.start + 1)
                    self.ended.add(block.end)
                pid_hint = None
                i = j
                continue
            if rank is None:
                close = self._near_rank(lines[i][0], _identity(stream))
                rank = close if close is not None else sticky
                self.result.marker_ranked += rank is not None
            for block in blocks:
                if self.in_log and logged_elsewhere(block):
                    continue
                self._place(block, rank, stream, sticky_local, pid_hint)
                self.result.stack_lines += max(1, block.end - block.start + 1)
                if block.kind == "traceback":
                    self.ended.add(block.end)
            pid_hint = None
            i = j

    def _near_rank(self, number: int, own: tuple[str | None, int | None, int | None]) -> int | None:
        """The rank named just above line ``number``: by the prefix of the line right
        above it, or by the text of one of the NEAR_LINES non-blank lines above it. A
        block in a stream whose prefix names its process (``[default3]:``, a pid) reads
        only its own stream's lines: the line's own prefix wins over a rank another
        process's line mentions (its traceback's source line, its exception)."""
        seen = 0
        for above in range(number - 1, max(0, number - 4 * markers.NEAR_LINES), -1):
            entry = self.by_number.get(above)
            if entry is None or not entry[1].strip():
                continue
            if own != (None, None, None) and self.stream_of.get(above) != own:
                continue
            if above in self.ended or above in self.tb_lines:
                # another traceback's source line (code, not output: "{rank:05d}") or its
                # exception ("rank 0: bad shard index"): a rank it names is not this block's
                return None
            prefix_rank, text = entry
            if seen == 0 and prefix_rank is not None:
                return prefix_rank
            r = markers.label_rank(text)
            if r is not None or (r := markers.any_rank(text)) is not None:
                return r
            if markers.file_header(text):
                return None  # the header of a file whose name says no rank: above is another
            seen += 1
            if seen >= markers.NEAR_LINES:
                break
        return None

    def _find(self, rank: int | None, pid: int | None, stream: Stream, block: Block) -> _Proc:
        host = stream.host
        key = (host, stream.local_rank, stream.pid)
        proc: _Proc | None = None
        if rank is not None:
            proc = self.by_rank.get((host, rank))
        if proc is None and pid is not None:
            proc = self.by_pid.get((host, pid))
            if proc is not None and rank is not None and proc.rank not in (None, rank):
                proc = None
        if proc is None and rank is None and pid is None:
            last = self.current.get(key)
            fresh = last is None or (
                bool(last.samples) and _new_moment(block, last.samples[-1].dump_kinds)
            )
            # (a cut traceback naming no process after another's whole one: whose it is
            # nothing says, and a main thread raises once: another process)
            if (
                last is not None
                and (not fresh or self._another_view(block, last))
                and not (block.cut and last.samples and _cut_apart(block, last.samples[-1]))
            ):
                return last
        if proc is None:
            proc = _Proc(rank, pid, host)
            self.procs.append(proc)
        if proc.rank is None and rank is not None:
            proc.rank = rank
        if proc.pid is None and pid is not None:
            proc.pid = pid
        if proc.rank is not None:
            self.by_rank.setdefault((host, proc.rank), proc)
        if proc.pid is not None:
            self.by_pid.setdefault((host, proc.pid), proc)
        self.current[key] = proc
        return proc

    @staticmethod
    def _another_view(block: Block, proc: _Proc) -> bool:
        """A dump naming no rank and no pid after another kind of dump of the same threads
        (py-spy's text, then the job's faulthandler dump): the same process, a new sample."""
        last = proc.samples[-1]
        return block.kind not in last.dump_kinds and _same_threads(block, last)

    def _place(
        self,
        block: Block,
        rank: int | None,
        stream: Stream,
        local: int | None,
        pid_hint: int | None,
        *,
        launcher: bool = False,
    ) -> None:
        self.result.blocks += 1
        self.result.kinds.add(block.kind)
        pid = block.pid or stream.pid or (pid_hint if block.dump else None)
        if launcher:
            proc = _Proc(None, None, stream.host)
            self.procs.append(proc)
        else:
            proc = self._find(rank, pid, stream, block)
        proc.local_rank = (
            proc.local_rank
            if proc.local_rank is not None
            else (stream.local_rank if stream.local_rank is not None else local)
        )
        proc.cmdline = proc.cmdline or block.cmdline
        main_tid = proc.pid
        threads = []
        for thread in block.threads:
            is_main = thread.is_main
            if block.kind == "pystack" and main_tid is not None:
                is_main = thread.os_thread_id == main_tid
            threads.append(dataclasses.replace(thread, source=self.source, is_main=is_main))
        block.threads = threads
        if block.kind == "cpp" and not block.exc_message and threads and threads[0].exception:
            self._cpp_message_above(block)
        proc.add(block)
        proc.exited = proc.exited or block.exited or _died_of(block)
        if block.timeout is not None:
            proc.timeouts.append((block.start, block.timeout))
        if block.kind == "traceback":
            span = Span(block.start, block.end, proc.rank, block.exc_type, block.exc_message)
            self.result.spans.append(span)

    def _cpp_message_above(self, block: Block) -> None:
        """The message over a C++ stack, when it sits in another stream than the stack
        (a ``[rankN]:``-prefixed watchdog line over unprefixed frames)."""
        above: Lines = []
        for number in range(block.start - 12, block.start + 1):
            entry = self.by_number.get(number)
            if entry is not None:
                above.append((number, entry[1]))
        message, exc_type = cpp_message(above, len(above) - 1)
        if message:
            block.exc_type, block.exc_message = exc_type, message
            block.threads[0] = dataclasses.replace(
                block.threads[0], exception=f"{exc_type}: {message}"
            )

    def finish(self) -> ScanResult:
        for proc in self.procs:
            if not any(s.threads for s in proc.samples):
                continue
            evidence = ProcessEvidence(
                rank=proc.rank,
                host=proc.host,
                pid=proc.pid,
                local_rank=proc.local_rank,
                cmdline=proc.cmdline,
                sources=[self.source],
                exited=proc.exited,
            )
            evidence.log_events.extend(
                LogEvent(_FAULTHANDLER_TIMEOUT, text, self.source, line)
                for line, text in proc.timeouts
            )
            kept = [s for s in proc.samples if s.threads][-MAX_SAMPLES:]
            for sample in kept:
                if not sample.threads:
                    continue
                evidence.text_stacks.append(
                    TextStack(
                        index=len(evidence.text_stacks),
                        threads=tuple(sample.threads),
                        kinds=tuple(StackTextKind(k) for k in sample.kinds),
                        source=self.source,
                        line=sample.line,
                        children=tuple(sample.children),
                        cut=sample.cut,
                    )
                )
            self.result.processes.append(evidence)
        return self.result


def scan_text(
    text: str, source: str, notes: list[str], in_log: bool = False, max_blocks: int = MAX_BLOCKS
) -> ScanResult:
    """Every stack in ``text``, grouped into processes. ``in_log``: the text is a log,
    whose post-mortem records of consequences are left out (``logged_elsewhere``).
    ``max_blocks``: where the scan stops (a file of one dump per rank holds as many
    blocks as ranks). Never raises on odd text."""
    streams = split_streams(markers.relabel_srun(text))
    scanner = _Scanner(source, notes, streams)
    scanner.in_log = in_log
    scanner.max_blocks = max_blocks
    for stream in streams:
        scanner.stream(stream)
    return scanner.finish()
