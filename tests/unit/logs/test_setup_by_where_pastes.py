"""Set-up failures read by where they happen, in the shapes a report pastes them (issue 21):

* pytest's failure lines (_pytest/_code/code.py, FormattedExcinfo.get_exconly with markall:
  every line of the exception's text behind the ``fail_marker`` "E" and the failing
  source line's indentation less one column) are a prefix of the paste, like a quote's
  marker: a spawned process's traceback inside them is read as printed.
* NCCL's WARN of a CUDA call that failed with an error CUDA documents as the caller's
  request (cudaErrorInvalidDeviceFunction "invalid device function",
  cudaErrorNoKernelImageForDevice: a build without this GPU's kernels), wherever NCCL
  checked it (enqueue.cc's kernel launch), is the install's failure at set-up; another
  CUDA error from the same place is not.
* A framework's logged error record of a traceback (vLLM's logger header on each line,
  vllm/logger.py's NewLineFormatter) cut before its exception line, whose innermost frames
  are a set-up entry point (PyNcclCommunicator.__init__ creating the communicator), is
  set-up, stated weaker than with its exception line; the same frames in no logger's error
  record, or a record cut in the training step, are not.

Paths, hosts, pids and line numbers are made up.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Evidence, Finding, LogEvent
from hangdoc.analyzer.parsers.logs.errors import cuda_build_lacks_device, cuda_gpu_sign
from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from hangdoc.analyzer.payloads.nccl import CudaFailure
from hangdoc.analyzer.vocabulary import EventKind


def _primary(diagnosis: Diagnosis) -> Finding:
    found = diagnosis.primary
    assert found is not None
    return found


def _events(evidence: Evidence) -> list[LogEvent]:
    """The log events of the job and of each process the evidence holds."""
    return [*evidence.job_log_events, *(e for p in evidence.processes for e in p.log_events)]


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


# ---- pytest's "E" marker ------------------------------------------------------------

_SPAWNED = [
    "torch.multiprocessing.spawn.ProcessRaisedException:",
    "",
    "-- Process 2 terminated with the following error:",
    "Traceback (most recent call last):",
    '  File "/opt/torch/multiprocessing/spawn.py", line 69, in _wrap',
    "    fn(i, *args)",
    '  File "/src/tests/test_ddp.py", line 31, in run_dist',
    "    model = DDP(model, device_ids=[rank])",
    '  File "/opt/torch/nn/parallel/distributed.py", line 578, in __init__',
    "    dist._verify_model_across_ranks(self.process_group, parameters)",
    "RuntimeError: NCCL error in: /opt/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:957,"
    " unhandled system error, NCCL version 21.0.3",
    "ncclSystemError: System call (socket, malloc, munmap, etc) failed.",
]


def _pytest_failure(indent: int) -> list[str]:
    """get_exconly's lines: "E" + indent-1 spaces before each line; a blank line of the
    text is the marker and its spaces, which an editor trims to "E"."""
    marker = "E" + " " * (indent - 1)
    return [(marker + line) if line else "E" for line in _SPAWNED]


def test_pytests_failure_marker_is_undone_whatever_the_indentation() -> None:
    for indent in (4, 8, 12):
        fixed = unmangle("\n".join(_pytest_failure(indent)) + "\n")
        assert fixed is not None
        assert fixed.text == "\n".join(_SPAWNED) + "\n"
        assert "pytest's 'E' marker on a failed test's lines" in fixed.undone


def test_pytests_marker_is_only_a_runs() -> None:
    # glog's error lines ("E1104 …") and one line of a word "E" are the job's own text
    text = "E1104 10:00:00.000 123 foo.cc:10] bad\nE    one line alone\nplain text\n"
    fixed = unmangle(text)
    assert fixed is None or "pytest's 'E' marker on a failed test's lines" not in fixed.undone


def test_a_spawned_ranks_set_up_failure_under_pytests_marker_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path, "pytest_output.txt", _pytest_failure(8))
    found = _primary(analyze(load_paths([path])))
    assert found.category is Category.NCCL_INIT
    assert tuple(found.culprit_ranks) == (2,)


# ---- NCCL's CUDA failure of a build without the GPU's kernels ------------------------

_K40 = [
    "host-a:101:201 [0] NCCL INFO NCCL version 2.7.8+cuda11.0",
    "host-a:101:201 [0] NCCL INFO Channel 00/02 :    0   1",
    "host-a:101:201 [0] enqueue.cc:215 NCCL WARN Cuda failure '{error}'",
    "host-a:102:202 [1] enqueue.cc:215 NCCL WARN Cuda failure '{error}'",
]


def test_the_builds_errors_are_read_from_cudas_documentation() -> None:
    for build in (
        "invalid device function",
        "no kernel image is available for execution on the device",
    ):
        assert cuda_build_lacks_device(build)
        assert cuda_gpu_sign(build) is Sign.CUDA_CALLER_REQUEST  # the caller's, not the GPU's
    assert cuda_gpu_sign("invalid device ordinal") is Sign.CUDA_CALLER_REQUEST
    for other in (
        "invalid device ordinal",
        "invalid argument",
        "an illegal memory access was encountered",
    ):
        assert not cuda_build_lacks_device(other)


def _cuda_failures(tmp_path: Path, error: str) -> list[CudaFailure]:
    path = _write(tmp_path, "ranks.log", [line.format(error=error) for line in _K40])
    evidence = load_paths([path])
    events = [e for e in _events(evidence) if e.kind is EventKind.CUDA_ERROR]
    failures = [e.payload for e in events if isinstance(e.payload, CudaFailure)]
    assert failures
    return failures


def test_nccls_kernel_launch_without_the_gpus_kernels_is_set_up(tmp_path: Path) -> None:
    for error in (
        "invalid device function",
        "no kernel image is available for execution on the device",
    ):
        assert all(f.setup for f in _cuda_failures(tmp_path, error))
        path = tmp_path / "ranks.log"
        found = _primary(analyze(load_paths([path])))
        assert found.category is Category.NCCL_INIT


def test_another_cuda_error_at_the_same_launch_is_not_set_up(tmp_path: Path) -> None:
    for error in ("invalid argument", "invalid device ordinal"):
        assert not any(f.setup for f in _cuda_failures(tmp_path, error))


# ---- a framework's logged traceback cut before its exception line ---------------------

_VLLM = "(VllmWorkerProcess pid=4242) ERROR 10-14 01:39:49 multiproc_worker_utils.py:226] "
_SETUP_FRAMES = [
    "    initialize_model_parallel(tensor_model_parallel_size,",
    '  File "/opt/vllm/distributed/parallel_state.py", line 883, in initialize_model_parallel',
    "    _TP = init_model_parallel_group(group_ranks,",
    '  File "/opt/vllm/distributed/parallel_state.py", line 175, in __init__',
    "    self.pynccl_comm = PyNcclCommunicator(",
    '  File "/opt/vllm/distributed/device_communicators/pynccl.py", line 89, in __init__',
    "    self.comm: ncclComm_t = self.nccl.ncclCommInitRank(",
]
_STEP_FRAMES = [
    "    output = self.model_runner.execute_model(",
    '  File "/opt/vllm/worker/model_runner.py", line 1500, in execute_model',
    "    hidden = model_executable(input_ids=input_ids,",
    '  File "/opt/vllm/model_executor/models/llama.py", line 300, in forward',
    "    hidden_states = self.model(input_ids, positions)",
]


def _cut(tmp_path: Path, head: str, frames: list[str]) -> list[ExceptionRaised]:
    path = _write(tmp_path, "worker.log", [head + line for line in frames])
    events = _events(load_paths([path]))
    return [e.payload for e in events if isinstance(e.payload, ExceptionRaised)]


def test_a_logged_traceback_cut_in_set_up_is_an_exception_of_set_up(tmp_path: Path) -> None:
    (raised,) = _cut(tmp_path, _VLLM, _SETUP_FRAMES)
    assert raised.stage is CodeStage.SETUP
    assert raised.bare and raised.unread
    assert raised.where_function == "__init__"


def test_a_logged_traceback_cut_in_set_up_reads_as_set_up_weaker(tmp_path: Path) -> None:
    cut = _primary(
        analyze(load_paths([_write(tmp_path, "a.log", [_VLLM + f for f in _SETUP_FRAMES])]))
    )
    assert cut.category is Category.NCCL_INIT
    whole = _primary(
        analyze(
            load_paths(
                [
                    _write(
                        tmp_path,
                        "b.log",
                        [
                            _VLLM + f
                            for f in (
                                "Traceback (most recent call last):",
                                *_SETUP_FRAMES,
                                "RuntimeError: NCCL error: unhandled cuda error",
                            )
                        ],
                    )
                ]
            )
        )
    )
    assert whole.category is Category.NCCL_INIT
    assert cut.strength < whole.strength


def test_a_traceback_cut_in_no_loggers_error_record_or_in_a_step_is_not(tmp_path: Path) -> None:
    assert _cut(tmp_path, "", _SETUP_FRAMES) == []  # no logger's error record
    info = _VLLM.replace("ERROR", "INFO")
    assert _cut(tmp_path, info, _SETUP_FRAMES) == []  # not an error record
    assert _cut(tmp_path, _VLLM, _STEP_FRAMES) == []  # cut in the step, not set-up
