"""Causes that live in the stacks and the node, each found on a real hung gloo job on CPU:
DataLoader workers, Python locks and the GIL, stuck and slow storage, pipeline p2p, uneven
data, evaluation on some ranks, a save that gathers on one rank, a thread that died
with its traceback in the logs — and a healthy pipeline that must not be called hung.
Each test waits for the ranks' ready markers, runs ``hangdoc collect --pid`` and
``hangdoc analyze --json`` like a user, and checks the verdict, the category, the
culprit ranks and the rule that named them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from .live import run_live

pytestmark = pytest.mark.e2e

CASES = [
    # scenario, verdict, category, culprits, rule, words the title must hold
    ("dataloader-worker", "hang", "dataloader_deadlock_or_worker_hang", [3], "HD100",
     "ForkLockDataset.__getitem__"),
    ("lock-deadlock", "hang", "python_deadlock_gil_or_lock", [3], "HD101", "metrics-flusher"),
    ("gil-held", "hang", "python_deadlock_gil_or_lock", [3], "HD102", "log-scrubber"),
    ("slow-save", "not_hung", "not_a_hang_slow_or_benign", [3], "HD104", "model.pt grew"),
    ("p2p-deadlock", "hang", "p2p_pipeline_deadlock", [2, 3], "HD105", "send/send cycle"),
    ("pipeline-healthy", "not_hung", "not_a_hang_slow_or_benign", None, "HD004", "progress"),
    ("uneven-ddp", "hang", "uneven_data_drop_last", [3], "HD106", "gradient all_reduce"),
    ("uneven-after-eval", "hang", "uneven_data_drop_last", [3], "HD106", "running evaluation"),
    ("eval-gather-tuple", "hang", "eval_loop_only_some_ranks", [3], "HD002", "all_gather"),
    ("final-save", "hang", "checkpoint_save_hang", [3], "HD107", "save_final_model"),
    ("steps-per-epoch", "hang", "uneven_data_drop_last", [3], "HD106", "still in a training"),
    # A dead thread's traceback and stall dumps in the logs are text, not samples (issue 20)
    ("thread-died", "hang", "dataloader_deadlock_or_worker_hang", [3], "HD001", "next batch"),
]  # fmt: skip


def _check(doc: dict[str, Any], verdict: str, category: str, culprits: list[int] | None,
           rule: str, words: str) -> dict[str, Any]:  # fmt: skip
    primary: dict[str, Any] = doc["findings"][0]
    assert doc["verdict"] == verdict, doc["findings"]
    assert primary["category"] == category, doc["findings"]
    assert primary["rule"] == rule, doc["findings"]
    if culprits is not None:
        assert primary["culprit_ranks"] == culprits, primary
    assert words in primary["title"], primary
    return primary


@pytest.mark.parametrize(("scenario", "verdict", "category", "culprits", "rule", "words"), CASES)
def test_cause_is_found_on_a_live_hang(
    tmp_path: Path,
    scenario: str,
    verdict: str,
    category: str,
    culprits: list[int] | None,
    rule: str,
    words: str,
) -> None:
    result = run_live(tmp_path, scenario)
    _check(result.findings, verdict, category, culprits, rule, words)
    assert result.findings["ranks"] == {"expected": 4, "seen": [0, 1, 2, 3], "missing": []}


def test_stuck_storage_is_an_io_stall(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not Path("/dev/loop-control").exists():
        pytest.skip("the I/O-stall scenario mounts and freezes a loop device (root)")
    result = run_live(tmp_path, "io-stall")
    primary = _check(
        result.findings, "hang", "io_or_filesystem_stall", [3], "HD103", "percpu_rwsem_wait"
    )
    assert "model.pt" in primary["title"]
    # The D-state rank was read without pausing it, and said so.
    manifest = json.loads((result.dump / "manifest.json").read_text())
    assert any("uninterruptible" in w for w in manifest["warnings"])


def test_worker_states_and_gpu_outcome_are_in_the_dump(tmp_path: Path) -> None:
    result = run_live(tmp_path, "dataloader-worker")
    process = json.loads((result.dump / "rank3" / "process.json").read_text())
    children = process["samples"][-1]["children"]
    assert len(children) >= 2 and all(c["state"] in ("S", "R") for c in children)
    manifest = json.loads((result.dump / "manifest.json").read_text())
    gpu_steps = [s for s in manifest["steps"] if s["step"] == "gpu"]
    assert len(gpu_steps) == 1  # once per node, not per rank
    if not Path("/proc/driver/nvidia").exists():
        assert gpu_steps[0]["status"] == "skipped"
        assert "no NVIDIA driver" in gpu_steps[0]["reason"]
    assert result.findings["verdict"] == "hang"  # everything else went on
