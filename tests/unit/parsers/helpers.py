"""Shared helpers for the parser tests: where the real samples are, and how to parse one
the way the loader would (sniff with every registered parser, first match wins: a
structured document by its own parser, every text by the text path)."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers import PARSERS
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile, Parser
from hangdoc.analyzer.parsers.text import text_kind

SAMPLES = Path(__file__).parent / "samples"


def sniffed(path: Path) -> Parser | None:
    head = path.read_bytes()[:SNIFF_BYTES]
    return next((p for p in PARSERS if p.sniff(head)), None)


# The kinds this package's parsers produce; other teams append parsers (flight recorder,
# logs) that may legitimately accept what the stack parsers refuse.
STACK_KINDS = frozenset(
    {
        InputKind.MANIFEST,
        InputKind.PROCESS,
        InputKind.PYSPY_JSON,
        InputKind.PYSPY_TEXT,
        InputKind.FAULTHANDLER,
    }
)


def kind_of(path: Path) -> InputKind:
    """What the text path takes a text file for (it reads every kind alike)."""
    return text_kind(path.read_bytes()[:SNIFF_BYTES])


def stack_sniffed(path: Path) -> Parser | None:
    """Like ``sniffed``, among the stack and dump parsers only."""
    head = path.read_bytes()[:SNIFF_BYTES]
    return next((p for p in PARSERS if p.kind in STACK_KINDS and p.sniff(head)), None)


def parse_sample(path: Path) -> ParsedFile:
    parser = sniffed(path)
    assert parser is not None, f"no parser recognised {path.name}"
    return parser.parse(path, path.name)


class Writer:
    """Writes hand-made variants into the test's tmp dir."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, name: str, content: str | bytes) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
        return path
