"""The stack-text parser and the hook the log parser calls.

A file that is mostly stacks (or that the log parser would not take) is claimed here;
it is then read by the log parser as well, so the tracebacks in it become the same
``exception`` log events HD030 reads from any log, exactly once, and the stacks are
added by ``attach_stacks`` (the log parser's one call into this package). A traceback
is therefore two records that agree: a thread that raised (``ThreadStack.exception``,
for the stack rules) and a log event (for the timeline), on the same rank.
"""

from __future__ import annotations

import contextvars
import dataclasses
import re
from pathlib import Path

from hangdoc.analyzer.model import InputKind, LogEvent, ProcessEvidence
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile, decode_bytes, read_text_capped
from hangdoc.analyzer.parsers.logs.errors import finish_payload
from hangdoc.analyzer.parsers.stacks import markers, pyspy_frames
from hangdoc.analyzer.parsers.stacks.scan import ScanResult, Span, scan_text
from hangdoc.analyzer.payloads.launch import ExceptionRaised
from hangdoc.analyzer.vocabulary import EventKind, RankFrom
from hangdoc.common.rank_names import Trailing, rank_from_name

# Stacks are read from at most this much of a file (its tail when larger): a 10 GB
# log's stacks that matter are near its end, and the scan keeps every line in memory
# (about a second per MiB of dense stacks).
STACK_TEXT_BYTES = 4 * 1024 * 1024
# Up to this size a stacks file is also read by the log parser (its tracebacks become
# the log events HD030 reads, its NCCL lines count); a larger one is read for stacks
# only, and its tracebacks' events are made here, in the same shape.
_WITH_LOG_PARSER_BYTES = 8 * 1024 * 1024
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


def _any_stack(text: str) -> bool:
    """Any stack in the text? Searched one pattern at a time: one alternation of them
    all costs several times their sum."""
    if _ANY_STACK.search(text) or _NEW_START_ANYWHERE.search(text):
        return True
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
# Set while this package's parser has the log parser read a stacks file: its stacks
# then come in full; in a plain log, records of consequences are left out
# (scan.logged_elsewhere).
_STACKS_FILE: contextvars.ContextVar[bool] = contextvars.ContextVar("stacks_file", default=False)
_EXCEPTION_KIND = EventKind.EXCEPTION


def extract_stacks(text: str, display: str) -> list[ProcessEvidence]:
    """Every stack in ``text`` as processes (rank None where nothing says which)."""
    return scan_text(text, display, []).processes


def attach_stacks(
    parsed: ParsedFile, path: Path, display: str, own_events: bool = False
) -> ParsedFile:
    """Add the stacks of the file at ``path`` to what the log parser made of it.

    Exception events the log parser could not attribute move to the rank a marker near
    their traceback names; a lone process of stacks with no rank takes the one rank the
    log gave the file, else a rank in the file name. Never raises on odd text."""
    in_log = not own_events and not _STACKS_FILE.get()
    try:
        text, truncated = read_text_capped(path, STACK_TEXT_BYTES)
        if not _any_stack(text):
            return parsed
        found = scan_text(text, display, parsed.notes, in_log=in_log)
    except Exception as exc:  # a bug here must not cost the log what the log parser read
        parsed.notes.append(f"{display}: stacks not read ({type(exc).__name__}: {exc})")
        return parsed
    if truncated and found.processes:
        parsed.notes.append(
            f"{display}: stacks read from the last {STACK_TEXT_BYTES >> 20} MiB only"
        )
    _rank_lone_process(found.processes, parsed, path, display)
    if own_events:
        _exception_events(parsed, found, display)
    if not truncated or own_events:
        # The log parser numbers the lines of the whole file; a tail read here does
        # not, so its events are matched to tracebacks only when both count alike.
        _rehome_exceptions(parsed, found.spans, found.processes)
    parsed.processes.extend(found.processes)
    return parsed


def _exception_events(parsed: ParsedFile, found: ScanResult, display: str) -> None:
    """The log events the log parser would have made of the tracebacks, for a file it
    did not read: one per distinct exception and rank (repeats counted, as the log
    parser does), unattributed here, then moved to their rank like its own."""
    first: dict[tuple[int | None, str, str], tuple[Span, int]] = {}
    for span in found.spans:
        if span.exc_type:
            key = (span.rank, span.exc_type, (span.message or "")[:120])
            seen = first.get(key)
            first[key] = (span, 1) if seen is None else (seen[0], seen[1] + 1)
    for span, count in first.values():
        assert span.exc_type is not None
        raised = ExceptionRaised(exc_type=span.exc_type, message=(span.message or "")[:400])
        text = f"{span.exc_type}: {span.message}" if span.message else span.exc_type
        payload = finish_payload(raised, text)
        event = LogEvent(
            _EXCEPTION_KIND, text, display, span.last, None, payload=payload, repeats=count - 1
        )
        parsed.job_log_events.append(event)


def _rank_lone_process(
    stacks: list[ProcessEvidence], parsed: ParsedFile, path: Path, display: str
) -> None:
    if len(stacks) != 1 or stacks[0].rank is not None:
        return
    log_ranks = {p.rank for p in parsed.processes if p.rank is not None}
    if len(log_ranks) == 1:
        stacks[0].rank = log_ranks.pop()
        return
    if log_ranks:
        return
    named = rank_from_name(Path(display) if display else path, Trailing.ONE_PROCESS)
    rank, how = named.rank, named.how
    if rank is not None:
        stacks[0].rank = rank
        parsed.notes.append(f"{display}: stacks given to rank {rank}, from {how}")


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
        moved = event
        if event.rank_from is None:
            moved = dataclasses.replace(event, rank_from=RankFrom.STACK_MARKER)
        by_rank[span.rank].log_events.append(moved)
    parsed.job_log_events = keep


def _claims(head: bytes) -> bool:
    """Stacks only this package reads, making up most of the head (or in a text the
    log parser would refuse); or several dumps under rank markers."""
    text = decode_bytes(head[:SNIFF_BYTES])
    if not _NEW_START.search(text) and not _NEW_START_ANYWHERE.search(text):
        # A py-spy/faulthandler file: cheap checks first, as thousands may be sniffed.
        if len(_DUMP_START.findall(text)) < 2:
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
        # py-spy / faulthandler only: theirs, unless several dumps carry rank markers
        # their parsers do not read ("=== rank 3 ===", "RANK=3" over each dump).
        return found.marker_ranked > 0 and len(found.processes) >= 2
    if found.stack_lines >= _MOSTLY * max(1, meaningful):
        return True
    from hangdoc.analyzer.parsers.logs import LogParser

    return not LogParser().sniff(head)


class StackTextParser:
    """gdb, pstack, pystack, py-bt, tracebacks and torch C++ stacks, alone or mixed."""

    kind = InputKind.STACK_TEXT

    def sniff(self, head: bytes) -> bool:
        return _claims(head)

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        from hangdoc.analyzer.parsers.logs import LogParser

        if path.stat().st_size > _WITH_LOG_PARSER_BYTES:
            parsed = ParsedFile(kind=InputKind.STACK_TEXT)
            attach_stacks(parsed, path, display_path, own_events=True)
            parsed.notes.append(f"{display_path}: large stacks file; its log lines were not read")
        else:
            token = _STACKS_FILE.set(True)
            try:
                parsed = LogParser().parse(path, display_path)
            finally:
                _STACKS_FILE.reset(token)
            if not any(p.text_stacks for p in parsed.processes):
                parsed = attach_stacks(parsed, path, display_path)  # the log hook is missing
        parsed.kind = InputKind.STACK_TEXT
        parsed.notes = [n for n in parsed.notes if not n.endswith("no recognised log lines")]
        if not any(p.text_stacks for p in parsed.processes):
            parsed.error = "no stack found"
        return parsed
