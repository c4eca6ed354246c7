"""What the views' tests share: Evidence built from the ranks' log lines alone."""

from __future__ import annotations

from hangdoc.analyzer.model import Evidence, LogLine, ProcessEvidence


def log_evidence(logs: dict[int, list[str]]) -> Evidence:
    """Each rank's lines as its own log file (``rank{N}.log``, lines numbered from 1), the
    way the loader hands a rank's log to the views."""
    return Evidence(
        processes=[
            ProcessEvidence(
                rank=rank,
                log_lines=[LogLine(t, f"rank{rank}.log", i + 1) for i, t in enumerate(lines)],
            )
            for rank, lines in logs.items()
        ]
    )
