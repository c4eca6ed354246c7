"""What a blocked rank waits on, by mechanism (issue 21), on real hung gloo jobs on CPU:
the job's own code blocked in ``flock`` on a lock that a stale process of an earlier run
holds; ranks blocked on a lock that another rank holds while it waits in a barrier; a
rank and its own subprocess each reading the other's pipe. The frames show only the
job's functions: ``hangdoc collect`` reads the rest from /proc, ``hangdoc analyze`` names
the holder and the culprit."""

from __future__ import annotations

from pathlib import Path

import pytest

from .live import run_live

pytestmark = pytest.mark.e2e

_LOCK = "python_deadlock_gil_or_lock"
CASES = [
    # scenario, category, culprits, rule, words the title must hold
    ("flock-stale", _LOCK, [3], "HD111", "held by a process outside the job"),
    ("flock-rank", _LOCK, [3], "HD111", "holds a file lock that ranks 0-2"),
    ("child-pipe", _LOCK, [3], "HD001", "waits on it in turn"),
]


@pytest.mark.parametrize(("scenario", "category", "culprits", "rule", "words"), CASES)
def test_what_a_blocked_rank_waits_on_names_the_cause(
    tmp_path: Path, scenario: str, category: str, culprits: list[int], rule: str, words: str
) -> None:
    result = run_live(tmp_path, scenario)
    doc = result.findings
    primary = doc["findings"][0]
    assert doc["verdict"] == "hang", doc["findings"]
    assert (primary["category"], primary["rule"]) == (category, rule), doc["findings"]
    assert primary["culprit_ranks"] == culprits, primary
    assert words in primary["title"], primary
    assert doc["ranks"] == {"expected": 4, "seen": [0, 1, 2, 3], "missing": []}
    if scenario == "flock-stale":
        # The holder is named with its command line, and is none of the collected ranks.
        assert "leftover-cache-builder" in primary["title"], primary
        assert not any(f"pid {pid} " in primary["title"] for pid in result.collected_pids())
