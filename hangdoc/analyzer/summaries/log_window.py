"""A rank's log window (``ProcessEvidence.log_lines``) as a node summary carries it: a
digest of template numbers and the line's numbers, not the lines (``hangdoc.summary/3``).

Why: the ranks' log windows were 97 % of a summary (1,567 lines a rank, 2.1 MB a node,
4.4 GB of JSON for 16,384 ranks), and decoding them built a dict per line in
``json.loads`` before the line itself. Ranks of a job print the same few templates with
other numbers (a node of the benchmark: 12,500 lines, 7 templates), so a line is written as
the number of its template in the node's table and its numbers, all of a rank's numbers
in one string: ``json.loads`` reads a rank's window as four values, and the lines come
back exact (text, source, line number, benign mark), each by one ``%`` of its template.

A template is a line cut at its numbers (``LINE_NUMBER``, the pattern the ranks' logs are
compared by: a template joined with "#" is the line's masked text there). A number never
holds a space, so the numbers of a window are one space-joined string. Line numbers are
written as differences from the line before (a window is mostly consecutive lines: runs
of 1, or of 0 for a tail that is not numbered); sources as runs (a rank's window is one
file, mostly).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any

from hangdoc.analyzer.model import LINE_NUMBER, LogLine
from hangdoc.analyzer.vocabulary import BenignWarning

# A window's text is a log's head and tail lines (a few hundred KB); a digest that would
# build more is damaged (or built to make the reader build gigabytes from a few bytes).
MAX_WINDOW_CHARS = 64 * 1024 * 1024
# A window: {"t": [template], "n": "numbers", "l": [line deltas], "s": [[source, lines]],
# "b": [[index, benign mark]] (only when a line has one)}.
Window = dict[str, Any]


@dataclass(slots=True)
class TemplateTable:
    """The templates of one node's windows, numbered in first-seen order: each a line's
    literal pieces between its numbers."""

    rows: list[list[str]] = field(default_factory=list)
    _index: dict[tuple[str, ...], int] = field(default_factory=dict)

    def add(self, pieces: list[str]) -> int:
        key = tuple(pieces)
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.rows)
            self.rows.append(pieces)
        return found


def encode_window(lines: list[LogLine], table: TemplateTable) -> Window:
    """One rank's window → its digest (sources as they are: the writer loaded the dump
    with the summary's token for its path). A window with a line that holds a newline
    (none that the line reader cuts does) cannot be a digest: ValueError."""
    ids: list[int] = []
    numbers: list[str] = []
    deltas: list[int] = []
    runs: list[list[Any]] = []
    marks: list[list[Any]] = []
    previous = 0
    split = LINE_NUMBER.split
    for index, line in enumerate(lines):
        if "\n" in line.text:
            raise ValueError("a log line holds a newline")
        # split() with a group-less pattern gives the pieces around the numbers; the
        # numbers are what lies between them in the text
        pieces = split(line.text)
        found = LINE_NUMBER.findall(line.text)
        ids.append(table.add(pieces))
        numbers.extend(found)
        deltas.append(line.line - previous)
        previous = line.line
        source = line.source
        if runs and runs[-1][0] == source:
            runs[-1][1] += 1
        else:
            runs.append([source, 1])
        if line.benign is not None:
            marks.append([index, line.benign.value])
    window: Window = {"t": ids, "n": " ".join(numbers), "l": deltas, "s": runs}
    if marks:
        window["b"] = marks
    return window


# Each field of a LogLine with the C function that fills it (its slot's descriptor),
# and the value a digest's line gets when the digest does not give one (its default).
_SLOTS = tuple(
    (f.name, getattr(LogLine, f.name).__set__, f.default) for f in dataclasses.fields(LogLine)
)
if (
    [name for name, _, _ in _SLOTS] != ["text", "source", "line", "benign"]
    or _SLOTS[3][2] is dataclasses.MISSING
    or hasattr(LogLine, "__post_init__")  # (which records built bare would skip)
):
    raise TypeError("log_window builds LogLine(text, source, line, benign=None) records bare")
_SET_TEXT, _SET_SOURCE, _SET_LINE, _SET_BENIGN = (setter for _, setter, _ in _SLOTS)
_NO_MARK = _SLOTS[3][2]
_drain = collections.deque[object](maxlen=0).extend


def _lines(texts: list[str], sources: list[str], numbers: list[int]) -> list[LogLine]:
    """``[LogLine(t, s, n) for ...]``, built in C: the records made bare and each field's
    slot filled by one ``map`` over its descriptor, which is what the dataclass's own
    __init__ does line by line in Python (a frozen record's __init__ sets its slots the
    same way, past __setattr__). A job's windows are millions of lines, and building
    them was most of reading a node summary; this takes 40 % off building them."""
    out: list[LogLine] = list(map(object.__new__, itertools.repeat(LogLine, len(texts))))
    _drain(map(_SET_TEXT, out, texts))
    _drain(map(_SET_SOURCE, out, sources))
    _drain(map(_SET_LINE, out, numbers))
    _drain(map(_SET_BENIGN, out, itertools.repeat(_NO_MARK)))
    return out


class TemplateFormats:
    """A node's template table ready to rebuild lines: each template as a %-format, and
    as the masked text the log comparison reads (built once per summary)."""

    def __init__(self, rows: list[Any]) -> None:
        self.formats: list[str] = []
        self.lengths: list[int] = []  # each template's text without its numbers
        masked: list[str] = []
        for pieces in rows:
            if not isinstance(pieces, list) or not pieces:
                raise ValueError("a log template is not a list of pieces")
            texts = [str(p) for p in pieces]
            self.formats.append("%s".join(t.replace("%", "%%") for t in texts))
            masked.append("#".join(texts))
            self.lengths.append(sum(map(len, texts)))
        # each template with its numbers masked, as the log comparison masks a line
        self.masked = tuple(masked)


def decode_window(raw: Window, formats: TemplateFormats, relocate: Any) -> list[LogLine]:
    """A digest → the window's lines, exactly as written. Raises (KeyError, TypeError,
    ValueError, IndexError) on a damaged one, as the rest of the summary's decoding does.

    Every loop runs in C: the window's templates joined by newlines (no line holds one)
    are one format that every number of the window fills at once, then split into the
    lines; a job's windows are millions of lines, and a Python step per line was most of
    decoding a summary."""
    ids: list[int] = raw["t"]
    text = raw["n"]
    numbers = tuple(text.split(" ")) if text else ()
    if not ids:
        if numbers or raw["l"] or raw["s"]:
            raise ValueError("a log window without lines holds numbers")
        return []
    if min(ids) < 0:  # (a negative index would pick a template from the end)
        raise IndexError("a log window names a template that is not there")
    if sum(map(formats.lengths.__getitem__, ids)) + len(text) > MAX_WINDOW_CHARS:
        raise ValueError("a log window longer than any window a log gives")
    texts = ("\n".join(map(formats.formats.__getitem__, ids)) % numbers).split("\n")
    if len(texts) != len(ids):
        raise ValueError("a log window's lines do not match its templates")
    deltas: list[int] = raw["l"]
    if len(deltas) != len(ids):
        raise ValueError("a log window's line numbers do not match its lines")
    sources: list[str] = []
    for source, count in raw["s"]:
        if not isinstance(count, int) or not 0 < count <= len(ids) - len(sources):
            raise ValueError("a log window's sources do not match its lines")
        sources.extend(itertools.repeat(relocate(source), count))
    if len(sources) != len(ids):
        raise ValueError("a log window's sources do not match its lines")
    out = _lines(texts, sources, list(itertools.accumulate(deltas)))
    for index, mark in raw.get("b", ()):
        line = out[index]
        out[index] = LogLine(line.text, line.source, line.line, BenignWarning(mark))
    return out
