"""What the job's own names say (analyzer/views/meaning.py): hand-made frames and files."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.model import FileMode, Frame, LogLine, OpenFile, ProcessEvidence, ProcSample
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.meaning import (
    frame_signal,
    job_meaning,
    kernel_signal,
    meaning_of,
    tokens,
)


def test_tokens_split_identifiers_paths_and_lines() -> None:
    assert tokens("ShardWriter.persist_shard") == ["shard", "writer", "persist", "shard"]
    assert tokens("run_val_epoch") == ["run", "val", "epoch"]
    assert tokens("/ckpt/step_100/model.safetensors") == ["ckpt", "step", "model", "safetensors"]


@pytest.mark.parametrize(
    ("name", "meaning"),
    [
        ("ShardWriter.persist_shard", Activity.CHECKPOINT_SAVE),
        ("save_model_weights", Activity.CHECKPOINT_SAVE),
        ("run_val_epoch", Activity.EVAL),
        ("MetricsReporter.maybe_report", Activity.METRICS),
        ("MyDataset.__getitem__", Activity.DATA),
        ("fetch_next_batch", Activity.DATA),
        ("train_step", None),
        ("forward", None),
        ("gather_results", None),  # one weak word is not enough
    ],
)
def test_meaning_of_names(name: str, meaning: Activity | None) -> None:
    assert meaning_of(tokens(name)) is meaning


def test_frames_of_a_driver_script_do_not_speak_for_every_function() -> None:
    # "train_eval.py" names both; only a function's own name counts there
    assert frame_signal([Frame("main", "/job/train_eval.py", 10)]) is None
    found = frame_signal(
        [Frame("write", "/job/io.py", 3), Frame("step", "/job/checkpointing.py", 9)]
    )
    assert found is not None and found.meaning is Activity.CHECKPOINT_SAVE


def test_a_function_named_for_preprocessing_is_not_a_dataloader() -> None:
    # "preprocess_dataset" holds DATA's strong "dataset"; the function preprocesses it
    found = frame_signal([Frame("preprocess_dataset", "/job/data/preprocess.py", 176)])
    assert found is not None and found.meaning is Activity.PREPROCESS
    found = frame_signal([Frame("MyDataset.__getitem__", "/job/data/preprocess.py", 40)])
    assert found is not None and found.meaning is Activity.DATA
    # a log line's "Preprocessing in 8.98 s" (faiss) reports a step done: function names only
    assert job_meaning([], _process((), "  Preprocessing in 8.98 s")) is None


def _process(files: tuple[OpenFile, ...], last_line: str | None = None) -> ProcessEvidence:
    lines = [LogLine(last_line, "rank3.log", 40)] if last_line else []
    return ProcessEvidence(
        rank=3, proc_samples=[ProcSample(0, None, open_files=files)], log_lines=lines
    )


def test_kernel_signal_from_a_checkpoint_file_open_for_writing() -> None:
    shard = OpenFile(7, "/mnt/nfs/run1/ckpt/shard3.bin", mode=FileMode.WRITE, fstype="nfs4")
    stdout = OpenFile(1, "/jobs/checkpoint-run/logs/rank3.out", mode=FileMode.WRITE)
    found = kernel_signal(_process((stdout, shard)))
    assert found is not None and "shard3.bin on nfs4" in found.text
    assert kernel_signal(_process((stdout,))) is None  # stdout is a log, whatever its folder


def test_independent_signals_that_agree_are_counted() -> None:
    shard = OpenFile(7, "/data/ckpt/step_9/shard3.pt", mode=FileMode.WRITE)
    process = _process((shard,), "writing shard 3 to /data/ckpt/step_9 ...")
    found = job_meaning([Frame("ShardWriter.persist_shard", "/job/train.py", 62)], process)
    assert found is not None
    meaning, signals = found
    assert meaning is Activity.CHECKPOINT_SAVE
    assert [s.kind for s in signals] == ["frame", "kernel", "log"]
    assert job_meaning([Frame("train_step", "/job/train.py", 5)], ProcessEvidence()) is None


@pytest.mark.parametrize(
    ("path", "user"),
    [
        ("torch/distributed/distributed_c10d.py", False),  # py-spy text of site-packages
        ("deepspeed/runtime/engine.py", False),
        ("/usr/lib/python3.11/threading.py", False),
        ("/opt/venv/lib/python3.11/site-packages/torch/serialization.py", False),
        ("threading.py", False),
        ("/srv/job/train.py", True),
        ("train.py", True),
        ("my_project/checkpointing.py", True),
        ("/workspace/Megatron-LM/megatron/training/training.py", True),  # a checkout
    ],
)
def test_library_frames_are_told_from_the_jobs_in_every_path_form(path: str, user: bool) -> None:
    from hangdoc.analyzer.views.activity import is_user_frame

    assert is_user_frame(Frame("f", path, 1)) is user
