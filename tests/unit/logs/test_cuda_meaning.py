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
        # the caller's own request (cuda-caller-request: cudaErrorInvalidDevice, a build
        # without the device's kernels, a limit the device lacks), not the GPU or driver
        ("invalid device ordinal", Sign.CUDA_CALLER_REQUEST),
        ("no kernel image is available for execution on the device", Sign.CUDA_CALLER_REQUEST),
        ("limit is not supported on this architecture", Sign.CUDA_CALLER_REQUEST),
        ("incompatible driver context", Sign.CUDA_CALLER_REQUEST),
        # the installed driver or the platform (cuda-driver-setup): still the driver's
        ("CUDA driver version is insufficient for CUDA runtime version", Sign.GPU_DRIVER_LIKELY),
        ("no CUDA-capable device is detected", Sign.GPU_DRIVER_LIKELY),
        ("initialization error", Sign.GPU_DRIVER_LIKELY),
        ("CUDA driver is a stub library", Sign.GPU_DRIVER_LIKELY),
        ("API call is not supported in the installed CUDA driver", Sign.GPU_DRIVER_LIKELY),
        # cudaErrorInvalidAddressSpace: a kernel's fault, not the platform's "not supported"
        ("operation not supported on global/shared address space", None),
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


def test_every_cuda_error_the_catalog_holds_has_one_reading() -> None:
    """Each of libcudart's strings (the catalog's cuda rows) is read as the GPU's or
    driver's, as the caller's own request, or neither: never both, and the caller's
    family never takes the GPU category (it would send a job's own error to HD301)."""
    from hangdoc.analyzer.parsers.catalog import default_matcher

    rows = [r for r in default_matcher().catalog.rows if r.project == "cuda"]
    assert len(rows) > 100
    for row in rows:
        if row.meaning is None or not row.template.startswith("CUDA error: "):
            continue
        caller = ("signs", Sign.CUDA_CALLER_REQUEST.value) in row.meaning.fields
        assert not (caller and row.meaning.category == "gpu_hardware_or_driver"), row.template
        if caller:
            assert cuda_gpu_sign(row.template[len("CUDA error: ") :]) is Sign.CUDA_CALLER_REQUEST
