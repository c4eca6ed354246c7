"""A kernel fault reported through ProcessGroupNCCL's watchdog abort is its rank's first
failure, also where a paste wrapped the line or no global rank is known.

The lines are written from torch's source: the watchdog's catch of
torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (``logPrefix() + "Process group watchdog
thread terminated with exception: " + e.what()``, torch ≥ 2.2, whose prefix is "[PG 0
Rank 3] " in 2.2-2.3 and "[PG ID 0 PG GUID 0(default_pg) Rank 3] " from 2.4; "[Rank 1]
NCCL watchdog thread terminated with exception: " before), its rethrow as
c10::DistBackendError (libstdc++'s "terminate called after throwing an instance of …" and
"  what():  …"), and c10's CUDA check (c10/cuda/CUDAException.cpp: "CUDA error: " +
cudaGetErrorString, then "CUDA kernel errors might be asynchronously reported …"), with
libcudart's error strings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.errors import (
    watchdog_cuda_error_cut,
    watchdog_cuda_error_joined,
)
from hangdoc.analyzer.vocabulary import EventKind

_ADVICE = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n"
    "Exception raised from c10_cuda_check_implementation at "
    "/pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):\n"
)
_ABORT = "Process group watchdog thread terminated with exception: "
_NEW = "[PG ID 0 PG GUID 0(default_pg) Rank 3] " + _ABORT
_MID = "[PG 0 Rank 3] " + _ABORT
_OLD = "[Rank 3] NCCL watchdog thread terminated with exception: "
_HEAD = "[rank3]:[E ProcessGroupNCCL.cpp:1414] "


def _first(tmp_path: Path, text: str) -> tuple[str, Category, tuple[int, ...]]:
    log = tmp_path / "console.log"
    log.write_text(text, encoding="utf-8")
    primary = analyze(load_paths([log])).findings[0]
    return primary.rule, primary.category, primary.culprit_ranks


def _cuda_errors(tmp_path: Path, text: str) -> list[str | None]:
    log = tmp_path / "console.log"
    log.write_text(text, encoding="utf-8")
    evidence = load_paths([log])
    teardowns = [
        e
        for p in evidence.processes
        for e in p.log_events
        if e.kind == EventKind.WATCHDOG_TEARDOWN.value
    ] + [e for e in evidence.job_log_events if e.kind == EventKind.WATCHDOG_TEARDOWN.value]
    return [getattr(e.payload, "cuda_error", None) for e in teardowns]


@pytest.mark.parametrize("prefix", [_NEW, _MID, _OLD])
@pytest.mark.parametrize(
    "error",
    [
        "an illegal memory access was encountered",
        "unspecified launch failure",
        "misaligned address",
        "an illegal instruction was encountered",
        "device-side assert triggered",
    ],
)
def test_the_kernel_fault_in_the_watchdog_abort_is_its_rank_s_death(
    tmp_path: Path, prefix: str, error: str
) -> None:
    text = f"{_HEAD}{prefix}CUDA error: {error}\n{_ADVICE}"
    assert _first(tmp_path, text) == ("HD030", Category.RANK_DEAD, (3,))


@pytest.mark.parametrize(
    ("first", "second", "error"),
    [
        # a terminal's hard wrap at its width, inside a word (atmorep #55)
        (f"{_HEAD}{_MID}CUDA erro", "r: unspecified launch failure", "unspecified launch failure"),
        (f"{_HEAD}{_MID}CUD", "A error: misaligned address", "misaligned address"),
        (
            f"{_HEAD}{_NEW}CUDA error: an illegal memory acc",
            "ess was encountered",
            "an illegal memory access was encountered",
        ),
        # a soft wrap at a space, the space gone
        (f"{_HEAD}{_NEW}CUDA error:", "misaligned address", "misaligned address"),
        (
            f"{_HEAD}{_NEW}",
            "CUDA error: an illegal memory access was encountered",
            "an illegal memory access was encountered",
        ),
        (  # (a line as long as a terminal's with a header: the unmangler's hard wrap)
            f"{_OLD}CUDA error: an illegal memory",
            "access was encountered",
            "an illegal memory access was encountered",
        ),
    ],
)
def test_a_wrapped_abort_line_keeps_its_cuda_error(
    tmp_path: Path, first: str, second: str, error: str
) -> None:
    text = f"{first}\n{second}\n{_ADVICE}"
    assert _cuda_errors(tmp_path, text) == [error]
    assert _first(tmp_path, text) == ("HD030", Category.RANK_DEAD, (3,))


def test_the_join_is_taken_only_where_it_completes_a_known_cuda_error() -> None:
    head = f"{_MID}CUDA erro"
    assert watchdog_cuda_error_cut(head)
    assert watchdog_cuda_error_joined(head, "r: unspecified launch failure") == (
        f"{_MID}CUDA error: unspecified launch failure"
    )
    assert watchdog_cuda_error_joined(head, "r: something else") is None
    # A whole error, a timeout, or another library's exception leaves nothing open.
    assert not watchdog_cuda_error_cut(f"{_MID}CUDA error: misaligned address")
    assert not watchdog_cuda_error_cut(
        f"{_NEW}[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600070 "
        "milliseconds before timing out."
    )
    assert not watchdog_cuda_error_cut(f"{_NEW}NCCL error: remote process exited")


def test_a_line_that_does_not_complete_the_error_is_read_as_itself(tmp_path: Path) -> None:
    """The watchdog line cut inside its error and followed by another record: the abort
    names no CUDA error (no join), and the next record is read as usual."""
    text = (
        f"{_HEAD}{_MID}CUDA erro\n"
        "[rank3]:[E ProcessGroupNCCL.cpp:577] [Rank 3] Some NCCL operations have failed or "
        "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
        "might run on corrupted/incomplete data.\n"
    )
    assert _cuda_errors(tmp_path, text) == [None, None]


def test_the_abort_of_a_group_rank_only_is_a_death_of_that_rank_of_its_group(
    tmp_path: Path,
) -> None:
    """A non-default group's prefix names the rank in that group, not a global one: the
    death is read as a process's no global rank is known for, and where nothing in the
    job names a global rank, the group's rank is the name the logs give it (sglang #8296's
    TP group; views/deaths.py group_rank_named). Beside global ranks it is not mixed in
    (tests/unit/logs/test_dying_process_named.py)."""
    text = (
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated "
        f"with exception: CUDA error: an illegal memory access was encountered\n{_ADVICE}"
    )
    assert _first(tmp_path, text) == ("HD030", Category.RANK_DEAD, (1,))


def test_a_timeout_before_the_abort_on_the_same_rank_is_no_kernel_fault_first(
    tmp_path: Path,
) -> None:
    """Where the rank's watchdog reported a collective timeout first, the CUDA error that
    ends it later is no first failure of that rank (the watchdog reports the timeout)."""
    text = (
        f"{_HEAD}[PG 0 Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran "
        "for 600058 milliseconds before timing out.\n"
        f"{_HEAD}{_MID}CUDA error: an illegal memory access was encountered\n{_ADVICE}"
    )
    rule, category, _ = _first(tmp_path, text)
    assert (rule, category) != ("HD030", Category.RANK_DEAD)


def test_an_unranked_abort_after_another_rank_s_timeout_is_no_death(tmp_path: Path) -> None:
    """With timeouts before it, an abort no rank is known for may be their teardown."""
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
        "Timeout(ms)=600000) ran for 600058 milliseconds before timing out.\n"
        "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated "
        f"with exception: CUDA error: an illegal memory access was encountered\n{_ADVICE}"
    )
    rule, category, _ = _first(tmp_path, text)
    assert (rule, category) != ("HD030", Category.RANK_DEAD)
