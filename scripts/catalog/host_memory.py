"""Which lines of NCCL's sources check a CUDA call that allocates or registers *host*
(pinned) memory, in each release: the place NCCL prints when that call fails.

    python scripts/catalog/host_memory.py --nccl /work/.mirror/NVIDIA+nccl/repo

Writes ``hangdoc/analyzer/parsers/catalog/data/stages/nccl_host_memory.json``, read by
``parsers/catalog/stages.py`` (``host_memory_call``). NCCL pins host memory for its
proxies' and the SHM transport's buffers: ``cudaHostAlloc`` (include/alloc.h
ncclCudaHostCalloc), ``cudaHostRegister`` of a /dev/shm segment (include/shm.h before 2.12,
misc/shmutils.cc after), and from 2.19 the driver's cuMem API with a host location
(include/alloc.h ncclCuMemHostAlloc, transport/shm.cc's import of a peer's buffer:
``prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA`` then ``cuMemCreate``, ``cuMemMap``,
``cuMemSetAccess``). Each call is under a check of include/checks.h or cudawrap.h
(``CUDACHECK``, ``CUCHECK``…) that WARNs ``Cuda failure %d '%s'`` with the caller's
``__FILE__:__LINE__``. CUDA returns ``out of memory`` (cudaErrorMemoryAllocation,
CUDA_ERROR_OUT_OF_MEMORY) from these calls when the *host* cannot pin or map the memory
(the locked-memory limit, a container's or WSL2's limits), not when the GPU is full: such
an out-of-memory is NCCL's set-up failing to get host resources, not the GPU's memory.

A line is such a check where its command is one of the host calls below, or where it
sits in a function that fills a ``CUmemAllocationProp`` with a host location (the cuMem
calls of that function map and grant access to that host allocation). The table holds,
for each file and line, the call and the releases (indexes into the stage table's
``versions``) in which that line is one. Not copied: the sources; names and numbers only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import csource
from catalog.nccl import release_tags
from catalog.sources import BlobReader, git, tree
from catalog.stages import _SUFFIXES, placed_lines, runs, write_table
from catalog.stages import OUT as STAGES

ROOT = Path(__file__).resolve().parents[2]
OUT = STAGES.parent / "nccl_host_memory.json"

# A CUDA check (include/checks.h CUDACHECK*, cudawrap.h CUCHECK*) and the call it wraps
# (CUCHECK pastes ``pfn_`` before the command; CUPFN(…) names the same pointer).
_CUDA_CHECK = re.compile(
    r"\b(?:CUDACHECK|CUCHECK)\w*\s*\(\s*(?:CUPFN\s*\(\s*|pfn_)?(?P<call>\w+)\s*\("
)
# The runtime's and the driver's calls that allocate or pin host memory.
HOST_CALLS = frozenset(
    {
        "cudaHostAlloc",
        "cudaMallocHost",
        "cudaHostRegister",
        "cuMemHostAlloc",
        "cuMemAllocHost",
        "cuMemHostRegister",
    }
)
# A CUmemAllocationProp declared in the function and given a host location.
_PROP_DECL = re.compile(r"\bCUmemAllocationProp\s+(?P<var>\w+)")


def _host_prop(body: str) -> bool:
    """The function fills an allocation property with a host location (and never a
    device one): its cuMem calls create, map and grant access to host memory."""
    for m in _PROP_DECL.finditer(body):
        var = re.escape(m.group("var"))
        host = re.search(rf"\b{var}\.location\.type\s*=\s*CU_MEM_LOCATION_TYPE_HOST", body)
        device = re.search(rf"\b{var}\.location\.type\s*=\s*CU_MEM_LOCATION_TYPE_DEVICE", body)
        if host and not device:
            return True
    return False


def host_lines(clean: str) -> tuple[dict[int, str], set[int]]:
    """(line -> the host-memory call a CUDA check on that line, or on a line its arguments
    run on, wraps; every line of any CUDA check), in comment-free code."""
    spans = csource.function_spans(clean)
    host_functions = {
        (start, end)
        for start, end, name in spans
        if not name.startswith("#define") and _host_prop(clean[start:end])
    }
    calls: dict[int, str] = {}
    checks: set[int] = set()
    for m in _CUDA_CHECK.finditer(clean):
        checks.add(m.start())
        call = m.group("call")
        if call in HOST_CALLS or any(s <= m.start() <= e for s, e in host_functions):
            calls[m.start()] = call
    placed = placed_lines(clean)
    return (
        {line: calls[offset] for line, offset in placed if offset in calls},
        {line for line, offset in placed if offset in checks},
    )


def extract(repo: Path) -> dict[str, object]:
    versions = json.loads(STAGES.read_text(encoding="utf-8"))["versions"]
    tags = dict(release_tags(repo))
    reader = BlobReader(repo)
    found: dict[str, dict[int, dict[str, set[str]]]] = {}
    checked: dict[str, dict[int, set[str]]] = {}
    cache: dict[str, tuple[dict[int, str], set[int]]] = {}
    try:
        for version in versions:
            tag = tags.get(version)
            if tag is None:
                continue
            for path, sha in tree(repo, tag, "src", _SUFFIXES):
                if sha not in cache:
                    cache[sha] = host_lines(csource.blank_comments(reader.read(sha)))
                file = path.removeprefix("src/")
                host, checks = cache[sha]
                for line, call in host.items():
                    found.setdefault(file, {}).setdefault(line, {}).setdefault(call, set()).add(
                        version
                    )
                for line in checks:
                    checked.setdefault(file, {}).setdefault(line, set()).add(version)
    finally:
        reader.close()
    return {
        "project": "nccl",
        "source": {
            "repository": "github.com/NVIDIA/nccl",
            "read": "every release tag of the stage table (data/stages/nccl.json), src/**: the "
            "lines of CUDACHECK*/CUCHECK* checks whose command allocates or pins host memory, "
            "or that sit in a function filling a CUmemAllocationProp with a host location; "
            "and, for the files with such lines, every CUDA check's lines",
            "mirror_head": git(repo, "rev-parse", "HEAD").strip(),
            "generator": "scripts/catalog/host_memory.py",
        },
        "versions": versions,
        # file -> {"host": line -> [[call, releases]], "checks": line -> releases}: a
        # "Cuda failure" WARN at a line can only come from a release with a check there.
        "files": {
            file: {
                "host": {
                    str(line): [[call, runs(versions, vs)] for call, vs in sorted(by_call.items())]
                    for line, by_call in sorted(lines.items())
                },
                "checks": {
                    str(line): runs(versions, vs) for line, vs in sorted(checked[file].items())
                },
            }
            for file, lines in sorted(found.items())
        },
    }


def main() -> int:
    return write_table(__doc__, OUT, extract, "files")


if __name__ == "__main__":
    raise SystemExit(main())
