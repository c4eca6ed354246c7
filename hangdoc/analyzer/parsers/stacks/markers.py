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


# A label that names the process by its pid, as people copy it from ``ps``, ``top`` or
# the launcher (``node-1:24036``, ``pid 24036``, ``PID=24036``), or the command they ran on
# it (_PID: ``$ py-spy dump --pid 24036``), with at most a rank beside it (``(rank 3)``,
# ``# rank 3``). A bare ``host:number`` is also how an address and its port are written
# (``MASTER_ADDR:29500``): it is a label only with a rank beside it.
_HOST_PID = re.compile(r"(?<![\w.:/@-])[A-Za-z][\w.-]*:(\d{2,9})(?![\w.:/])")
_PID_WORD = re.compile(r"(?<![\w.-])pid\s*[:=#]?\s*(\d{2,9})(?![\w.])", re.IGNORECASE)
# What is left of a label once its pid is taken out: punctuation (a prompt's "$", the
# brackets) and spaces only.
_NOTHING_ELSE = re.compile(r"^[\W_]*$")
# A label is a short line: the text path's and the line window's rank labels are under 60
# characters; a pid and a command take a little more.
_MAX_PID_LABEL = 100


def may_name_process(text: str) -> bool:
    """Whether a line may be a label that names a process by its pid (``process_label``):
    one with a rank beside the pid holds "rank" ("ank" or "ANK"), one without holds "pid"
    (a command with ``-p`` and no rank beside it is no label; ``pid_marker`` still reads
    it for the stack right below it)."""
    return "ank" in text or "ANK" in text or "pid" in text or "PID" in text


def process_label(text: str) -> tuple[int | None, int | None] | None:
    """(rank, pid) of a line that is nothing but a label over one process's paste: a
    rank label (``label_rank``: ``rank 3:``, ``=== Rank 3 ===``), or one that names the
    process by its pid (a ``host:pid`` pair, ``pid N``, the command run on it), with
    nothing beside the pid but a rank (``node-1:24036 (rank 3)``, ``$ py-spy dump --pid
    24036  # rank 3``). The pid is what py-spy's ``Process N:`` header of the dump under
    it says, which ties the label, and so the log lines under it, to those stacks."""
    stripped = text.strip()
    if (rank := label_rank(stripped)) is not None:
        return rank, None
    return pid_label(stripped)


def pid_label(text: str) -> tuple[int | None, int] | None:
    """(rank or None, pid) of a label that names the process by its pid (``process_label``
    less the rank labels)."""
    if not may_name_process(text) or len(stripped := text.strip()) >= _MAX_PID_LABEL:
        return None
    for pattern, bare in ((_PID, True), (_PID_WORD, True), (_HOST_PID, False)):
        for m in pattern.finditer(stripped):
            rest = stripped[: m.start()] + " " + stripped[m.end() :]
            if bare and _NOTHING_ELSE.match(rest):
                return None, int(m.group(1))
            said = _RANK_HEADER.match(rest.strip()) or _LABEL.match(rest.strip())
            if said is not None:
                return int(said.group(1)), int(m.group(1))
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
