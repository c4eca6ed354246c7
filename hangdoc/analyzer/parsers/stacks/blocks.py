"""What a recogniser returns: one block of stack text, before it is given a rank.

A block is the unit the assembler attributes: a gdb ``thread apply all bt`` is one
block of several threads, a traceback one block of one thread, a py-spy segment one
block per ``Process`` dump. ``dump`` marks blocks that are a snapshot of a whole
process (a new one of the same kind starts a new sample); the others (tracebacks,
C++ exception stacks) are post-mortem records that join the snapshot they sit near.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.model import ChildStacks, ThreadStack

# (1-based line number, text without launcher prefixes)
Lines = list[tuple[int, str]]

# Pager prompts gdb prints in an interactive session; pasted along with the frames.
PAGER = re.compile(r"-{2,3}\s*Type <(?:return|RET)> .*?-{2,3}\s?")


@dataclass(slots=True)
class Block:
    """One recognised piece of stack text."""

    kind: str  # traceback | py-bt | gdb | pystack | cpp | pyspy | faulthandler
    start: int  # line number of its first line
    threads: list[ThreadStack] = field(default_factory=list)
    dump: bool = False  # a snapshot of a whole process (else a post-mortem record)
    pid: int | None = None
    cmdline: str | None = None
    children: list[ChildStacks] = field(default_factory=list)
    exc_type: str | None = None
    exc_message: str | None = None
    exited: bool = False  # the record says the process ended (fatal signal...)
    timeout: str | None = None  # faulthandler's "Timeout (0:00:05)!": the job's timer fired
    end: int = 0  # line number of its last line
    # A traceback cut before its exception line: a position of its thread, never its end.
    cut: bool = False


def strip_pager(text: str) -> str:
    """Drop gdb's "--Type <RET> for more…--" prompt wherever the paste put it."""
    return PAGER.sub("", text) if "Type <" in text else text
