"""The Python stack torch's flight recorder prints under "Stack trace of the failed
collective:" (FlightRecorder's Entry::getTraceback: ``#N <function> from <file.py>:<line>``)
is a Python stack: its frames are read as Python frames, so the frame catalog knows them
(a collective inside a checkpoint save, a DataLoader…), and a rank whose own collective
timed out there is the one that waited, not the one to blame."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.stacks.native import gdb_frame
from hangdoc.analyzer.parsers.stacks.saves import is_save_call

_PKG = "/opt/venv/lib/python3.11/site-packages"


def test_a_flight_recorder_frame_is_a_python_frame() -> None:
    frame = gdb_frame(
        f"all_gather_into_tensor from {_PKG}/torch/distributed/distributed_c10d.py:3712"
    )
    assert not frame.native
    assert frame.function == "all_gather_into_tensor"
    assert frame.file.endswith("torch/distributed/distributed_c10d.py") and frame.line == 3712
    # gdb's own "from <library>" frames stay native
    lib = gdb_frame("0x00007f0 in pthread_cond_wait () from /lib64/libpthread.so.0")
    assert lib.native and lib.file == "/lib64/libpthread.so.0"


def test_megatron_dist_checkpointing_async_save_frames_are_save_calls() -> None:
    path = f"{_PKG}/megatron/core/dist_checkpointing/strategies/async_utils.py:433"
    assert is_save_call(gdb_frame(f"maybe_finalize_async_calls from {path}"))
    assert not is_save_call(gdb_frame(f"_get_async_caller from {path}"))


def _timeout_log(tmp_path: Path, frames: list[str]) -> Path:
    lines = [
        "[rank3]:[E1002 08:01:10.000000000 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=1800000) ran for 1800021 milliseconds before timing out.",
        "[rank3]:[E1002 08:01:10.000100000 ProcessGroupNCCL.cpp:667] Stack trace of the failed "
        "collective: ",
        *(f"#{i} {f}" for i, f in enumerate(frames)),
    ]
    log = tmp_path / "rank3.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_a_collective_timed_out_inside_a_save_names_the_save_and_not_the_waiter(
    tmp_path: Path,
) -> None:
    log = _timeout_log(
        tmp_path,
        [
            f"all_reduce from {_PKG}/torch/distributed/distributed_c10d.py:2501",
            f"wrapper from {_PKG}/torch/distributed/c10d_logger.py:83",
            f"maybe_finalize_async_calls from {_PKG}/megatron/core/dist_checkpointing/"
            "strategies/async_utils.py:545",
            f"save_checkpoint from {_PKG}/megatron/training/checkpointing.py:480",
        ],
    )
    diagnosis = analyze(load_paths([log]), calibrate=False)
    primary = diagnosis.primary
    assert primary is not None and primary.category is Category.CHECKPOINT_SAVE
    assert 3 not in primary.culprit_ranks  # rank 3 waited in the collective


def test_a_collective_timed_out_in_the_training_step_is_no_save(tmp_path: Path) -> None:
    log = _timeout_log(
        tmp_path,
        [
            f"all_reduce from {_PKG}/torch/distributed/distributed_c10d.py:2501",
            "train_step from /work/job/train.py:211",
        ],
    )
    diagnosis = analyze(load_paths([log]), calibrate=False)
    assert all(f.category is not Category.CHECKPOINT_SAVE for f in diagnosis.findings)
