"""Three layers of vLLM-over-Ray logs, each from the code that writes it, and the set-up
failure they hide.

* vLLM's logger (vllm/logger.py: ``"%(levelname)s %(asctime)s %(filename)s:%(lineno)d]
  %(message)s"``, later with the file in brackets, dates ``%m-%d %H:%M:%S``) is peeled as a
  header, keeping a traceback line's own indentation;
* Ray's driver appends the count of lines its log deduplication stands for
  (ray/_private/ray_logging/__init__.py: ``f" [repeated {count}x across cluster]"`` and, the
  first time, a note in parentheses), removed as a paste layer;
* vLLM's NCCL binding raises ``RuntimeError(f"NCCL error: {error_str}")`` with
  ncclGetErrorString's words (vllm/distributed/device_communicators/pynccl_wrapper.py,
  NCCL_CHECK): raised from ``ncclCommInitRank`` it is a communicator's set-up failing
  (HD206), not a crash and not nothing.

Hosts, pids, paths and times are made up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.tb_stage import frame_stage
from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.analyzer.payloads.launch import CodeStage

_PYNCCL = "/usr/lib/python3/dist-packages/vllm/distributed/device_communicators/pynccl_wrapper.py"


@pytest.mark.parametrize(
    ("line", "text", "origin"),
    [
        (
            "INFO 05-02 10:11:12 [worker_base.py:620] Loading weights",
            "Loading weights",
            "worker_base.py:620",
        ),
        (
            'ERROR 05-02 10:11:12 llm_engine.py:229]   File "/x.py", line 2, in f',
            '  File "/x.py", line 2, in f',
            "llm_engine.py:229",
        ),
        (
            "WARNING 13-02 10:11:12 [a.py:1] month 13 is no date",
            "WARNING 13-02 10:11:12 [a.py:1] month 13 is no date",
            None,
        ),
    ],
)
def test_vllm_logger_header_is_peeled(line: str, text: str, origin: str | None) -> None:
    tag = peel_line(line)
    assert tag.text == text
    assert tag.origin == origin


def test_ray_dedup_count_is_a_paste_layer() -> None:
    pasted = (
        "(Worker pid=7) RuntimeError: boom [repeated 3x across cluster] (Ray deduplicates logs "
        "by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
        "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html"
        "#log-deduplication for more options.)\n"
        "(Worker pid=7) ValueError: again [repeated 2x across cluster]\n"
    )
    fixed = unmangle(pasted)
    assert fixed is not None
    assert fixed.text == "(Worker pid=7) RuntimeError: boom\n(Worker pid=7) ValueError: again\n"


def _console(tmp_path: Path, frames: list[str]) -> Path:
    head = "(RayWorkerWrapper pid=880) ERROR 05-02 10:11:12 [worker_base.py:620] "
    lines = [
        *frames,
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    ]
    path = tmp_path / "ray.log"
    path.write_text("".join(f"{head}{line} [repeated 6x across cluster]\n" for line in lines))
    return path


def test_an_nccl_error_raised_from_communicator_creation_is_a_setup_failure(tmp_path: Path) -> None:
    frames = [
        "Traceback (most recent call last):",
        f'  File "{_PYNCCL}", line 277, in ncclCommInitRank',
        '    self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),',
        f'  File "{_PYNCCL}", line 256, in NCCL_CHECK',
    ]
    diagnosis = analyze(load_paths([_console(tmp_path, frames)]))
    assert diagnosis.primary.rule == "HD206"
    assert diagnosis.primary.category.value == "nccl_init_or_bootstrap_hang"


def test_the_same_error_raised_from_a_collective_is_no_setup_failure(tmp_path: Path) -> None:
    frames = [
        "Traceback (most recent call last):",
        f'  File "{_PYNCCL}", line 301, in ncclAllReduce',
        '    self.NCCL_CHECK(self._funcs["ncclAllReduce"](sendbuff, recvbuff, count,',
        f'  File "{_PYNCCL}", line 256, in NCCL_CHECK',
    ]
    diagnosis = analyze(load_paths([_console(tmp_path, frames)]))
    assert diagnosis.primary.rule != "HD206"


def test_a_segfault_whose_native_backtrace_shows_communicator_creation_is_set_up(
    tmp_path: Path,
) -> None:
    """apache/tvm-ffi's SIGSEGV handler (src/ffi/backtrace.cc, loaded with xgrammar and
    flashinfer) prints the native backtrace as traceback frames, innermost first: a crash
    inside ncclCommInitRank is the communicator's set-up failing (HD030's set-up reading)."""
    path = tmp_path / "worker.log"
    path.write_text(
        "!!!!!!! Segfault encountered !!!!!!!\n"
        '  File "/opt/shim/src/cuda/memory.c", line 582, in cuMemCreate\n'
        '  File "misc/cudawrap.cc", line 92, in ncclCuMemHostEnable()\n'
        '  File "/build/nccl/src/init.cc", line 1852, in ncclCommInitRank\n'
        '  File "<unknown>", line 0, in _PyEval_EvalFrameDefault\n'
    )
    primary = analyze(load_paths([path])).primary
    assert (primary.rule, primary.category.value) == ("HD030", "nccl_init_or_bootstrap_hang")


def test_a_worker_failing_to_start_after_the_set_up_error_is_its_consequence(
    tmp_path: Path,
) -> None:
    """vLLM's V1 workers prefix their lines "(VllmWorker rank={rank} pid={pid}) "
    (multiproc_executor.py WorkerProc, _add_prefix): the rank is read from it. Rank 3's
    pynccl call (its traceback cut above ncclCommInitRank's frame) fails set-up; rank 2 then
    logs "WorkerProc failed to start." (its logger.exception header): HD206 answers, HD030
    does not call rank 2's report the cause."""
    head = "ERROR 08-05 14:13:44 [multiproc_executor.py:487] "
    lines = [
        ("3", f'  File "{_PYNCCL}", line 277, in ncclCommInitRank'),
        ("3", '    self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),'),
        ("3", f'  File "{_PYNCCL}", line 257, in NCCL_CHECK'),
        ("3", '    raise RuntimeError(f"NCCL error: {error_str}")'),
        (
            "3",
            "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for "
            "details)",
        ),
        ("2", "WorkerProc failed to start."),
        ("2", "Traceback (most recent call last):"),
    ]
    path = tmp_path / "workers.log"
    path.write_text("".join(f"(VllmWorker rank={r} pid=46{r}) {head}{line}\n" for r, line in lines))
    findings = analyze(load_paths([path])).findings
    assert (findings[0].rule, findings[0].culprit_ranks) == ("HD206", (3,))
    assert all(f.rule != "HD030" for f in findings)


def test_a_call_looked_up_by_name_names_its_stage() -> None:
    """ctypes bindings call NCCL's API through a table of functions by name
    (pynccl_wrapper.py: 'self._funcs["ncclCommInitRank"](…)'): the name is the call's."""
    line = '    self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),'
    assert frame_stage(line) is CodeStage.SETUP
    assert frame_stage('    self.NCCL_CHECK(self._funcs["ncclAllReduce"](sendbuff,') is None


def _cut_workers(tmp_path: Path, source_above: str) -> Path:
    """Rank 3's traceback as a paste cut between a frame and its source line: the first
    line shown is the source line of the frame cut away (gpustack#2680's shape)."""
    head = "ERROR 08-05 14:13:44 [multiproc_executor.py:487] "
    lines = [
        ("3", source_above),
        ("3", f'  File "{_PYNCCL}", line 257, in NCCL_CHECK'),
        ("3", '    raise RuntimeError(f"NCCL error: {error_str}")'),
        ("3", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)"),
        ("2", "WorkerProc failed to start."),
        ("2", "Traceback (most recent call last):"),
    ]
    path = tmp_path / "workers.log"
    path.write_text("".join(f"(VllmWorker rank={r} pid=46{r}) {head}{line}\n" for r, line in lines))
    return path


def test_the_source_line_above_a_cut_traceback_names_its_stage(tmp_path: Path) -> None:
    """The line right above the first frame a paste kept, when it is a source line, is
    the call of the frame the paste cut: its stage is the traceback's outermost shown."""
    path = _cut_workers(
        tmp_path, '    self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),'
    )
    findings = analyze(load_paths([path])).findings
    assert (findings[0].rule, findings[0].culprit_ranks) == ("HD206", (3,))
    assert all(f.rule != "HD030" for f in findings)


def test_a_collective_call_above_a_cut_traceback_is_no_set_up(tmp_path: Path) -> None:
    path = _cut_workers(tmp_path, '    self.NCCL_CHECK(self._funcs["ncclAllReduce"](sendbuff,')
    assert analyze(load_paths([path])).primary.rule != "HD206"


def test_a_source_line_of_another_rank_above_is_not_read(tmp_path: Path) -> None:
    """Only a line of the same stream, right above the frame, is its cut source line."""
    head = "ERROR 08-05 14:13:44 [multiproc_executor.py:487] "
    lines = [
        ("2", '    self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),'),
        ("3", f'  File "{_PYNCCL}", line 257, in NCCL_CHECK'),
        ("3", '    raise RuntimeError(f"NCCL error: {error_str}")'),
        ("3", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)"),
    ]
    path = tmp_path / "workers.log"
    path.write_text("".join(f"(VllmWorker rank={r} pid=46{r}) {head}{line}\n" for r, line in lines))
    assert analyze(load_paths([path])).primary.rule != "HD206"


def test_a_crash_after_another_ranks_nccl_failure_is_not_the_first_failure(
    tmp_path: Path,
) -> None:
    """Rank 3's NCCL call failed with a set-up class's error (no frame shows where it was
    called); rank 2's "WorkerProc failed to start." after it is no crash that came first:
    HD030 yields (no stage shown, so HD206 does not answer either)."""
    head = "ERROR 08-05 14:13:44 [multiproc_executor.py:487] "
    lines = [
        ("3", f'  File "{_PYNCCL}", line 257, in NCCL_CHECK'),
        ("3", '    raise RuntimeError(f"NCCL error: {error_str}")'),
        ("3", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)"),
        ("2", "WorkerProc failed to start."),
    ]
    path = tmp_path / "workers.log"
    path.write_text("".join(f"(VllmWorker rank={r} pid=46{r}) {head}{line}\n" for r, line in lines))
    assert all(f.rule != "HD030" for f in analyze(load_paths([path])).findings)


def test_a_crash_before_another_ranks_nccl_failure_stays_the_first(tmp_path: Path) -> None:
    head = "ERROR 08-05 14:13:44 [multiproc_executor.py:487] "
    lines = [
        ("2", "Traceback (most recent call last):"),
        ("2", '  File "/srv/model.py", line 12, in load'),
        ("2", "ValueError: bad shape in layer 3"),
        ("3", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)"),
    ]
    path = tmp_path / "workers.log"
    path.write_text("".join(f"(VllmWorker rank={r} pid=46{r}) {head}{line}\n" for r, line in lines))
    primary = analyze(load_paths([path])).primary
    assert (primary.rule, primary.culprit_ranks) == ("HD030", (2,))
