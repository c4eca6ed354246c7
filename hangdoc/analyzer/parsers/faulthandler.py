"""Python ``faulthandler`` tracebacks (FORMATS.md §4).

Written on a fatal signal (``-X faulthandler``), on a registered signal
(``faulthandler.register(SIGUSR1, all_threads=True)``), by ``dump_traceback_later``
("Timeout (0:00:01)!"), and by torch.distributed.debug's ``dump_traceback`` handler::

    Fatal Python error: Segmentation fault           (fatal only)
    Thread 0x00007f95275fc6c0 (most recent call first):
      File "/srv/job/fh.py", line 4 in allreduce_wait
    Current thread 0x00007f952805bb80 (most recent call first):
      File "/srv/job/fh.py", line 11 in main
    Extension modules: numpy…, torch._C (total: 13)

Thread ids are pthread ids (``ThreadStack.thread_id``), not TIDs. Frames are already
innermost first. Several dumps in one file (a signal handler writing to the same log
again) become several text stacks of one process: a dump ends where a thread id repeats or
a new "Fatal"/"Timeout" header starts.

The loader reads every text through the text path (``parsers/text.py``): its stack scan
reads these dumps wherever they sit with ``parse_fault_lines`` (``stacks/segments.py``),
its log side the lines around them, and ``FaulthandlerParser.sniff`` names a file that is
such dumps. ``FaulthandlerParser.parse`` is the format's own reading of a whole file,
which the scan is held to (``tests/unit/parsers/test_text_path.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.model import (
    Frame,
    InputKind,
    LogEvent,
    ProcessEvidence,
    StackTextKind,
    TextStack,
)
from hangdoc.analyzer.model import ThreadStack as Thread
from hangdoc.analyzer.parsers.base import ParsedFile, read_text_capped
from hangdoc.analyzer.parsers.fault_logs import foreign_events
from hangdoc.analyzer.parsers.prefixes import Stream, sniff_lines, split_sections, split_streams
from hangdoc.analyzer.payloads.launch import FatalReport, FatalSignal, SignalName
from hangdoc.analyzer.vocabulary import EventKind

# faulthandler's names of the fatal signals it reports (Python's faulthandler.c).
_FATAL_SIGNALS = {
    "Segmentation fault": SignalName.SIGSEGV,
    "Aborted": SignalName.SIGABRT,
    "Bus error": SignalName.SIGBUS,
    "Floating point exception": SignalName.SIGFPE,
    "Illegal instruction": SignalName.SIGILL,
}

_FATAL = re.compile(r"(?:Fatal Python error|Windows fatal exception): (.*)$")
_TIMEOUT = re.compile(r"Timeout \((\d+:\d\d:\d\d(?:\.\d+)?)\)!$")
# Python 3.14 may add the thread name in brackets; accept it without requiring it.
_THREAD = re.compile(
    r"(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[(.*)\])? \(most recent call first\):$"
)
_STACK = re.compile(r"Stack \(most recent call first\):$")
_FILE = re.compile(r'File "(.*)", line (\d+|\?\?\?) in (.*)$')
_THREAD_CAP = "..."
_FRAME_CAP = "..."
_C_STACK = re.compile(r"Current thread's C stack trace|C stack trace")


@dataclass(slots=True)
class _ThreadDraft:
    thread_id: int | None
    current: bool
    name: str | None
    frames: list[Frame] = field(default_factory=list)
    capped: bool = False


@dataclass(slots=True)
class FaultDump:
    """One faulthandler dump: its header and threads in the order printed."""

    line: int
    fatal: str | None = None
    timeout: str | None = None
    threads: list[_ThreadDraft] = field(default_factory=list)
    threads_capped: bool = False

    def seen(self, thread_id: int | None) -> bool:
        return any(t.thread_id == thread_id for t in self.threads)

    def to_threads(self, source: str) -> tuple[Thread, ...]:
        # CPython links thread states newest first and faulthandler walks that list, so
        # the main thread (the oldest) is printed LAST. Checked on every sample: in
        # faulthandler_timeout.txt no thread is "Current" and the last one runs
        # <module>; in torch_debug_dump_traceback.txt "Current" is the debug server
        # thread (first, <no Python frame>) and the main thread is last again; in the
        # SIGSEGV/SIGUSR1 samples "Current" and last coincide (the main thread). So the
        # last thread is marked main in every dump, fatal or not: a crash in a worker
        # thread makes that worker "Current", not main. When the 100-thread cap cut the
        # list ("..."), the main thread was not printed and none is marked.
        out: list[Thread] = []
        last = len(self.threads) - 1
        for i, draft in enumerate(self.threads):
            out.append(
                Thread(
                    frames=tuple(draft.frames),
                    thread_id=draft.thread_id,
                    name=draft.name,
                    is_main=i == last and not self.threads_capped,
                    source=source,
                )
            )
        return tuple(out)


def parse_fault_lines(
    lines: list[tuple[int, str]], source: str, notes: list[str]
) -> list[FaultDump]:
    """Parse one stream section's lines into faulthandler dumps."""
    dumps: list[FaultDump] = []
    dump: FaultDump | None = None
    thread: _ThreadDraft | None = None
    in_c_stack = False

    def new_dump(number: int) -> FaultDump:
        fresh = FaultDump(line=number)
        dumps.append(fresh)
        return fresh

    for number, raw in lines:
        text = raw.rstrip()
        stripped = text.strip()
        if not stripped:
            continue
        indented = text[:1] in " \t"
        if in_c_stack and indented:
            continue
        in_c_stack = False
        if indented:
            if thread is None:
                continue
            if m := _FILE.match(stripped):
                line = None if m.group(2) == "???" else int(m.group(2))
                thread.frames.append(Frame(function=m.group(3), file=m.group(1), line=line))
            elif stripped == _FRAME_CAP:
                thread.capped = True
                notes.append(f"{source}:{number}: a thread's stack was cut at 100 frames")
            continue  # "<no Python frame>", "Garbage-collecting"
        thread = None
        if m := _FATAL.match(text):
            dump = new_dump(number)
            dump.fatal = m.group(1).strip()
        elif m := _TIMEOUT.match(text):
            dump = new_dump(number)
            dump.timeout = m.group(0)
        elif (m := _THREAD.match(text)) or _STACK.match(text):
            thread_id = int(m.group(2), 16) if m else None
            if dump is None or (dump.threads and (m is None or dump.seen(thread_id))):
                dump = new_dump(number)
            thread = _ThreadDraft(
                thread_id=thread_id,
                current=bool(m and m.group(1) == "Current thread"),
                name=(m.group(3) or None) if m else None,
            )
            dump.threads.append(thread)
        elif text == _THREAD_CAP and dump is not None:
            dump.threads_capped = True
            notes.append(f"{source}:{number}: thread list cut at 100 threads; main not shown")
        elif _C_STACK.match(text):
            in_c_stack = True
    return [d for d in dumps if d.threads or d.fatal or d.timeout]


def _process(stream: Stream, rank: int | None, source: str) -> ProcessEvidence:
    return ProcessEvidence(
        rank=rank,
        host=stream.host,
        pid=stream.pid,
        local_rank=stream.local_rank,
        sources=[source],
    )


def processes_from_stream(stream: Stream, source: str, notes: list[str]) -> list[ProcessEvidence]:
    """One process per prefix stream (per torch.debug section), one text stack per dump."""
    out: list[ProcessEvidence] = []
    for section in split_sections(stream.lines):
        rank = section.rank if section.rank is not None else stream.rank
        dumps = parse_fault_lines(section.lines, source, notes)
        # The log lines around the dumps (a torch error printed just before the crash):
        # analyzer/parsers/fault_logs.py.
        foreign = foreign_events(section.lines, source)
        if not dumps:
            for number, text in section.lines:
                if text.startswith("Error:"):
                    notes.append(f"{source}:{number}: rank {rank}: {text.strip()}")
            if foreign:
                proc = _process(stream, rank, source)
                proc.log_events.extend(foreign)
                out.append(proc)
            continue
        proc = _process(stream, rank, source)
        proc.log_events.extend(foreign)
        for dump in dumps:
            if dump.fatal:
                proc.exited = True  # faulthandler re-raises the signal: the process died
                text = f"Fatal Python error: {dump.fatal}"
                # The same event the log parser makes of "Segmentation fault" lines, so the
                # crash rules see a faulthandler crash (analyzer/vocabulary.py: fatal_signal).
                signal = _FATAL_SIGNALS.get(dump.fatal.split(" (")[0].strip())
                fatal = FatalSignal(signal=signal, reported_by=FatalReport.FAULTHANDLER)
                proc.log_events.append(
                    LogEvent(EventKind.FATAL_SIGNAL, text, source, dump.line, payload=fatal)
                )
            if dump.timeout:
                proc.log_events.append(
                    LogEvent(EventKind.FAULTHANDLER_TIMEOUT, dump.timeout, source, dump.line)
                )
            if dump.threads:
                proc.text_stacks.append(
                    TextStack(
                        index=len(proc.text_stacks),
                        threads=dump.to_threads(source),
                        kinds=(StackTextKind.FAULTHANDLER,),
                        source=source,
                        line=dump.line,
                    )
                )
        out.append(proc)
    return out


def parse_faulthandler_text(text: str, source: str) -> ParsedFile:
    """Parse faulthandler dumps from a whole file's text."""
    result = ParsedFile(kind=InputKind.FAULTHANDLER)
    for stream in split_streams(text):
        result.processes.extend(processes_from_stream(stream, source, result.notes))
    if not result.processes:
        result.error = "no faulthandler traceback found"
    return result


_SNIFF_WINDOW = 20


class FaulthandlerParser:
    """faulthandler text, alone, repeated, prefixed, or in torch.debug sections."""

    kind = InputKind.FAULTHANDLER

    def sniff(self, head: bytes) -> bool:
        for line in sniff_lines(head, _SNIFF_WINDOW):
            # The thread header is specific enough; "Fatal Python error" alone also
            # starts ordinary crash logs, which the log parser should get.
            if _THREAD.match(line) or _STACK.match(line):
                return True
        return False

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        text, truncated = read_text_capped(path)
        result = parse_faulthandler_text(text, display_path)
        if truncated:
            result.notes.append(f"{display_path}: file too large, only its tail was read")
        return result
