"""Stacks pasted without their header: frame lines with no "Traceback" or "Thread 0x…"
line above them.

A reporter often copies only the part of a stack they think matters: the frames from the
training script down, without ``Traceback (most recent call last):`` (torchtune #2643,
xtuner #944), or a faulthandler dump without its ``Thread 0x… (most recent call first):``
line (DeepSpeed #797). The frames are exact, in the two formats CPython prints:

* traceback (``traceback.format_list``): ``File "x.py", line 12, in train`` with the
  source line (and better_exchook's ``line:``/``locals:`` lines) indented under it,
  outermost first; the exception line follows the innermost frame at the frames' indent;
* faulthandler (``Python/traceback.c``, dump_frame): ``File "x.py", line 12 in train``,
  one line per frame, innermost first.

Two frames at least make a stack (one ``File`` line is a SyntaxError or a warning). A
headless traceback is read when its exception line follows (as python_tb requires of a
headed one: without it the paste was cut and the innermost frames are missing), or when
its innermost frame shown is a call whose deeper frames can only be inside it
(torch.distributed's own API and c10d_logger's wrapper of it, a framework's collective
wrapper, a file-system call, a checkpoint writer's entry: cut.py; the main process's
DataLoader receiving a worker's batch: pin_memory.py), so where the thread waited is
known. A faulthandler dump prints the innermost frame first, so its frames are read as
they are. Frames under a ``Traceback`` header never come here (parse_traceback
takes or drops them), nor frames under a thread line (stack_print.py reads those).
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import Frame, ThreadStack
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines
from hangdoc.analyzer.parsers.stacks.cut import WRAPPED_FILE, leaf_call
from hangdoc.analyzer.parsers.stacks.pin_memory import receiving_worker_batch
from hangdoc.analyzer.parsers.stacks.python_tb import exception_line

# The first line of a headless stack (the scanner tests it on the stripped line).
FRAME_LINE = re.compile(r'File "[^"]+", line (?:\d+|\?)(?:, in | in )\S')
_TB_FRAME = re.compile(
    r'(?P<indent>\s*)File "(?P<file>[^"]+)", line (?P<line>\d+|\?), in (?P<fn>.+?)\s*$'
)
_FH_FRAME = re.compile(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+|\?) in (?P<fn>.+?)\s*$')
_MIN_FRAMES = 2


def _frame(m: re.Match[str]) -> Frame:
    line = m.group("line")
    return Frame(
        function=m.group("fn"), file=m.group("file"), line=int(line) if line.isdigit() else None
    )


def parse_headless(lines: Lines, i: int) -> tuple[Block | None, int]:
    """A stack whose first line here is a frame line with no header above it."""
    text = lines[i][1]
    if _TB_FRAME.match(text):
        return _traceback(lines, i)
    if _FH_FRAME.match(text):
        return _faulthandler(lines, i)
    return None, i + 1


def _traceback(lines: Lines, i: int) -> tuple[Block | None, int]:
    start = lines[i][0]
    first = _TB_FRAME.match(lines[i][1])
    assert first is not None
    base = len(first.group("indent"))
    begin = i
    frames: list[Frame] = []
    if i + 2 < len(lines) and (second := _second_frame(lines, i)) is not None and second > base:
        # A paste cut at its start loses the first line's leading spaces: the first frame
        # sits left of the others ("File …" over "  File …"), its source line under both.
        frames.append(_frame(first))
        base = second
        i += 1
    while i < len(lines):
        text = lines[i][1]
        m = _TB_FRAME.match(text)
        if m is not None and len(m.group("indent")) == base:
            frames.append(_frame(m))
            i += 1
            continue
        indent = len(text) - len(text.lstrip(" \t"))
        if text.strip() and indent > base:
            i += 1  # the source line, carets, better_exchook's "line:" and "locals:"
            continue
        break
    if len(frames) < _MIN_FRAMES:
        return None, max(i, begin + 1)
    exc = exception_line(lines[i][1]) if i < len(lines) and lines[i][1].strip() else None
    if exc is None and not (
        leaf_call(frames[-1])
        or frames[-1].file.endswith(WRAPPED_FILE)
        or receiving_worker_batch(frames)
    ):
        return None, i  # cut: the frames shown are not where the thread was
    summary = None
    if exc is not None:
        summary = f"{exc[0]}: {exc[1]}" if exc[1] else exc[0]
    thread = ThreadStack(frames=tuple(reversed(frames)), is_main=True, exception=summary)
    block = Block(kind="traceback", start=start, threads=[thread], end=lines[i - 1][0])
    if exc is not None:
        block.exc_type, block.exc_message = exc
        block.end = lines[i][0]
        i += 1
    return block, i


def _second_frame(lines: Lines, i: int) -> int | None:
    """The indent of the frame line after the first one and its source line."""
    source, nxt = lines[i + 1][1], lines[i + 2][1]
    m = _TB_FRAME.match(nxt)
    if m is None or _TB_FRAME.match(source) is not None or not source.strip():
        return None
    indent = len(m.group("indent"))
    source_indent = len(source) - len(source.lstrip(" \t"))
    return indent if source_indent > indent else None


def _faulthandler(lines: Lines, i: int) -> tuple[Block | None, int]:
    start = lines[i][0]
    frames: list[Frame] = []
    while i < len(lines) and (m := _FH_FRAME.match(lines[i][1])) is not None:
        frames.append(_frame(m))
        i += 1
    if len(frames) < _MIN_FRAMES:
        return None, i
    thread = ThreadStack(frames=tuple(frames), is_main=True)
    block = Block(kind="faulthandler", start=start, threads=[thread], dump=True)
    block.end = lines[i - 1][0]
    return block, i
