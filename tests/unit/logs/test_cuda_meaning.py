"""CUDA runtime errors read by the catalog's documented meaning (meanings.toml, the cuda
families): which strings say the GPU or its driver, and how strongly (errors.cuda_gpu_sign).

The strings are libcudart's cudaGetErrorString texts as the catalog's cuda.json holds them;
the meanings are CUDA's cudaError_t documentation.
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs.errors import cuda_gpu_sign
from hangdoc.analyzer.payloads.base import Sign


@pytest.mark.parametrize(
    ("error", "sign"),
    [
        # cudaErrorLaunchTimeout: a kernel cut by the device's run-time limit
        ("the launch timed out and was terminated", Sign.GPU_DRIVER_LIKELY),
        # cudaErrorUnknown: an internal error with no documented cause
        ("unknown error", Sign.GPU_DRIVER_POSSIBLE),
        # the program's own kernel fault: a crash, no GPU reading
        ("an illegal memory access was encountered", None),
        ("device-side assert triggered", None),
        # cudaErrorCudartUnloading: the process exiting, says nothing
        ("driver shutting down", None),
        # not a CUDA error string
        ("something unknown error happened", None),
        ("", None),
    ],
)
def test_cuda_gpu_sign(error: str, sign: Sign | None) -> None:
    assert cuda_gpu_sign(error) == sign


def test_c10_advice_glued_by_a_rejoined_wrap() -> None:
    """A hard-wrapped paste rejoined glues c10's advice line to the error's last word."""
    glued = (
        "the launch timed out and was terminated"
        "CUDA kernel errors might be asynchronously reported at some other API call"
    )
    assert cuda_gpu_sign(glued) == Sign.GPU_DRIVER_LIKELY
