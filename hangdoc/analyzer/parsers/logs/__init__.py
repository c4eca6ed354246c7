"""Logs of hung jobs, recognised line by line (FORMATS.md §1-3, §5-8).

``LogParser`` is the entry point, the log side of the text path (``parsers/text.py``);
the family modules (``nccl``, ``torch_pg``, ``elastic``, ``process``, ``gpu``,
``reports``, ``phases``) each recognise one source of lines, ``scanner`` follows
multi-line records, and ``attribution`` decides which rank each event belongs to.
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.logs.parser import LogParser, recognise_line

__all__ = ["LogParser", "recognise_line"]
