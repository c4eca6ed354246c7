"""Counters behind RELIABILITY.md: how many cases each reliability test tried.

Tests call :func:`count`; ``conftest.py`` writes the totals as JSON to the file named
by ``HANGDOC_RELIABILITY_STATS`` at the end of the session (nothing otherwise).
``HANGDOC_FUZZ_EXAMPLES`` sets how many cases each property-based test draws.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

COUNTS: Counter[str] = Counter()
# Cases per property-based test: bounded in the normal run, larger on request.
EXAMPLES = int(os.environ.get("HANGDOC_FUZZ_EXAMPLES", "60"))


def count(key: str, n: int = 1) -> None:
    COUNTS[key] += n


def write_stats() -> None:
    target = os.environ.get("HANGDOC_RELIABILITY_STATS")
    if not target:
        return
    path = Path(target)
    previous = json.loads(path.read_text()) if path.exists() else {}
    merged = Counter(previous)
    merged.update(COUNTS)
    path.write_text(json.dumps(dict(sorted(merged.items())), indent=2) + "\n")
