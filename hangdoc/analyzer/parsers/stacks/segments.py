"""py-spy text and faulthandler dumps found inside a longer text.

The existing parsers (pyspy_text, faulthandler) parse a whole file of their format;
here a run of their lines is cut out of a mixed text (up to the first line that is
not theirs) and handed to the same line parsers, so a dump reads the same pasted alone
or between an NCCL log and a gdb backtrace.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import ChildStacks
from hangdoc.analyzer.parsers.faulthandler import parse_fault_lines
from hangdoc.analyzer.parsers.pyspy_text import parse_dump_lines
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines

PYSPY_PROCESS = re.compile(r"Process (\d+):\s?(.*)$")
PYSPY_THREAD = re.compile(r'Thread (0[xX][0-9a-fA-F]+|\d+)(?: \(([\w+ -]*)\))?(?:: "(.*)")?\s*$')
_PYSPY_OTHER = re.compile(r"(?:Parent Process \d+:|Python v\d|Error:)")
FH_THREAD = re.compile(
    r"(?:Current thread|Thread) 0x[0-9a-fA-F]+(?: \[.*\])? \(most recent call first\):$"
    r"|Stack \(most recent call first\):$"
)
FH_HEADER = re.compile(r"(?:Fatal Python error|Windows fatal exception): |Timeout \(\d+:\d\d:\d\d")
_FH_OTHER = re.compile(
    r"(?:Extension modules:|Current thread's C stack trace|<no Python frame>|\.\.\.$|"
    r"Python runtime state:|Binary file|Thread 0x)"
)


def starts_pyspy(lines: Lines, i: int) -> bool:
    text = lines[i][1]
    if PYSPY_PROCESS.match(text):
        return any(PYSPY_THREAD.match(t) for _, t in lines[i + 1 : i + 4])
    if PYSPY_THREAD.match(text) and i + 1 < len(lines):
        nxt = lines[i + 1][1]
        return nxt[:1] in " \t" and "(" in nxt
    return False


def starts_faulthandler(lines: Lines, i: int) -> bool:
    text = lines[i][1].strip()
    if FH_THREAD.match(text):
        return True
    return bool(FH_HEADER.match(text)) and any(
        FH_THREAD.match(t.strip()) for _, t in lines[i + 1 : i + 4]
    )


def _run(lines: Lines, i: int, own: re.Pattern[str]) -> int:
    """Index after the run of lines from ``i`` that are blank, indented or ``own``."""
    j = i + 1
    while j < len(lines):
        text = lines[j][1]
        if text.strip() and text[:1] not in " \t" and not own.match(text.strip()):
            break
        j += 1
    while j > i + 1 and not lines[j - 1][1].strip():
        j -= 1
    return j


_PYSPY_OWN = re.compile(f"{PYSPY_PROCESS.pattern}|{PYSPY_THREAD.pattern}|{_PYSPY_OTHER.pattern}")
_FH_OWN = re.compile(f"{FH_THREAD.pattern}|{FH_HEADER.pattern}|{_FH_OTHER.pattern}")


def parse_pyspy_segment(
    lines: Lines, i: int, source: str, notes: list[str]
) -> tuple[list[Block], int]:
    """Every ``Process`` dump in the py-spy run at ``i``: one block each, ``-s``
    subprocess dumps attached to their parent's block as children."""
    end = _run(lines, i, _PYSPY_OWN)
    blocks: list[Block] = []
    by_pid: dict[int, Block] = {}
    for dump in parse_dump_lines(lines[i:end], source, notes):
        if dump.parent_pid is not None and dump.parent_pid in by_pid and dump.pid is not None:
            parent = by_pid[dump.parent_pid]
            if all(c.pid != dump.pid for c in parent.children):
                parent.children.append(ChildStacks(dump.pid, tuple(dump.threads), dump.cmdline))
            continue
        if not dump.threads:
            continue
        block = Block(
            kind="pyspy",
            start=dump.line,
            threads=list(dump.threads),
            dump=True,
            pid=dump.pid,
            cmdline=dump.cmdline,
            end=lines[end - 1][0],
        )
        blocks.append(block)
        if dump.pid is not None:
            by_pid[dump.pid] = block
    return blocks, end


def parse_fault_segment(
    lines: Lines, i: int, source: str, notes: list[str]
) -> tuple[list[Block], int]:
    """Every faulthandler dump in the run at ``i``; a fatal one ends its process."""
    end = _run(lines, i, _FH_OWN)
    blocks: list[Block] = []
    for dump in parse_fault_lines(lines[i:end], source, notes):
        block = Block(
            kind="faulthandler",
            start=dump.line,
            threads=list(dump.to_threads(source)),
            dump=True,
            end=lines[end - 1][0],
        )
        # faulthandler re-raises a fatal signal: the process died. The event itself
        # is the log parser's to report (it reads the same file), not counted twice;
        # its timer's header ("Timeout (0:00:05)!") is no log line: the scan reports it.
        block.exited = bool(dump.fatal)
        block.timeout = dump.timeout
        blocks.append(block)
    return blocks, end
