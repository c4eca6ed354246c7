# ruff: noqa: E501  (tables of log lines read better unwrapped)
"""Readings that named a cause the evidence does not show (issue 21, precision; batch
2026-11-28j): each test pairs the line that misled a rule with its sibling that must keep
the reading, so a rule that reads too much fails here and one that reads too little fails
on the sibling.

Each line is written from the format string of the code that prints it (named beside
it), with made-up hosts, paths and numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.meaning import meaning_of, tokens


def _diagnose(tmp_path: Path, text: str) -> Diagnosis:
    log = tmp_path / "console.txt"
    log.write_text(text)
    return analyze(load_paths([log]))


def _rules(diagnosis: Diagnosis) -> set[str]:
    return {f.rule for f in diagnosis.findings}


# ---- ranks one SeqNum apart around a rooted collective ---------------------------------
# ProcessGroupNCCL.cpp's watchdog (WorkNCCL::checkTimeout, torch < 2.3: no group prefix):
# "[Rank R] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=S, OpType=O,
# Timeout(ms)=T) ran for M milliseconds before timing out."
def _timeout(rank: int, seq: int, op: str) -> str:
    return (
        f"[E ProcessGroupNCCL.cpp:821] [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType={op}, Timeout(ms)=1800000) ran for 1808116 milliseconds before timing out.\n"
    )


def test_a_root_one_past_its_broadcast_is_no_mismatch_nor_a_laggard(tmp_path: Path) -> None:
    # rank 1 still receives BROADCAST #1 that rank 0, its root, finished: rank 0 waits in
    # the program's next collective. One sequence; nothing says which side is wrong.
    diagnosis = _diagnose(tmp_path, _timeout(1, 1, "BROADCAST") + _timeout(0, 2, "ALLGATHER"))
    assert not _rules(diagnosis) & {"HD041", "HD032"}


@pytest.mark.parametrize(
    ("behind", "ahead"),
    [
        # an all-reduce completes on no rank before every rank joined it
        ((1, 7, "ALLREDUCE"), (0, 8, "BROADCAST")),
        # two apart: rank 0 completed #8 too, which rank 1 never entered
        ((1, 7, "BROADCAST"), (0, 9, "ALLGATHER")),
    ],
)
def test_ranks_apart_otherwise_stay_out_of_step(
    tmp_path: Path, behind: tuple[int, int, str], ahead: tuple[int, int, str]
) -> None:
    diagnosis = _diagnose(tmp_path, _timeout(*behind) + _timeout(*ahead))
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD041"
    assert diagnosis.primary.category is Category.COLLECTIVE_TYPE_MISMATCH


# ---- an abort that is an NCCL call's invalid argument ----------------------------------
# NCCL's argcheck.cc ("%s : invalid root %d (root should be in the 0..%d range)") returns
# ncclInvalidArgument (enqueue.cc's "-> 4"); torch's NCCL_CHECK throws "NCCL Error 4:
# invalid argument"; nothing catches it: libstdc++'s terminate.
_NCCL_INFO = "host:2396:2428 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.1<0>\nNCCL version 2.5.6+cuda10.2\n"
_INVALID_ROOT = (
    "host:2396:2428 [0] misc/argcheck.cc:40 NCCL WARN Reduce : invalid root 0 (root should be in the 0..0 range)\n"
    "host:2396:2428 [0] NCCL INFO enqueue.cc:447 -> 4\n"
)
_ABORT = (
    "terminate called after throwing an instance of 'std::runtime_error'\n"
    "  what():  NCCL Error 4: invalid argument\n"
    "Aborted (core dumped)\n"
)


def test_an_abort_of_an_nccl_argument_check_is_no_death_of_its_own(tmp_path: Path) -> None:
    diagnosis = _diagnose(tmp_path, _NCCL_INFO + _INVALID_ROOT + _ABORT)
    assert "HD030" not in _rules(diagnosis)
    # argcheck's WARN is the caller's bug, not a CUDA call failing under NCCL
    assert all(f.category is not Category.GPU_HARDWARE for f in diagnosis.findings)


def test_the_same_abort_without_the_check_is_still_a_death(tmp_path: Path) -> None:
    diagnosis = _diagnose(tmp_path, _NCCL_INFO + _ABORT)
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD030"


# ---- a per-step join check whose rank 0 names the missing rank --------------------------
# CosyVoice's cosyvoice_join (cosyvoice/utils/train_utils.py, wenet's wenet_join):
# dist.monitored_barrier(group=group_join, timeout=…) each step; on RuntimeError
# logging.info("Detected uneven workload distribution: {}\n".format(e) + "Break current
# worker to manually join all workers, world_size {}, current rank {}, current local_rank
# {}"). ProcessGroupGloo's monitoredBarrier: rank 0 "Rank R failed to pass monitoredBarrier
# in T ms"; the others "Rank R successfully reached monitoredBarrier, but received errors
# while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
_PEER = "Rank {r} successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
_JOIN = (
    f"[E ProcessGroupGloo.cpp:138] {_PEER.format(r=2)}\n"
    "[E ProcessGroupGloo.cpp:138] [Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms\n"
    f"[E ProcessGroupGloo.cpp:138] {_PEER.format(r=1)}\n"
    f"2024-07-21 00:11:29,529 INFO Detected uneven workload distribution: {_PEER.format(r=2)}\n"
    "Break current worker to manually join all workers, world_size 4, current rank 2, current local_rank 2\n"
)


def test_a_join_check_names_the_rank_rank_0_reported(tmp_path: Path) -> None:
    diagnosis = _diagnose(tmp_path, _JOIN)
    primary = diagnosis.primary
    assert primary is not None and primary.rule == "HD040"
    assert primary.category is Category.UNEVEN_DATA and primary.culprit_ranks == (3,)


def test_a_monitored_barrier_outside_a_join_stays_a_divergence(tmp_path: Path) -> None:
    text = "\n".join(line for line in _JOIN.splitlines() if "uneven" not in line) + "\n"
    primary = _diagnose(tmp_path, text).primary
    assert primary is not None and primary.rule == "HD037"
    assert primary.category is Category.RANK_DIVERGENCE and primary.culprit_ranks == (3,)


# ---- loading words beside a checkpoint's weak words -------------------------------------
@pytest.mark.parametrize(
    ("line", "meaning"),
    [
        # vLLM's model_runner.py load_model: logger.info("Loading model weights took %.4f GB", …)
        ("Loading model weights took 7.5324 GB", Activity.CHECKPOINT_LOAD),
        ("restoring model state from /ckpt/step_100", Activity.CHECKPOINT_LOAD),
        ("saving model weights to /ckpt/step_100", Activity.CHECKPOINT_SAVE),
        ("writing model state", Activity.CHECKPOINT_SAVE),
    ],
)
def test_weak_checkpoint_words_beside_a_load_mean_a_load(line: str, meaning: Activity) -> None:
    assert meaning_of(tokens(line)) is meaning


def test_a_timeout_after_loading_weights_is_no_save(tmp_path: Path) -> None:
    text = (
        "INFO 05-01 10:00:40 model_runner.py:1008] Loading model weights took 7.5324 GB\n"
        # vLLM V1's gpu_model_runner: "Model loading took %.4f GiB and %.6f seconds"
        "INFO 05-01 10:00:41 gpu_model_runner.py:1800] Model loading took 7.5324 GiB and 12.301 seconds\n"
        "[rank1]:[E501 10:30:42.196832485 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600008 milliseconds before timing out.\n"
    )
    diagnosis = _diagnose(tmp_path, text)
    assert all(f.category is not Category.CHECKPOINT_SAVE for f in diagnosis.findings)
