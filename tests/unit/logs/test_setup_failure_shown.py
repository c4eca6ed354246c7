"""Set-up failures whose stage the paste shows by what the printing code means, not by a
traceback through init_process_group, and the deaths they cause.

* vLLM's ``WorkerWrapperBase.execute_method`` (vllm/worker/worker_base.py) logs "Error
  executing method <method>. This might cause deadlock in distributed execution." with
  logger.exception, then re-raises: the method named is the call its record's exception
  was raised in, read as its frame would be (``init_device`` sets up the device and the
  distributed environment, whose NCCL communicators pynccl creates). vLLM's
  NewLineFormatter repeats the header ("… worker_base.py:382] ") on each line of a record,
  so a paste that starts inside one worker's traceback and goes on to the next record of
  the same logging call holds the end of an earlier record of that call.
* NCCL's ``wrap_ibv_modify_qp`` (src/misc/ibvwrap.cc, IBV_INT_CHECK_RET_ERRNO's WARN "Call
  to %s failed with error %s") is called only to bring a queue pair of ncclIbConnect or
  ncclIbAccept up (net_ib.cc ncclIbInitQp / ncclIbRtrQp / ncclIbRtsQp) in every release
  before 2.30: the IB connection never came up, and the call that created or first used
  the communicator raised that failure in the same process.

The lines are those of fixtures/cases/vllm-7896-ray-init-device-unhandled-cuda-error and
fixtures/cases/openrlhf-335-update-weight-ibv-modify-qp (train split), varied where a test
says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.tb_stage import called_stage
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from tests.unit.recognition_kit import MANGLINGS, Mangle
from tests.unit.recognition_kit import answer as _answer

_W1 = "(RayWorkerWrapper pid=11305) ERROR 08-27 05:12:18 worker_base.py:382] "
_W2 = "(RayWorkerWrapper pid=11934) ERROR 08-27 05:12:18 worker_base.py:382] "
_DEDUP = " [repeated 6x across cluster]"
_NCCL_CUDA = "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"


def _vllm(first_exception: str = _NCCL_CUDA, method: str = "init_device", w2: str = _W2) -> str:
    lines = [
        _W1 + '  File "/usr/local/lib/python3.10/dist-packages/vllm/distributed/'
        'device_communicators/pynccl_wrapper.py", line 223, in NCCL_CHECK',
        _W1 + '    raise RuntimeError(f"NCCL error: {error_str}")',
        _W1 + first_exception,
        w2
        + f"Error executing method {method}. This might cause deadlock in distributed "
        + "execution."
        + _DEDUP,
        w2 + "Traceback (most recent call last):" + _DEDUP,
        w2 + '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker_base.py", '
        "line 374, in execute_method" + _DEDUP,
        w2 + "    return executor(*args, **kwargs)" + _DEDUP,
    ]
    return "".join(f"{line}\n" for line in lines)


_ACTOR = "(LLMRayActor pid=1112, ip=172.26.5.7) "
_LOGGED = _ACTOR + "ERROR 06-30 06:10:12 worker_base.py:145] "
_MODIFY_QP = (
    "job-hvjmrsm8sqf4r2h5q2tl-worker-0:1112:13532 [0] ibvwrap.c:160 NCCL WARN Call to "
    "ibv_modify_qp failed with error Connection timed out"
)


def _openrlhf(warn_prefix: str = _ACTOR, warn: str = _MODIFY_QP) -> str:
    lines = [
        _ACTOR + "update weight: model.embed_tokens.weight, dtype: torch.bfloat16, shape: "
        "torch.Size([128256, 8192])",
        _ACTOR,
        warn_prefix + warn,
        _LOGGED + "Error executing method update_weight. This might cause deadlock in "
        "distributed execution.",
        _LOGGED + "Traceback (most recent call last):",
        _LOGGED + '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker_base.py", '
        "line 137, in execute_method",
        _LOGGED + "    return executor(*args, **kwargs)",
        _LOGGED + '  File "/tmp/ray/session_2024-06-30_05-59-44_592613_569/runtime_resources/'
        "working_dir_files/_ray_pkg_4323eb844e717d61/openrlhf/trainer/ray/vllm_worker_wrap.py"
        '", line 43, in update_weight',
    ]
    return "".join(f"{line}\n" for line in lines)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "console.txt"
    path.write_text(text, encoding="utf-8")
    return path


# ---- the method a worker was asked to run -------------------------------------------------
def test_the_method_a_worker_ran_is_read_as_its_frame() -> None:
    assert called_stage("init_device") is CodeStage.DEVICE_INIT
    assert called_stage("init_process_group") is CodeStage.SETUP
    assert called_stage("'init_device'") is CodeStage.DEVICE_INIT
    assert called_stage("update_weight") is None  # names no stage
    assert called_stage("execute_model") is None
    assert called_stage("<function Worker.init_device at 0x7f>") is None  # no name


def test_the_logged_method_gives_its_record_its_stage(tmp_path: Path) -> None:
    events = load_paths([_write(tmp_path, _vllm())]).job_log_events
    raised = [e.payload for e in events if isinstance(e.payload, ExceptionRaised)]
    message = [r for r in raised if r.exc_type is None]
    assert [r.stage for r in message] == [CodeStage.DEVICE_INIT]
    # the earlier record of the same logging call, cut above its header: raised there too
    nccl = [r for r in raised if r.exc_type == "RuntimeError"]
    assert [r.stage for r in nccl] == [CodeStage.DEVICE_INIT]


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_an_nccl_error_of_the_workers_device_init_is_set_up(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    category, rule, _ = _answer(tmp_path, mangle(_vllm()))
    if how == "first line cut":
        # the cut takes the first frame's start: the earlier record's exception is a bare
        # line under a source line, read as nothing; less specific, never another answer
        assert category in (Category.NCCL_INIT, Category.UNKNOWN), how
    else:
        assert (category, rule) == (Category.NCCL_INIT, "HD206"), how


def test_a_method_that_names_no_set_up_stages_nothing(tmp_path: Path) -> None:
    diagnosis = analyze(load_paths([_write(tmp_path, _vllm(method="execute_model"))]))
    assert all(f.rule != "HD206" for f in diagnosis.findings)


def test_another_error_of_the_device_init_is_no_set_up_failure(tmp_path: Path) -> None:
    # init_device also checks the dtype (Worker._check_if_gpu_supports_dtype): its error
    # is raised there too, and is no NCCL failure.
    bf16 = (
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
        "8.0. Your Tesla T4 GPU has compute capability 7.5."
    )
    diagnosis = analyze(load_paths([_write(tmp_path, _vllm(first_exception=bf16))]))
    assert all(f.rule != "HD206" for f in diagnosis.findings)


def test_a_record_of_another_logging_call_takes_no_stage(tmp_path: Path) -> None:
    other = "(RayWorkerWrapper pid=11934) ERROR 08-27 05:12:18 worker_base.py:390] "
    events = load_paths([_write(tmp_path, _vllm(w2=other))]).job_log_events
    nccl = [
        e.payload
        for e in events
        if isinstance(e.payload, ExceptionRaised) and e.payload.exc_type == "RuntimeError"
    ]
    assert [r.stage for r in nccl] == [None]


# ---- a death after its own process's connection set-up failed ----------------------------
@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_workers_exception_after_its_queue_pair_failed_is_that_failure(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    category, rule, _ = _answer(tmp_path, mangle(_openrlhf()))
    assert (category, rule) == (Category.NCCL_INIT, "HD200"), how


def test_another_processs_connect_failure_does_not_hide_a_death(tmp_path: Path) -> None:
    # The WARN of another process (pid 2224 on another host): its failed connection may be
    # this death's consequence; the death stays a candidate.
    other = (
        "job-hvjmrsm8sqf4r2h5q2tl-worker-1:2224:2301 [0] ibvwrap.c:160 NCCL WARN Call to "
        "ibv_modify_qp failed with error Connection timed out"
    )
    diagnosis = analyze(
        load_paths([_write(tmp_path, _openrlhf("(LLMRayActor pid=2224, ip=172.26.5.8) ", other))])
    )
    assert any(f.rule == "HD030" for f in diagnosis.findings)


def test_a_retried_connect_is_no_set_up_failure(tmp_path: Path) -> None:
    # misc/socket.cc's INFO "Call to connect returned %s, retrying" (2.18.3: line 470): normal
    # while the peers start; the death after it is still one.
    retry = (
        "job-hvjmrsm8sqf4r2h5q2tl-worker-0:1112:13532 [0] misc/socket.cc:470 NCCL INFO Call to "
        "connect returned Connection refused, retrying"
    )
    diagnosis = analyze(load_paths([_write(tmp_path, _openrlhf(warn=retry))]))
    assert any(f.rule == "HD030" for f in diagnosis.findings)


# ---- an RL framework's worker building its model -------------------------------------------
# verl/workers/fsdp_workers.py (HEAD): ActorRolloutRefWorker.init_model builds the model in
# _build_model_optimizer, whose torch.distributed.barrier() is the first collective on the
# process group its __init__ created without a device: torch creates the NCCL communicator
# there. The c10d frames and the error are torch 2.6's (distributed_c10d.py barrier,
# NCCLUtils.hpp's C10D_NCCL_CHECK); the line numbers are made up.
def _verl(init: str = "init_model", error: str = "") -> str:
    lines = [
        "Traceback (most recent call last):",
        '  File "/opt/verl/verl/single_controller/ray/base.py", line 663, in func',
        "    return getattr(self.worker_dict[key], name)(*args, **kwargs)",
        '  File "/opt/verl/verl/single_controller/base/decorator.py", line 540, in inner',
        "    return func(*args, **kwargs)",
        f'  File "/opt/verl/verl/workers/fsdp_workers.py", line 775, in {init}',
        "    ) = self._build_model_optimizer(",
        '  File "/opt/verl/verl/workers/fsdp_workers.py", line 485, in _build_model_optimizer',
        "    torch.distributed.barrier()",
        '  File "/usr/lib/python3.10/site-packages/torch/distributed/c10d_logger.py", line 83, '
        "in wrapper",
        "    return func(*args, **kwargs)",
        '  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", '
        "line 4635, in barrier",
        "    work = group.barrier(opts=opts)",
        error
        or "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/"
        "c10d/NCCLUtils.hpp:317, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.21.5",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        "Last error:",
        "Cuda failure 2 'out of memory'" if error else "Cuda failure 101 'invalid device ordinal'",
    ]
    return "".join(f"{line}\n" for line in lines)


def test_the_rl_frameworks_model_init_methods_are_a_workers_init() -> None:
    # verl's and SkyRL's init_model, OpenRLHF's init_model_from_pretrained
    assert called_stage("init_model") is CodeStage.WORKER_INIT
    assert called_stage("init_model_from_pretrained") is CodeStage.WORKER_INIT
    assert called_stage("FSDPRefRayActorBase.init_model") is CodeStage.WORKER_INIT


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_an_nccl_error_of_a_workers_first_collective_in_its_model_init_is_set_up(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    category, rule, _ = _answer(tmp_path, mangle(_verl()))
    assert (category, rule) == (Category.NCCL_INIT, "HD206"), how


def test_the_same_error_outside_a_workers_init_shows_no_stage(tmp_path: Path) -> None:
    # the barrier of a method the controller calls every step: a collective's launch as
    # much as the communicator's creation (C10D_NCCL_CHECK wraps both)
    diagnosis = analyze(load_paths([_write(tmp_path, _verl(init="update_actor"))]))
    assert all(f.rule != "HD206" for f in diagnosis.findings)


def test_a_model_that_cannot_load_in_a_workers_init_is_no_nccl_failure(tmp_path: Path) -> None:
    error = "OSError: /models/qwen does not appear to have a file named config.json."
    text = _verl(error=error).split("ncclUnhandledCudaError")[0]
    diagnosis = analyze(load_paths([_write(tmp_path, text)]))
    assert all(f.rule != "HD206" for f in diagnosis.findings)
