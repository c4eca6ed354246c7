"""Native stacks: gdb ``bt`` / ``thread apply all bt``, pstack, and torch's C++ stacks.

gdb and pstack print ``#N  0xADDR in func (args) at file.c:12`` or ``… from lib.so``,
innermost first, under ``Thread N (Thread 0x… (LWP n) "name"):`` headers (pstack the
same, sometimes ``Thread N (LWP n)``). Every frame is native; the function keeps its
C++ qualification (``c10d::ProcessGroupNCCL::allreduce``) because the catalog matches
native frames on such substrings. A ``py-bt`` printed under a thread header (``thread
apply all py-bt``) gives that thread Python frames instead.

torch's C++ stacks (``Exception raised from checkTimeout at …cpp:565 (most recent call
first):`` then ``frame #0: c10::Error::Error(…) + 0x96 (0x7f… in /…/libc10.so)``) are
the stack of the thread that threw, often the NCCL watchdog; a paste that wrapped a
long frame line is joined back.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import Frame, ThreadStack
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines, strip_pager

GDB_THREAD = re.compile(
    r"Thread (\d+) \((?:Thread (0x[0-9a-fA-F]+) )?\(?LWP (\d+)\)\)?(?: \"(.*)\")?\):?\s*$"
)
GDB_FRAME = re.compile(r"#(\d+)\s+(.*)$")
_ADDR_IN = re.compile(r"(0x[0-9a-fA-F]+) in ")
_FROM = re.compile(r"\s+from (\S+)\s*$")
_AT = re.compile(r"\s+at (\S+?):(\d+)\s*$")
# torch's flight recorder symbolizes a collective's captured Python stack as
# "#N <function> from <file.py>:<line>" (FlightRecorder's Entry::getTraceback, printed by
# ProcessGroupNCCL under "Stack trace of the failed collective:"): a Python frame, not a
# gdb frame "from" a shared library.
_PY_FROM = re.compile(r"(.+\.py):(\d+)$")
_NOISE = (
    "[Switching to",
    "[New Thread",
    "[Thread debugging",
    "Using host libthread_db",
    "(gdb)",
    "(No debugging symbols",
)
_STOP = ("Backtrace stopped:",)

CPP_START = re.compile(r"Exception raised from (\S+) at (.*?) \(most recent call first\):\s*$")
_CPP_FRAME = re.compile(r"frame #(\d+): (.*)$")
_CPP_BODY = re.compile(r"(.*?)(?: \+ (0x[0-9a-fA-F]+))? \((0x[0-9a-fA-F]+) in (.*)\)$")
_THROWN = re.compile(r"terminate called after throwing an instance of '([^']+)'")


def _strip_args(text: str) -> str:
    """``func (a=1, b=(x))`` → ``func``; ``ns::f(int) ()`` → ``ns::f``: cut trailing
    balanced parenthesised groups (arguments, then a signature)."""
    text = text.strip()
    for _ in range(2):
        if not text.endswith(")"):
            break
        depth = 0
        for pos in range(len(text) - 1, -1, -1):
            ch = text[pos]
            if ch == ")":
                depth += 1
            elif ch == "(":
                depth -= 1
                if depth == 0:
                    break
        else:
            break
        head = text[:pos].rstrip()
        if not head:
            break
        text = head
    return text


# A pointer argument gdb resolved to a symbol: "cond=0x5555558e49e0 <_PyRuntime+384>".
# Kept as the frame's locals: the object a wait is on (views/gil_native.py).
_SYMBOL_ARG = re.compile(r"\b(\w+)=(0x[0-9a-fA-F]+ <[\w.$@]+(?:\+\d+)?>)")


def gdb_frame(body: str) -> Frame:
    """One ``#N`` line's text after the number."""
    text = body.strip()
    library = file = None
    line: int | None = None
    if m := _FROM.search(text):
        library, text = m.group(1), text[: m.start()]
        if (py := _PY_FROM.match(library)) is not None and " " not in text.strip():
            return Frame(
                function=text.strip() or "??", file=py.group(1), line=int(py.group(2)), native=False
            )
    if m := _AT.search(text):
        file, line, text = m.group(1), int(m.group(2)), text[: m.start()]
    if m := _ADDR_IN.match(text):
        text = text[m.end() :]
    function = _strip_args(text) or "??"
    args = text[len(function) :]
    symbols = tuple(dict.fromkeys(_SYMBOL_ARG.findall(args))) if " <" in args else ()
    return Frame(
        function=function, file=file or library or "??", line=line, native=True, locals=symbols
    )


def _frame_lines(lines: Lines, i: int) -> tuple[list[str], int]:
    """The ``#N`` frames from ``i`` with gdb's wrapped continuation lines joined."""
    texts: list[str] = []
    while i < len(lines):
        text = strip_pager(lines[i][1])
        stripped = text.strip()
        if m := GDB_FRAME.match(stripped):
            texts.append(m.group(2))
        elif stripped and texts and text[:1] in " \t" and not stripped.startswith("#"):
            texts[-1] += " " + stripped  # "   from /lib/x.so", wrapped arguments
        elif not stripped and texts:
            break
        elif not stripped or stripped.startswith(_NOISE):
            pass
        else:
            break
        i += 1
    return texts, i


def parse_gdb(lines: Lines, i: int) -> tuple[Block | None, int]:
    """``thread apply all bt`` / pstack output (thread headers), or one bare ``bt``.

    Ends at a line that is neither a header, a frame nor gdb noise, or where a thread
    number repeats (the next dump of the same process)."""
    from hangdoc.analyzer.parsers.stacks.python_tb import PYBT_START, parse_pybt_frames

    start = lines[i][0]
    threads: list[ThreadStack] = []
    seen: set[int] = set()
    while i < len(lines):
        stripped = strip_pager(lines[i][1]).strip()
        header = GDB_THREAD.match(stripped)
        if header is None:
            if GDB_FRAME.match(stripped) and not threads:
                texts, i = _frame_lines(lines, i)
                frames = tuple(gdb_frame(t) for t in texts)
                threads.append(ThreadStack(frames=frames, is_main=True))
                continue
            if not stripped or stripped.startswith(_NOISE) or stripped.startswith(_STOP):
                i += 1
                continue
            break
        number = int(header.group(1))
        if number in seen:
            break
        seen.add(number)
        i += 1
        while i < len(lines) and not lines[i][1].strip():
            i += 1
        frames_list: list[Frame] = []
        owns_gil: bool | None = None
        if i < len(lines) and PYBT_START.match(lines[i][1].strip()):
            frames_list, waits, i = parse_pybt_frames(lines, i)
            owns_gil = False if waits else None
        else:
            texts, i = _frame_lines(lines, i)
            frames_list = [gdb_frame(t) for t in texts]
        threads.append(
            ThreadStack(
                frames=tuple(frames_list),
                os_thread_id=int(header.group(3)),
                thread_id=int(header.group(2), 16) if header.group(2) else None,
                name=header.group(4),
                owns_gil=owns_gil,
                is_main=number == 1,
            )
        )
    if not threads:
        return None, i + 1
    pid = next((t.os_thread_id for t in threads if t.is_main and t.os_thread_id), None)
    end = lines[i - 1][0] if i > 0 else start
    return Block(kind="gdb", start=start, threads=threads, dump=True, pid=pid, end=end), i


CPP_FRAME_START = re.compile(r"frame #\d+: \S")


def parse_cpp(lines: Lines, i: int) -> tuple[Block | None, int]:
    """A torch C++ stack: the ``Exception raised from`` header and its ``frame #N``
    lines; a paste that starts at a ``frame #N`` line (its header cut off) too."""
    header = CPP_START.match(lines[i][1].strip())
    if header is None and not CPP_FRAME_START.match(lines[i][1].strip()):
        return None, i + 1
    start, at = lines[i][0], i
    texts: list[str] = []
    if header is not None:
        i += 1
    while i < len(lines):
        stripped = lines[i][1].strip()
        if m := _CPP_FRAME.match(stripped):
            texts.append(m.group(2))
        elif stripped and texts and not texts[-1].endswith(")"):
            texts[-1] += stripped  # a paste that wrapped the line mid-path
        else:
            break
        i += 1
    frames = [_cpp_frame(text) for text in texts]
    if header is None:
        thread = ThreadStack(frames=tuple(frames), is_main=False)
        return Block(kind="cpp", start=start, threads=[thread], end=lines[i - 1][0]), i
    message, exc_type = cpp_message(lines, at)
    where = f"{header.group(2)} ({header.group(1)})"
    exception = f"{exc_type}: {message}" if message else f"{exc_type} raised from {where}"
    thread = ThreadStack(frames=tuple(frames), name=None, is_main=False, exception=exception)
    block = Block(kind="cpp", start=start, threads=[thread], end=lines[i - 1][0])
    block.exc_type, block.exc_message = exc_type, message
    return block, i


def _cpp_frame(text: str) -> Frame:
    m = _CPP_BODY.match(text)
    if m is not None:
        function = m.group(1).strip()
        return Frame(function=_strip_args(function) or function, file=m.group(4), native=True)
    # A frame cut off by the end of the paste: keep the function, drop the rest.
    function = re.split(r" \+ 0x| \(0x", text, maxsplit=1)[0].strip()
    return Frame(function=_strip_args(function) or function or "??", file="??", native=True)


_WHAT = re.compile(r"^\s*what\(\):\s*")
_LOG_HEAD = re.compile(r"^\[?[EWIF]\d{3,4} [\d:.]+ [^\]]*\]\s*")


def cpp_message(lines: Lines, header: int) -> tuple[str, str]:
    """The message printed just above the header (``what(): …`` or a watchdog log
    line, joined back when a terminal wrapped it), and the C++ type from a ``terminate
    called after throwing`` line above it."""
    parts: list[str] = []
    exc_type = "c10::Error"
    k = header - 1
    while k >= 0 and header - k <= _MESSAGE_LINES:
        text = lines[k][1].strip()
        if not text:
            break
        parts.insert(0, text)
        if _WHAT.match(text) or _LOG_HEAD.match(text) or "] " in text[:80]:
            break
        k -= 1
    message = ""
    for part in parts:
        glue = "" if len(message) >= _WRAP_WIDTH else " "
        message = (message + glue + part).strip() if message else part
    message = _LOG_HEAD.sub("", _WHAT.sub("", message))
    for j in range(k, max(-1, header - _TYPE_LINES), -1):
        if m := _THROWN.search(lines[j][1]):
            named = _TYPE_NAME.search(m.group(1))
            exc_type = named.group(1) if named else m.group(1) or exc_type
            break
    return message[:400], exc_type


_MESSAGE_LINES = 4
_TYPE_LINES = 12
_WRAP_WIDTH = 100  # a longer line that continues was cut by the terminal, not by the writer
_TYPE_NAME = re.compile(r"((?:[a-z_]\w*::)*[A-Z]\w*?(?:Error|Exception))")
