"""The contract between the loader and the parsers of each input format.

A parser recognises its format by content (``sniff``), never by file name, and turns
one file into a :class:`ParsedFile`: fragments of Evidence that the loader merges
with what other files said about the same process. A parser never raises on bad
input: it returns a ParsedFile with ``error`` set and whatever it could still read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hangdoc.analyzer.model import (
    InputKind,
    LogEvent,
    ProcessEvidence,
    ProcessGroupInfo,
)

# How much of a file the sniffers see. Parsers that need more read the file themselves,
# through read_text_capped.
SNIFF_BYTES = 64 * 1024
# Beyond this, a text file is read from its tail only (the end of a log holds the hang).
MAX_TEXT_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class ParsedFile:
    """What one input file contributed."""

    kind: InputKind
    processes: list[ProcessEvidence] = field(default_factory=list)
    job_log_events: list[LogEvent] = field(default_factory=list)
    process_groups: list[ProcessGroupInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    # Where the parsers read only the file's last ``tail_bytes`` (a large paste of stacks),
    # numbering its lines from there: whatever else reads the file's lines for this
    # reading (the ranks' line windows) must read that tail too, or its lines, numbered
    # from the file's start, would sit beside the events as if they came later.
    tail_bytes: int | None = None


class Parser(Protocol):
    """One input format. Registered in ``hangdoc.analyzer.parsers.PARSERS``."""

    kind: InputKind

    def sniff(self, head: bytes) -> bool:
        """True when the first SNIFF_BYTES of a file look like this format."""
        ...

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        """Parse the file at ``path``; ``display_path`` is how reports should name it."""
        ...


def read_text_capped(path: Path, limit: int = MAX_TEXT_BYTES) -> tuple[str, bool]:
    """Decode a file as UTF-8 with replacement; past ``limit`` bytes keep only the tail.

    Returns the text and whether it was truncated. Never loads more than ``limit``
    bytes, so a 10 GB log costs at most ``limit`` of memory.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        truncated = size > limit
        if truncated:
            handle.seek(size - limit)
            data = handle.read(limit)
            # Drop the partial first line.
            newline = data.find(b"\n")
            if newline != -1:
                data = data[newline + 1 :]
        else:
            data = handle.read()
    return decode_bytes(data), truncated


def decode_bytes(data: bytes) -> str:
    """UTF-8 (with BOM), UTF-16 with BOM, else UTF-8 with replacement characters."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8", errors="replace")
