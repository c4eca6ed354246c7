"""Real hangs, collected and diagnosed end to end: gloo on CPU, 3-4 ranks each.

Each test starts a job that really hangs (hangdoc/scenarios/job.py), waits for every
rank's ready marker, runs ``hangdoc collect --pid …`` and ``hangdoc analyze`` as a user
would, and asserts the verdict, the category and the culprit ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .live import run_live

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("scenario", "category", "culprits", "waiting_op"),
    [
        ("checkpoint", "checkpoint_save_hang", [3], "all_gather"),
        ("checkpoint-barrier", "checkpoint_save_hang", [3], "barrier"),
        ("dataloader-teardown", "dataloader_deadlock_or_worker_hang", [3], "all_reduce"),
        ("eval-mismatch", "eval_loop_only_some_ranks", [3], "barrier"),
    ],
)
def test_one_rank_elsewhere(
    tmp_path: Path, scenario: str, category: str, culprits: list[int], waiting_op: str
) -> None:
    result = run_live(tmp_path, scenario)
    doc = result.findings
    primary = doc["findings"][0]
    assert doc["verdict"] == "hang", primary
    assert primary["category"] == category, primary
    assert primary["culprit_ranks"] == culprits, primary
    assert waiting_op in primary["title"], primary
    assert doc["ranks"] == {"expected": 4, "seen": [0, 1, 2, 3], "missing": []}
    assert result.report.stat().st_size > 0


def test_killed_rank(tmp_path: Path) -> None:
    doc = run_live(tmp_path, "killed").findings
    primary = doc["findings"][0]
    assert doc["verdict"] == "hang"
    assert primary["category"] == "rank_dead_or_crashed", primary
    assert primary["culprit_ranks"] == [3]
    assert primary["waiting_ranks"] == [0, 1, 2]
    assert doc["ranks"]["missing"] == [3]


def test_slow_job_is_not_hung(tmp_path: Path) -> None:
    doc = run_live(tmp_path, "slow", world_size=3, interval=2.0).findings
    primary = doc["findings"][0]
    assert doc["verdict"] == "not_hung", doc["findings"]
    assert primary["category"] == "not_a_hang_slow_or_benign"


def test_torchrun_agent_pid_expands_to_workers(tmp_path: Path) -> None:
    doc = run_live(tmp_path, "checkpoint", torchrun=True).findings
    primary = doc["findings"][0]
    assert doc["ranks"]["seen"] == [0, 1, 2, 3]
    assert primary["category"] == "checkpoint_save_hang"
    assert primary["culprit_ranks"] == [3]


def test_collect_all_finds_the_ranks(tmp_path: Path) -> None:
    result = run_live(tmp_path, "checkpoint", world_size=3, use_all=True)
    found = result.collected_pids()
    assert set(result.job_pids) <= found
    if found != set(result.job_pids):
        pytest.skip(f"other jobs with RANK in their environment run here: {found}")
    doc = result.findings
    assert doc["ranks"]["seen"] == [0, 1, 2]
    assert doc["findings"][0]["culprit_ranks"] == [2]
