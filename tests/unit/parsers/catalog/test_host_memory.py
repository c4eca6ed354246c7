"""The host-memory allocation a "Cuda failure" WARN's place is (parsers/catalog/stages.py
``host_memory_call`` over the table scripts/catalog/host_memory.py generates from every
NCCL release's sources), and the readings that follow from it: an out-of-memory of a
pinned host allocation is NCCL's set-up failing, not the GPU's memory running out.

The places below are NCCL's own: each comment names the call at that line in the release
tags of NVIDIA/nccl the table was read from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.catalog.stages import host_memory_call
from hangdoc.analyzer.parsers.logs.nccl_stage import mark_stages
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.nccl import CudaFailure, NcclVersion
from tests.unit.parsers.catalog.scripts_import import catalog_script


def test_a_host_allocation_check_in_every_allowed_release() -> None:
    # 2.18.3 include/alloc.h:28: ncclCudaHostCallocDebug's CUDACHECKGOTO(cudaHostAlloc).
    assert host_memory_call(("include/alloc.h:28",), "2.18.3+cuda12.1") == "cudaHostAlloc"
    # 2.18.3 include/alloc.h:156: ncclCudaCallocDebug's cudaMalloc, the GPU's memory.
    assert host_memory_call(("include/alloc.h:156",), "2.18.3") is None
    # 2.26.2 include/alloc.h:65: cuMemSetAccess of ncclCuMemHostAlloc (a host-located
    # cuMem allocation); the SHM transport's chain narrows the releases without a version.
    chain = ("include/alloc.h:65", "transport/shm.cc:534", "transport/shm.cc:491")
    assert host_memory_call(chain) == "cuMemSetAccess"
    # 2.26.2 include/alloc.h:228: cuMemCreate of ncclCuMemAlloc, a device allocation.
    assert host_memory_call(("include/alloc.h:228",), "2.26.2") is None
    # misc/shmutils.cc (2.19-2.28): cudaHostRegister of a /dev/shm segment.
    assert host_memory_call(("misc/shmutils.cc:117",), "2.26.2") == "cudaHostRegister"
    # A base name, and a place whose start a paste cut, are the one file that ends so.
    assert host_memory_call(("alloc.h:28",), "2.18.3") == "cudaHostAlloc"
    assert host_memory_call(("lloc.h:28",), "2.18.3") == "cudaHostAlloc"
    assert host_memory_call(("h:28",), "2.18.3") is None  # several files end so
    # No place, another file, a release the table does not hold.
    assert host_memory_call(()) is None
    assert host_memory_call(("transport/p2p.cc:300",), "2.26.2") is None
    assert host_memory_call(("include/alloc.h:28",), "2.99.1") is None


def test_the_scanner_marks_a_host_allocations_oom_only() -> None:
    class Event:
        def __init__(self, payload: object) -> None:
            self.payload = payload

    host = CudaFailure(error="out of memory", where="include/alloc.h:28", rc_chain=("init.cc:412",))
    device = CudaFailure(error="out of memory", where="include/alloc.h:156")
    invalid = CudaFailure(error="invalid argument", where="include/alloc.h:28")
    events = [Event(NcclVersion(version="2.18.3+cuda12.1")), *map(Event, (host, device, invalid))]
    mark_stages(events)  # type: ignore[arg-type]
    assert Sign.PINNED_HOST_MEMORY in events[1].payload.signs
    assert Sign.PINNED_HOST_MEMORY not in events[2].payload.signs
    assert Sign.PINNED_HOST_MEMORY not in events[3].payload.signs  # not an out-of-memory


def test_the_generator_finds_host_allocations_by_call_and_by_location() -> None:
    host_lines = catalog_script("host_memory").host_lines
    code = (
        "static ncclResult_t hostAlloc(void** ptr, size_t size) {\n"
        "  CUmemAllocationProp prop = {};\n"
        "  CUmemAccessDesc accessDesc = {};\n"
        "  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;\n"
        "  CUCHECK(cuMemCreate(&handle, size, &prop, 0));\n"
        "  accessDesc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;\n"
        "  CUCHECK(cuMemSetAccess((CUdeviceptr)*ptr, size, &accessDesc, 1));\n"
        "}\n"
        "static ncclResult_t devAlloc(void** ptr, size_t size) {\n"
        "  CUmemAllocationProp prop = {};\n"
        "  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;\n"
        "  CUCHECK(cuMemCreate(&handle, size, &prop, 0));\n"
        "  CUDACHECKGOTO(cudaHostAlloc(ptr, size,\n"
        "      cudaHostAllocMapped), ret, fail);\n"
        "  CUDACHECK(cudaMalloc(ptr, size));\n"
        "}\n"
    )
    host, checks = host_lines(code)
    assert host[5] == "cuMemCreate" and host[7] == "cuMemSetAccess"
    assert 12 not in host  # a device-located allocation
    assert host[13] == host[14] == "cudaHostAlloc"
    assert 15 not in host and {5, 7, 12, 13, 15} <= checks


_HEADER = "gpu-host-3:8811:8811 [0] "


@pytest.mark.parametrize("indent", ["", "    ", "> "])
def test_a_pinned_host_oom_is_a_set_up_failure_not_a_cuda_oom(tmp_path: Path, indent: str) -> None:
    # 2.18.3: cudaHostAlloc of the work FIFO (init.cc:412) out of memory: the host could
    # not pin it. Quoted or indented, the reading is the same.
    log = tmp_path / "nccl.log"
    log.write_text(
        "".join(
            f"{indent}{_HEADER}{line}\n"
            for line in (
                "NCCL INFO NCCL version 2.18.3+cuda12.1",
                "include/alloc.h:28 NCCL WARN Cuda failure 'out of memory'",
                "NCCL INFO init.cc:412 -> 1",
            )
        ),
        encoding="utf-8",
    )
    diagnosis = analyze(load_paths([log]))
    assert diagnosis.findings[0].category is Category.NCCL_INIT
    assert all(f.category is not Category.CUDA_OOM for f in diagnosis.findings)
