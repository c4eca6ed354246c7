"""``py-spy dump`` text output (FORMATS.md §4), as people paste it into tickets.

Grammar, after launcher prefixes, ANSI and CR are gone (``prefixes``)::

    Process <pid>: <cmdline>
    Python v<version> (<exe>)
    Parent Process <pid>: <cmdline>          (-s: this process is a child of <pid>)
    Thread <tid>|0x<pthread> (idle|active|active+gil|gil)[: "<name>"]
        <function> (<file>:<line>)           innermost first; "(<file>)" when line 0
            Arguments: / Locals:             (--locals) then deeper "name: repr"
        clock_nanosleep (libc.so.6)          (--native) native frames interleaved

A file may hold several dumps (of one process over time, or of several processes),
dumps pasted without their ``Process`` line (a run of ``Thread`` blocks: a process has one
main thread, so a second thread named ``MainThread`` starts another dump, and the decimal
id py-spy prints of a main thread is its OS thread id, which is the process's pid: it
keeps a process's dumps together and two processes' dumps apart),
interleaved prefixed output of several ranks, and torch.distributed.debug sections
(``=== Rank <i>: <addr> ===``, one rank each). Each dump becomes one TextStack (text,
not a live sample: a paste carries no time); dumps of the same pid in the same stream
are text stacks of one process, in file order.

The loader reads every text through the text path (``parsers/text.py``): its stack scan
reads these dumps wherever they sit with ``parse_dump_lines`` (``stacks/segments.py``),
and ``PyspyTextParser.sniff`` names a file that is such dumps. ``PyspyTextParser.parse``
is the format's own reading of a whole file, which the scan is held to
(``tests/unit/parsers/test_text_path.py``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from hangdoc.analyzer.model import (
    ChildStacks,
    Frame,
    InputKind,
    ProcessEvidence,
    StackTextKind,
    TextStack,
    ThreadStack,
)
from hangdoc.analyzer.parsers.base import ParsedFile, read_text_capped
from hangdoc.analyzer.parsers.prefixes import (
    Stream,
    sniff_lines,
    split_sections,
    split_streams,
)
from hangdoc.analyzer.parsers.pyspy_json import is_main_thread, is_native, looks_main
from hangdoc.common.redact import redact_local

_PROCESS = re.compile(r"Process (\d+):\s?(.*)$")
_PARENT = re.compile(r"Parent Process (\d+):\s?(.*)$")
_PYTHON = re.compile(r"Python v\d")
_THREAD = re.compile(r'Thread (0[xX][0-9a-fA-F]+|\d+)(?: \(([\w+ -]*)\))?(?:: "(.*)")?\s*$')
_FRAME = re.compile(r"(.*) \((.*?)\)$")
_LINE_SUFFIX = re.compile(r"(.*):(\d+)$")
_LOCALS_HEADER = re.compile(r"(Arguments|Locals):{1,2}$")
_ERROR = re.compile(r"Error:\s*(.*)$")


@dataclass(slots=True)
class _ThreadBuilder:
    os_thread_id: int | None
    thread_id: int | None
    status: str | None
    name: str | None
    frames: list[Frame] = field(default_factory=list)
    locals: list[tuple[str, str]] = field(default_factory=list)
    frame_indent: int | None = None
    in_locals: bool = False
    headerless: bool = False  # frames a blank line parted from a thread, with no Thread line

    def flush_locals(self) -> None:
        if self.locals and self.frames:
            last = self.frames[-1]
            self.frames[-1] = Frame(
                last.function, last.file, last.line, last.native, tuple(self.locals)
            )
        self.locals = []

    def build(self, pid: int | None, source: str) -> ThreadStack:
        self.flush_locals()
        status = (self.status or "").strip()
        active = None if status in ("", "gil") else status.startswith("active")
        owns_gil = "gil" in status if status else None
        return ThreadStack(
            frames=tuple(self.frames),
            os_thread_id=self.os_thread_id,
            thread_id=self.thread_id,
            name=self.name,
            active=active,
            owns_gil=owns_gil,
            is_main=is_main_thread(pid, self.os_thread_id, self.name),
            source=source,
        )


@dataclass(slots=True)
class TextDump:
    """One ``Process N:`` block (or a headerless run of threads)."""

    pid: int | None
    cmdline: str | None
    line: int
    parent_pid: int | None = None
    threads: list[ThreadStack] = field(default_factory=list)
    children: list[TextDump] = field(default_factory=list)
    headless: bool = False  # no ``Process`` line: its threads' own lines say whose it is


_MAIN_NAME = "MainThread"  # the name Python's threading gives the main thread


def _has_main(dump: TextDump) -> bool:
    return any(t.name == _MAIN_NAME for t in dump.threads)


def _place_run(thread: ThreadStack, dump: TextDump, dumps: list[TextDump]) -> TextDump:
    """Where a run of frames with no Thread line over it goes (``parse_dump_lines``): a
    main thread's run (``looks_main``) after the dump's own main thread is another
    process's, which starts a dump of its own; any other run is a thread of the dump.
    Returns the dump read on."""
    main = looks_main(thread.frames)
    if main and any(t.is_main or looks_main(t.frames) for t in dump.threads):
        dump = TextDump(pid=None, cmdline=None, line=dump.line, headless=True)
        dumps.append(dump)
    is_main = main and not any(t.is_main for t in dump.threads)
    dump.threads.append(replace(thread, is_main=is_main))
    return dump


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


# A paste of many ranks' dumps repeats the same frame lines thousands of times (every
# rank waits in the same calls); a Frame is immutable, so one line's Frame serves each.
@functools.lru_cache(maxsize=8192)
def _frame(text: str) -> Frame | None:
    m = _FRAME.match(text)
    if m is None:
        return None
    function, where = m.group(1), m.group(2)
    line: int | None = None
    if lm := _LINE_SUFFIX.match(where):
        where, line = lm.group(1), int(lm.group(2)) or None
    return Frame(function=function, file=where, line=line, native=is_native(function, where))


def parse_dump_lines(lines: list[tuple[int, str]], source: str, notes: list[str]) -> list[TextDump]:
    """Parse one stream section's lines into dumps, in file order."""
    dumps: list[TextDump] = []
    dump: TextDump | None = None
    thread: _ThreadBuilder | None = None

    gap = False  # blank lines since the current thread's last frame

    def close_thread() -> None:
        nonlocal thread, dump
        if thread is not None and dump is not None:
            built = thread.build(dump.pid, source)
            if thread.headerless:
                dump = _place_run(built, dump, dumps)
            else:
                dump.threads.append(built)
        thread = None

    for number, raw in lines:
        text = raw.rstrip()
        stripped = text.strip()
        if not stripped:
            gap = gap or (thread is not None and bool(thread.frames))
            continue
        if gap and _indent(text) > 0 and thread is not None and _frame(stripped) is not None:
            # Frames after a blank line, with no Thread line over them: py-spy prints no
            # blank line inside a dump, so a reporter parted these from the thread above.
            close_thread()
            thread = _ThreadBuilder(None, None, None, None, headerless=True)
        gap = False
        if _indent(text) == 0:
            if m := _PROCESS.match(text):
                close_thread()
                dump = TextDump(
                    pid=int(m.group(1)), cmdline=m.group(2).strip() or None, line=number
                )
                dumps.append(dump)
            elif (m := _PARENT.match(text)) and dump is not None:
                dump.parent_pid = int(m.group(1))
            elif m := _THREAD.match(text):
                close_thread()
                tid = m.group(1)
                is_hex = tid.lower().startswith("0x")
                main = m.group(3) == _MAIN_NAME
                if dump is None or (dump.headless and main and _has_main(dump)):
                    dump = TextDump(pid=None, cmdline=None, line=number, headless=True)
                    dumps.append(dump)
                if dump.headless and main and not is_hex and dump.pid is None:
                    dump.pid = int(tid)  # a main thread's OS thread id is the pid
                thread = _ThreadBuilder(
                    os_thread_id=None if is_hex else int(tid),
                    thread_id=int(tid, 16) if is_hex else None,
                    status=m.group(2),
                    name=m.group(3),
                )
            elif _PYTHON.match(text):
                continue
            else:
                close_thread()
                if m := _ERROR.match(text):
                    notes.append(f"{source}:{number}: {m.group(0)}")
            continue
        if thread is None:
            continue
        indent = _indent(text)
        if _LOCALS_HEADER.match(stripped) and thread.frames:
            thread.in_locals = True
            continue
        if thread.in_locals and thread.frame_indent is not None and indent > thread.frame_indent:
            name, _, value = stripped.partition(": ")
            name = name.rstrip(":")
            thread.locals.append((name, redact_local(name, value)))
            continue
        frame = _frame(stripped)
        if frame is not None:
            thread.flush_locals()
            thread.in_locals = False
            if thread.frame_indent is None:
                thread.frame_indent = indent
            thread.frames.append(frame)
    close_thread()
    return dumps


def _attach_children(dumps: list[TextDump], source: str, notes: list[str]) -> list[TextDump]:
    """Move ``-s`` subprocess dumps under the dump of their (top) ancestor."""
    latest_by_pid: dict[int, TextDump] = {}
    top_of: dict[int, TextDump] = {}
    roots: list[TextDump] = []
    for dump in dumps:
        parent = None if dump.parent_pid is None else latest_by_pid.get(dump.parent_pid)
        if parent is None:
            if dump.parent_pid is not None:
                notes.append(
                    f"{source}:{dump.line}: process {dump.pid} is a child of "
                    f"{dump.parent_pid}, whose dump is not in this file"
                )
            roots.append(dump)
            top = dump
        else:
            top = top_of.get(id(parent), parent)
            if all(c.pid != dump.pid for c in top.children):  # py-spy <0.4 repeats them
                top.children.append(dump)
        if dump.pid is not None:
            latest_by_pid[dump.pid] = dump
        top_of[id(dump)] = top
    return roots


def _to_stack(dump: TextDump, index: int, source: str) -> TextStack:
    children = tuple(
        ChildStacks(pid=c.pid, threads=tuple(c.threads), cmdline=c.cmdline)
        for c in dump.children
        if c.pid is not None
    )
    return TextStack(
        index=index,
        threads=tuple(dump.threads),
        kinds=(StackTextKind.PYSPY,),
        source=source,
        line=dump.line,
        children=children,
    )


def processes_from_stream(stream: Stream, source: str, notes: list[str]) -> list[ProcessEvidence]:
    """All processes of one prefix stream (each torch.debug section its own rank)."""
    out: dict[tuple[int | None, int | None, int], ProcessEvidence] = {}
    for section in split_sections(stream.lines):
        dumps = _attach_children(parse_dump_lines(section.lines, source, notes), source, notes)
        rank = section.rank if section.rank is not None else stream.rank
        for number, dump in enumerate(dumps):
            if not dump.threads:
                notes.append(f"{source}:{dump.line}: a dump header without any thread; skipped")
                continue
            # A dump that names no process (no Process line, no decimal main thread id)
            # is another process than the dump before it, as the stack scan reads it.
            apart = number if dump.headless and dump.pid is None and rank is None else 0
            key = (rank, dump.pid, apart)
            proc = out.get(key)
            if proc is None:
                proc = out[key] = ProcessEvidence(
                    rank=rank,
                    host=stream.host,
                    pid=dump.pid if dump.pid is not None else stream.pid,
                    local_rank=stream.local_rank,
                    cmdline=dump.cmdline,
                    sources=[source],
                )
            proc.text_stacks.append(_to_stack(dump, len(proc.text_stacks), source))
    return list(out.values())


def parse_pyspy_text(text: str, source: str) -> ParsedFile:
    """Parse py-spy text dumps from a whole file's text."""
    result = ParsedFile(kind=InputKind.PYSPY_TEXT)
    for stream in split_streams(text):
        result.processes.extend(processes_from_stream(stream, source, result.notes))
    if not any(p.text_stacks for p in result.processes):
        result.error = "no py-spy thread found"
    return result


_SNIFF_WINDOW = 20


class PyspyTextParser:
    """``py-spy dump`` text, plain or from a TTY, alone, concatenated or sectioned."""

    kind = InputKind.PYSPY_TEXT

    def sniff(self, head: bytes) -> bool:
        # A thread header followed by a frame, or a process header followed by a thread
        # header, near the top: leading junk (a shell prompt, a section header) is fine.
        lines = sniff_lines(head, _SNIFF_WINDOW + 8)
        for i, line in enumerate(lines[:_SNIFF_WINDOW]):
            if _THREAD.match(line) and lines[i + 1 : i + 2] and lines[i + 1][:1] in " \t":
                return True
            if _PROCESS.match(line) and any(_THREAD.match(x) for x in lines[i + 1 : i + 8]):
                return True
        return False

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        text, truncated = read_text_capped(path)
        result = parse_pyspy_text(text, display_path)
        if truncated:
            result.notes.append(f"{display_path}: file too large, only its tail was read")
        return result
