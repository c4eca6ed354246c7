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

import bisect
import collections
import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hangdoc.analyzer.model import LINE_NUMBER, LogLine, LogWindow
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


def encode_window(lines: Sequence[LogLine], table: TemplateTable) -> Window:
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
        self.arity: list[int] = []  # how many numbers each template takes
        masked: list[str] = []
        broken: list[int] = []  # templates no line can be built of (a newline inside)
        for index, pieces in enumerate(rows):
            if not isinstance(pieces, list) or not pieces:
                raise ValueError("a log template is not a list of pieces")
            texts = [str(p) for p in pieces]
            self.formats.append("%s".join(t.replace("%", "%%") for t in texts))
            masked.append("#".join(texts))
            self.lengths.append(sum(map(len, texts)))
            self.arity.append(len(texts) - 1)
            if any("\n" in t for t in texts):
                broken.append(index)
        # each template with its numbers masked, as the log comparison masks a line
        self.masked = tuple(masked)
        self.broken = frozenset(broken)


def decode_window(
    raw: Window, formats: TemplateFormats, relocate: Any
) -> LogWindow | list[LogLine]:
    """A digest → the window, its lines built when read (``DigestWindow``). Raises
    (KeyError, TypeError, ValueError, IndexError) on a damaged one, as the rest of the
    summary's decoding does: every check is made here, none when a line is built.

    The checks run in C, over the template numbers once each: a job's windows are
    millions of lines, and a Python step per line was most of decoding a summary."""
    ids: list[int] = raw["t"]
    text: str = raw["n"]
    if not isinstance(text, str):
        raise TypeError("a log window's numbers are not a string")
    if not ids:
        if text or raw["l"] or raw["s"]:
            raise ValueError("a log window without lines holds numbers")
        return []
    if min(ids) < 0:  # (a negative index would pick a template from the end)
        raise IndexError("a log window names a template that is not there")
    if sum(map(formats.lengths.__getitem__, ids)) + len(text) > MAX_WINDOW_CHARS:
        raise ValueError("a log window longer than any window a log gives")
    wanted = sum(map(formats.arity.__getitem__, ids))
    if (text.count(" ") + 1 if text else 0) != wanted or "\n" in text:
        raise ValueError("a log window's lines do not match its templates")
    if formats.broken and not formats.broken.isdisjoint(ids):
        raise ValueError("a log window's lines do not match its templates")
    deltas: list[int] = raw["l"]
    if len(deltas) != len(ids):
        raise ValueError("a log window's line numbers do not match its lines")
    runs: list[tuple[str, int]] = []
    ends: list[int] = []
    total = 0
    for source, count in raw["s"]:
        if not isinstance(count, int) or not 0 < count <= len(ids) - total:
            raise ValueError("a log window's sources do not match its lines")
        total += count
        runs.append((relocate(source), count))
        ends.append(total)
    if total != len(ids):
        raise ValueError("a log window's sources do not match its lines")
    marks: dict[int, BenignWarning] = {}
    for index, mark in raw.get("b", ()):
        if not isinstance(index, int):
            raise TypeError("a benign mark's line is not a number")
        if not -len(ids) <= index < len(ids):
            raise IndexError("a benign mark names a line that is not there")
        marks[index % len(ids)] = BenignWarning(mark)
    # (a line number that is not one raises in DigestWindow, as adding them up would)
    return DigestWindow(formats, ids, text, wanted, deltas, tuple(runs), tuple(ends), marks)


# Numbers this close to an end of a window's text are split off it; further in, they
# are found by counting (``_after_space``).
_NEAR = 64


def _after_space(text: str, count: int, mean: float) -> int:
    """Where the text after its ``count``-th space starts (``count`` ≥ 1 and at most its
    spaces): guessed from the mean length of a number and a space, then corrected by
    counting the spaces in between, all in C."""
    low, seen = 0, 0  # text[:low] holds ``seen`` spaces, fewer than ``count``
    high = len(text)  # text[:high] holds ``count`` or more
    guess, tries = int(count * mean), 0
    while high - low > _NEAR:
        guess = min(max(guess, low + 1), high - 1)
        found = seen + text.count(" ", low, guess)
        if found < count:  # short of it: on by the mean, aiming a little past it
            low, seen = guess, found
            guess = low + int((count - seen) * mean) + _NEAR // 2
        else:  # at or past it: back by the mean, aiming a little short of it
            high = guess
            guess = high - int((found - count) * mean) - _NEAR // 2
        tries += 1
        if tries > 3:  # (numbers of very unequal lengths: halves from here)
            guess = (low + high) // 2
    position = low
    for _ in range(count - seen):
        position = text.index(" ", position) + 1
    return position


class DigestWindow(LogWindow):
    """A rank's window as its digest holds it (checked by ``decode_window``): a line is
    built when it is read (its template filled with its numbers, found by counting from
    the nearer end of the window, so that reading the last lines costs little and keeps
    nothing), every line at once, in C, when the window is iterated."""

    __slots__ = (
        "_deltas",
        "_ends",
        "_formats",
        "_ids",
        "_last_line",
        "_marks",
        "_numbers",
        "_runs",
        "_some",
        "_text",
    )  # fmt: skip

    def __init__(
        self,
        formats: TemplateFormats,
        ids: list[int],
        text: str,
        numbers: int,
        deltas: list[int],
        runs: tuple[tuple[str, int], ...],
        ends: tuple[int, ...],
        marks: dict[int, BenignWarning],
    ) -> None:
        super().__init__()
        self._formats, self._ids, self._text, self._numbers = formats, ids, text, numbers
        self._deltas, self._last_line = deltas, sum(deltas)
        self._runs, self._ends, self._marks = runs, ends, marks
        self._some: dict[int, LogLine] = {}  # lines built one by one (the same when read again)

    def _count(self) -> int:
        return len(self._ids)

    def _line(self, index: int) -> LogLine:
        line = self._some.get(index)
        if line is not None:
            return line
        ids, arity, text = self._ids, self._formats.arity, self._text
        template = ids[index]
        wanted = arity[template]
        if 2 * index < len(ids):  # nearer the head: count from there
            first = sum(map(arity.__getitem__, itertools.islice(ids, index)))
            number = sum(itertools.islice(self._deltas, index + 1))
        else:  # nearer the tail (where the lines read most are)
            first = self._numbers - sum(map(arity.__getitem__, ids[index:]))
            number = self._last_line - sum(self._deltas[index + 1 :])
        numbers = self._numbers_from(first, wanted) if wanted else []
        source = self._runs[bisect.bisect_right(self._ends, index)][0]
        text = self._formats.formats[template] % tuple(numbers)
        line = LogLine(text, source, number, self._marks.get(index))
        self._some[index] = line
        return line

    def _numbers_from(self, first: int, wanted: int) -> list[str]:
        """Numbers ``first`` to ``first + wanted`` of the window, from its text: split
        off the nearer end when they are close to it, else found by counting spaces (in
        C, from where the window's mean number length puts it), since splitting a
        thousand numbers off to read one line costs four times as much."""
        text, total = self._text, self._numbers
        if first + wanted <= _NEAR:
            return text.split(" ", first + wanted)[first : first + wanted]
        if total - first <= _NEAR:
            return text.rsplit(" ", total - first)[1 : 1 + wanted]
        start = _after_space(text, first, len(text) / total)
        return text[start:].split(" ", wanted)[:wanted]

    def _all(self) -> list[LogLine]:
        ids = self._ids
        numbers = tuple(self._text.split(" ")) if self._text else ()
        texts = ("\n".join(map(self._formats.formats.__getitem__, ids)) % numbers).split("\n")
        sources: list[str] = []
        for source, count in self._runs:
            sources.extend(itertools.repeat(source, count))
        out = _lines(texts, sources, list(itertools.accumulate(self._deltas)))
        for index, mark in self._marks.items():
            line = out[index]
            out[index] = LogLine(line.text, line.source, line.line, mark)
        for index, line in self._some.items():
            out[index] = line  # (a line read before is the same record)
        return out

    def sources(self) -> Iterator[str]:
        return iter(dict.fromkeys(source for source, _ in self._runs))

    def benign_marks(self) -> Iterator[LogLine]:
        if self._built is not None:
            return super().benign_marks()
        return (self._line(index) for index in sorted(self._marks))
