"""The message catalog: recognisers as data (issue 21, DESIGN "load").

Rows are generated from the sources that print the messages (``scripts/catalog/
extract.py`` writes ``data/<project>.json``); what a row means is written by people
(``meanings.toml``, by family or row by row). :func:`default_catalog` loads both once;
:class:`~hangdoc.analyzer.parsers.catalog.matcher.Matcher` scans lines with one combined
keyword prefilter and tries only the rows whose keyword occurs;
:func:`~hangdoc.analyzer.parsers.catalog.adapter.to_event` turns a match into an event kind,
typed values and that kind's typed payload (analyzer/payloads/).
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.catalog.adapter import EventDraft, to_event
from hangdoc.analyzer.parsers.catalog.loader import Catalog, CatalogRow, default_catalog
from hangdoc.analyzer.parsers.catalog.matcher import CatalogMatch, Matcher, default_matcher

__all__ = [
    "Catalog",
    "CatalogMatch",
    "CatalogRow",
    "EventDraft",
    "Matcher",
    "default_catalog",
    "default_matcher",
    "to_event",
]
