"""Input formats, recognised by content. Order matters: the first parser whose
``sniff`` accepts a file parses it, so put specific formats before generic ones.

The order here: hangdoc's own JSON files (a format marker in the head), py-spy JSON
(a list of objects with "frames"), flight recorder dumps (a pickle's first bytes, or
JSON with FR keys), faulthandler (its "(most recent call first):" thread header), py-spy
text (its "Thread N (idle)" header followed by frames). A log parser, being the most
generic, should stay last.
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.base import Parser
from hangdoc.analyzer.parsers.faulthandler import FaulthandlerParser
from hangdoc.analyzer.parsers.flight_recorder import FlightRecorderParser
from hangdoc.analyzer.parsers.hangdoc_json import ManifestParser, ProcessFileParser
from hangdoc.analyzer.parsers.logs import LogParser
from hangdoc.analyzer.parsers.pyspy_json import PyspyJsonParser
from hangdoc.analyzer.parsers.pyspy_text import PyspyTextParser
from hangdoc.analyzer.parsers.stacks import StackTextParser

PARSERS: list[Parser] = [
    ManifestParser(),
    ProcessFileParser(),
    PyspyJsonParser(),
    # Flight recorder (issue 3): pickles and JSON, recognised by FR keys. Before the text
    # parsers: its sniff looks at a few bytes, theirs decode a pickle's 64 KiB head as
    # text and search it (0.7 ms a file: 3 s in the loader's one thread at 4,096 ranks).
    FlightRecorderParser(),
    # Pasted stacks (gdb, pstack, pystack, tracebacks, C++ stacks, mixes): before the
    # text dump parsers, whose pure files its sniff leaves to them.
    StackTextParser(),
    FaulthandlerParser(),
    PyspyTextParser(),
]

# Logs (issue 4): the most generic format; keep it the last entry.
PARSERS.append(LogParser())
