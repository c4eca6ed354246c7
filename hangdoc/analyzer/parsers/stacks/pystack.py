"""pystack (``pystack remote PID`` / ``pystack core CORE``) text.

Each thread is ``Traceback for thread 1234 (python) [Has the GIL] (most recent call
last):`` followed by ``(Python) File "…", line N, in f`` frames (outermost first) with
their source lines, and with ``--native`` ``(C) File "…", line N, in f (lib.so)``
frames in between. The GIL states pystack prints become ``owns_gil``; the thread whose
id is the process id, or whose outermost Python frame is ``<module>``, is the main one.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import Frame, ThreadStack
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines

PYSTACK_START = re.compile(
    r"Traceback for thread (\d+)(?: \((.*?)\))?((?: \[[^\]]*\])*) \(most recent call last\):\s*$"
)
_PY_FRAME = re.compile(r'\(Python\) File "(.*)", line (\d+|\?), in (.*?)\s*$')
_C_FRAME = re.compile(
    r'\(C\) File "(.*)", line (\d+|\?), in (.*?)(?: \(inlined\))?(?: \((\S*)\))?\s*$'
)
PYSTACK_FRAME_START = re.compile(r'\((?:Python|C)\) File "')


def parse_pystack(lines: Lines, i: int) -> tuple[Block | None, int]:
    """Consecutive pystack thread tracebacks of one process from ``lines[i]``."""
    start = lines[i][0]
    threads: list[ThreadStack] = []
    seen: set[int] = set()
    # A paste cut above its first header still has its frames: one thread, no id.
    headless = PYSTACK_FRAME_START.match(lines[i][1].strip()) is not None
    while i < len(lines):
        header = PYSTACK_START.match(lines[i][1].strip())
        if header is None and not (headless and not threads):
            stripped = lines[i][1].strip()
            if not stripped:
                i += 1
                continue
            break
        tid = int(header.group(1)) if header else None
        if tid is not None and tid in seen:
            break  # the next report of the same process
        if tid is not None:
            seen.add(tid)
        status = (header.group(3) if header else "") or ""
        frames: list[Frame] = []
        i += 1 if header else 0
        while i < len(lines):
            stripped = lines[i][1].strip()
            if m := _PY_FRAME.match(stripped):
                line = int(m.group(2)) if m.group(2).isdigit() else None
                frames.append(Frame(function=m.group(3), file=m.group(1), line=line))
            elif m := _C_FRAME.match(stripped):
                line = int(m.group(2)) if m.group(2).isdigit() else None
                file = m.group(1) if m.group(1) not in ("???", "") else (m.group(4) or "??")
                frames.append(
                    Frame(
                        function=m.group(3).removesuffix(" ()"), file=file, line=line, native=True
                    )
                )
            elif (
                not stripped
                or lines[i][1][:1] in " \t"
                or stripped.startswith(("(", "Arguments", "Locals"))
            ):
                pass  # source lines, locals, "(no Python frames)"
            else:
                break
            i += 1
        outer_py = next((f for f in frames if not f.native), None)
        threads.append(
            ThreadStack(
                frames=tuple(reversed(frames)),
                os_thread_id=tid,
                name=header.group(2) if header else None,
                owns_gil=True
                if "Has the GIL" in status
                else (False if "Waiting for the GIL" in status else None),
                is_main=outer_py is not None and outer_py.function == "<module>",
            )
        )
    if not threads:
        return None, i + 1
    return Block(kind="pystack", start=start, threads=threads, dump=True, end=lines[i - 1][0]), i
