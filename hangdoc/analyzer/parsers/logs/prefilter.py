"""One search that tells the scanner a line can mean nothing (issue 21 item 1).

Every line of a text goes to the scanner, and most lines of a big one mean nothing to it:
the step lines of a training log, the log tails under each rank of a pasted job. Before
this, each such line was peeled in up to three rounds of anchored patterns and offered
to fourteen recognisers and the catalog, 20 µs a line, to be rejected by all of them.

``may_mean(line)`` is False only when nothing the scanner does with a line could use it:

* no recogniser could make an event of it: each declares its need (``literals.Need``:
  the literals every line it reads holds, from its keyword test or from its patterns'
  syntax trees) and tests that need first, so a need cannot claim less than the
  recogniser reads (``scanner.RECOGNISER_NEEDS``);
* no catalog row could match it: every row's keyword is a word of the lines it matches
  (``catalog.matcher``), and a word of the peeled line is a word of the raw one;
* it starts no record the scanner follows (tracebacks, exception lines, reports,
  "Last error:", a record cut inside ``WorkNCCL(…)``: ``scanner.RECORD_NEED``);
* cleaning it cannot make any of these appear (no ANSI colour, no carriage return).

The test runs on the raw line, before its prefixes are peeled: peeling only takes text
from the front (the line that is read is the end of the raw line, and starts where a word
may), so what the raw line does not hold, the peeled one does not hold either. It is
asked of the line's shape (its digits 0) and the shape's answer is kept: a log's step
lines differ in their numbers only, and cost a look-up each (about 1 µs); a new shape
costs one search over every literal of every need (a trie), a look at the rest of a need
only where a literal of it was found, and one split into words for the catalog.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hangdoc.analyzer.parsers.logs.literals import Need

# The catalog matcher's words (catalog.matcher._WORDS): a word of the peeled line is one
# of the raw line, since every layer peeling takes ends with a character that is no
# word's (a bracket, a colon, a space, a bar: tests/unit/logs/test_prefilter.py holds
# it to every fixture's lines).
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
# Longer lines are read in part by the matcher (matcher._MAX_LINE), whose cut may make
# a word of a longer one: read in full.
_MAX_LINE = 4000
# A line's shape: its ASCII digits 0 (Prefilter.may_mean); the shapes remembered, at most.
_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_STR_ZEROS = str.maketrans("123456789", "000000000")
_MAX_SHAPES = 4096
_MAX_SHAPE_LINE = 1024  # a longer line's shape is not kept (the memory it holds is bounded)
# What clean_line takes out of a line (prefixes.strip_colours, the "\r" of a redraw): a
# line holding any is read in full, since what is left may join two parts into a word.
_BARE_SGR = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")


class Prefilter:
    """``may_mean`` for the needs of recognisers and the keywords of catalog rows (words
    of the line each, as the catalog's matcher reads them)."""

    def __init__(self, needs: Iterable[Need], words: Iterable[str]) -> None:
        self._words = frozenset(map(_shape, words))
        sufficient: set[str] = set()
        self._rest: dict[str, list[tuple[re.Pattern[str], ...]]] = {}
        self._seen: dict[bytes, bool] = {}
        for need in needs:
            for branch in need.branches:
                first = frozenset(map(_shape, branch[0]))
                rest = [frozenset(map(_shape, part)) for part in branch[1:]]
                if not rest:
                    sufficient |= first
                    continue
                tests = tuple(_alternation(part) for part in rest)
                for literal in first:
                    self._rest.setdefault(literal, []).append(tests)
        literals = sufficient | set(self._rest)
        self._sufficient = frozenset(sufficient)
        # The trie's match at a place is the shortest literal there; the longer ones that
        # start with it are looked at in turn.
        self._longer: dict[str, tuple[str, ...]] = {}
        for literal in literals:
            for end in range(1, len(literal)):
                if literal[:end] in literals:
                    self._longer.setdefault(literal[:end], ())
                    self._longer[literal[:end]] += (literal,)
        self._search = re.compile(_trie(literals)).search

    def may_mean(self, line: str, shape: bytes | None = None) -> bool:
        """False only when no recogniser, catalog row or record the scanner follows can
        use ``line`` (see the module's docstring).

        Asked of the line's shape (its digits all 0, as the needs' and keywords' are): a
        literal in a line is one in its shape, so the answer may only be more often True;
        and lines of one shape are many (a log's step lines differ in their numbers), so
        the shape's answer is remembered. ``shape``: the line's ``line_shape``, where the
        caller has it already."""
        if len(line) > _MAX_SHAPE_LINE:
            return self._may_mean(line.translate(_STR_ZEROS))
        if shape is None:
            shape = line_shape(line)
        known = self._seen.get(shape)
        if known is None:
            if len(self._seen) >= _MAX_SHAPES:
                self._seen.clear()
            known = self._seen[shape] = self._may_mean(shape.decode("utf-8", "surrogatepass"))
        return known

    def _may_mean(self, line: str) -> bool:
        if len(line) > _MAX_LINE or "\x1b" in line or "\r" in line:
            return True
        if "m" in line and "[" in line and _BARE_SGR.search(line) is not None:
            return True
        if not self._words.isdisjoint(_WORDS.findall(line)):
            return True
        pos = 0
        while (m := self._search(line, pos)) is not None:
            at = m.start()
            shortest = m.group()
            for literal in (shortest, *self._longer.get(shortest, ())):
                if literal is not shortest and not line.startswith(literal, at):
                    continue
                if literal in self._sufficient:
                    return True
                for tests in self._rest.get(literal, ()):
                    if all(test.search(line) is not None for test in tests):
                        return True
            pos = at + 1
        return False


def line_shape(line: str) -> bytes:
    """A line's shape: its UTF-8 with every ASCII digit 0 (what ``may_mean`` remembers
    answers by; the log scanner remembers a passed-over line's wrap facts by it too)."""
    return line.encode("utf-8", "surrogatepass").translate(_ZEROS)


def block_shapes(data: bytes) -> list[bytes]:
    """The shapes of the lines of ``data`` split at "\\n", in one C-level pass: each the
    ``line_shape`` of that line where ``data`` decodes as UTF-8 without a replacement (its
    lines' UTF-8 is then their bytes)."""
    return data.translate(_ZEROS).split(b"\n")


def _shape(literal: str) -> str:
    """A literal with its digits 0, as it is in the shape of a line that holds it."""
    return literal.translate(_STR_ZEROS)


def _alternation(literals: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, sorted(literals, key=lambda x: (-len(x), x)))))


def _trie(literals: Iterable[str]) -> str:
    """One pattern for any of ``literals`` whose every branch starts with a distinct
    character (the engine skips a branch on its first character), ending at the shortest
    literal found."""
    root: dict[str, dict] = {}  # type: ignore[type-arg]
    for literal in literals:
        node = root
        for char in literal:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:  # type: ignore[type-arg]
        if "" in node:
            return ""  # a literal ends here: the shorter one is enough
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return emit(root) if root else "(?!)"
