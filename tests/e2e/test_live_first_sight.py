"""Live hangs written for issue 21 and scored at first sight (fixtures/first_sight/
live-2026-11-28.json), run again for real: a login prompt read from a terminal nobody
sees; a shard download retried forever; a data producer process killed under its Queue;
early stopping decided on one rank's own validation loss; a metrics log waiting on a
thread blocked on a tracker's wedged service. And the second blind batch
(live-2026-11-28b.json): a rank-0-only reduction in an epoch-time log; two groups'
all-reduces issued in another order on one rank; a node started without MASTER_PORT; a
training loop dead under a non-daemon reducer thread; a JIT build waiting on a lock file
a killed build left. Each gets its category and culprit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .live import run_live

pytestmark = pytest.mark.e2e

# A JIT extension build needs a C++ compiler and ninja (torch.utils.cpp_extension).
_BUILDS = shutil.which("g++") is not None and shutil.which("ninja") is not None
_NEEDS_BUILD = pytest.mark.skipif(not _BUILDS, reason="g++ and ninja are needed to build")

CASES = [
    # scenario, category, rule, culprits, words the title must hold
    ("login-prompt", "rank_divergence_collective_vs_noncollective", "HD001", [3], "terminal"),
    ("http-shards", "io_or_filesystem_stall", "HD001", [3], "network I/O"),
    ("producer-killed", "dataloader_deadlock_or_worker_hang", "HD001", [3], "dead child"),
    ("early-stop", "collective_type_mismatch", "HD002", [3], "barrier"),
    ("tracker-wedged", "io_or_filesystem_stall", "HD001", [3], "its thread"),
    ("epoch-time-log", "collective_type_mismatch", "HD002", [0], "broadcast"),
    ("two-towers", "collective_type_mismatch", "HD005", [3], "another order"),
    ("slurm-init", "nccl_init_or_bootstrap_hang", "HD207", [3], "MASTER_PORT"),
    ("reducer-thread", "rank_dead_or_crashed", "HD003", [3], "dead"),
    pytest.param(
        "fused-kernels", "python_deadlock_gil_or_lock", "HD001", [3], "lock file",
        marks=_NEEDS_BUILD,
    ),
]  # fmt: skip


@pytest.mark.parametrize(("scenario", "category", "rule", "culprits", "words"), CASES)
def test_a_live_hang_seen_at_first_sight_gets_its_cause_and_culprit(
    tmp_path: Path, scenario: str, category: str, rule: str, culprits: list[int], words: str
) -> None:
    doc = run_live(tmp_path, scenario).findings
    primary = doc["findings"][0]
    assert doc["verdict"] == "hang", doc["findings"]
    assert (primary["category"], primary["rule"]) == (category, rule), doc["findings"]
    assert primary["culprit_ranks"] == culprits, primary
    assert words in primary["title"], primary
