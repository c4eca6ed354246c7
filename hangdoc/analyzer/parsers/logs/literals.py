"""The literal words a regular expression cannot match without: a cheap test before it.

Every line of every log is offered to every recogniser (DESIGN: text is scanned, not
sniffed), so a recogniser pays for the lines it does not match. A training log is mostly
step lines ("epoch 3 step 8400 | loss 2.0076 | …"), which pass a recogniser's keyword
prefilter ("step", "loss") and then fail a dozen searches: 30 µs a line, most of the
parse of a 1 MB log. ``gate(pattern)`` reads the pattern's syntax tree once and finds
what every match must contain: per branch of a top-level alternation, the parts of its
sequence that cannot be skipped (a literal run, a group of alternative phrases, the body
of a repeat that must occur), each a set of literals one of which is in the match. The
search then runs only on a line that holds, for some branch, one literal of each of its
sets. The sets are derived from the pattern itself, so a phrase added to a recogniser is
covered without anyone keeping a list.

A pattern that ignores case anywhere is gated on the lower-cased line, and only for
ASCII lines (``re``'s case-insensitive matching knows non-ASCII equivalences, such as the
Kelvin sign and "k", that lower-casing does not); other lines run the search as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

__all__ = ["Gate", "Need", "any_of", "gate", "required_literals"]

_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
# A branch keeps at most this many sets (the longest literals first): enough to rule out
# ordinary lines, few enough to test quickly.
_SETS_PER_BRANCH = 3

Literals = frozenset[str]  # one of these is in every match (of a part)
Branch = tuple[Literals, ...]  # all of these parts are in every match of a branch


def required_literals(pattern: re.Pattern[str]) -> tuple[tuple[Branch, ...], bool] | None:
    """Per top-level branch, the sets of literals that each of its matches contains one of
    (all of them), and whether the literals are lower-cased; None when some branch can
    match without any fixed text."""
    folded = [bool(pattern.flags & re.IGNORECASE)]
    tree = sre_parse.parse(pattern.pattern, pattern.flags)
    items = list(tree)
    top_branch = len(items) == 1 and items[0][0] is sre.BRANCH
    alternatives = items[0][1][1] if top_branch else [items]
    branches: list[Branch] = []
    for alternative in alternatives:
        parts = _parts(alternative, folded)
        if not parts:
            return None
        best = sorted(parts, key=lambda found: (-min(map(len, found)), len(found)))
        branches.append(tuple(best[:_SETS_PER_BRANCH]))
    if folded[0]:
        branches = [tuple(frozenset(x.lower() for x in part) for part in b) for b in branches]
    return tuple(branches), folded[0]


def _parts(items: Any, folded: list[bool]) -> list[Literals]:
    """The sets a sequence's every match holds one literal of, one per required part."""
    parts: list[Literals] = []
    run: list[str] = []
    for op, av in items:
        if op is sre.LITERAL:
            run.append(chr(av))
            continue
        if run:
            parts.append(frozenset({"".join(run)}))
            run = []
        part = _node(op, av, folded)
        if part is not None:
            parts.append(part)
    if run:
        parts.append(frozenset({"".join(run)}))
    return parts


def _one_of(items: Any, folded: list[bool]) -> Literals | None:
    """A single set for a sub-sequence: its most selective required part."""
    parts = _parts(items, folded)
    if not parts:
        return None
    return max(parts, key=lambda found: (min(map(len, found)), -len(found)))


def _node(op: Any, av: Any, folded: list[bool]) -> Literals | None:
    if op is sre.SUBPATTERN:
        _group, add_flags, _del_flags, body = av
        if add_flags & re.IGNORECASE:
            folded[0] = True
        return _one_of(body, folded)
    if op is sre.ATOMIC_GROUP:
        return _one_of(av, folded)
    if op is sre.BRANCH:
        union: set[str] = set()
        for alternative in av[1]:
            found = _one_of(alternative, folded)
            if found is None:
                return None  # this alternative can match without any literal
            union |= found
        return frozenset(union)
    if op in _REPEATS:
        least, _most, body = av
        return _one_of(body, folded) if least >= 1 else None
    return None  # classes, anchors, lookarounds, back references: no literal of their own


def _search_for(literals: Literals) -> Callable[[str], object]:
    """One C-level search for any of ``literals`` (a match object, or None)."""
    return re.compile("|".join(map(re.escape, sorted(literals, key=lambda x: (-len(x), x))))).search


def any_of(words: Iterable[str]) -> Callable[[str], bool]:
    """``lambda text: any(w in text for w in words)`` as one C-level search: a keyword
    list of 20 or 30 words tested word by word cost a microsecond or more on every line."""
    search = _search_for(frozenset(words))
    return lambda text: search(text) is not None


class Gate:
    """``pattern.search``, run only on text that holds what a match must hold."""

    __slots__ = ("_first", "_tests", "branches", "folded", "pattern", "search")

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        found = required_literals(pattern)
        self.branches: tuple[Branch, ...] = found[0] if found else ()
        self.folded = bool(found and found[1])
        # first, one search for a literal of any branch's most selective set (most lines
        # hold none: one C call); then each branch's sets in turn
        self._first = _search_for(frozenset().union(*(b[0] for b in self.branches)))
        self._tests = tuple(tuple(map(_search_for, branch)) for branch in self.branches)
        self.search: Callable[..., re.Match[str] | None] = (
            self._search if found is not None else pattern.search
        )

    def admits(self, text: str) -> bool:
        """False only when no match of the pattern can be in ``text``."""
        if self.folded:
            if not text.isascii():
                return True
            text = text.lower()
        if self._first(text) is None:
            return False
        for tests in self._tests:
            for test in tests:
                if test(text) is None:
                    break
            else:
                return True
        return False

    def _search(self, text: str, *args: int) -> re.Match[str] | None:
        if not self.admits(text):
            return None
        return self.pattern.search(text, *args)

    def first_literals(self) -> frozenset[str] | None:
        """The literals of every branch's most selective set (admits' first search: a
        text that holds none of them holds no match), None where that test is none (no
        literal required, or one read case-folded)."""
        if not self.branches or self.folded:
            return None
        return frozenset().union(*(branch[0] for branch in self.branches))

    def search_held(self, text: str) -> re.Match[str] | None:
        """``search``, for a text known to hold one of ``first_literals`` (that search
        not made again)."""
        for tests in self._tests:
            if all(test(text) is not None for test in tests[1:]):
                return self.pattern.search(text)
        return None


def gate(pattern: re.Pattern[str]) -> Gate:
    """The gated search of ``pattern`` (its plain search when no literal is required)."""
    return Gate(pattern)


def any_admits(gates: tuple[Gate, ...]) -> Callable[[str], bool]:
    """One C-level test for several gates: False only when none of them admits the text
    (a line must hold a literal of the most selective set of some branch of some one)."""
    words: set[str] = set()
    for one in gates:
        if not one.branches:
            return lambda text: True
        for branch in one.branches:
            words |= branch[0]
    folded = any(one.folded for one in gates)
    search = _search_for(frozenset(word.lower() for word in words) if folded else frozenset(words))

    def test(text: str) -> bool:
        if folded:
            if not text.isascii():
                return True
            text = text.lower()
        return search(text) is not None

    return test


class Need:
    """What every line a recogniser makes something of holds: for one of its branches, a
    literal of each of the branch's sets. A recogniser tests its own need first (so the
    need cannot claim less than the recogniser reads), and the scanner's prefilter
    (``parsers/logs/prefilter.py``) is the union of every recogniser's need."""

    __slots__ = ("_first", "_tests", "branches")

    def __init__(self, branches: Iterable[Branch]) -> None:
        self.branches: tuple[Branch, ...] = tuple(branches)
        # compiled on first use: most needs are only read into the scanner's prefilter,
        # and a process that reads no log pays for none of them
        self._first: Callable[[str], object] | None = None
        self._tests: tuple[tuple[Callable[[str], object], ...], ...] = ()

    @classmethod
    def words(cls, words: Iterable[str]) -> Need:
        """A need of one of ``words``."""
        return cls(((frozenset(words),),))

    @classmethod
    def patterns(cls, *patterns: re.Pattern[str]) -> Need:
        """What a match of one of ``patterns`` holds, read from their syntax trees; a
        pattern that can match without fixed text, or that ignores case, has no need and
        is a ``ValueError`` (a recogniser cannot declare a need it does not have)."""
        branches: list[Branch] = []
        for pattern in patterns:
            found = required_literals(pattern)
            if found is None or found[1]:
                raise ValueError(f"no literal every match of {pattern.pattern!r} holds")
            branches.extend(found[0])
        return cls(branches)

    def __or__(self, other: Need) -> Need:
        return Need(self.branches + other.branches)

    def admits(self, text: str) -> bool:
        """False only when no line the recogniser reads can be ``text``."""
        if self._first is None:
            self._first = _search_for(frozenset().union(*(b[0] for b in self.branches)))
            self._tests = tuple(tuple(map(_search_for, branch)) for branch in self.branches)
        if self._first(text) is None:
            return False
        for tests in self._tests:
            for test in tests:
                if test(text) is None:
                    break
            else:
                return True
        return False
