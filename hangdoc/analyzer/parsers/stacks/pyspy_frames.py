"""py-spy frames pasted without py-spy's ``Process``, ``Python`` and ``Thread`` lines.

A reporter who pastes the stacks of several ranks often keeps only the frames of each
(``    all_reduce (torch/distributed/distributed_c10d.py:2050)``), one rank under the label
they typed, threads apart by a blank line if at all. The frames are py-spy's own format
(``src/dump.rs``: ``NAME (FILENAME:LINE)``, ``NAME (FILENAME)`` when the line is 0,
innermost first, four spaces in), so they are known by their shape: a run of such lines,
at least two, one naming a Python file and line. A blank line between two runs parts two
threads of the same dump (py-spy prints none between threads, so a reporter's blank line
is the only boundary left); anything else ends the dump. A thread of one frame (a main
thread whose script has ended, left in threading's ``_shutdown``) is one of the dump when
a thread gap parts it from another run of the dump and its function is a code name: the
frames around it say what it is, where one such line alone could be any log line.

Which thread is the main one is what its frames say: its outermost frame is the script's
``<module>``, where every other thread's is ``Thread._bootstrap`` (or the thread pool's
worker); failing that, the first thread threading did not start (a main thread in
``_shutdown``), else the first thread shown (py-spy prints the main thread first).
What py-spy's thread line said (idle, active, the GIL) is unknown here and left unknown.

A paste of several processes' frames keeps no header between them either, only the
reporter's gap, so the gap alone cannot part processes from threads; the frames can. A
process has one main thread: a run that is a main thread's after another run that is one
starts the next process's dump (the scan gives it a process of its own). A run is a main
thread's when its outermost frame is the script's ``<module>``, or when it waits inside
torch.distributed's collective API and was not started by ``threading``
(``pyspy_json.looks_main``).
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import Frame, ThreadStack
from hangdoc.analyzer.parsers.pyspy_json import is_native, looks_main
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines

# One frame line: a function name (no parentheses of its own but "<locals>"-style
# brackets), a space, and a source location in parentheses that names a file: a Python
# file with or without its line, "<frozen …>"/"<string>", or a native library.
FRAME = re.compile(
    r"\s*(?P<fn>[^\s()][^()]*?) \((?:(?P<file>[\w.<>~+\-/ ]*?\.(?:py|pyx|pyi)|<[\w. \-]+>)"
    r"(?::(?P<line>\d+))?|(?P<lib>[\w.+\-/]+\.so(?:\.[\d.]+)?))\)\s*$"
)
_MIN_FRAMES = 2
_LOOK_FOR_LINE = 8
_MAX_BLANKS = 2  # blank lines a reporter leaves between two threads of one rank
_MAIN_BOTTOM = "<module>"
_THREAD_BOTTOM = "_bootstrap"  # threading's Thread._bootstrap (older py-spy: _bootstrap)
_SPACE = re.compile(r"\s")


def _starts_run(lines: Lines, i: int) -> bool:
    """Two frame lines in a row at ``i``, and a Python file with its line among the run's
    first few (native frames and built-ins name none)."""
    run = []
    for _, text in lines[i : i + _LOOK_FOR_LINE]:
        m = FRAME.match(text)
        if m is None:
            break
        run.append(m)
    return len(run) >= _MIN_FRAMES and any(m.group("line") is not None for m in run)


def _blanks_after(lines: Lines, i: int) -> int:
    """How many blank lines (at most ``_MAX_BLANKS``, the gap between two threads) start
    at ``i``."""
    blanks = 0
    while i + blanks < len(lines) and blanks < _MAX_BLANKS and not lines[i + blanks][1].strip():
        blanks += 1
    return blanks


def _one_frame(lines: Lines, i: int) -> bool:
    """A frame line at ``i`` whose function is a code name (no spaces: a log message
    that ends in a file and line has words) and that names a Python file and line."""
    if i >= len(lines):
        return False
    m = FRAME.match(lines[i][1])
    return m is not None and m.group("line") is not None and not _SPACE.search(m.group("fn"))


def starts_frames(lines: Lines, i: int) -> bool:
    """A run of frames at ``i`` (``_starts_run``), or a thread of one frame (a main
    thread left in threading's ``_shutdown``) that a thread gap parts from such a run:
    the frames after it say the paste is a dump, where one frame line alone could be any
    log line. (Not by indent: a paste's undone code-block indentation may have taken the
    run's and left the lone line's.)"""
    if _starts_run(lines, i):
        return True
    if not _one_frame(lines, i) or (i + 1 < len(lines) and FRAME.match(lines[i + 1][1])):
        return False
    after = i + 1 + _blanks_after(lines, i + 1)
    return after > i + 1 and _starts_run(lines, after)


def _frame(m: re.Match[str]) -> Frame:
    if m.group("lib") is not None:
        return Frame(function=m.group("fn"), file=m.group("lib"), native=True)
    line = m.group("line")
    file = m.group("file")
    return Frame(
        function=m.group("fn"),
        file=file,
        line=int(line) or None if line else None,
        native=is_native(m.group("fn"), file),
    )


def _main_run(runs: list[list[Frame]]) -> int:
    """The main thread's run: the one whose outermost frame is the script's ``<module>``;
    failing that (a main thread whose script has ended, left in threading's
    ``_shutdown``), the first one not started by ``threading`` (``Thread._bootstrap``);
    failing that, the first (py-spy prints the main thread first)."""
    bottoms = [run[-1].function for run in runs]
    if _MAIN_BOTTOM in bottoms:
        return bottoms.index(_MAIN_BOTTOM)
    return next((k for k, b in enumerate(bottoms) if not b.endswith(_THREAD_BOTTOM)), 0)


def parse_pyspy_frames(lines: Lines, i: int) -> tuple[Block | None, int]:
    """The threads of one headless py-spy dump from ``i``: frame runs parted by at most
    ``_MAX_BLANKS`` blank lines, up to a second main thread's run (another process)."""
    start = lines[i][0]
    runs: list[list[Frame]] = []
    end = i
    while i < len(lines):
        run: list[Frame] = []
        while i < len(lines) and (m := FRAME.match(lines[i][1])) is not None:
            run.append(_frame(m))
            i += 1
        if len(run) < (1 if runs or starts_frames(lines, i - len(run)) else _MIN_FRAMES):
            break  # (a thread of one frame is one when the frames around it say so)
        if runs and looks_main(run) and any(looks_main(r) for r in runs):
            break  # another process's main thread: the scan reads its dump next
        runs.append(run)
        end = i
        blanks = _blanks_after(lines, i)
        i += blanks
        if not blanks or not (starts_frames(lines, i) or _one_frame(lines, i)):
            break
    if not runs:
        return None, max(i, end + 1)
    main = _main_run(runs)
    threads = [ThreadStack(frames=tuple(run), is_main=k == main) for k, run in enumerate(runs)]
    block = Block(kind="pyspy", start=start, threads=threads, dump=True)
    block.end = lines[end - 1][0]
    return block, end
