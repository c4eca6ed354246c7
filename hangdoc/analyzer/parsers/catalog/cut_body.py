"""A first line cut inside a message body, read back from the catalog row whose end it is.

A selection that starts in the middle of a paste's first line takes the header with it,
and often the first words of the message body too: ``ive operation timeout: WorkNCCL(…``
(torch's watchdog), `` to recv from 10.0.0.2<41468> failed : …`` (NCCL's socket WARN).
The matcher searches a row's whole body, so the line is no longer any row's, and what it
said is lost or its remaining words read as the job's own (issue 21 item 3). The
catalog's rows are the message bodies as the sources print them, so the cut line is
matched against their *ends*: a row claims the line when the line starts inside one of
the row's literal runs (the run's rest is the line's start) and the row's template
matches the line from there on. The literal run's cut-away start is then known text,
put back so that every reader reads the message whole; slots before it (a log prefix, a
header) are not, and stay cut.

Only the communication stack's rows are used (NCCL, torch, gloo, CUDA, the kernel): the
messages a paste starts with are theirs far more often than a framework's, and the
frameworks' rows say the same words around other values (Horovod's own copy of NCCL's
recv failure, tried too, took NCCL's line from it and named another culprit). A claim
needs the cut inside the body's words (not only a header's punctuation, not the value of
a text slot, which takes any text), and enough literal text after the cut
(``_MIN_TAIL_LETTERS`` letters in ``_MIN_TAIL_WORDS`` whole words), so that a line of its
own cannot start like the end of a library's message by chance: on the casebook's 469
unmangled files no first line is claimed.

A cut may fall inside a value the message prints, not in its words: torch's watchdog
prints the timed-out work's own description (``WorkNCCL(SeqNum=3, OpType=…)``) between
"operation timeout: " and " ran for N milliseconds before timing out.", and half a line
ends inside it (``eqNum=3, OpType=ALLREDUCE, …) ran for …``). Where no literal run claims
the line, a row claims it from a text slot (``_slot_tail_at``): the row's literal text
after the slot holds the same least letters and words, and the line is no whole row's.
The literal run before the slot is put back, the slot's cut value stays as it is: the
message is read for what it is, without the values the cut took.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

from hangdoc.analyzer.parsers.catalog.loader import Catalog, CatalogRow, default_catalog
from hangdoc.analyzer.parsers.catalog.matcher import default_matcher
from hangdoc.analyzer.parsers.catalog.template import (
    Part,
    Slot,
    literal_length,
    regex_source,
    safe_words,
)

# The projects whose messages are about the library's own state (the catalog's project
# names, analyzer/parsers/catalog/data/*.json).
LIBRARY_PROJECTS = frozenset({"nccl", "torch", "gloo", "cuda", "kernel"})
# Letters and digits of literal text that the row's end must hold after the cut (the
# matcher's least is 12 for a whole row; an end is weaker evidence than a whole).
_MIN_TAIL_LETTERS = 15
# And that many whole literal words: one long name ("torch.distributed", the end of
# "Failed to initialize torch.distributed") starts many a line of its own.
_MIN_TAIL_WORDS = 3
# The literal run the line starts in, followed by a text slot: its rest must hold this
# many letters, or the line starts with that slot's value, and a text slot takes any text
# ("[Rank " + "[E ProcessGroupNCCL.cpp:828] [Rank 3" + "] Watchdog caught …").
_MIN_RUN_LETTERS = 3
_ALNUM = re.compile(r"[A-Za-z0-9]")
_MIN_SHARED_WORDS = 2
# A literal word this common says nothing about which row it is ("failed", "the").
_MAX_ROWS_PER_WORD = 400
# The rows tried, most words shared first: every row sharing as few as three common words
# with a line of ordinary length (69 for a cut watchdog line whose row shares only
# "terminated with exception"), at about 15 us a row, once for a file's first line.
_MAX_CANDIDATES = 256
_MAX_LINE = 4000  # the matcher's limit too (matcher.py)
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")


@dataclass(frozen=True, slots=True)
class CutBody:
    """A line that starts inside a catalog row's literal text."""

    row: CatalogRow
    missing: str  # the cut-away start of the literal run the line starts in
    restored: str  # ``missing`` + the line: the message body from that run on


class _TailIndex:
    """The library rows by their literal words, and each row's pattern from a part on."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.parts: dict[int, tuple[Part, ...]] = {}
        by_word: dict[str, list[int]] = {}
        for index, project, parts in catalog.templates():
            if project not in LIBRARY_PROJECTS:
                continue
            self.parts[index] = parts
            for word in set(safe_words(parts)):
                by_word.setdefault(word, []).append(index)
        self.by_word = {w: rows for w, rows in by_word.items() if len(rows) <= _MAX_ROWS_PER_WORD}
        self._from: dict[tuple[int, int], re.Pattern[str]] = {}

    def pattern_from(self, index: int, part: int) -> re.Pattern[str]:
        key = (index, part)
        found = self._from.get(key)
        if found is None:
            found = self._from[key] = re.compile(regex_source(self.parts[index][part:]))
        return found

    def candidates(self, line: str) -> list[int]:
        # Ranked by the words shared, then by the row's place in the catalog: never by a
        # set's order, which follows the process's string hashing (PYTHONHASHSEED), so
        # that a paste cut at its start gets the same answer in every process.
        shared: Counter[int] = Counter()
        for word in set(_WORDS.findall(line)):
            shared.update(self.by_word.get(word, ()))
        ranked = sorted(
            (i for i, n in shared.items() if n >= _MIN_SHARED_WORDS),
            key=lambda i: (-shared[i], i),
        )
        return ranked[:_MAX_CANDIDATES]


def _slot_cut(index: _TailIndex, line: str) -> tuple[int, int, str] | None:
    """The row whose end the line is from inside one of its text slots (see the module
    docstring), unless the line is a whole row's message: (letters, row, missing)."""
    if default_matcher().match(line) is not None:
        return None
    best: tuple[int, int, str] | None = None
    for row in index.candidates(line):
        found = _slot_tail_at(index, row, line)
        if found is not None and (best is None or found[0] > best[0]):
            best = (found[0], row, found[1])
    return best


@functools.cache
def _index() -> _TailIndex:
    return _TailIndex(default_catalog())


def _tail_at(index: _TailIndex, row: int, line: str) -> tuple[int, str] | None:
    """(literal letters after the cut, the cut-away start) of the row's end that the
    line is, the longest end first; None when the line is no end of the row."""
    parts = index.parts[row]
    for number, part in enumerate(parts):
        if isinstance(part, Slot):
            continue
        for cut in range(1, len(part)):
            if not line.startswith(part[cut:]):
                continue
            if not _ALNUM.search(part[:cut]):
                break  # only a header's punctuation was cut ("] Watchdog …"): no body
            after = parts[number + 1] if number + 1 < len(parts) else None
            if (
                literal_length((part[cut:],)) < _MIN_RUN_LETTERS
                and isinstance(after, Slot)
                and after.type == "text"
            ):
                break  # the line starts with the text slot after it, which takes any text
            tail: list[Part] = [part[cut:], *parts[number + 1 :]]
            letters = literal_length(tail)
            if letters < _MIN_TAIL_LETTERS or len(safe_words(tuple(tail))) < _MIN_TAIL_WORDS:
                break  # later cuts leave less
            if index.pattern_from(row, number).match(part[:cut] + line) is not None:
                return letters, part[:cut]
            break  # a longer end of this run did not fit; a shorter one fits no better
    return None


def _holds_end_of(line: str, run: str) -> bool:
    """The line holds the last two words of ``run`` (in any case): the message's words
    before the slot are there (a header-less or reworded copy of the message), so the
    line does not start inside the slot's value."""
    words = _WORDS.findall(run)[-2:]
    if not words:
        return False
    return re.search(r"\W+".join(words), line, re.IGNORECASE) is not None


def _slot_tail_at(index: _TailIndex, row: int, line: str) -> tuple[int, str] | None:
    """(literal letters after the slot, the literal run before it) of the row's end that
    the line is when the line starts inside a text slot's value (the value's start cut,
    its rest kept): the slot follows a literal run of words, and what comes after the
    slot holds enough literal text to say which row it is; None when no slot fits."""
    parts = index.parts[row]
    for number in range(1, len(parts) - 1):
        part, before = parts[number], parts[number - 1]
        if not isinstance(part, Slot) or part.type != "text" or not isinstance(before, str):
            continue
        if not _ALNUM.search(before):
            continue  # no words before the slot to put back
        tail = tuple(parts[number + 1 :])
        if literal_length(tail) < _MIN_TAIL_LETTERS or len(safe_words(tail)) < _MIN_TAIL_WORDS:
            continue
        if _holds_end_of(line, before):
            continue  # the words before the slot are in the line: its header was cut, not this
        if index.pattern_from(row, number - 1).match(before + line) is not None:
            return literal_length(tail), before
    return None


def cut_body(line: str) -> CutBody | None:
    """The library row whose body's end the line is, with the cut-away start of the
    literal run the line starts in; None when no row's end fits. A line that is a row's
    whole message (or starts with a header) is the matcher's, not this."""
    if not line.strip():
        return None
    index = _index()
    best: tuple[int, int, str] | None = None
    head = line[:_MAX_LINE]  # a message body is short; a line may be a megabyte of JSON
    for row in index.candidates(head):
        found = _tail_at(index, row, head)
        if found is not None and (best is None or found[0] > best[0]):
            best = (found[0], row, found[1])
    if best is None:
        best = _slot_cut(index, head)
    if best is None:
        return None
    _, row, missing = best
    return CutBody(index.catalog.row(row), missing, missing + line)
