"""One pass over lines with a combined keyword prefilter (gitleaks' way).

Every matchable row has one keyword, a literal word of its template chosen by the
extraction script for being rare among the rows. A line is cut into words once (one
regular expression, in C); only the rows whose keyword is among them are tried, each
with its pattern searched anywhere in the line, so a header that a paste cut or mangled
costs nothing. Of the rows that match, the most specific wins (the most literal text);
the others are kept as alternatives.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from hangdoc.analyzer.parsers.catalog.loader import Catalog, CatalogRow, default_catalog
from hangdoc.analyzer.parsers.catalog.template import net_tag

# The same words as template.keywords_of: a letter, then letters, digits, underscores.
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_MAX_LINE = 4000  # longer lines are searched on their first characters only


@dataclass(frozen=True, slots=True)
class CatalogMatch:
    """A line recognised by a catalog row: the row, the slots' text, where it matched."""

    row: CatalogRow
    captures: tuple[str, ...]
    start: int
    end: int
    text: str  # the matched span of the line (the message body)
    others: tuple[CatalogRow, ...] = ()

    @property
    def named(self) -> dict[str, str]:
        """Captured text by the named value each slot carries (unnamed slots dropped)."""
        out: dict[str, str] = {}
        for name, text in zip(self.row.slot_values, self.captures, strict=False):
            if name and name not in out:
                out[name] = text
        return out


class Matcher:
    """Scans lines against a catalog. Build once; :meth:`match` is thread-safe."""

    def __init__(self, catalog: Catalog, *, only: Iterable[int] | None = None) -> None:
        self.catalog = catalog
        wanted = set(only) if only is not None else None
        self._by_keyword: dict[str, list[int]] = {}
        for index, keyword in catalog.keywords():
            if wanted is None or index in wanted:
                self._by_keyword.setdefault(keyword, []).append(index)
        self._keywords = frozenset(self._by_keyword)
        self._sorted: set[str] = set()
        # The last line matched and its match: the log scanner asks again for the line it
        # held back as maybe broken in two (scanner._may_be_broken), then reads it.
        self._last: tuple[str, CatalogMatch | None] = ("", None)

    @property
    def keywords(self) -> frozenset[str]:
        return self._keywords

    def holds_keyword(self, line: str) -> bool:
        """Whether the line holds any row's keyword (the prefilter alone, rows unbuilt)."""
        return not self._keywords.isdisjoint(_WORDS.findall(line[:_MAX_LINE]))

    def candidates(self, line: str) -> list[CatalogRow]:
        """The rows whose keyword occurs in the line (the prefilter alone)."""
        found = self._keywords.intersection(_WORDS.findall(line[:_MAX_LINE]))
        if not found:
            return []
        rows: list[CatalogRow] = []
        for word in found:
            rows.extend(self._bucket(word))
        return rows

    def _bucket(self, word: str) -> list[CatalogRow]:
        """The rows of one keyword, most specific first (built on first use)."""
        rows = [self.catalog.row(i) for i in self._by_keyword[word]]
        if word not in self._sorted:
            rows.sort(key=lambda r: -r.specificity)
            self._by_keyword[word] = [
                i
                for _, i in sorted(
                    (-self.catalog.row(i).specificity, i) for i in self._by_keyword[word]
                )
            ]
            self._sorted.add(word)
        return rows

    def match(self, line: str) -> CatalogMatch | None:
        """The most specific row that matches the line, or None."""
        text = line[:_MAX_LINE]
        last = self._last  # one read: another thread may replace it
        if last[0] == text and text:
            return last[1]
        found = self._match(text)
        self._last = (text, found)
        return found

    def _match(self, text: str) -> CatalogMatch | None:
        words = _WORDS.findall(text)
        if self._keywords.isdisjoint(words):
            return None  # the prefilter: most lines hold no row's keyword
        tokens = set(words)
        found = self._keywords.intersection(tokens)
        best: tuple[CatalogRow, re.Match[str]] | None = None
        others: list[CatalogRow] = []
        for word in found:
            for row in self._bucket(word):
                if not row.words <= tokens:
                    continue  # a literal word of the row is not in the line
                m = row.pattern.search(text)
                if m is None:
                    continue
                if best is None or _better(row, m, best):
                    if best is not None:
                        others.append(best[0])
                    best = (row, m)
                else:
                    others.append(row)
        if best is None:
            return None
        row, m = best
        return CatalogMatch(row, m.groups(), m.start(), m.end(), m.group(0), tuple(others))

    def scan(self, lines: Iterable[str]) -> Iterator[tuple[int, CatalogMatch]]:
        """(line number from 1, match) for every line a row recognises."""
        for number, line in enumerate(lines, 1):
            found = self.match(line)
            if found is not None:
                yield number, found


def _better(row: CatalogRow, m: re.Match[str], best: tuple[CatalogRow, re.Match[str]]) -> bool:
    """A whole message wins over a row that is a part of messages (``WorkNCCL(…)``);
    then more literal text; then the row whose own transport tag the line prints (the
    same body under NCCL's "NET/IB : " and "NET/Socket : "); then a row with a meaning;
    then the longer match."""
    other, om = best
    row_part = row.meaning is not None and row.meaning.component
    other_part = other.meaning is not None and other.meaning.component
    if row_part != other_part:
        return other_part  # a part of a message loses to the message
    if row.specificity != other.specificity:
        return row.specificity > other.specificity
    own_tag = _own_tag(row, m) - _own_tag(other, om)
    if own_tag:
        return own_tag > 0
    meaningful = (row.meaning is not None and row.meaning.strength != "none") - (
        other.meaning is not None and other.meaning.strength != "none"
    )
    if meaningful:
        return meaningful > 0
    return (m.end() - m.start()) > (om.end() - om.start())


def _own_tag(row: CatalogRow, m: re.Match[str]) -> int:
    """1 where the matched text opens with the row's own transport tag (or the row has
    none to stand in for), else 0."""
    tag = net_tag(row.parts)
    return int(not tag or m.group(0).startswith(tag))


@functools.cache
def default_matcher() -> Matcher:
    """A matcher over the shipped catalog, built once per process."""
    return Matcher(default_catalog())
