"""Input formats, recognised by content; text is scanned, not sniffed.

Formats that are one structured document come first, each recognised by its content:
hangdoc's own JSON files (a format marker in the head), py-spy JSON (a list of objects
with "frames"), flight recorder pickles and JSON (their keys). Every other text, whatever
it holds, is read by ``TextParser`` (``text.py``): all its lines go to the log
recognisers and to the stack recognisers, and what both find is composed for the same
ranks. It accepts any text, so it stays the last entry.
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.base import Parser
from hangdoc.analyzer.parsers.flight_recorder import FlightRecorderParser
from hangdoc.analyzer.parsers.hangdoc_json import ManifestParser, ProcessFileParser
from hangdoc.analyzer.parsers.pyspy_json import PyspyJsonParser
from hangdoc.analyzer.parsers.text import TextParser

PARSERS: list[Parser] = [
    ManifestParser(),
    ProcessFileParser(),
    PyspyJsonParser(),
    FlightRecorderParser(),
    TextParser(),
]
