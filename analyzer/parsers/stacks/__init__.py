"""Stacks as people paste them: gdb, pstack, pystack, py-bt, Python tracebacks, torch's
C++ stacks, and py-spy/faulthandler dumps inside longer text, in any mix.

``StackTextParser`` claims files that are mostly such stacks; ``attach_stacks`` is the
one call the log parser makes so a log that *contains* stacks yields them as well.
Both go through ``scan.scan_text``, which splits the text into streams (launcher
prefixes), blocks (one recogniser each) and processes (rank markers near each block).
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.stacks.parser import StackTextParser, attach_stacks, extract_stacks

__all__ = ["StackTextParser", "attach_stacks", "extract_stacks"]
