"""Stacks as people paste them: gdb, pstack, pystack, py-bt, Python tracebacks, torch's
C++ stacks, py-spy and faulthandler dumps, alone or inside longer text, in any mix.

The stacks side of the one text path (``analyzer/parsers/text.py``): ``attach_stacks``
adds a text's stacks to what the log recognisers made of it (``scan_stacks`` and
``compose_stacks`` are its two halves, for a text path that runs both sides at once),
``mostly_stacks`` tells a paste of stacks from a log, ``is_dump_frame`` the frame lines
the log side can skip.
All go through ``scan.scan_text``, which splits the text into streams (launcher
prefixes), blocks (one recogniser each) and processes (rank markers near each block).
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.stacks.frame_lines import FRAME_FIRSTS, is_dump_frame
from hangdoc.analyzer.parsers.stacks.parser import (
    STACK_TEXT_BYTES,
    any_stack,
    attach_stacks,
    compose_stacks,
    extract_stacks,
    mostly_stacks,
    moved_event,
    scan_stacks,
)

__all__ = [
    "FRAME_FIRSTS",
    "STACK_TEXT_BYTES",
    "any_stack",
    "attach_stacks",
    "compose_stacks",
    "extract_stacks",
    "is_dump_frame",
    "mostly_stacks",
    "moved_event",
    "scan_stacks",
]
