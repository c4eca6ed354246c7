"""Input formats, recognised by content. Order matters: the first parser whose
``sniff`` accepts a file parses it, so put specific formats before generic ones."""

from __future__ import annotations

from hangdoc.analyzer.parsers.base import Parser

PARSERS: list[Parser] = []
