"""A loose text file as the tool printed it: the paste's layers undone before parsing.

``parsers/unmangle.py`` undoes quoting, code-block indentation, fences, emphasis,
colours and hard wraps on a text; this module applies it to a file the user gave
(never to a file of a ``hangdoc collect`` dump, which no person pasted), hands the
parsers a temporary copy of the undone text, and maps the line numbers the parsers
report back to the user's file.

Cost: a file up to ``FULL_BYTES`` is checked whole; a larger one only when most lines of
its first ``HEAD_BYTES`` carry a layer (a paste is mangled as a whole, from its first
line on; a big log with a quoted line here and a coloured word there is read as it is),
and files past ``MAX_BYTES`` are logs, not pastes, and are left alone.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hangdoc.analyzer.model import LogEvent, LogLine
from hangdoc.analyzer.parsers.base import ParsedFile, decode_bytes
from hangdoc.analyzer.parsers.unmangle import Unmangled, unmangle

FULL_BYTES = 8 * 1024 * 1024
HEAD_BYTES = 1024 * 1024
MAX_BYTES = 64 * 1024 * 1024


def unmangled(path: Path, size: int) -> Unmangled | None:
    """The file's text with its paste layers undone, or None when it has none."""
    if size > MAX_BYTES:
        return None
    with path.open("rb") as handle:
        data = handle.read(FULL_BYTES if size <= FULL_BYTES else HEAD_BYTES)
        if size > FULL_BYTES:
            head = data[: data.rfind(b"\n") + 1]
            fixed = unmangle(decode_bytes(head), whole_only=True)
            if fixed is None or not fixed.whole:
                return None  # a log, read as it is: a paste is mangled from its start
            data += handle.read()
    return unmangle(decode_bytes(data))


@contextmanager
def undone_copy(path: Path, fixed: Unmangled) -> Iterator[Path]:
    """A temporary copy holding the undone text, with the file's name (a rank may be in
    it) and modification time (year-less stamps are dated by it); removed on exit."""
    with tempfile.TemporaryDirectory(prefix="hangdoc-paste-") as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(fixed.text, encoding="utf-8")
        st = path.stat()
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        yield copy


def _event(event: LogEvent, fixed: Unmangled) -> LogEvent:
    if event.line is None:
        return event
    return dataclasses.replace(event, line=fixed.original_line(event.line))


def remap_lines(lines: Sequence[LogLine], fixed: Unmangled) -> list[LogLine]:
    """Log lines numbered as in the user's file (0, unknown, stays 0)."""
    return [
        dataclasses.replace(line, line=fixed.original_line(line.line)) if line.line else line
        for line in lines
    ]


def remap_parsed(parsed: ParsedFile, fixed: Unmangled) -> None:
    """Every line number a parser reported, as the user's file numbers it."""
    parsed.job_log_events = [_event(e, fixed) for e in parsed.job_log_events]
    for proc in parsed.processes:
        proc.log_events = [_event(e, fixed) for e in proc.log_events]
        proc.log_lines = remap_lines(proc.log_lines, fixed)


def undone_note(display: str, fixed: Unmangled) -> str:
    return f"{display}: read as the tool printed it, without {', '.join(fixed.undone)}"
