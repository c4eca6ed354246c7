"""Which lines of NCCL's ``src/transport/nvls.cc`` check a CUDA multicast call, in each
release: the place NCCL prints when that call fails.

    python scripts/catalog/nvls_multicast.py --nccl /work/.mirror/NVIDIA+nccl/repo

Writes ``hangdoc/analyzer/parsers/catalog/data/stages/nccl_multicast.json``, read by
``parsers/catalog/stages.py`` (``multicast_call``). NCCL's NVLS (NVLink SHARP) transport
creates a multicast object, adds each GPU to it and binds memory to it with the CUDA
driver's ``cuMulticast*`` calls (``cuMulticastCreate``, ``cuMulticastAddDevice``,
``cuMulticastBindMem``, ``cuMulticastBindAddr``, ``cuMulticastGetGranularity``), each
under ``CUCHECK``/``CUCHECKGOTO`` (src/include/cudawrap.h: ``WARN("Cuda failure %d '%s'",
err, errStr)``, printed with the caller's ``__FILE__:__LINE__``). On NVSwitch systems the
multicast object is the fabric's, set up by the fabric manager, so NCCL's maintainers read
such a failure as the fabric manager's or the GPUs' state (from 2.27 NCCL says so itself
when the bind fails: "This is usually caused by a system or configuration error in the
Fabric Manager or NVSwitches"). The other CUDA checks of the file (``cuCtxGetDevice``,
``cuMemCreate``, ``cudaMemset``, the copies of ncclNvlsSetup) are not multicast calls.

The table holds, for each line with such a check, the releases (indexes into the stage
table's ``versions``, so the two narrow a chain's releases together) in which that line is
one, and the call's name. Not copied: the sources; names and numbers only.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import csource
from catalog.nccl import release_tags
from catalog.sources import git
from catalog.stages import OUT as STAGES
from catalog.stages import placed_lines, runs, write_table

ROOT = Path(__file__).resolve().parents[2]
OUT = STAGES.parent / "nccl_multicast.json"
FILE = "transport/nvls.cc"

# A check macro of cudawrap.h (CUCHECK, CUCHECKGOTO, …) whose command is a multicast call:
# the macro pastes ``pfn_`` before the command, so the call's name opens its argument.
_MULTICAST_CHECK = re.compile(r"\bCUCHECK\w*\s*\(\s*(?P<call>cuMulticast\w+)\s*\(")
# A multicast call's result kept to be reported by hand: 2.27's nvlsAllocateMem holds
# ``CUresult err = CUPFN(cuMulticastBindMem(…));`` and, where it is not CUDA_SUCCESS, WARNs
# "Failed to bind NVLink SHARP (NVLS) Multicast memory … CUDA error %d '%s'" with ``err``
# among its arguments: that WARN's place is the multicast call's failure too.
_MULTICAST_RESULT = re.compile(
    r"\b(?P<var>\w+)\s*=\s*(?:CUPFN\s*\(\s*|pfn_)(?P<call>cuMulticast\w+)\s*\("
)
_WARN_CALL = re.compile(r"\bWARN\s*\(")
# How far after the call its result is reported (the if-block that follows it).
_REPORT_SPAN = 1200


def multicast_lines(clean: str) -> dict[int, str]:
    """line -> the multicast call a check on that line (or on a line its arguments run
    on: ``__LINE__`` of a call spread over lines is one of them) wraps."""
    calls = {m.start(): m.group("call") for m in _MULTICAST_CHECK.finditer(clean)}
    calls.update(reported_results(clean))
    return {line: calls[offset] for line, offset in placed_lines(clean) if offset in calls}


def reported_results(clean: str) -> dict[int, str]:
    """offset of a WARN -> the multicast call whose kept result (``err``) it prints: the
    WARNs that follow the call, before the variable is assigned again, and name it."""
    out: dict[int, str] = {}
    for m in _MULTICAST_RESULT.finditer(clean):
        var = re.compile(rf"\b{re.escape(m.group('var'))}\b")
        span = clean[m.end() : m.end() + _REPORT_SPAN]
        again = re.search(rf"\b{re.escape(m.group('var'))}\s*=[^=]", span)
        span = span[: again.start()] if again else span
        for warn in _WARN_CALL.finditer(span):
            end = span.find(";", warn.end())
            if var.search(span[warn.end() : end if end >= 0 else None]):
                out[m.end() + warn.start()] = m.group("call")
    return out


def extract(repo: Path) -> dict[str, object]:
    versions = json.loads(STAGES.read_text(encoding="utf-8"))["versions"]
    tags = dict(release_tags(repo))
    found: dict[int, dict[str, set[str]]] = {}
    for version in versions:
        tag = tags.get(version)
        if tag is None:
            continue
        try:
            code = git(repo, "show", f"{tag}:src/{FILE}")
        except subprocess.CalledProcessError:  # a release without the NVLS transport
            continue
        for line, call in multicast_lines(csource.blank_comments(code)).items():
            found.setdefault(line, {}).setdefault(call, set()).add(version)
    return {
        "project": "nccl",
        "source": {
            "repository": "github.com/NVIDIA/nccl",
            "read": f"every release tag of the stage table (data/stages/nccl.json), src/{FILE}: "
            "the lines of CUCHECK* checks whose command is a cuMulticast* call, and of "
            "the WARNs that print a cuMulticast* call's kept result",
            "mirror_head": git(repo, "rev-parse", "HEAD").strip(),
            "generator": "scripts/catalog/nvls_multicast.py",
        },
        "file": FILE,
        "versions": versions,
        "lines": {
            str(line): [[call, runs(versions, vs)] for call, vs in sorted(by_call.items())]
            for line, by_call in sorted(found.items())
        },
    }


def main() -> int:
    return write_table(__doc__, OUT, extract, "lines")


if __name__ == "__main__":
    raise SystemExit(main())
