"""The stacks of a text, composed with what the log recognisers made of the same text.

``attach_stacks`` is the stacks side of the one text path (``analyzer/parsers/text.py``):
it scans the text for stacks of every format (``scan.scan_text``) and adds them to the
log side's ``ParsedFile``, for the same ranks: a lone process of stacks takes the one rank
the log names, else the file's; an exception event moves to the rank a marker near its
traceback names. A traceback is therefore two records that agree: a thread that raised
(``ThreadStack.exception``, for the stack rules) and a log event (for the timeline), on the
same rank. ``mostly_stacks`` says whether a text is a paste of stacks rather than a log.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from hangdoc.analyzer.model import LogEvent, ProcessEvidence
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile, decode_bytes
from hangdoc.analyzer.parsers.logs.literals import any_of, gate
from hangdoc.analyzer.parsers.stacks import markers, pyspy_frames
from hangdoc.analyzer.parsers.stacks.scan import MAX_BLOCKS, ScanResult, Span, scan_text
from hangdoc.analyzer.vocabulary import EventKind, RankFrom
from hangdoc.common.rank_names import Trailing, rank_from_name

# Stacks are read from at most this much of a file (its tail when larger): a 10 GB
# log's stacks that matter are near its end, and the scan keeps every line in memory
# (about a second per MiB of dense stacks).
STACK_TEXT_BYTES = 4 * 1024 * 1024
# A file whose lines are at least this share stack lines is a stacks file.
_MOSTLY = 0.5
# First lines of the formats only this package reads, after any launcher prefix.
_NEW_START = re.compile(
    r"^(?:.*\]: ?|\d{1,5}: )?\s*(?:Traceback \(most recent call|"
    r"Thread \d+ \((?:Thread 0x|LWP)|#\d+ |"
    r"Exception raised from \S+ at|frame #\d+: |\((?:Python|C)\) File \"|Traceback for thread \d+|"
    r"File \"[^\"\n]+\", line \d+, in )",
    re.MULTILINE,
)
# The same first lines behind any line prefix (a shipper's time stamp, kubectl's or
# docker's tag, a colour code: scan_text peels them): only the tokens specific enough to
# be searched anywhere in a line.
_NEW_START_ANYWHERE = re.compile(
    r"Traceback \(most recent call|Thread \d+ \((?:Thread 0x|LWP)|#\d+ +0x[0-9a-fA-F]+ in |"
    r"Exception raised from \S+ at|frame #\d+: |\((?:Python|C)\) File \"|Traceback for thread \d+|"
    r'File "[^"\n]+", line \d+,? in '
)
# py-spy and faulthandler dumps, which their own parsers read unless rank markers the
# scan understands sit over several of them.
_DUMP_START = re.compile(
    r"^(?:.*\]: ?)?(?:Process \d+:|"
    r"(?:Current thread|Thread) 0x[0-9a-fA-F]+ .*most recent call first)",
    re.MULTILINE,
)
# Any stack at all, for the log parser's call: most logs hold none, and one C-level
# search is all they then cost.
_ANY_STACK = re.compile(
    f"{_NEW_START.pattern}|{_DUMP_START.pattern}"
    # a faulthandler dump pasted without its thread line (parsers/stacks/headless.py)
    r'|^(?:.*\]: ?)?\s*File "[^"\n]+", line \d+ in \S'
    r"|^(?:.*\]: ?)?\s*(?:Thread (?:0x[0-9a-fA-F]+|\d+) \((?:idle|active|gil)"
    r"|Stack \(most recent call first\))",
    re.MULTILINE,
)
# The end of a py-spy frame line ("… (train.py:12)"): where frames pasted without their
# thread line may be (parsers/stacks/pyspy_frames.py), each such place then checked.
_PYSPY_FRAME_END = re.compile(r"\.py:\d+\)[ \t]*$", re.MULTILINE)
_MAX_FRAME_CHECKS = 200
# A terminal's colour codes (SGR, with their ESC).
_COLOUR = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def any_stack(text: str, shapes: Iterable[bytes] | None = None) -> bool:
    """Any stack in the text? Searched one pattern at a time: one alternation of them
    all costs several times their sum. A terminal's colours inside a header ("Thread
    \\x1b[33m9106\\x1b[0m (idle)") are looked through, as the scan does.

    ``shapes``: the shapes (prefilter.line_shape) of the text's lines, where the log side
    has them (a log read whole): every literal looked for in the whole text here (the
    stack words, a py-spy frame's ".py:", a colour's ESC) is then looked for in the few
    dozen distinct shapes joined, not in the whole text (each a pass over it: 0.4 to
    0.8 ms a MB)."""
    seen = _distinct_shapes(shapes)
    if _any_plain_stack(text, seen):
        return True
    return _COLOUR_START in (text if seen is None else seen) and _any_plain_stack(
        _COLOUR.sub("", text)
    )


def _distinct_shapes(shapes: Iterable[bytes] | None) -> str | None:
    """The text's distinct line shapes joined by newlines, where they serve
    (_SHAPES_SERVE): a line holds a literal without an ASCII digit or a newline exactly
    where its shape does; None where there are no shapes."""
    if shapes is None or not _SHAPES_SERVE:
        return None
    return b"\n".join(set(shapes)).decode("utf-8", errors="replace")


# _ANY_STACK behind the literals each of its matches holds (parsers/logs/literals.py): a
# rank's 1 MB log holds none of them, found in a third of the search's time (2.7 ms).
_ANY_STACK_GATED = gate(_ANY_STACK)


def _covered(words: frozenset[str] | None, pattern: re.Pattern[str]) -> frozenset[str] | None:
    """``words`` where every match of ``pattern`` holds one of them (each branch of its
    gate has a required set of literals among them), else None."""
    branches = gate(pattern).branches
    if words is None or not branches:
        return None
    covered = all(any(part <= words for part in branch) for branch in branches)
    return words if covered else None


# The literals any match of _ANY_STACK holds, when every match of _NEW_START_ANYWHERE
# holds one too ("#" of gdb's frame, "Thread ", 'File "' …): one search for them, and a
# text that holds none (a rank's log) holds no match of either, where each pattern's
# search was a pass over the whole text (2.3 ms a MB each).
_STACK_WORDS = _covered(_ANY_STACK_GATED.first_literals(), _NEW_START_ANYWHERE)
_HOLDS_STACK_WORD = any_of(_STACK_WORDS) if _STACK_WORDS is not None else None
# A line holds a word without an ASCII digit or a newline exactly where its shape does
# (the shape is the line with each ASCII digit made 0): so a text's lines hold one of
# the stack words exactly where their distinct shapes do, joined by newlines.
# A colour's start (_COLOUR), and the literal every _PYSPY_FRAME_END match holds.
_COLOUR_START = "\x1b["
_FRAME_END_WORD = ".py:"
_SHAPES_SERVE = _STACK_WORDS is not None and not any(
    char in "0123456789\n"
    for word in (*_STACK_WORDS, _COLOUR_START, _FRAME_END_WORD)
    for char in word
)


def _holds_stack_word(text: str, shapes: Iterable[bytes] | None) -> bool:
    assert _HOLDS_STACK_WORD is not None
    seen = _distinct_shapes(shapes)
    return _HOLDS_STACK_WORD(text if seen is None else seen)


def _any_plain_stack(text: str, shapes: str | None = None) -> bool:
    """``shapes``: _distinct_shapes of the text's lines (None: look in the text)."""
    if _HOLDS_STACK_WORD is None:
        if _ANY_STACK_GATED.search(text) or _NEW_START_ANYWHERE.search(text):
            return True
    elif _HOLDS_STACK_WORD(text if shapes is None else shapes) and (
        _ANY_STACK_GATED.search_held(text) or _NEW_START_ANYWHERE.search(text)
    ):
        return True
    if shapes is not None and _FRAME_END_WORD not in shapes:
        return False  # no line ends as a py-spy frame does (each such end holds ".py:")
    for checked, m in enumerate(_PYSPY_FRAME_END.finditer(text)):
        if checked >= _MAX_FRAME_CHECKS:
            break
        start = text.rfind("\n", 0, m.start()) + 1
        after = text.find("\n", m.end() + 1)
        pair = text[start : after if after >= 0 else len(text)].split("\n")
        if len(pair) == 2 and all(pyspy_frames.FRAME.match(line) for line in pair):
            return True
    return False


_NEW_FORMATS = frozenset({"traceback", "py-bt", "gdb", "pystack", "cpp", "stack-print"})
_EXCEPTION_KIND = EventKind.EXCEPTION


def extract_stacks(text: str, display: str) -> list[ProcessEvidence]:
    """Every stack in ``text`` as processes (rank None where nothing says which)."""
    return scan_text(text, display, []).processes


def attach_stacks(
    parsed: ParsedFile,
    text: str,
    truncated: bool,
    display: str,
    *,
    in_log: bool,
    max_blocks: int = MAX_BLOCKS,
    shapes: Iterable[bytes] | None = None,
) -> ParsedFile:
    """Add the stacks of ``text`` (a file's text, its tail when ``truncated``) to what the
    log recognisers made of the same file.

    ``in_log``: the text is a log or a console rather than a paste of stacks, so the
    records of consequences in it are left out as stacks (``scan.logged_elsewhere``).
    Exception events the log side could not attribute move to the rank a marker near
    their traceback names; a lone process of stacks with no rank takes the one rank the
    log gave the file, else a rank in the file name. ``max_blocks``: ``scan_text``'s;
    ``shapes``: ``any_stack``'s. Never raises on odd text."""
    found = scan_stacks(
        text, display, parsed.notes, in_log=in_log, max_blocks=max_blocks, shapes=shapes
    )
    return parsed if found is None else compose_stacks(parsed, found, truncated, display)


def scan_stacks(
    text: str,
    display: str,
    notes: list[str],
    *,
    in_log: bool,
    max_blocks: int = MAX_BLOCKS,
    shapes: Iterable[bytes] | None = None,
) -> ScanResult | None:
    """``attach_stacks``'s first half, which needs nothing of the log side: the stacks of
    ``text`` (None when it holds none, or when reading them failed: ``notes`` says why).
    Never raises on odd text."""
    try:
        if not any_stack(text, shapes):
            return None
        return scan_text(text, display, notes, in_log=in_log, max_blocks=max_blocks)
    except Exception as exc:  # a bug here must not cost the log what the log side read
        notes.append(f"{display}: stacks not read ({type(exc).__name__}: {exc})")
        return None


def compose_stacks(
    parsed: ParsedFile, found: ScanResult, truncated: bool, display: str
) -> ParsedFile:
    """``attach_stacks``'s second half: ``found`` (``scan_stacks`` of the same file) given
    the ranks the log side read and added to its processes."""
    _rank_lone_process(found.processes, parsed, display)
    if not truncated:
        # The log side numbers the lines of the whole file; a tail read here does not,
        # so its events are matched to tracebacks only when both count alike.
        _rehome_exceptions(parsed, found.spans, found.processes)
    parsed.processes.extend(found.processes)
    return parsed


def _rank_lone_process(stacks: list[ProcessEvidence], parsed: ParsedFile, display: str) -> None:
    if len(stacks) != 1 or stacks[0].rank is not None:
        return
    log_ranks = {p.rank for p in parsed.processes if p.rank is not None}
    if len(log_ranks) == 1:
        stacks[0].rank = log_ranks.pop()
        return
    if log_ranks:
        return
    named = rank_from_name(Path(display), Trailing.ONE_PROCESS)
    rank, how = named.rank, named.how
    if rank is not None:
        stacks[0].rank = rank
        parsed.notes.append(f"{display}: rank {rank} taken from {how}")


def moved_event(event: LogEvent, how: RankFrom) -> LogEvent:
    """The event as given to a rank by ``how`` (a marker near it, a label above it); an
    event that already says how its rank was found keeps that."""
    if event.rank_from is not None:
        return event
    return dataclasses.replace(event, rank_from=how)


def _rehome_exceptions(
    parsed: ParsedFile, spans: list[Span], stacks: list[ProcessEvidence]
) -> None:
    ranked = [s for s in spans if s.rank is not None]
    if not ranked or not parsed.job_log_events:
        return
    by_rank = {p.rank: p for p in stacks if p.rank is not None}
    keep: list[LogEvent] = []
    for event in parsed.job_log_events:
        span = None
        if event.kind == _EXCEPTION_KIND and event.line is not None:
            span = next((s for s in ranked if s.first <= event.line <= s.last + 1), None)
        if span is None or span.rank not in by_rank:
            keep.append(event)
            continue
        by_rank[span.rank].log_events.append(moved_event(event, RankFrom.STACK_MARKER))
    parsed.job_log_events = keep


# _NEW_START and _DUMP_START behind the literals each of their matches holds
# (parsers/logs/literals.py): a rank log's 64 KiB head holds none, refused in about half
# of each search's time (_NEW_START_ANYWHERE's literals, " in " among them, are in every
# log: searched plain).
_NEW_START_GATED = gate(_NEW_START)
_DUMP_START_GATED = gate(_DUMP_START)


def mostly_stacks(head: bytes, log_sniff: Callable[[bytes], bool]) -> bool:
    """Is this head a paste of stacks rather than a log? Stacks only this package reads,
    making up most of the head (or in a text ``log_sniff``, the log recognisers' own
    test, would refuse); or several py-spy/faulthandler dumps under rank markers.

    A paste of stacks keeps its records of consequences (a timeout's traceback, the
    watchdog's C++ stack) as stacks; a log leaves them to its events."""
    text = decode_bytes(head[:SNIFF_BYTES])
    if not _NEW_START_GATED.search(text) and not _NEW_START_ANYWHERE.search(text):
        # A py-spy/faulthandler file: cheap checks first, as thousands may be sniffed.
        if not _DUMP_START_GATED.admits(text) or len(_DUMP_START.findall(text)) < 2:
            return False
        if not any(markers.any_rank(line) is not None for line in text.splitlines()):
            return False
    lines = text.splitlines()
    if len(head) >= SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]
    found: ScanResult = scan_text("\n".join(lines), "sniff", [])
    if not found.blocks:
        return False
    kinds = found.kinds
    meaningful = sum(1 for line in lines if line.strip())
    if not kinds & _NEW_FORMATS:
        # py-spy / faulthandler only: dumps, unless several carry rank markers their own
        # readers do not read ("=== rank 3 ===", "RANK=3" over each dump).
        return found.marker_ranked > 0 and len(found.processes) >= 2
    if found.stack_lines >= _MOSTLY * max(1, meaningful):
        return True
    return not log_sniff(head)
