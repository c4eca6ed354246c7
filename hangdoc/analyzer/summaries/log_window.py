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

``hangdoc.summary/5`` writes the template numbers and the line-number differences as runs
(``"tr"``, ``"lr"``: [[value, count], ...]) in place of their lists (``"t"``, ``"l"``), and
the numbers one string per run of templates (``"n"``: a list): a window is a few long runs
of one template (a node of the benchmark: 17 runs for 1,567 lines), reading two lists of
1,567 small numbers was half the JSON of a summary, and the lines read most (a template's
first and last, by the log comparison) are then at an end of their run's string, their
numbers split off it, where one string for the window had them found by counting spaces
through it. A window of either kind is read; inside, a window is its runs
(``DigestWindow``), and the log comparison reads a rank's templates as runs
(``LogTemplates.runs``), so ranks whose windows give the same runs are compared once.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import operator
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hangdoc.analyzer.model import LINE_NUMBER, LogLine, LogWindow
from hangdoc.analyzer.vocabulary import BenignWarning

# A window's text is a log's head and tail lines (a few hundred KB); a digest that would
# build more is damaged (or built to make the reader build gigabytes from a few bytes).
MAX_WINDOW_CHARS = 64 * 1024 * 1024
# A window: {"tr": [[template, lines]], "n": ["numbers of a run"], "lr": [[line delta,
# lines]], "s": [[source, lines]], "b": [[index, benign mark]] (only when a line has
# one)}; /3 and /4 wrote "t": [template] and "l": [line delta], a value a line, and
# "n": "numbers" for the whole window.
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


def _add_to_runs(runs: list[list[int]], value: int) -> None:
    if runs and runs[-1][0] == value:
        runs[-1][1] += 1
    else:
        runs.append([value, 1])


def encode_window(
    lines: Sequence[LogLine], table: TemplateTable, numbers_out: list[str] | None = None
) -> Window:
    """One rank's window → its digest (sources as they are: the writer loaded the dump
    with the summary's token for its path). A window with a line that holds a newline
    (none that the line reader cuts does) cannot be a digest: ValueError. ``numbers_out``
    (/6): each run's numbers go there, for the node's one string of numbers, and the
    window gives their lengths (``"nl"``) in place of the strings (``"n"``)."""
    template_runs: list[list[int]] = []
    numbers: list[list[str]] = []  # a run's numbers
    delta_runs: list[list[int]] = []
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
        runs_before = len(template_runs)
        _add_to_runs(template_runs, table.add(pieces))
        if len(template_runs) > runs_before:
            numbers.append([])
        numbers[-1].extend(found)
        _add_to_runs(delta_runs, line.line - previous)
        previous = line.line
        source = line.source
        if runs and runs[-1][0] == source:
            runs[-1][1] += 1
        else:
            runs.append([source, 1])
        if line.benign is not None:
            marks.append([index, line.benign.value])
    texts = [" ".join(run) for run in numbers]
    window: Window = {"tr": template_runs, "n": texts, "lr": delta_runs, "s": runs}
    if numbers_out is not None:
        del window["n"]
        window["nl"] = [len(text) for text in texts]
        numbers_out.extend(texts)
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


def _runs(raw: Window, runs_key: str, list_key: str) -> tuple[list[int], list[int]]:
    """A column of a window as (values, counts): its runs as /5 writes them, or its list of
    one value a line as /3 and /4 wrote it, made runs. Whole numbers only; TypeError or
    ValueError on a damaged one."""
    values: list[int] = []
    counts: list[int] = []
    if runs_key in raw:
        for value, count in raw[runs_key]:
            if type(value) is not int or type(count) is not int:
                raise TypeError("a log window's runs are not whole numbers")
            if count < 1:
                raise ValueError("a log window's run has no lines")
            values.append(value)
            counts.append(count)
        return values, counts
    listed = raw[list_key]
    if not isinstance(listed, list):
        raise TypeError("a log window's column is not a list")
    for value, group in itertools.groupby(listed):
        if type(value) is not int:
            raise TypeError("a log window's column holds what is not a whole number")
        values.append(value)
        counts.append(sum(1 for _ in group))
    return values, counts


def decode_window(
    raw: Window,
    formats: TemplateFormats,
    relocate: Any,
    numbers: NodeNumbers | None = None,
    rank: object = None,
) -> LogWindow | list[LogLine]:
    """A digest → the window, its lines built when read (``DigestWindow``). Raises
    (KeyError, TypeError, ValueError, IndexError) on a damaged one, as the rest of the
    summary's decoding does: every check is made here, none when a line is built, but
    for the numbers of a /6 window's runs, checked when a run is first read (RunTexts;
    ``rank`` names the window then).

    The checks run over the runs of templates (a window has tens), not over its lines."""
    ids, id_counts = _runs(raw, "tr", "t")
    if "nl" in raw:  # (/6: in the node's string of numbers)
        if numbers is None:
            raise ValueError("a log window's numbers are not in the summary")
        texts_of: str | list[Any] | RunTexts = numbers.take(raw["nl"], rank)
    else:
        texts_of = raw["n"]
        if not isinstance(texts_of, str | list):
            raise TypeError("a log window's numbers are neither a string nor a list of them")
    deltas, delta_counts = _runs(raw, "lr", "l")
    if not ids:
        if len(texts_of) or deltas or raw["s"]:
            raise ValueError("a log window without lines holds numbers")
        return []
    if min(ids) < 0:  # (a negative index would pick a template from the end)
        raise IndexError("a log window names a template that is not there")
    lengths, arity = formats.lengths, formats.arity
    count = sum(id_counts)
    wanted = list(map(operator.mul, map(arity.__getitem__, ids), id_counts))  # a run's numbers
    if isinstance(texts_of, RunTexts):
        size = texts_of.size()
    else:
        size = len(texts_of) if isinstance(texts_of, str) else sum(map(len, texts_of))
    # (each line but the last ends in a newline when the window is built whole)
    if sum(map(operator.mul, map(lengths.__getitem__, ids), id_counts)) + size + count > (
        MAX_WINDOW_CHARS
    ):
        raise ValueError("a log window longer than any window a log gives")
    if formats.broken and not formats.broken.isdisjoint(ids):
        raise ValueError("a log window's lines do not match its templates")
    texts = _run_texts(texts_of, wanted)
    if sum(delta_counts) != count:
        raise ValueError("a log window's line numbers do not match its lines")
    runs: list[tuple[str, int]] = []
    ends: list[int] = []
    total = 0
    for source, lines in raw["s"]:
        if not isinstance(lines, int) or not 0 < lines <= count - total:
            raise ValueError("a log window's sources do not match its lines")
        total += lines
        runs.append((relocate(source), lines))
        ends.append(total)
    if total != count:
        raise ValueError("a log window's sources do not match its lines")
    marks: dict[int, BenignWarning] = {}
    for index, mark in raw.get("b", ()):
        if not isinstance(index, int):
            raise TypeError("a benign mark's line is not a number")
        if not -count <= index < count:
            raise IndexError("a benign mark names a line that is not there")
        marks[index % count] = BenignWarning(mark)
    return DigestWindow(
        formats,
        RunColumn(ids, id_counts),
        texts,
        RunColumn(deltas, delta_counts),
        tuple(runs),
        tuple(ends),
        marks,
    )


def _run_texts(numbers: str | list[Any] | RunTexts, wanted: list[int]) -> Sequence[str]:
    """Each run's numbers as one string, checked against what its templates take: /5
    gives them so; /6 as places in the node's string (cut when read); the one string of
    /3 and /4 is cut at the runs' ends, in one pass."""
    if isinstance(numbers, RunTexts):
        numbers.check(wanted)
        return numbers
    if isinstance(numbers, list):
        if len(numbers) != len(wanted):
            raise ValueError("a log window's numbers do not match its runs")
        for text, count in zip(numbers, wanted, strict=True):
            if type(text) is not str:
                raise TypeError("a log window's numbers are not a string")
            if (text.count(" ") + 1 if text else 0) != count or "\n" in text:
                raise ValueError("a log window's lines do not match its templates")
        return numbers
    text, total = numbers, sum(wanted)
    if (text.count(" ") + 1 if text else 0) != total or "\n" in text:
        raise ValueError("a log window's lines do not match its templates")
    mean = len(text) / total if total else 1.0
    out: list[str] = []
    start, seen = 0, 0
    for count in wanted:
        if not count:
            out.append("")
            continue
        seen += count
        end = len(text) + 1 if seen == total else _after_space(text, count, mean, start)
        out.append(text[start : end - 1])
        start = end
    return out


class DamagedWindow(ValueError):
    """A run of a rank's window numbers found damaged when a line of it is first read
    (``RunTexts``): the analysis leaves that rank's window out (engine.analyze) and says
    so in ``message``, which names the summary file and the rank."""


class NodeNumbers:
    """A /6 summary's numbers of every window (``NodeSummary.window_numbers``), each
    window's runs taken in turn (``take``). The reader finds the string in the file
    without ``json.loads`` scanning it (summaries/read.py), and a run's numbers are cut
    from it, and checked, when a line of the run is first read (``RunTexts``): a node's
    windows are 80 % numbers, most never read, and any check of every byte at load was a
    second of CPU at 16,384 ranks. Only what costs nothing a byte is checked here: that
    the windows' lengths add up to the string. ``where``: the summary file, named by a
    damaged run's message."""

    __slots__ = ("taken", "text", "where")

    def __init__(self, text: str, where: str = "the summary") -> None:
        self.text, self.taken, self.where = text, 0, where

    def take(self, lengths: Any, rank: object = None) -> RunTexts:
        if type(lengths) is not list:
            raise TypeError("a log window's numbers' lengths are not a list")
        start = self.taken
        ends = list(itertools.accumulate(lengths, initial=start))
        if not all(type(n) is int and n >= 0 for n in lengths) or ends[-1] > len(self.text):
            raise ValueError("a log window's numbers are not in the summary's numbers")
        self.taken = ends[-1]
        return RunTexts(self.text, ends, f"{self.where}: rank {rank}'s log window")

    def check_all_taken(self) -> None:
        if self.taken != len(self.text):
            raise ValueError("a summary's window numbers are not its windows'")


class RunTexts(Sequence[str]):
    """Each run's numbers of one window, cut from the node's string when first read, and
    checked then. A run read whole, or at a line inside it, is checked whole
    (``check_run``: it holds the numbers its templates take, its spaces counted in place,
    in C, and nothing a number never holds); a line at a run's start or end is found from
    that end, and checked alone (``DigestWindow._numbers_at``: as many numbers as its
    template takes, none empty, none holding what a number never holds, the last line's
    ending where the run ends), since its place does not depend on the run's middle.
    The analysis reads mostly such lines (a template's first and last), in runs that are
    70 % of a job's numbers. A damaged run raises ``DamagedWindow`` whenever it is read,
    and the window says so (``damage``), so that the analysis can leave it out."""

    __slots__ = ("_cut", "_ends", "_ok", "_text", "_wanted", "damage", "what")

    def __init__(self, text: str, ends: list[int], what: str = "a log window") -> None:
        self._text, self._ends = text, ends  # ends[0]: where the first run starts
        self._cut: dict[int, str] = {}
        self._wanted: list[int] | None = None  # each run's count of numbers (``check``)
        self._ok: set[int] | None = None  # runs checked whole
        self.what = what
        self.damage: str | None = None

    def __len__(self) -> int:
        return len(self._ends) - 1

    @typing.overload
    def __getitem__(self, index: int) -> str: ...
    @typing.overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        text = self._cut.get(index)
        if text is None:
            if not 0 <= index < len(self):
                raise IndexError("run out of range")
            self.check_run(index)
            text = self._cut[index] = self._text[self._ends[index] : self._ends[index + 1]]
        return text

    def size(self) -> int:
        return self._ends[-1] - self._ends[0]

    def span(self, index: int) -> tuple[str, int, int]:
        """(the node's string, where a run's numbers start in it, where they end): a
        line's numbers are found in place, without cutting the run's (a run of a
        template's lines is kilobytes, and a check reads one line of it on every rank).
        Its reader checks what it reads (``DigestWindow._numbers_at``)."""
        if self.damage is not None:
            raise DamagedWindow(self.damage)
        return self._text, self._ends[index], self._ends[index + 1]

    def check(self, wanted: list[int]) -> None:
        """What each run must hold (the numbers its templates take), checked when the run
        is read; here only that there is a run of numbers for each."""
        if len(wanted) != len(self._ends) - 1:
            raise ValueError("a log window's numbers do not match its runs")
        self._wanted = wanted

    def check_run(self, run: int) -> None:
        """The run holds its templates' numbers (its spaces counted in place, in C) and no
        newline, quote or backslash; else DamagedWindow."""
        if self._ok is not None and run in self._ok:
            return
        if self.damage is not None:
            raise DamagedWindow(self.damage)
        text, start, end = self._text, self._ends[run], self._ends[run + 1]
        wanted = self._wanted[run] if self._wanted is not None else None
        if wanted is not None and (text.count(" ", start, end) + 1 if end > start else 0) != (
            wanted
        ):
            raise self.damaged(run, "its numbers do not match its templates")
        if any(text.find(c, start, end) >= 0 for c in _NOT_IN_NUMBERS):
            raise self.damaged(run, "its numbers hold a newline, quote or backslash")
        if self._ok is None:
            self._ok = set()
        self._ok.add(run)

    def damaged(self, run: int, why: str) -> DamagedWindow:
        """The window is damaged from now on: the error to raise."""
        self.damage = f"{self.what} is damaged (its run {run}: {why})"
        return DamagedWindow(self.damage)

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))


# What a run's numbers never hold (a number is a match of LINE_NUMBER; the string is a
# JSON string's contents read unescaped, so a quote or a backslash means it is not ours)
_NOT_IN_NUMBERS = ("\n", '"', "\\")


class RunColumn:
    """A column of a window as runs: each run's value, where it ends (the index of the
    line after it), and the values' total before it (``weights``: each value counted
    as ``weight(value)``, e.g. a template's numbers)."""

    __slots__ = ("counts", "ends", "values")

    def __init__(self, values: list[int], counts: list[int]) -> None:
        self.values, self.counts = values, counts
        self.ends = list(itertools.accumulate(counts))

    def run_of(self, index: int) -> int:
        return bisect.bisect_right(self.ends, index)

    def start(self, run: int) -> int:
        return self.ends[run - 1] if run else 0

    def totals(self, weights: Sequence[int] | None = None) -> list[int]:
        """Before each run, the sum of the values of its lines (each value mapped by
        ``weights``), and the whole sum last."""
        values = map(weights.__getitem__, self.values) if weights is not None else self.values
        return [0, *itertools.accumulate(map(operator.mul, values, self.counts))]

    def expanded(self) -> Iterator[int]:
        return itertools.chain.from_iterable(map(itertools.repeat, self.values, self.counts))

    def pairs(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.values, self.counts, strict=True))


# Spaces closer than this are found one by one; further, by counting (``_after_space``).
_NEAR = 64


def _after_space(
    text: str, count: int, mean: float, start: int = 0, stop: int | None = None
) -> int:
    """Where the text after its ``count``-th space from ``start`` starts (``count`` ≥ 1
    and at most its spaces from there to ``stop``, the end of the part looked in: a run's
    numbers inside its node's string): guessed from the mean length of a number and a
    space, then corrected by counting the spaces in between, all in C."""
    low, seen = start, 0  # text[start:low] holds ``seen`` spaces, fewer than ``count``
    high = len(text) if stop is None else stop  # text[start:high] holds ``count`` or more
    guess, tries = start + int(count * mean), 0
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
    built when it is read (its template filled with its numbers, split off the nearer end
    of its run's numbers, so that reading a template's first or last line costs little
    and keeps nothing), every line at once, in C, when the window is iterated. Its
    templates and line numbers are runs (``RunColumn``): a line's line number is a sum over
    the runs before it."""

    __slots__ = (
        "_deltas",
        "_ends",
        "_formats",
        "_marks",
        "_runs",
        "_some",
        "_starts",
        "_templates",
        "_texts",
    )  # fmt: skip

    def __init__(
        self,
        formats: TemplateFormats,
        templates: RunColumn,
        texts: Sequence[str],
        deltas: RunColumn,
        runs: tuple[tuple[str, int], ...],
        ends: tuple[int, ...],
        marks: dict[int, BenignWarning],
    ) -> None:
        super().__init__()
        self._formats, self._templates, self._deltas = formats, templates, deltas
        self._texts = texts  # each run's numbers
        self._runs, self._ends, self._marks = runs, ends, marks
        self._some: dict[int, LogLine] = {}  # lines built one by one (the same when read again)
        # (made when a first line is read: the line number before each run of differences)
        self._starts: list[int] | None = None

    def _count(self) -> int:
        return self._templates.ends[-1]

    def damage(self) -> str | None:
        texts = self._texts
        return texts.damage if type(texts) is RunTexts else None

    def template_runs(self) -> tuple[tuple[int, int], ...]:
        """Its templates (numbers into the node's table) as (template, lines) runs."""
        return self._templates.pairs()

    def _place(self, index: int) -> tuple[int, int]:
        """(its run of templates, its place in the run) of a line."""
        templates = self._templates
        run = templates.run_of(index)
        return run, index - templates.start(run)

    def _line_number(self, index: int) -> int:
        if self._starts is None:
            self._starts = self._deltas.totals()
        deltas = self._deltas
        run = deltas.run_of(index)
        return self._starts[run] + (index - deltas.start(run) + 1) * deltas.values[run]

    def _line(self, index: int) -> LogLine:
        line = self._some.get(index)
        if line is not None:
            return line
        run, place = self._place(index)
        template = self._templates.values[run]
        numbers = self._numbers_at(run, place, self._formats.arity[template])
        source = self._runs[bisect.bisect_right(self._ends, index)][0]
        text = self._formats.formats[template] % tuple(numbers)
        line = LogLine(text, source, self._line_number(index), self._marks.get(index))
        self._some[index] = line
        return line

    def numbers(self, index: int) -> tuple[str, ...]:
        """The numbers of a line, read from the digest without building the line: they
        are ``LINE_NUMBER.findall`` of its text, which is where ``encode_window`` cut it."""
        if self._built is not None or index in self._some:
            return super().numbers(index)
        templates = self._templates  # (``_place``, inline: a check asks it of every rank)
        ends = templates.ends
        count = ends[-1]
        if not -count <= index < count:
            raise IndexError("log window index out of range")
        index %= count
        run = bisect.bisect_right(ends, index)
        place = index - ends[run - 1] if run else index
        return tuple(self._numbers_at(run, place, self._formats.arity[templates.values[run]]))

    def _numbers_at(self, run: int, place: int, wanted: int) -> list[str]:
        """The ``wanted`` numbers of the line at ``place`` in a run, from the run's string:
        split off its nearer end when they are close to it (a template's first and last
        lines, the lines read most), else found by counting spaces (in C, from where the
        run's mean number length puts them).

        The log comparison asks this of a few lines of every rank (13 a rank in the
        benchmark, 200,000 calls at 16,384 ranks), each of another rank's objects: the
        common case (a run's first line) is written out with the fewest calls."""
        if not wanted:
            return []
        texts = self._texts
        # (/6: the run is a part of the node's string, checked as it is read; ``span``
        # inline: a RunTexts is this module's)
        lazy = texts if type(texts) is RunTexts else None
        if lazy is not None:
            if lazy.damage is not None:
                raise DamagedWindow(lazy.damage)
            text, ends = lazy._text, lazy._ends
            low, high = ends[run], ends[run + 1]
        else:
            text = texts[run]
            low, high = 0, len(text)
        lines = self._templates.counts[run]
        before, after = place * wanted, (lines - place - 1) * wanted  # numbers around it
        find = text.find
        try:
            if not before:  # (a run's first line: its numbers start the run)
                start = low
            elif after <= min(before, _NEAR):  # (numbers before it: from the end)
                start = high
                for _ in range(after + wanted):
                    start = text.rfind(" ", low, start)
                    if start < 0:
                        raise ValueError("fewer numbers than its lines take")
                start += 1
            elif before <= _NEAR:
                start = low
                for _ in range(before):
                    start = text.index(" ", start, high) + 1
            else:
                if lazy is not None:  # (a line inside a run: counted through the run)
                    lazy.check_run(run)
                mean = (high - low) / (before + wanted + after)
                start = _after_space(text, before, mean, low, high)
        except ValueError as exc:
            if lazy is not None and not isinstance(exc, DamagedWindow):
                raise lazy.damaged(run, str(exc)) from None
            raise
        end = start - 1
        for _ in range(wanted):
            end = find(" ", end + 1, high)
            if end == -1:
                end = high
                break
        found = text[start:end]
        numbers = found.split(" ")
        if lazy is not None and (
            len(numbers) != wanted
            or (not after and end != high)
            or "" in numbers
            or "\n" in found
            or '"' in found
            or "\\" in found
        ):
            raise lazy.damaged(run, "a line's numbers are not its template's")
        return numbers

    def _all(self) -> list[LogLine]:
        joined = " ".join(text for text in self._texts if text)
        numbers = tuple(joined.split(" ")) if joined else ()
        formats = self._formats.formats
        lines = map(itertools.repeat, map(formats.__getitem__, self._templates.values),
                    self._templates.counts)  # fmt: skip
        texts = ("\n".join(itertools.chain.from_iterable(lines)) % numbers).split("\n")
        sources: list[str] = []
        for source, count in self._runs:
            sources.extend(itertools.repeat(source, count))
        out = _lines(texts, sources, list(itertools.accumulate(self._deltas.expanded())))
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
