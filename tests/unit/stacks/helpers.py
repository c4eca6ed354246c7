"""Shared helpers for the stack-paste tests: where the real pastes are, and how to read
one the way the loader would."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.model import ProcessEvidence, ThreadStack
from hangdoc.analyzer.parsers.stacks.scan import ScanResult, scan_text

PASTES = Path(__file__).resolve().parents[3] / "fixtures" / "pastes"


def paste(relative: str) -> str:
    return (PASTES / relative).read_text()


def scan(text: str, source: str = "t") -> ScanResult:
    return scan_text(text, source, [])


def only_process(text: str) -> ProcessEvidence:
    [proc] = scan(text).processes
    return proc


def threads(proc: ProcessEvidence) -> list[ThreadStack]:
    return [t for s in proc.text_stacks for t in s.threads]
