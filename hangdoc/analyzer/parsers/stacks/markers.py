"""Rank, local rank and pid markers that people and launchers write near a stack.

A wrong rank is worse than an unknown one (hangdoc/common/rank_names.py), so a marker counts only
when it is *near* a block: a header line that says nothing else (``=== rank 3 ===``,
``RANK=3``, ``GLOBAL_RANK: 3``, ``========rank0====``) holds until the next header,
and any other line that names one rank counts for the block right below it (within
``NEAR_LINES`` lines), e.g. the ``[Rank 3] Watchdog caught…`` line over a C++ stack.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.literals import gate
from hangdoc.common.rank_names import rank_from_name

NEAR_LINES = 3

# Not a number glued to a word (``{rank:05d}``, a format spec in a traceback's source line:
# code, not output).
_RANK_ANY = re.compile(
    r"(?<![\w.-])(?:global[_ ]?)?rank(?:\s*[:=#]\s*|\s+|(?=\d))(\d{1,6})(?![\w.])", re.IGNORECASE
)
# A line that is only a marker: punctuation, the word, the number, punctuation.
_RANK_HEADER = re.compile(
    r"^[\W_]*(?:global[_ ]?)?rank(?:\s*[:=#-]\s*|\s+|(?=\d))(\d{1,6})[\W_]*$", re.IGNORECASE
)
_LOCAL_HEADER = re.compile(
    r"^[\W_]*local[_ ]?rank(?:\s*[:=#-]\s*|\s+|(?=\d))(\d{1,6})[\W_]*$", re.I
)
# Commands and tool output that name the inspected process.
_PID = re.compile(
    r"(?:\bpy-spy dump\b.*?(?:--pid|-p)\s*=?\s*|\bpystack remote\s+(?:--\S+\s+)*|\bpstack\s+|"
    r"\bgdb\b.*?(?:-p|--pid|attach)\s*=?\s*|Attaching to process\s+|"
    r"Stack dump for \S+\s+)(\d{2,9})\b"
)
# Asked of every line a stack scan does not take: most hold none of the commands' words,
# which one search for them tells (the pattern's own search tries each alternative at
# every position: 4 µs a line, 0.1 s of a 4 MiB paste).
_PID_SEARCH = gate(_PID).search


def header_rank(text: str) -> int | None:
    """The rank of a line that is nothing but a rank header."""
    m = _RANK_HEADER.match(text.strip())
    return int(m.group(1)) if m else None


# A label a person types over one rank's paste: the rank and words that name what follows
# ("Rank 3 py-spy dump", "rank 3 stack:", "== rank 3 log ==").
_LABEL = re.compile(
    r"^[\W_]*(?:global[_ ]?)?rank(?:\s*[:=#-]\s*|\s+|(?=\d))(\d{1,6})[\W_]*"
    r"(?:(?:py-?spy|dump|stacks?|traces?|traceback|backtrace|bt|gdb|faulthandler|logs?|output"
    r"|stdout|stderr|console|threads?|process)[\W_]*)+$",
    re.IGNORECASE,
)


# The header GNU head and tail print over each of several files (coreutils' tail.c and
# head.c: ``"==> %s <==\n"``): ``tail -n 50 rank*.txt`` pasted whole. The file's name says
# the rank as it would for the file itself (common/rank_names.py), or nothing.
_FILE_HEADER = re.compile(r"^==> (.+) <==$")


def file_header(text: str) -> bool:
    """Whether the line is head's or tail's header over a file: what is above it belongs to
    another file, whatever rank it names."""
    return _FILE_HEADER.match(text.strip()) is not None


def label_rank(text: str) -> int | None:
    """The rank of a line that is nothing but a rank header, a typed label, or head's and
    tail's header over a file whose name says its rank."""
    stripped = text.strip()
    m = _RANK_HEADER.match(stripped) or _LABEL.match(stripped)
    if m:
        return int(m.group(1))
    if (f := _FILE_HEADER.match(stripped)) is not None:
        return rank_from_name(f.group(1).strip()).rank
    return None


def header_local_rank(text: str) -> int | None:
    m = _LOCAL_HEADER.match(text.strip())
    return int(m.group(1)) if m else None


def any_rank(text: str) -> int | None:
    """The rank a line names, when it names exactly one (``rank 0 and rank 3`` names none)."""
    found = {int(m.group(1)) for m in _RANK_ANY.finditer(text)}
    return found.pop() if len(found) == 1 else None


def pid_marker(text: str) -> int | None:
    m = _PID_SEARCH(text)
    return int(m.group(1)) if m else None


_SRUN_LABEL = re.compile(r"^ {0,4}(\d{1,5}): ")
_SRUN_SAMPLE = 400
_SRUN_SHARE = 0.6


def relabel_srun(text: str) -> str:
    """``srun --label`` prints ``3: line``; when most lines carry it, rewrite it as the
    ``[rank3]:`` prefix that ``prefixes.peel`` knows, so streams split by task."""
    lines = text.split("\n", _SRUN_SAMPLE)[:_SRUN_SAMPLE]
    meaningful = [line for line in lines if line.strip()]
    if not meaningful:
        return text
    hits = sum(1 for line in meaningful if _SRUN_LABEL.match(line))
    if hits < _SRUN_SHARE * len(meaningful) or hits < 2:
        return text
    return _SRUN_LABEL_M.sub(r"[rank\1]: ", text)


_SRUN_LABEL_M = re.compile(r"^ {0,4}(\d{1,5}): ", re.MULTILINE)
