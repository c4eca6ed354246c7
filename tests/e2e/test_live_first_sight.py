"""Live hangs written for issue 21 and scored at first sight (fixtures/first_sight/
live-2026-11-28.json), run again for real: a login prompt read from a terminal nobody
sees; a shard download retried forever; a data producer process killed under its Queue;
early stopping decided on one rank's own validation loss; a metrics log waiting on a
thread blocked on a tracker's wedged service. And the second blind batch
(live-2026-11-28b.json): a rank-0-only reduction in an epoch-time log; two groups'
all-reduces issued in another order on one rank; a node started without MASTER_PORT; a
training loop dead under a non-daemon reducer thread; a JIT build waiting on a lock file
a killed build left. And the third (live-2026-11-28c.json): a sharded save entered by the
main process only; a first step slowed by compilation, not hung; a rank that crashed
before init_process_group; a world size that counts a node never started; a pipeline
whose last stage receives its tensors in another order than they are sent (gloo matches
send and recv by tag). And the fourth (live-2026-11-28d.json): a ring exchange in which
every rank sends before it receives; a tokenizer run on rank 0 first while the others wait
(slow, not hung); an out-of-memory error caught on one rank and its batch skipped, with its
all_reduce; a Pool worker killed under Pool.map; ranks polling for a signal file written
elsewhere. And the fifth (live-2026-11-28e.json): shard files handed round robin, two
ranks with fewer batches; validation on rank 0 only; a checkpoint executor's gather and the
main thread's barrier issued in another order on one rank; a DataLoader worker's
segmentation fault before init_process_group; a tool-call regex backtracking on one rank.
And the sixth (live-2026-11-28f.json): a per-source history all-reduced while one rank's is
empty (a collective of 0 elements returns at once); token-bucketed validation batches, more
on one rank; a log directory frozen under one rank's writes; a SIGUSR1 handler that takes
the lock the code it interrupted holds; FID computed on rank 0 only.
Each gets its verdict, category and culprit."""

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
    ("save-main-process", "checkpoint_save_hang", "HD107", [0], "inside a save"),
    ("compile-warmup", "not_a_hang_slow_or_benign", "HD004", [], "slow, not hung"),
    ("crash-at-startup", "rank_dead_or_crashed", "HD003", [3], "dead"),
    ("world-size-nodes", "nccl_init_or_bootstrap_hang", "HD207", [], "init_process_group"),
    ("p2p-tags", "p2p_pipeline_deadlock", "HD105", [2, 3], "neither transfer completes"),
    ("ring-exchange", "p2p_pipeline_deadlock", "HD105", [], "none in recv"),
    ("tokenize-main-first", "not_a_hang_slow_or_benign", "HD004", [0], "slow, not hung"),
    ("oom-skip", "collective_type_mismatch", "HD002", [3], "barrier"),
    ("pool-worker-killed", "dataloader_deadlock_or_worker_hang", "HD001", [3], "worker processes"),
    ("signal-file", "rank_divergence_collective_vs_noncollective", "HD001", [1, 2, 3], "polls"),
    ("sharded-reader", "uneven_data_drop_last", "HD106", [2, 3], "different numbers of batches"),
    ("rank0-validation", "eval_loop_only_some_ranks", "HD060", [0], "validating"),
    ("async-checkpoint", "checkpoint_save_hang", "HD114", [0], "two threads"),
    ("worker-segfault", "rank_dead_or_crashed", "HD003", [3], "dead"),
    ("grpo-tool-parse", "rank_divergence_collective_vs_noncollective", "HD001", [1], "outside"),
    ("source-mix-stats", "collective_size_or_dtype_mismatch", "HD060", [3], "other sizes"),
    ("dynamic-batch-eval", "uneven_data_drop_last", "HD060", [3], "other counts"),
    ("log-dir-stall", "io_or_filesystem_stall", "HD103", [3], "file system"),
    ("requeue-signal", "python_deadlock_gil_or_lock", "HD101", [3], "signal handler"),
    ("fid-rank-zero", "eval_loop_only_some_ranks", "HD060", [0], "evaluation"),
    ("pipeline-short-batch", "p2p_pipeline_deadlock", "HD105", [0], "ran short"),
    ("rollout-eos", "uneven_data_drop_last", "HD106", [3], "ran out of work"),
    ("remote-shards", "dataloader_deadlock_or_worker_hang", "HD100", [3], "DataLoader worker"),
    ("token-stream", "rank_divergence_collective_vs_noncollective", "HD001", [3], "on CPU"),
    ("weight-load", "not_a_hang_slow_or_benign", "HD004", [], "slow, not hung"),
]  # fmt: skip
# The one category that is not a hang: a job that moved between the samples.
_NOT_HUNG = "not_a_hang_slow_or_benign"


@pytest.mark.parametrize(("scenario", "category", "rule", "culprits", "words"), CASES)
def test_a_live_hang_seen_at_first_sight_gets_its_cause_and_culprit(
    tmp_path: Path, scenario: str, category: str, rule: str, culprits: list[int], words: str
) -> None:
    doc = run_live(tmp_path, scenario).findings
    primary = doc["findings"][0]
    assert doc["verdict"] == ("not_hung" if category == _NOT_HUNG else "hang"), doc["findings"]
    assert (primary["category"], primary["rule"]) == (category, rule), doc["findings"]
    assert primary["culprit_ranks"] == culprits, primary
    assert words in primary["title"], primary
