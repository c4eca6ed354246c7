"""A vLLM worker failing in its start-up, from the code that prints it.

* vLLM's logger header names the logging call's file by its path under the package at
  VLLM_LOGGING_LEVEL=DEBUG (vllm/logging_utils/formatter.py NewLineFormatter: shrink_path,
  "[v1/executor/multiproc_executor.py:597]"); it is peeled as the file name is.
* ``init_device`` (vllm/v1/worker/gpu_worker.py Worker.init_device, through worker_base.py's
  WorkerWrapperBase.init_device) sets the device up, checks the dtype and the free memory,
  then the distributed environment: its own stage (DEVICE_INIT), where only an NCCL error
  of a set-up class is the communicators' creation failing (HD206); the bf16 check's
  ValueError stays what it is.
* "WorkerProc failed to start." is logged by logger.exception in WorkerProc.worker_main
  (vllm/v1/executor/multiproc_executor.py): its traceback cut before its exception line
  still gives it the stage its frames show, and a paste's first line, a bare exception line
  printed by that same logging call, is an earlier record's end: raised there too.

Paths, times and line numbers are made up.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.tb_stage import frame_stage
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised

_HEAD = "ERROR 10-13 09:06:25 [v1/executor/multiproc_executor.py:597] "
_OTHER = "ERROR 10-13 09:06:25 [v1/executor/multiproc_executor.py:611] "
_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/app/vllm/vllm/v1/executor/multiproc_executor.py", line 571, in worker_main',
    "    worker = WorkerProc(*args, **kwargs)",
    '  File "/app/vllm/vllm/v1/executor/multiproc_executor.py", line 430, in __init__',
    "    self.worker.init_device()",
    '  File "/app/vllm/vllm/worker/worker_base.py", line 259, in init_device',
    "    self.worker.init_device()  # type: ignore",
]
_NCCL = "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
_BF16 = (
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
    "Your Tesla T4 GPU has compute capability 7.5."
)


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "vllm_worker.log"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_the_debug_file_info_header_is_peeled() -> None:
    tag = peel_line(_HEAD + "WorkerProc failed to start.")
    assert tag.text == "WorkerProc failed to start."
    assert tag.origin == "v1/executor/multiproc_executor.py:597"
    shrunk = peel_line(
        "INFO 10-13 09:06:25 [model_executor/.../quantization/utils/fp8_utils.py:12] x"
    )
    assert shrunk.text == "x"


def test_init_device_is_its_own_stage_and_the_distributed_set_up_under_it_is_set_up() -> None:
    frame = '  File "/app/vllm/vllm/v1/worker/gpu_worker.py", line 160, in init_device'
    assert frame_stage(frame) is CodeStage.DEVICE_INIT
    assert frame_stage("    self.worker.init_device()") is CodeStage.DEVICE_INIT
    under = "    init_worker_distributed_environment(self.vllm_config, self.rank,"
    assert frame_stage(under) is CodeStage.SETUP


def test_an_nccl_error_raised_in_init_device_is_set_up(tmp_path: Path) -> None:
    path = _write(tmp_path, [_HEAD + "WorkerProc failed to start.", *(_HEAD + f for f in _FRAMES)])
    path.write_text(path.read_text() + _HEAD + _NCCL + "\n")
    assert analyze(load_paths([path])).primary.rule == "HD206"


def test_the_bf16_check_raised_in_init_device_is_no_set_up(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [_HEAD + "WorkerProc failed to start.", *(_HEAD + f for f in _FRAMES), _HEAD + _BF16],
    )
    assert all(f.rule != "HD206" for f in analyze(load_paths([path])).findings)


def test_a_cut_traceback_gives_the_logged_message_its_stage(tmp_path: Path) -> None:
    path = _write(tmp_path, [_HEAD + "WorkerProc failed to start.", *(_HEAD + f for f in _FRAMES)])
    events = load_paths([path]).job_log_events
    stages = [e.payload.stage for e in events if isinstance(e.payload, ExceptionRaised)]
    assert stages == [CodeStage.DEVICE_INIT]


def _cut_above(tmp_path: Path, first_head: str, first: str) -> Path:
    return _write(
        tmp_path,
        [first_head + first, _HEAD + "WorkerProc failed to start.", *(_HEAD + f for f in _FRAMES)],
    )


def test_an_earlier_records_nccl_error_on_the_first_line_is_set_up(tmp_path: Path) -> None:
    diagnosis = analyze(load_paths([_cut_above(tmp_path, _HEAD, _NCCL)]))
    assert diagnosis.primary.rule == "HD206"
    assert all(f.rule != "HD030" for f in diagnosis.findings)


def test_an_earlier_records_bf16_error_on_the_first_line_is_no_set_up(tmp_path: Path) -> None:
    diagnosis = analyze(load_paths([_cut_above(tmp_path, _HEAD, _BF16)]))
    assert all(f.rule != "HD206" for f in diagnosis.findings)


def test_a_first_line_of_another_logging_call_takes_no_stage(tmp_path: Path) -> None:
    events = load_paths([_cut_above(tmp_path, _OTHER, _NCCL)]).job_log_events
    assert not any(
        isinstance(e.payload, ExceptionRaised) and e.payload.exc_type == "RuntimeError"
        for e in events
    )
    diagnosis = analyze(load_paths([_cut_above(tmp_path, _OTHER, _NCCL)]))
    assert all(f.rule != "HD206" for f in diagnosis.findings)
