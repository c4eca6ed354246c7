"""The CUDA error that says a kernel ran past the device's run-time limit
(cudaErrorLaunchTimeout, the catalog's cuda-launch-timeout family's field), told from the
other CUDA errors by its documented meaning (errors.cuda_time_limit), and the stack
printed with it read for the kernel that ran long (views/kernel_limit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs.errors import cuda_time_limit
from hangdoc.analyzer.views.deaths import first_deaths
from hangdoc.analyzer.views.kernel_limit import cut_while_waiting
from hangdoc.analyzer.views.timeline import Timeline


@pytest.mark.parametrize(
    ("error", "limit"),
    [
        ("the launch timed out and was terminated", True),
        # c10's place after the string, as torch < 1.5 printed it
        (
            "the launch timed out and was terminated (insert_events at "
            "/x/CUDACachingAllocator.cpp:564)",
            True,
        ),
        ("unknown error", False),
        ("an illegal memory access was encountered", False),
        ("unspecified launch failure", False),
        (None, False),
    ],
)
def test_time_limit_by_meaning(error: str | None, limit: bool) -> None:
    # GIVEN a CUDA runtime error string WHEN its documented meaning is read
    # THEN only the kernel run-time limit's error says a kernel ran too long
    assert cuda_time_limit(error) is limit


_WHAT = (
    "terminate called after throwing an instance of 'c10::Error'\n"
    "  what():  CUDA error: the launch timed out and was terminated "
    "(insert_events at /pytorch/c10/cuda/CUDACachingAllocator.cpp:569)\n"
)
_FRAMES = (
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string const&) + 0x33 "
    "(0x7f0a1c2e1193 in /site-packages/torch/lib/libc10.so)\n"
    "frame #1: c10::TensorImpl::release_resources() + 0x4d "
    "(0x7f0a1c2ce7dd in /site-packages/torch/lib/libc10.so)\n"
    "frame #2: {where} + 0x5c (0x7f0a5f2b1a4c in /site-packages/torch/lib/libtorch_python.so)\n"
)


def _deaths(tmp_path: Path, text: str) -> list[bool]:
    log = tmp_path / "rank0.log"
    log.write_text(text)
    evidence = load_paths([log])
    return [cut_while_waiting(evidence, d.placed) for d in first_deaths(Timeline(evidence))]


def test_backtrace_through_a_collective_work_is_the_wait(tmp_path: Path) -> None:
    # GIVEN the error's what() with c10's backtrace through a WorkNCCL's release
    text = _WHAT + _FRAMES.format(where="c10d::ProcessGroupNCCL::WorkNCCL::~WorkNCCL()")
    # THEN the kernel cut is read as the collective's, waiting for its peers
    assert _deaths(tmp_path, text) == [True]


def test_backtrace_elsewhere_is_not(tmp_path: Path) -> None:
    # GIVEN the same error whose backtrace runs through the program's own op
    text = _WHAT + _FRAMES.format(where="at::native::index_select_out_cuda(at::Tensor&)")
    # THEN nothing says which kernel ran long
    assert _deaths(tmp_path, text) == [False]


def test_no_stack_is_not(tmp_path: Path) -> None:
    # GIVEN the error alone THEN nothing says which kernel ran long
    assert _deaths(tmp_path, _WHAT) == [False]
