"""The CUDA multicast call a failure's NVLS place is (parsers/catalog/stages.py
``multicast_call`` over the table scripts/catalog/nvls_multicast.py generates from every
NCCL release's src/transport/nvls.cc), and the scanner's reading of it.

The lines below are NCCL's own: each comment names the call at that line in the release
tags of NVIDIA/nccl the table was read from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.catalog.stages import multicast_call
from hangdoc.analyzer.parsers.logs.nccl_stage import mark_stages
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.nccl import CudaFailure, NcclVersion
from tests.unit.logs.helpers import events, parse
from tests.unit.parsers.catalog.scripts_import import catalog_script

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


def test_a_line_that_is_a_multicast_check_in_every_allowed_release() -> None:
    # 2.21.5: nvls.cc:158 CUCHECK(cuMulticastBindMem); 2.18.x: CUDACHECK(cudaMemset).
    assert multicast_call(("transport/nvls.cc:158",), "2.21.5+cuda12.4") == "cuMulticastBindMem"
    assert multicast_call(("transport/nvls.cc:158",), "2.18.3+cuda12.2") is None
    # No version: both releases possible, the line is not a multicast call in all of them.
    assert multicast_call(("transport/nvls.cc:158",)) is None
    # The chain narrows: nvls.cc:324 (ncclNvlsSetup's NCCLCHECKGOTO(nvlsGroupBindMem)) and
    # init.cc:1093 leave 2.18.x, where nvls.cc:165 is the bind (2.23.4: cuDeviceGetAttribute).
    chain = ("transport/nvls.cc:165", "transport/nvls.cc:324", "init.cc:1093")
    assert multicast_call(chain) == "cuMulticastBindMem"
    assert multicast_call(("transport/nvls.cc:165",)) is None


def test_other_cuda_checks_of_nvls_are_not_multicast_calls() -> None:
    # 2.18.3 ncclNvlsInit: CUCHECK(cuCtxGetDevice(&dev)), the context query.
    assert multicast_call(("transport/nvls.cc:245", "init.cc:872"), "2.18.3") is None
    # Another file, a release the table does not hold, nothing at all.
    assert multicast_call(("transport/p2p.cc:158",), "2.21.5") is None
    assert multicast_call(("transport/nvls.cc:158",), "2.99.1") is None
    assert multicast_call(()) is None


def test_the_scanner_marks_a_multicast_failure_as_the_fabrics() -> None:
    class Event:
        def __init__(self, payload: object) -> None:
            self.payload = payload

    bind = CudaFailure(error="invalid argument", where="transport/nvls.cc:158")
    oom = CudaFailure(error="out of memory", where="transport/nvls.cc:158")
    events = [Event(NcclVersion(version="2.21.5+cuda12.4")), Event(bind), Event(oom)]
    mark_stages(events)  # type: ignore[arg-type]
    marked = events[1].payload
    assert isinstance(marked, CudaFailure)
    assert Sign.NVLS_MULTICAST in marked.signs
    assert marked.hardware is not None and "cuMulticastBindMem" in marked.hardware
    # An out-of-memory stays HD031's.
    assert events[2].payload.hardware is None  # type: ignore[attr-defined]
    same_line_old = [Event(NcclVersion(version="2.18.3")), Event(bind)]
    mark_stages(same_line_old)  # type: ignore[arg-type]
    assert same_line_old[1].payload.hardware is None  # type: ignore[attr-defined]


def test_the_generator_finds_checks_of_multicast_calls_only() -> None:
    multicast_lines = catalog_script("nvls_multicast").multicast_lines
    code = (
        "static ncclResult_t f() {\n"
        "  CUCHECK(cuMulticastCreate(&h, prop));\n"
        "  CUCHECK(cuMemCreate(&u, size, &p, 0));\n"
        "  CUCHECKGOTO(cuMulticastBindMem(h, 0, u, 0,\n"
        "      size, 0), ret, fail);\n"
        "  CUDACHECK(cudaMemset(ptr, 0, size));\n"
        "}\n"
    )
    lines = multicast_lines(code)
    assert lines[2] == "cuMulticastCreate"
    assert lines[4] == lines[5] == "cuMulticastBindMem"
    assert 3 not in lines and 6 not in lines


def test_the_generator_finds_a_warn_that_prints_a_multicast_calls_kept_result() -> None:
    # NCCL 2.27's nvlsAllocateMem: the bind's CUresult kept in ``err`` and WARNed by hand.
    multicast_lines = catalog_script("nvls_multicast").multicast_lines
    code = (
        "static ncclResult_t f() {\n"
        "  CUresult err = CUPFN(cuMulticastBindMem(h, 0, u, 0, size, 0));\n"
        "  if (err != CUDA_SUCCESS) {\n"
        '    WARN("Failed to bind NVLink SHARP (NVLS) Multicast memory of size %ld : '
        "CUDA error %d '%s'.\", size, err, errStr);\n"
        "  }\n"
        '  WARN("unrelated %d", size);\n'
        "  err = CUPFN(cuMemCreate(&u, size, &p, 0));\n"
        '  WARN("later %d", err);\n'
        "}\n"
    )
    lines = multicast_lines(code)
    assert lines[4] == "cuMulticastBindMem"
    assert 6 not in lines and 8 not in lines


def test_nccl_227s_own_nvls_warn_is_the_multicast_calls_failure() -> None:
    # v2.27.3-1 … v2.27.7-1 src/transport/nvls.cc:284, the WARN after cuMulticastBindMem.
    assert multicast_call(("transport/nvls.cc:284",), "2.27.3+cuda12.9") == "cuMulticastBindMem"


_WARN_227 = (
    "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 1610612736 : CUDA error 1 "
    "'invalid argument'.\n"
    "This is usually caused by a system or configuration error in the Fabric Manager or "
    "NVSwitches.\n"
    "Do not force-enable NVLS (NCCL_NVLS_ENABLE=1) if you wish to avoid this error in the "
    "future.\n"
)
_HEADER = "node01:12345:12400 [0] "


def _cuda_failures(tmp_path: Path, text: str) -> list[object]:
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    return [e.payload for _, e in events(parse(log), "cuda_error")]


@pytest.mark.parametrize("cut", [False, True])
def test_nccl_227s_nvls_warn_read_from_a_log(tmp_path: Path, cut: bool) -> None:
    # The WARN as 2.27 prints it (its three lines), then its "-> rc" chain; or pasted from
    # its body on. The multicast failure is the fabric's (HD301's sign) by its place or by
    # its own words, its error the CUDA error's words, not the CUresult's number NCCL
    # prints beside them.
    text = (
        _WARN_227
        if cut
        else f"{_HEADER}NCCL INFO NCCL version 2.27.3+cuda12.9\n"
        f"{_HEADER}transport/nvls.cc:284 NCCL WARN {_WARN_227}"
        f"{_HEADER}NCCL INFO transport/nvls.cc:382 -> 6\n"
        f"{_HEADER}NCCL INFO init.cc:1560 -> 6\n"
    )
    failures = _cuda_failures(tmp_path, text)
    assert failures, "the WARN is a CUDA failure"
    for failure in failures:
        assert isinstance(failure, CudaFailure)
        assert failure.error == "invalid argument"
        assert Sign.NVLS_MULTICAST in failure.signs
        assert failure.hardware is not None and "invalid argument" in failure.hardware
        assert list(failure.signs).count(Sign.NVLS_MULTICAST) == 1


def test_the_same_failure_at_info_goes_on_without_nvls(tmp_path: Path) -> None:
    # Without NCCL_NVLS_ENABLE=1 the same failure is an INFO ("Proceeding without NVLS
    # support"): NCCL goes on, nothing failed.
    text = (
        f"{_HEADER}NCCL INFO Failed to bind NVLink SHARP (NVLS) Multicast memory of size "
        "1610612736 : CUDA error 1 'invalid argument'. Proceeding without NVLS support.\n"
    )
    assert _cuda_failures(tmp_path, text) == []
