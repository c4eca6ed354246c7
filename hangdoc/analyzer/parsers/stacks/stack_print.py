"""Thread dumps printed in traceback format: ``traceback.print_stack`` of each thread.

The usual home-made thread dump of a live process prints, for every thread of
``sys._current_frames()``, a line naming the thread and then CPython's traceback frame
lines (``  File "x.py", line 3, in f`` and the source line, outermost first; Lib/
traceback.py ``StackSummary.format``), with no ``Traceback (most recent call last):``
header and no exception line, because nothing raised (pytorch issue 24927, train case
pytorch-24927-pin-memory-stuck: ``Thread MainThread`` over a DataLoader worker's frames).
logging's ``stack_info=True`` prints the same frames under ``Stack (most recent call
last):`` (Lib/logging/__init__.py ``Logger.findCaller``).

Only frames under such a line are read here: frames with neither a thread line above nor
an exception line below may be a traceback cut at its bottom, whose innermost frames are
missing (python_tb leaves those; headless.py reads the ones with an exception line).
Frames right under a ``Traceback (most recent call last):`` header are never read here.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import Frame, ThreadStack
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines
from hangdoc.analyzer.parsers.stacks.python_tb import TB_START

FRAME_LINE = re.compile(r'\s*File "([^"]+)", line (\d+|\?), in (.+?)\s*$')
# The line above a stack print that names its thread: "Thread MainThread", "# Thread:
# MainThread (140...)", "--- Thread-3 ---", "<Thread(worker, started 1234)>".
_THREAD_HEAD = re.compile(r"^[#\-=<\s]*Thread(?:[\s:]+|\()(?P<name>[\w.\-]+)(?P<rest>.{0,80})$")
_STACK_HEAD = re.compile(r"Stack \(most recent call last\):\s*$")
# Lines a reporter puts between the thread line and the first frame shown.
_ELISION = re.compile(r"^\s*(?:\.\.\.|…|<[^>]{0,60}>|\[\.\.\.\])\s*$")
_LOOK_UP = 6
_MAIN_NAMES = ("MainThread",)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def thread_above(lines: Lines, i: int) -> tuple[bool, str | None]:
    """Whether a thread line (or logging's stack header) sits over the frame line at
    ``i``, across blank, elided ("...", "<omitted some trace>") and source lines; and the
    thread's name. A traceback header found first means no."""
    j = i - 1
    looked = 0
    while j >= 0 and looked < _LOOK_UP:
        text = lines[j][1]
        stripped = text.strip()
        j -= 1
        if not stripped or _ELISION.match(text) or _indent(text) > 0:
            looked += 1
            continue
        if TB_START.match(stripped):
            return False, None
        if _STACK_HEAD.match(stripped):
            return True, None
        if (m := _THREAD_HEAD.match(stripped)) and "most recent call" not in stripped:
            return True, m.group("name")
        return False, None
    return False, None


def starts_stack_print(lines: Lines, i: int) -> bool:
    return bool(FRAME_LINE.match(lines[i][1])) and thread_above(lines, i)[0]


def parse_stack_print(lines: Lines, i: int) -> tuple[Block | None, int]:
    """The frames from ``lines[i]`` (a frame line under a thread line) to the first line
    at or left of their indent; one thread, innermost first."""
    start = lines[i][0]
    _, name = thread_above(lines, i)
    base = _indent(lines[i][1])
    frames: list[Frame] = []
    while i < len(lines):
        text = lines[i][1]
        if m := FRAME_LINE.match(text):
            line = int(m.group(2)) if m.group(2).isdigit() else None
            frames.append(Frame(function=m.group(3), file=m.group(1), line=line))
        elif not text.strip():
            if i + 1 >= len(lines) or not FRAME_LINE.match(lines[i + 1][1]):
                break
        elif _indent(text) <= base and not _ELISION.match(text):
            break
        i += 1
    if len(frames) < 2:
        return None, i
    thread = ThreadStack(
        frames=tuple(reversed(frames)),
        name=name,
        is_main=name is None or name in _MAIN_NAMES,
    )
    return Block(kind="stack-print", start=start, threads=[thread], end=lines[i - 1][0]), i
