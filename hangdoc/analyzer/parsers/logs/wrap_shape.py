"""What a line's peeling says of it but its identity, remembered per line shape.

Two readers peel lines only to learn a few facts of them: the log scanner, of a line the
prefilter passed over, whether it is tagged and whether it may continue the line before
(a hard-wrapped line takes the identity of the one it continues); the line window, of an
untagged line, where its text starts, whether its header names the library as its
writer, and whether it is indented. A log's lines are few shapes (its step lines differ
in their numbers only), and peeling one is 5 µs: the facts are remembered per shape.

A line's wrap shape is its ASCII digits 0 (prefilter.line_shape). Every test peel_line
and headerless make of a digit is of its class, in which all ten are alike, but for the
values of a date's month and day (timefmt's 1-12 and 1-31) and _MPI_RANK_TAG's literal
"[1,"; a line holding "[1," is peeled, and the digits a date's test read are told apart
by class: 0, 1, 2, 3 or "4 or more" in each place decide those tests alike
(tests/unit/logs/test_wrap_shape.py). So two lines of one wrap shape whose digits at the
places the first one's peeling tested are of one class take the same path through the
peeling: the same layers, of the same lengths, so the same facts.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hangdoc.analyzer.parsers.logs.prefilter import line_shape
from hangdoc.analyzer.parsers.logs.prefix import LineTag, peel_line, peel_line_reads
from hangdoc.analyzer.parsers.prefixes import clean_line

NCCL_HEAD = re.compile(r"[A-Za-z0-9][\w.\-]*:\d+:\d+ \[\d+\] ")
# Whose words a logging line is, by the origin its header names: torch's C++ (glog/c10
# headers name a source file, "ProcessGroupNCCL.cpp:632") and torch's Python loggers
# ("torch.distributed.elastic…") are the library's. Any other logger is the job's or its
# framework's: "2024-02-18 10:28:25,496 - root - INFO - Saving latest checkpoint …" is what
# the job was doing, and the log comparison and HD061 must see it (parsers/logs/window.py).
LIBRARY_ORIGIN = re.compile(r"\.(?:cpp|cc|cu|cuh|c|h|hpp):\d+$|^torch(?:\.|$)")

_DIGIT_CLASS = str.maketrans("56789", "44444")
_MAX_WRAP_SHAPES = 4096
MAX_WRAP_SHAPE_LINE = 1024  # a longer line is peeled (the memory a shape holds is bounded)
_MAX_PER_WRAP_SHAPE = 8


def headerless(tag: LineTag) -> bool:
    """A line no prefix, NCCL header or level names the writer of."""
    return not tag.tagged and not NCCL_HEAD.match(tag.text) and tag.level is None


@dataclass(frozen=True, slots=True)
class WrapFacts:
    """What the scanner's wrap tests and the line window read of a line's tag, but its
    identity."""

    tagged: bool
    joins: bool  # headerless and not blank: it continues a long enough line before it
    indented: bool  # its text starts with a space or a tab: it continues any line before it
    ranked: bool  # a layer named a rank (tagged or not: Determined's "[rank=3]")
    library: bool  # its header's origin is the library's (LIBRARY_ORIGIN)
    text_from: int  # where its text starts in the line (-1: unknown, see facts_of)


def facts_of(tag: LineTag, line: str | None) -> WrapFacts:
    """The facts of ``tag``, the peeling of ``line`` where that is plain (its text is
    an end of it, read from text_from on), or of a line that is not (None: its text is
    one of the cleaned line, and text_from is -1)."""
    text = tag.text
    return WrapFacts(
        tag.tagged,
        headerless(tag) and bool(text.strip()),
        text[:1] in " \t",
        tag.rank is not None,
        tag.origin is not None and LIBRARY_ORIGIN.search(tag.origin) is not None,
        len(line) - len(text) if line is not None and line.endswith(text) else -1,
    )


def plain(raw: str) -> bool:
    """Whether a line's facts are remembered by its shape: short, no "[1," (whose digit
    is a literal), and nothing cleaning it takes out (so its peeling reads it as it is)."""
    return not (
        len(raw) > MAX_WRAP_SHAPE_LINE
        or "[1," in raw
        or raw[-1:] == "\n"
        or "\x1b" in raw
        or "\r" in raw
        or ("[" in raw and "m" in raw and clean_line(raw) != raw)
    )


_wrap_shapes: dict[bytes, list[tuple[Callable[[str], object], str, WrapFacts]]] = {}
# Of each shape's first entry: its digits' getter, the digits (as the getter gives them)
# of lines found of its classes, and its facts: a log's lines of one shape mostly carry
# the same date, found again at one look-up instead of their classes' comparison. Then
# the facts of other digits found already, and while every entry of the shape reads the
# first's places (the last item), its entries' facts by their classes: the one entry a
# line's classes match (a log's lines of one shape and several dates are found at one or
# two look-ups, not by comparing the entries one by one).
_FirstEntry = tuple[
    Callable[[str], object],
    set[object],
    WrapFacts,
    dict[object, WrapFacts],
    dict[str, WrapFacts] | None,
    tuple[int, ...],
]
_first_entries: dict[bytes, _FirstEntry] = {}
_MAX_FIRST_DIGITS = 64


def wrap_facts(raw: str, shape: bytes | None = None) -> WrapFacts:
    """facts_of(peel_line(raw)), remembered per wrap shape (prefilter.line_shape:
    ``shape``, where the caller has it) and the classes of the digits its peeling tested
    (a log's step lines are one shape, one entry).

    A shape is remembered of a plain line only, and whether a line is plain is read of
    its shape but for "[1,": a line without one, of a shape remembered, is plain too."""
    seen = None
    if len(raw) <= MAX_WRAP_SHAPE_LINE:
        if shape is None:
            shape = line_shape(raw)
        seen = _wrap_shapes.get(shape)
        if seen is not None and "[1," not in raw:
            first, found, first_facts, found_other, by_classes, _ = _first_entries[shape]
            read = first(raw)
            if read in found:
                return first_facts
            known = found_other.get(read)
            if known is not None:
                return known
            if by_classes is not None:
                known = by_classes.get(_classes(first, raw))
                if known is not None:
                    if len(found) + len(found_other) >= _MAX_FIRST_DIGITS:
                        pass
                    elif known is first_facts:
                        found.add(read)
                    else:
                        found_other[read] = known
                    return known
            else:
                for index, (digits, classes, facts) in enumerate(seen):
                    if _classes(digits, raw) == classes:
                        if index == 0 and len(found) < _MAX_FIRST_DIGITS:
                            found.add(read)
                        return facts
    if not plain(raw):
        return facts_of(peel_line(raw), None)
    assert shape is not None  # a plain line is short
    if seen is None and len(_wrap_shapes) >= _MAX_WRAP_SHAPES:
        _wrap_shapes.clear()
        _first_entries.clear()
    tag, places = peel_line_reads(raw)
    facts = facts_of(tag, raw)
    entries = _wrap_shapes.setdefault(shape, [])
    if len(entries) < _MAX_PER_WRAP_SHAPE:
        digits = operator.itemgetter(*(-place for place in places)) if places else _no_digits
        entries.append((digits, _classes(digits, raw), facts))
        first_entry = _first_entries.get(shape) if len(entries) > 1 else None
        if first_entry is None:
            of_classes = {_classes(digits, raw): facts}
            _first_entries[shape] = (digits, {digits(raw)}, facts, {}, of_classes, places)
        elif first_entry[4] is not None and first_entry[5] == places:
            first_entry[4][_classes(digits, raw)] = facts
        else:  # entries of other places: compared one by one, in turn
            _first_entries[shape] = (*first_entry[:4], None, first_entry[5])
    return facts


def forget() -> None:
    """Forget every shape remembered (a test's fresh start)."""
    _wrap_shapes.clear()
    _first_entries.clear()


def _no_digits(raw: str) -> str:
    return ""


def _classes(digits: Callable[[str], object], raw: str) -> str:
    """The classes of the digits ``digits`` takes of ``raw`` (one, or a tuple of them)."""
    return "".join(digits(raw)).translate(_DIGIT_CLASS)  # type: ignore[arg-type]


def run_codes(lines: list[str], shapes: list[bytes], code_of: Callable[[WrapFacts], int]) -> bytes:
    """``bytes(code_of(wrap_facts(line, shape)) ...)`` of lines of at most
    MAX_WRAP_SHAPE_LINE characters and their shapes (a log scanner's run of lines passed
    over), in C where every line's facts are its shape's first entry's already found
    (known_facts), else line by line."""
    known = known_facts(lines, shapes)
    if known is not None:
        code = {shape: code_of(facts) for shape, facts in known.items()}
        return bytes(map(code.__getitem__, shapes))
    facts = list(map(wrap_facts, lines, shapes))
    ids = list(map(id, facts))
    by_id = {key: code_of(one) for key, one in dict(zip(ids, facts, strict=True)).items()}
    return bytes(map(by_id.__getitem__, ids))


def known_facts(lines: list[str], shapes: list[bytes]) -> dict[bytes, WrapFacts] | None:
    """Each shape's facts, where wrap_facts of every line (of at most
    MAX_WRAP_SHAPE_LINE characters, with its shape) would answer its shape's first
    entry's at its first look-up (the digits the entry reads are among those found of
    its classes), found without asking it line by line; None where that is not sure.

    Sure when: every shape is remembered, none holds "[0," (a line with "[1," is peeled,
    not looked up), and the digits every first entry reads lie at the same places from
    the line's start (a log's lines of one date, whose length differs by its numbers'),
    so one getter reads them all at once, and the digits each line reads are found by
    its shape's entry, or found of other classes with facts equal to the entry's
    (shapes that read no digit: always)."""
    places_from_start: tuple[int, ...] | None = None
    known: dict[bytes, WrapFacts] = {}
    entries: dict[bytes, _FirstEntry] = {}
    for shape, line in dict(zip(shapes, lines, strict=True)).items():
        entry = _first_entries.get(shape)
        if entry is None or shape not in _wrap_shapes or b"[0," in shape:
            return None
        known[shape] = entry[2]
        places = entry[5]
        if not places:
            continue  # it reads no digit: every line of it is its first entry's
        at = tuple(len(line) - place for place in places)
        if places_from_start is None:
            places_from_start = at
        elif at != places_from_start:
            return None
        entries[shape] = entry
    if places_from_start is not None:
        read = _read_digits(lines, shapes, known, places_from_start)
        if read is None:
            return None
        for shape, digits in read:
            entry = entries.get(shape)
            if entry is None or digits in entry[1]:
                continue  # no digit read, or found of the first entry's classes
            # found since of other classes (another date), or the classes' own entry:
            # what wrap_facts' next look-ups answer
            _, _, facts, found_other, by_classes, _ = entry
            other = found_other.get(digits)
            if other is None and by_classes is not None:
                other = by_classes.get("".join(digits).translate(_DIGIT_CLASS))
            if other != facts:
                return None
    return known


def _read_digits(
    lines: list[str],
    shapes: list[bytes],
    distinct: dict[bytes, WrapFacts],
    places: tuple[int, ...],
) -> set[tuple[bytes, Any]] | None:
    """The (shape, digits read at ``places`` from the line's start) of the lines; None
    where a line is too short to hold them.

    A log's lines of one run mostly carry one date: the span from the first place to the
    last is cut of each line (one string a line), and where every line's is the same,
    every line reads the same digits, so the pairs are each distinct shape's with them
    (not a tuple a line for each line's pair: 1.9 ms of a bench rank's 8,200 step lines,
    against 0.6)."""
    low, high = min(places), max(places) + 1
    spans = set(map(operator.itemgetter(slice(low, high)), lines))
    if len(spans) == 1:
        (span,) = spans
        if len(span) < high - low:
            return None  # every line is too short
        digits = operator.itemgetter(*(place - low for place in places))(span)
        return {(shape, digits) for shape in distinct}
    try:
        return set(zip(shapes, map(operator.itemgetter(*places), lines), strict=True))
    except IndexError:  # a short line of a shape that reads no digit
        return None
