"""A rank's log window read from its raw log, held as the digest a node summary holds.

Why: a raw analysis kept every rank's window (1,567 lines of a 1 MB rank log) as
``LogLine`` records, 326 KB a rank: 5.3 GB at 16,384 ranks, most of the raw path's memory,
while the views read the text of a dozen lines a rank (the log comparison) and the
others by column (``sources``, ``benign_marks``). The summaries path holds the same
windows as digests (``summaries/log_window.DigestWindow``: runs of template numbers and
of line-number differences, the numbers' text; a line built when read). Here the raw
path makes the same digests: a text worker cuts a rank's window into columns
(``parsers/logs/window.read_window_columns``), ``digest_columns`` turns them into a
``WindowDigest`` at C speed (the lines' shapes by one translate, ``LINE_NUMBER`` once a
shape), which is also what the worker sends back (a fifth of the columns' pickle); the
loader numbers the templates job-wide (``JobTemplates``) and keeps a ``PackedWindow`` (a
``DigestWindow`` whose numbers are zlib blocks), whose templates the log comparison reads
as runs without masking a line (``LogTemplates``), as it does from a summary: ranks whose
windows give the same runs are compared once.

The lines are the same records the columns give (text, source, line number, benign
mark: a template is a line cut at its ``LINE_NUMBER`` matches, which never hold a space
nor cross a line end, so the window's text joined by "\\n" cuts as each line does);
``tests/unit/logs/test_window_digest.py`` holds every recorded log's windows to that.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import operator
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hangdoc.analyzer.model import (
    LINE_NUMBER,
    LogLine,
    LogLines,
    LogTemplates,
    LogWindow,
    ProcessEvidence,
)
from hangdoc.analyzer.parsers.logs.window import UNATTRIBUTED, WindowColumns
from hangdoc.analyzer.summaries.log_window import (
    DamagedWindow,
    DigestWindow,
    RunColumn,
    TemplateFormats,
)
from hangdoc.analyzer.vocabulary import BenignWarning

# Where a line's numbers were, in its template (a line holding one is not digested).
_HOLE = "\x00"


# A window's numbers are packed in blocks of this many, each compressed: a block is read
# (14 µs) for a line read alone, the whole for a window built.
NUMBERS_PER_BLOCK = 512


@dataclass(frozen=True, slots=True)
class PackedNumbers:
    """A window's numbers (its lines' ``LINE_NUMBER`` matches, in order), in blocks:
    each block its numbers space-joined, UTF-8, zlib-compressed (level 1). The numbers
    were 85 % of a digest (53 KB of a bench rank's 62 KB), and compress threefold;
    ``starts`` is each block's first number's index."""

    blocks: tuple[bytes, ...]
    starts: tuple[int, ...]
    count: int

    def block(self, index: int) -> list[str]:
        return zlib.decompress(self.blocks[index]).decode("utf-8").split(" ")

    def text(self) -> str:
        """Every number, space-joined (a ``DigestWindow``'s text)."""
        return " ".join(zlib.decompress(block).decode("utf-8") for block in self.blocks)

    def then(self, other: PackedNumbers) -> PackedNumbers:
        """These numbers, then ``other``'s."""
        starts = (*self.starts, *(start + self.count for start in other.starts))
        return PackedNumbers((*self.blocks, *other.blocks), starts, self.count + other.count)


def pack_numbers(numbers: list[str]) -> PackedNumbers:
    step = NUMBERS_PER_BLOCK
    starts = tuple(range(0, len(numbers), step))
    blocks = tuple(
        zlib.compress(" ".join(numbers[start : start + step]).encode("utf-8"), 1)
        for start in starts
    )
    return PackedNumbers(blocks, starts, len(numbers))


# The block read last, of which window: the views read a few lines of one window, then
# of the next (a block kept per window would be 16,384 of them).
_last_block: list[tuple[object, int, list[str]]] = []


class PackedWindow(DigestWindow):
    """A ``DigestWindow`` whose numbers are packed (``PackedNumbers``, the window's in
    order, not a string per run of templates): a line read alone unpacks the block its
    numbers are in (where they start: the numbers of the runs before it, and of the lines
    before it in its run), a window built unpacks them all."""

    __slots__ = ("_firsts", "_packed")

    def __init__(
        self,
        formats: TemplateFormats,
        templates: RunColumn,
        numbers: PackedNumbers,
        deltas: RunColumn,
        runs: tuple[tuple[str, int], ...],
        ends: tuple[int, ...],
        marks: dict[int, BenignWarning],
    ) -> None:
        super().__init__(formats, templates, [], deltas, runs, ends, marks)
        self._packed = numbers
        # (made when a first line is read: each run of templates' first number's index)
        self._firsts: list[int] | None = None

    def _block(self, index: int) -> list[str]:
        if _last_block and _last_block[0][0] is self and _last_block[0][1] == index:
            return _last_block[0][2]
        numbers = self._packed.block(index)
        _last_block[:] = [(self, index, numbers)]
        return numbers

    def _numbers_at(self, run: int, place: int, wanted: int) -> list[str]:
        if not wanted:
            return []
        if self._firsts is None:
            self._firsts = self._templates.totals(self._formats.arity)
        first = self._firsts[run] + place * wanted
        starts = self._packed.starts
        index = bisect.bisect_right(starts, first) - 1
        start, numbers = starts[index], self._block(index)
        while start + len(numbers) < first + wanted:  # (a line's numbers over two blocks)
            index += 1
            numbers = numbers + self._block(index)
        return numbers[first - start : first - start + wanted]

    def _all(self) -> list[LogLine]:
        # the numbers as one run's string: the whole window's are joined there anyway
        self._texts = [self._packed.text()]
        return super()._all()


@dataclass(frozen=True, slots=True)
class WindowDigest:
    """One rank's window of one file, digested: its templates as runs (numbers into
    ``templates``, the file's own, first-seen order: each template is the line with
    ``_HOLE`` where its numbers were), all numbers packed, the line numbers as runs of
    differences from the line before (0: not numbered), the benign marks by line."""

    templates: tuple[str, ...]
    ids: list[int]  # each run's template
    id_counts: list[int]  # its lines
    numbers: PackedNumbers
    deltas: list[int]  # each run's line-number difference
    delta_counts: list[int]
    marks: tuple[tuple[int, BenignWarning], ...]


def _as_runs(values: Iterable[int]) -> tuple[list[int], list[int]]:
    """(each run's value, its length) of a column."""
    out: list[int] = []
    counts: list[int] = []
    for value, group in itertools.groupby(values):
        out.append(value)
        counts.append(sum(1 for _ in group))
    return out, counts


def digest_columns(columns: WindowColumns) -> WindowDigest | None:
    """The window's digest, None when it has no line or a line holds ``_HOLE`` (then
    its records are built from the columns, as before)."""
    texts = columns.texts
    if not texts:
        return None
    joined = "\n".join(texts)
    if _HOLE in joined:
        return None
    cut = _cut_by_shape(texts, joined) if joined.isascii() else None
    if cut is None:
        cut = _cut(texts, joined)
        if cut is None:
            return None
    local, ids, numbers = cut
    lines = columns.numbers
    id_runs = _as_runs(ids)
    delta_runs = _as_runs(map(operator.sub, lines, itertools.chain((0,), lines)))
    return WindowDigest(
        tuple(local), *id_runs, pack_numbers(numbers), *delta_runs, tuple(columns.marks)
    )


_Cut = tuple[dict[str, int], list[int], list[str]]  # templates, each line's, numbers


def _cut(texts: list[str], joined: str) -> _Cut | None:
    """Each line's template and the numbers, by ``LINE_NUMBER`` over the whole window
    (16 ns a character: 2.5 ms a pass over a bench rank's window)."""
    shapes = LINE_NUMBER.sub(_HOLE, joined).split("\n")
    if len(shapes) != len(texts):  # (a text holding "\n": the reader cuts none)
        return None
    local = {shape: index for index, shape in enumerate(dict.fromkeys(shapes))}
    ids = list(map(local.__getitem__, shapes))
    return local, ids, LINE_NUMBER.findall(joined)


# A line's shape: its bytes with every digit made one byte (NUL), as the log comparison
# has it: which spans ``LINE_NUMBER`` matches depends only on where the digits, colons,
# dots and letters are, except for hex ("0x…", where the digit before the x must be 0).
_SHAPE = bytes.maketrans(b"0123456789", b"\x00" * 10)
_HEX_SHAPE = b"\x00x"
# (a shape's template id, what takes its numbers out of a line, how many it has)
_ShapeCut = tuple[int, Callable[[str], Any], int]


def _cut_by_shape(texts: list[str], joined: str) -> _Cut | None:
    """``_cut`` of an ASCII window, five times faster: the lines' shapes in C (one
    translate and split), ``LINE_NUMBER`` once per shape (a bench rank's 1,567 lines
    have a few dozen), each line's numbers cut at its shape's spans by one ``itemgetter``
    of slices. A shape that may hold hex is cut line by line."""
    shapes = joined.encode("ascii").translate(_SHAPE).split(b"\n")
    if len(shapes) != len(texts):
        return None
    local: dict[str, int] = {}
    cuts: dict[bytes, _ShapeCut] = {}
    ids: list[int] = []
    numbers: list[str] = []
    add, extend = numbers.append, numbers.extend
    for text, shape in zip(texts, shapes, strict=True):
        cut = cuts.get(shape)
        if cut is None:
            cut = _shape_cut(text, local)
            if _HEX_SHAPE in shape:  # (not kept: the next line of it may differ)
                ids.append(cut[0])
                extend(LINE_NUMBER.findall(text))
                continue
            cuts[shape] = cut
        ids.append(cut[0])
        if cut[2] == 1:
            add(cut[1](text))
        elif cut[2]:
            extend(cut[1](text))
    return local, ids, numbers


def _shape_cut(text: str, local: dict[str, int]) -> _ShapeCut:
    spans = [match.span() for match in LINE_NUMBER.finditer(text)]
    template = _HOLE.join(LINE_NUMBER.split(text))
    found = local.get(template)
    if found is None:
        found = local[template] = len(local)
    if not spans:
        return found, str, 0  # (never called: a line without numbers)
    return found, operator.itemgetter(*(slice(a, b) for a, b in spans)), len(spans)


RankWindow = WindowColumns | WindowDigest


def digest_windows(columns: dict[int, WindowColumns]) -> dict[int, RankWindow]:
    """Each rank's window digested where it can be (the unattributed lines are the
    job's list, never a rank's window: kept as columns)."""
    out: dict[int, RankWindow] = {}
    for rank, window in columns.items():
        digest = digest_columns(window) if rank != UNATTRIBUTED else None
        out[rank] = digest if digest is not None else window
    return out


class _JobFormats(TemplateFormats):
    """``TemplateFormats`` grown as windows arrive: ``masked`` is complete at ``seal``."""

    def __init__(self) -> None:
        super().__init__([])
        self.masked_list: list[str] = []

    def add(self, pieces: list[str]) -> None:
        self.formats.append("%s".join(p.replace("%", "%%") for p in pieces))
        self.masked_list.append("#".join(pieces))
        self.lengths.append(sum(map(len, pieces)))
        self.arity.append(len(pieces) - 1)


@dataclass(frozen=True, slots=True)
class _Made:
    """What a window made by ``JobTemplates`` was made of (to join it with the next)."""

    window: DigestWindow | None  # None: not made yet
    ids: tuple[list[int], list[int]]  # the templates' runs: values, counts
    numbers: PackedNumbers
    deltas: tuple[list[int], list[int]]  # the line-number differences' runs
    runs: tuple[tuple[str, int], ...]
    marks: dict[int, BenignWarning]


class JobTemplates:
    """The templates of every rank window one loader digests, numbered job-wide (a job's
    ranks print the same few), and the windows made of them: a rank's windows of several
    files (its stdout and stderr) are joined into one (``add_lines``), and ``attach``
    gives their processes their ``LogTemplates`` once every template is known."""

    def __init__(self) -> None:
        self._formats = _JobFormats()
        self._index: dict[str, int] = {}
        self._made: dict[int, _Made] = {}
        # windows found damaged when joined (a node summary's, read when first joined)
        self.notes: list[str] = []

    def _global(self, template: str) -> int:
        found = self._index.get(template)
        if found is None:
            found = self._index[template] = len(self._formats.formats)
            self._formats.add(template.split(_HOLE))
        return found

    def _window(self, made: _Made) -> DigestWindow:
        ends = tuple(itertools.accumulate(count for _, count in made.runs))
        window = PackedWindow(
            self._formats, RunColumn(*made.ids), made.numbers, RunColumn(*made.deltas),
            made.runs, ends, made.marks,
        )  # fmt: skip
        self._made[id(window)] = dataclasses.replace(made, window=window)
        return window

    def window(self, digest: WindowDigest, source: str) -> DigestWindow:
        """The digest as a window of lines from ``source``."""
        mapping = list(map(self._global, digest.templates))
        ids = list(map(mapping.__getitem__, digest.ids))  # (distinct templates: runs stay)
        return self._window(
            _Made(
                None,
                (ids, list(digest.id_counts)),
                digest.numbers,
                (list(digest.deltas), list(digest.delta_counts)),
                ((source, sum(digest.id_counts)),),
                dict(digest.marks),
            )
        )

    def windows(self, read: dict[int, RankWindow], source: str) -> dict[int, LogLines]:
        """Each rank's window: a digest's as a ``DigestWindow``, columns' as records."""
        return {
            rank: self.window(window, source)
            if isinstance(window, WindowDigest)
            else window.lines(source)
            for rank, window in read.items()
        }

    def _unbuilt(self, lines: LogLines) -> _Made | None:
        made = self._made.get(id(lines))
        window = made.window if made is not None else None
        if window is None or window is not lines or window._built is not None:
            return None  # (a window built may have been changed as a list since)
        return made

    def add_lines(self, proc: ProcessEvidence, lines: LogLines) -> None:
        """``proc.log_lines.extend(lines)``, except that a window given to a process
        without lines becomes its window as it is, no lines leave a window as it is, and
        two windows made here are joined into a third (extending would build them)."""
        if not lines:
            return
        if isinstance(lines, LogWindow) and not proc.log_lines:
            proc.log_lines = lines
            return
        first, second = self._unbuilt(proc.log_lines), self._unbuilt(lines)
        if first is None or second is None:
            readable = self._readable(proc.log_lines)
            if readable is not proc.log_lines:
                proc.log_lines, proc.log_templates = readable, None
            proc.log_lines.extend(self._readable(lines))
            return
        del self._made[id(proc.log_lines)], self._made[id(lines)]
        proc.log_lines = self._window(_joined(first, second))

    def _readable(self, lines: LogLines) -> LogLines:
        """The lines, built, or none when they are a window found damaged as it is built
        (a node summary's numbers are checked when read: summaries/log_window.RunTexts),
        with a warning naming the summary, as the analysis leaves one out."""
        if isinstance(lines, LogWindow):
            try:
                lines.lines()
            except DamagedWindow as exc:
                self.notes.append(f"{exc}; that rank's log window is left out, the rest is read")
                return []
        return lines

    def attach(self, processes: list[ProcessEvidence]) -> None:
        """Give each process whose log window is one made here its templates' runs (the
        log comparison then masks none of its lines, and compares ranks of the same runs
        once); forget the windows."""
        if not self._made:
            return
        masked = tuple(self._formats.masked_list)
        self._formats.masked = masked
        for proc in processes:
            made = self._made.get(id(proc.log_lines))
            if made is not None and made.window is proc.log_lines:
                runs = made.window.template_runs()
                proc.log_templates = LogTemplates(masked, runs, proc.log_lines)
        self._made.clear()


def _then(
    first: tuple[list[int], list[int]], second: Iterable[tuple[int, int]]
) -> tuple[list[int], list[int]]:
    """The runs of ``first``, then the (value, count) runs of ``second`` (a run that goes
    on with the same value is one)."""
    values, counts = list(first[0]), list(first[1])
    for value, count in second:
        if values and values[-1] == value:
            counts[-1] += count
        else:
            values.append(value)
            counts.append(count)
    return values, counts


def _joined(first: _Made, second: _Made) -> _Made:
    """The lines of ``first`` then those of ``second``, as one window's parts."""
    shift = sum(first.ids[1])
    ids = _then(first.ids, zip(*second.ids, strict=True))
    # the second's first line number is told from the first's last line now
    last = sum(map(operator.mul, *first.deltas))
    (delta, count), *rest = zip(*second.deltas, strict=True)
    head = [(delta - last, 1), *([(delta, count - 1)] if count > 1 else [])]
    deltas = _then(first.deltas, [*head, *rest])
    runs = list(first.runs)
    for source, lines in second.runs:
        if runs[-1][0] == source:
            runs[-1] = (source, runs[-1][1] + lines)
        else:
            runs.append((source, lines))
    numbers = first.numbers.then(second.numbers)
    marks = {**first.marks, **{index + shift: mark for index, mark in second.marks.items()}}
    return _Made(None, ids, numbers, deltas, tuple(runs), marks)
