"""Set-up failures read by where they happen, whatever their words (issue 21).

* The set-up entry points' table (parsers/catalog/data/stages/setup_entry_points.json),
  read from the sources of torch.distributed and the frameworks: each entry's frame shows
  its stage, a constructor only in its own file; every entry names its source.
* An NCCL error raised as an exception in words none of ncclGetErrorString's strings
  (NCCL src/init.cc) carries Sign.NCCL_ERROR_UNREAD; one of its strings does not.
* An exception whose words nothing reads, raised in a framework's worker set-up (vLLM's
  init_device), is read as set-up one step weaker (death_kind's init-unread row); the
  same place with words the catalog holds (vLLM's bf16 check) keeps its own reading.
* torch's synchronous "NCCL error in: <place>, <new words>" raised through
  init_process_group is set-up (HD206), one step weaker than a known class.

Paths, hosts and line numbers are made up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Finding, Strength
from hangdoc.analyzer.parsers.logs.errors import signs_of, words_unread
from hangdoc.analyzer.parsers.logs.tb_stage import (
    ENTRY_POINTS_FILE,
    called_stage,
    entry_points,
    frame_stage,
)
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.launch import CodeStage


def _primary(diagnosis: Diagnosis) -> Finding:
    found = diagnosis.primary
    assert found is not None
    return found


_TABLE = json.loads(ENTRY_POINTS_FILE.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "entry", _TABLE["entries"], ids=lambda e: f"{e['project']}:{e['file']}:{e['function']}"
)
def test_each_entry_points_frame_shows_its_stage(entry: dict[str, str | None]) -> None:
    file = entry["file"] or "some/pkg/module.py"
    frame = f'  File "/opt/site-packages/{file}", line 12, in {entry["function"]}'
    assert frame_stage(frame) is CodeStage(str(entry["stage"]))
    assert entry["source"], "every entry names the source it was read from"


def test_a_constructor_is_set_up_only_in_its_own_file() -> None:
    mine = '  File "/x/vllm/distributed/device_communicators/pynccl.py", line 99, in __init__'
    other = '  File "/x/vllm/engine/llm_engine.py", line 99, in __init__'
    assert frame_stage(mine) is CodeStage.SETUP
    assert frame_stage(other) is None
    assert entry_points().stage("/x/mine/pynccl.py", "__init__") is None  # a suffix of a path


def test_a_name_only_entry_is_read_in_a_source_line_and_as_a_called_method() -> None:
    assert frame_stage("    mesh._init_process_groups()") is None  # file-qualified: not by name
    assert frame_stage("    engine = self._configure_distributed_model(model)") is None
    assert called_stage("init_device") is CodeStage.DEVICE_INIT
    assert called_stage("init_model_from_pretrained") is CodeStage.WORKER_INIT


@pytest.mark.parametrize(
    ("exc_type", "message", "unread"),
    [
        ("RuntimeError", "NCCL error: ncclFooBar: something new happened", True),
        ("RuntimeError", "NCCL error in: ../ProcessGroupNCCL.cpp:535, ncclFooBar went wrong", True),
        ("RuntimeError", "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)", False),
        ("RuntimeError", "NCCL error in: x.cpp:1, invalid argument, NCCL version 2.4.8", False),
        ("RuntimeError", "NCCL error: remote process exited or there was a network error", False),
        ("RuntimeError", "something unrelated to NCCL", False),
    ],
)
def test_an_nccl_error_in_words_nccl_does_not_print_is_unread(
    exc_type: str, message: str, unread: bool
) -> None:
    assert (Sign.NCCL_ERROR_UNREAD in signs_of(exc_type, message)) is unread


def test_words_the_catalog_holds_are_not_unread() -> None:
    assert words_unread("RuntimeError: ncclFooBar: something new happened")
    bf16 = (
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
        "8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by "
        "explicitly setting the`dtype` flag in CLI, for example: --dtype=half."
    )
    assert not words_unread(bf16)  # vLLM's own check (vllm/platforms/cuda.py)


_HEAD = "ERROR 10-13 09:06:25 [v1/executor/multiproc_executor.py:597] "
_FRAMES = [
    "WorkerProc failed to start.",
    "Traceback (most recent call last):",
    '  File "/app/vllm/vllm/v1/executor/multiproc_executor.py", line 571, in worker_main',
    "    worker = WorkerProc(*args, **kwargs)",
    '  File "/app/vllm/vllm/v1/executor/multiproc_executor.py", line 430, in __init__',
    "    self.worker.init_device()",
    '  File "/app/vllm/vllm/worker/worker_base.py", line 259, in init_device',
    "    self.worker.init_device()  # type: ignore",
]


def _worker(tmp_path: Path, error: str) -> Path:
    path = tmp_path / "worker.log"
    path.write_text("".join(f"{_HEAD}{line}\n" for line in (*_FRAMES, error)))
    return path


def test_new_words_raised_in_init_device_read_as_set_up_one_step_weaker(tmp_path: Path) -> None:
    new = analyze(load_paths([_worker(tmp_path, "RuntimeError: ncclFooBar: something new")]))
    assert _primary(new).category is Category.NCCL_INIT
    assert _primary(new).rule == "HD030"
    known = analyze(
        load_paths([_worker(tmp_path, "RuntimeError: NCCL error: unhandled system error")])
    )
    assert _primary(known).category is Category.NCCL_INIT
    assert _primary(new).strength < _primary(known).strength


@pytest.mark.parametrize(
    "error",
    [
        # vLLM's bf16 check, whole and cut at its end (a paste's excerpt): a ValueError, the
        # job's configuration, not words torch's C++ side raises
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
        "8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by "
        "explicitly setting the`dtype` flag in CLI, for example: --dtype=half.",
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
        "8.0. Your Tesla T4 GPU has compute capability 7.5.",
        "AssertionError: something new the job asserted",
    ],
)
def test_known_words_or_the_jobs_own_checks_in_init_device_are_no_set_up(
    tmp_path: Path, error: str
) -> None:
    diagnosis = analyze(load_paths([_worker(tmp_path, error)]))
    assert all(f.category is not Category.NCCL_INIT for f in diagnosis.findings)


def test_an_oom_raised_in_init_device_stays_an_oom(tmp_path: Path) -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert _primary(analyze(load_paths([_worker(tmp_path, oom)]))).category is Category.CUDA_OOM


def _init_pg(tmp_path: Path, words: str) -> Path:
    path = tmp_path / "rank0.log"
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 10, in <module>',
        "    dist.init_process_group('nccl')",
        '  File "/opt/torch/distributed/distributed_c10d.py", line 602, in init_process_group',
        "    default_pg = _new_process_group_helper(",
        '  File "/opt/torch/distributed/c10d.py", line 738, in _new_process_group_helper',
        "    pg = ProcessGroupNCCL(prefix_store, group_rank, group_size, pg_options)",
        f"RuntimeError: NCCL error in: /opt/torch/csrc/ProcessGroupNCCL.cpp:91234, {words}",
    ]
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_an_nccl_error_of_new_words_raised_through_set_up_is_set_up_weaker(
    tmp_path: Path,
) -> None:
    new = analyze(load_paths([_init_pg(tmp_path, "ncclFooBar: something new happened")]))
    assert _primary(new).category is Category.NCCL_INIT
    known = analyze(load_paths([_init_pg(tmp_path, "unhandled system error, NCCL version 2.7")]))
    assert _primary(known).category is Category.NCCL_INIT
    assert _primary(new).strength < _primary(known).strength
    assert _primary(new).strength >= Strength.HINT


def test_the_same_new_words_raised_in_the_training_loop_are_not_set_up(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log"
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 40, in train_one_epoch',
        "    dist.all_reduce(loss)",
        '  File "/opt/torch/distributed/distributed_c10d.py", line 1536, in all_reduce',
        "    work = default_pg.allreduce([tensor], opts)",
        "RuntimeError: NCCL error in: /opt/torch/csrc/ProcessGroupNCCL.cpp:91234, ncclFooBar",
    ]
    path.write_text("".join(f"{line}\n" for line in lines))
    diagnosis = analyze(load_paths([path]))
    assert all(f.category is not Category.NCCL_INIT for f in diagnosis.findings)


# DDP's constructor's first collective in each release's words (torch/nn/parallel/
# distributed.py __init__; setup_entry_points.json, stage rank_check): 1.9-1.10, 1.11-1.12,
# and 1.13- through torch/distributed/utils.py.
_DDP_CHECKS = {
    "1.9": ["    dist._verify_model_across_ranks(self.process_group, parameters)"],
    "1.11": ["    dist._verify_params_across_processes(self.process_group, parameters)"],
    "1.13": [
        "    _verify_param_shape_across_processes(self.process_group, parameters)",
        '  File "/opt/torch/distributed/utils.py", line 286, in '
        "_verify_param_shape_across_processes",
        "    return dist._verify_params_across_processes(process_group, tensors, logger)",
    ],
}


def _ddp_init(tmp_path: Path, check: list[str], error: str) -> Path:
    path = tmp_path / "rank0.log"
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 217, in main',
        "    model = nn.parallel.DistributedDataParallel(model, device_ids=[0])",
        '  File "/opt/torch/nn/parallel/distributed.py", line 641, in __init__',
        *check,
        error,
    ]
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


@pytest.mark.parametrize("release", sorted(_DDP_CHECKS))
def test_ddps_check_across_ranks_is_a_rank_check_in_every_release(release: str) -> None:
    assert frame_stage(_DDP_CHECKS[release][-1]) is CodeStage.RANK_CHECK


@pytest.mark.parametrize("release", sorted(_DDP_CHECKS))
def test_an_nccl_set_up_error_from_ddps_first_collective_is_set_up(
    tmp_path: Path, release: str
) -> None:
    error = (
        "RuntimeError: NCCL error in: /opt/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:47,"
        " unhandled cuda error, NCCL version 21.0.3"
    )
    diagnosis = analyze(load_paths([_ddp_init(tmp_path, _DDP_CHECKS[release], error)]))
    assert _primary(diagnosis).category is Category.NCCL_INIT


def test_what_ddps_check_itself_raises_is_no_set_up_failure(tmp_path: Path) -> None:
    error = (
        "RuntimeError: [1]: params[0] in this process with sizes [10, 4] appears not to match"
        " sizes of the same param in process 0."
    )
    path = _ddp_init(tmp_path, _DDP_CHECKS["1.13"], error)
    diagnosis = analyze(load_paths([path]))
    assert all(f.category is not Category.NCCL_INIT for f in diagnosis.findings)
