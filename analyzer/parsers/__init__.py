"""Input formats, recognised by content. Order matters: the first parser whose
``sniff`` accepts a file parses it, so put specific formats before generic ones.

The order here: hangdoc's own JSON files (a format marker in the head), py-spy JSON
(a list of objects with "frames"), faulthandler (its "(most recent call first):"
thread header), py-spy text (its "Thread N (idle)" header followed by frames).
Formats appended by other modules (flight recorder, logs) go after these; a log
parser, being the most generic, should stay last.
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
    # Pasted stacks (gdb, pstack, pystack, tracebacks, C++ stacks, mixes): before the
    # text dump parsers, whose pure files its sniff leaves to them.
    StackTextParser(),
    FaulthandlerParser(),
    PyspyTextParser(),
]

# Flight recorder (issue 3): pickles and JSON, recognised by FR keys; before the logs.
PARSERS.append(FlightRecorderParser())

# Logs (issue 4): the most generic format; keep it the last entry.
PARSERS.append(LogParser())
