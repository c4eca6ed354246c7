"""The catalog's rows, read from the generated data files with their meanings.

Loading is cheap: the data files are parsed once, and a row's template, pattern and
meaning are built only when the matcher first tries it (most rows are never tried in a
run: their keyword never occurs)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangdoc.analyzer.parsers.catalog.meanings import Meanings, RowMeaning, load_meanings
from hangdoc.analyzer.parsers.catalog.template import (
    Part,
    Slot,
    literal_length,
    parts_from_json,
    regex_source,
    safe_words,
    untagged,
)

HERE = Path(__file__).resolve().parent
DATA_DIR = HERE / "data"
MEANINGS_FILE = HERE / "meanings.toml"


@dataclass(frozen=True, slots=True)
class Source:
    file: str
    function: str
    line: int
    versions: str


@dataclass(slots=True)
class CatalogRow:
    """One message a program prints: its template, where it comes from, what it means."""

    id: str
    project: str
    level: str
    template: str
    parts: tuple[Part, ...]
    keyword: str | None
    matchable: bool
    versions: str
    sources: tuple[Source, ...]
    meaning: RowMeaning | None = None
    given_by: str = ""  # row | message | area | generic | "" (meanings.Meanings.meaning_of)
    slot_values: tuple[str | None, ...] = ()  # the named value each slot carries
    value_types: tuple[str | None, ...] = ()  # and its type (meanings.toml [value_types])
    specificity: int = 0
    # Every literal word the printed line must hold: checked before the pattern is tried.
    words: frozenset[str] = frozenset()
    _pattern: re.Pattern[str] | None = field(default=None, repr=False)

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._pattern is None:
            self._pattern = re.compile(regex_source(self.parts))
        return self._pattern

    @property
    def generic_meaning(self) -> bool:
        return self.given_by in {"", "generic"}

    @property
    def slots(self) -> tuple[Slot, ...]:
        return tuple(p for p in self.parts if isinstance(p, Slot))


class Catalog:
    """The rows of every project; :meth:`row` builds one on first use."""

    def __init__(
        self,
        raw: list[tuple[str, dict[str, Any]]],
        meanings: Meanings,
        sources: dict[str, dict[str, object]],
    ) -> None:
        self._raw = raw
        self._built: list[CatalogRow | None] = [None] * len(raw)
        self.meanings = meanings
        self.sources = sources

    def __len__(self) -> int:
        return len(self._raw)

    def keywords(self) -> Iterator[tuple[int, str]]:
        """(row index, keyword) of every row the matcher may try."""
        for index, (_, raw) in enumerate(self._raw):
            keyword = raw.get("keyword")
            if keyword and raw.get("matchable"):
                yield index, str(keyword)

    def templates(self) -> Iterator[tuple[int, str, tuple[Part, ...]]]:
        """(row index, project, template parts) of every row the matcher may try, without
        building the rows (a row's meaning is looked up when it is built)."""
        for index, (project, raw) in enumerate(self._raw):
            if raw.get("keyword") and raw.get("matchable"):
                yield index, project, parts_from_json(raw["parts"])

    def row(self, index: int) -> CatalogRow:
        built = self._built[index]
        if built is None:
            built = self._built[index] = self._build(*self._raw[index])
        return built

    @property
    def rows(self) -> list[CatalogRow]:
        return [self.row(i) for i in range(len(self._raw))]

    def by_id(self) -> dict[str, CatalogRow]:
        return {row.id: row for row in self.rows}

    def _build(self, project: str, raw: dict[str, Any]) -> CatalogRow:
        parts = parts_from_json(raw["parts"])
        row_sources = tuple(
            Source(str(s["file"]), str(s["function"]), int(s["line"]), str(s["versions"]))
            for s in raw["sources"]
        )
        row = CatalogRow(
            id=str(raw["id"]),
            project=project,
            level=str(raw["level"]),
            template=str(raw["template"]),
            parts=parts,
            keyword=raw.get("keyword"),
            matchable=bool(raw.get("matchable")),
            versions=str(raw.get("versions", "")),
            sources=row_sources,
            # a transport tag any transport's may stand for says who printed the line,
            # not what it says: neither counted nor required (template.net_tag)
            specificity=literal_length(untagged(parts)),
            words=frozenset(safe_words(untagged(parts))),
        )
        files = [(s.file, s.function) for s in row_sources]
        meanings = self.meanings
        row.meaning, row.given_by = meanings.meaning_of(
            project, row.level, files, row.template, row.id
        )
        row.slot_values = tuple(meanings.value_name(row.meaning, s.name) for s in row.slots)
        row.value_types = tuple(
            meanings.value_types.get(name) if name else None for name in row.slot_values
        )
        return row


def load_catalog(data_dir: Path = DATA_DIR, meanings_file: Path = MEANINGS_FILE) -> Catalog:
    meanings = load_meanings(meanings_file)
    raw: list[tuple[str, dict[str, Any]]] = []
    sources: dict[str, dict[str, object]] = {}
    for path in sorted(data_dir.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        project = str(data["project"])
        sources[project] = dict(data.get("source", {}))
        raw.extend((project, row) for row in data["rows"])
    return Catalog(raw, meanings, sources)


@functools.cache
def default_catalog() -> Catalog:
    """The catalog shipped with hangdoc, loaded once per process."""
    return load_catalog()
