"""NCCL's own report of a CUDA failure is its process's death only when the error ends it.

NCCL's CUDACHECK and CUCHECK (src/include/checks.h, cudawrap.h) print "Cuda failure '%s'"
(≥ 2.19: "Cuda failure %d '%s'") as a WARN and *return* ncclUnhandledCudaError to the
caller; torch raises it as "NCCL error in: …, unhandled cuda error" with NCCL's "Last
error: Cuda failure …". The process goes on, so the line by itself is no crash: where the
call was made (set-up, a collective) is read from the caller's error (HD206, HD301). An
error that ends the process wherever it is reported, a kernel fault whose CUDA context is
dead ("an illegal memory access was encountered", the catalog's cuda-kernel-fault family)
or the GPU's own failure, stays one; so does a CUDA error the process raised itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.payloads.nccl import CudaFailure
from hangdoc.analyzer.views.deaths import DeathHow, first_deaths
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.analyzer.vocabulary import EventKind

# NCCL's WARN format (src/include/debug.h: "host:pid:tid [dev] file:line NCCL WARN …"),
# from enqueue.cc, which launches a collective (no set-up file).
_WARN = "node1:11:21 [0] enqueue.cc:1556 NCCL WARN "


def _timeline(tmp_path: Path, text: str) -> Timeline:
    path = tmp_path / "console.log"
    path.write_text(text)
    return Timeline(load_paths([path]))


def _failures(tl: Timeline) -> list[CudaFailure]:
    return [
        f for p in tl.of(EventKind.CUDA_ERROR) if (f := p.event.payload_as(CudaFailure)) is not None
    ]


@pytest.mark.parametrize(
    "text",
    [
        _WARN + "Cuda failure 'invalid argument'\n",
        _WARN + "Cuda failure 1 'invalid argument'\n",
        # a paste cut so that only the WARN's body is left
        "Cuda failure 1 'invalid argument'\n",
        # torch's synchronous NCCL error, its "Last error:" line under it
        "[rank7]: torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "[rank7]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank7]: Last error:\n"
        "[rank7]: Cuda failure 1 'invalid argument'\n",
    ],
)
def test_a_cuda_failure_nccl_returns_is_no_death(tmp_path: Path, text: str) -> None:
    tl = _timeline(tmp_path, text)
    failures = _failures(tl)
    assert failures and all(f.by_nccl and not f.fatal for f in failures)
    assert not [d for d in first_deaths(tl) if d.how == DeathHow.CUDA_ERROR]


def test_a_kernel_fault_nccl_reports_is_a_death(tmp_path: Path) -> None:
    tl = _timeline(
        tmp_path, _WARN + "Cuda failure 700 'an illegal memory access was encountered'\n"
    )
    (failure,) = _failures(tl)
    assert failure.by_nccl and failure.fatal
    (death,) = first_deaths(tl)
    assert death.how == DeathHow.CUDA_ERROR


@pytest.mark.parametrize(
    ("text", "how"),
    [
        # c10's CUDA error, raised by the process's own call
        ("RuntimeError: CUDA error: invalid argument\n", DeathHow.CUDA_ERROR),
        ("CUDA error: an illegal memory access was encountered\n", DeathHow.CUDA_ERROR),
    ],
)
def test_a_cuda_error_the_process_raised_stays_a_death(
    tmp_path: Path, text: str, how: DeathHow
) -> None:
    tl = _timeline(tmp_path, text)
    assert not any(f.by_nccl for f in _failures(tl))
    assert [d.how for d in first_deaths(tl)] == [how]
