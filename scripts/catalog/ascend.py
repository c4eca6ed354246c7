"""Huawei Ascend's collective library and its torch binding: HCCL (the library, its
communication base ``hcomm``: socket and link set-up, transports, the notify waits of a
running collective), the error codes its error manager prints (``EI0006: … Getting socket
times out. Reason: …``), and torch_npu's ProcessGroupHCCL (``HCCL function error:
hcclCommInitRootInfo(…), error code is 7``).

Jobs on Ascend NPUs (torch_npu, vllm-ascend, MindSpeed) print these where a CUDA job prints
NCCL's WARN lines and torch's ProcessGroupNCCL errors; the plog (CANN's log) holds the
library's own lines, ``[ERROR] HCCL(pid,proc):date [file.cc:line] [tid]<format>``: the
format is the message body, so a row is the format and the header stays the reader's.

* ``hccl``: the ``HCCL_ERROR``/``HCCL_WARNING``/``HCCL_RUN_WARNING`` calls (printf-style,
  the format first: ``src/legacy/ascend910/pub_inc/log.h``) of the communication base's
  ``src/**`` at every release tag and HEAD (github.com/hicann/hcomm, read from its public
  mirror), and the error manager's table of the same repository (``src/common/error_code/
  error_code.cc``: each code's ErrMessage, the format printed after ``EIxxxx: [PID: n]
  <date>``, at every tag) with its reference pages (``docs/en/error_codes/EIxxxx-*.md``: the
  first ``text`` block, a newer wording); the code is the row's function.
* ``torch_npu``: its own files of ``torch_npu/csrc/distributed`` (ProcessGroupHCCL,
  HCCLUtils: the ``HCCL_CHECK_ERROR`` macro's ``oss << " HCCL function error: " << …``
  chain, its ``TORCH_CHECK``s, ``ASCEND_LOGE/LOGW``) and NPUException of
  github.com/Ascend/pytorch at every release and HEAD.

Meanings are given by family in ``analyzer/parsers/catalog/meanings.toml`` (the
``hccl-*`` and ``torch-npu-*`` families).
"""

from __future__ import annotations

import re
from pathlib import Path

from catalog import cppstream, csource
from catalog.native import NativeSource, release_refs, sites_of
from catalog.rows import rows_json, unheld, write
from catalog.sources import BlobReader, Site, group, tree

HCOMM = NativeSource(
    "github.com/hicann/hcomm",
    r"v(\d+\.\d+\.\d+)",
    ("src",),
    printf=(("HCCL_ERROR", 0), ("HCCL_WARNING", 0), ("HCCL_RUN_WARNING", 0)),
    levels=(("HCCL_ERROR", "ERROR"), ("HCCL_WARNING", "WARNING"), ("HCCL_RUN_WARNING", "WARNING")),
    note="release tags vX.Y.Z (not -beta/-rc) and HEAD: src/** without tests "
    "(HCCL_ERROR, HCCL_WARNING, HCCL_RUN_WARNING: printf formats); docs/en/error_codes "
    "(the error manager's EIxxxx formats)",
)

TORCH_NPU = NativeSource(
    "github.com/Ascend/pytorch",
    r"v(\d+\.\d+\.\d+)-pytorch[\d.]+",
    # torch_npu's own files: ProcessGroupHCCL and its helpers, its parallel TCP store, and
    # NPUException (NPU_CHECK_ERROR's "OPS function error: <call>"); not its copies of
    # torch's files (reducer.cpp, rpc/, TraceUtils.h), whose messages are torch's rows
    paths=(
        "torch_npu/csrc/distributed/ProcessGroupHCCL.cpp",
        "torch_npu/csrc/distributed/ProcessGroupHCCL.hpp",
        "torch_npu/csrc/distributed/HCCLUtils.cpp",
        "torch_npu/csrc/distributed/HCCLUtils.hpp",
        "torch_npu/csrc/distributed/HcclCompile.h",
        "torch_npu/csrc/distributed/ProcessGroupLCCL.cpp",
        "torch_npu/csrc/distributed/LCCLUtils.cpp",
        "torch_npu/csrc/distributed/ParallelTcpServer.cpp",
        "torch_npu/csrc/distributed/ParallelTcpStore.cpp",
        "torch_npu/csrc/distributed/ParallelStoreProxy.cpp",
        "torch_npu/csrc/distributed/StoreClient.cpp",
        "torch_npu/csrc/core/npu/NPUException.cpp",
        "torch_npu/csrc/core/npu/NPUException.h",
    ),
    printf=(("ASCEND_LOGE", 0), ("ASCEND_LOGW", 0)),
    streams=("oss",),
    levels=(("ASCEND_LOGE", "ERROR"), ("ASCEND_LOGW", "WARNING")),
    note="release tags vX.Y.Z-pytorchA.B (one per X.Y.Z) and HEAD: "
    "ProcessGroupHCCL, HCCLUtils, HcclCompile, ProcessGroupLCCL, LCCLUtils, the parallel "
    "TCP store and NPUException (TORCH_CHECK, TORCH_NPU_WARN, ASCEND_LOGE/W, "
    "the HCCL_CHECK_ERROR macro's oss << chain)",
)

_ERROR_TABLE = "src/common/error_code/error_code.cc"
_TABLE_ENTRY = re.compile(
    r'"ErrCode":\s*"(E[A-Z]\d{4})",\s*"ErrMessage":\s*"((?:[^"\\]|\\.)*)"'
    r'(?:,\s*"Arglist":\s*"([^"]*)")?'
)
_CONTINUATION = re.compile(r"\\\n")
_CODE_PAGE = re.compile(r"(E[A-Z]\d{4})-[^/]*\.md$")
_FIRST_TEXT_BLOCK = re.compile(r"```text\n(.*?)\n```", re.S)


def error_code_sites(page: str, text: str, version: str) -> list[Site]:
    """The format of one error-code page (its first ``text`` block) as a site."""
    code = _CODE_PAGE.search(page)
    block = _FIRST_TEXT_BLOCK.search(text)
    if code is None or block is None:
        return []
    fmt = block.group(1).strip()
    lit = csource.literal('"' + fmt.replace("\\", "\\\\").replace('"', '\\"') + '"')
    if lit is None or not lit.text.strip():
        return []
    slots = [f"arg{i}" for i in range(fmt.count("%s"))]
    parts = tuple(csource.printf_parts(lit, slots))
    return [Site("hccl", "errcode", parts, page, code.group(1), 1, version)]


def error_table_sites(path: str, code: str, version: str) -> list[Site]:
    """The error manager's table (``error_code.cc``'s JSON: ErrCode, ErrMessage, Arglist):
    the message each code prints after ``EIxxxx: [PID: n] <date>``, its slots named by the
    Arglist."""
    sites: list[Site] = []
    for m in _TABLE_ENTRY.finditer(code):
        lit = csource.literal('"' + m.group(2) + '"')
        if lit is None or not lit.text.strip():
            continue
        names = [a.strip() for a in (m.group(3) or "").split(",") if a.strip()]
        count = m.group(2).count("%s")
        slots = (names + [f"arg{i}" for i in range(len(names), count)])[:count]
        parts = tuple(csource.printf_parts(lit, slots))
        line = code.count("\n", 0, m.start()) + 1
        sites.append(Site("hccl", "errcode", parts, path, m.group(1), line, version))
    return sites


def _read(
    repo: Path, spec: NativeSource, project: str, refs: list[tuple[str, str]], docs: bool
) -> list[Site]:
    reader = BlobReader(repo)
    cache: dict[tuple[str, str], list[Site]] = {}
    sites: list[Site] = []
    try:
        for version, ref in refs:
            for under in spec.paths:
                for path, sha in tree(repo, ref, under, (".c", ".cc", ".cpp", ".h", ".hpp")):
                    if "/test" in path or "/tests/" in path or "/ut/" in path or "/st/" in path:
                        continue
                    if (sha, path) not in cache:
                        # a macro's line continuations are not part of its expressions
                        # (HCCL_CHECK_ERROR's "… + std::string(__FILE__) + \\"): blanked,
                        # the line numbers kept
                        code = _CONTINUATION.sub(" \n", reader.read(sha))
                        found = sites_of(code, project, spec, path, "")
                        if project == "torch_npu":
                            found += cppstream.sites_of(code, project, path, "")
                        cache[(sha, path)] = found
                    sites.extend(
                        Site(s.project, s.level, s.parts, s.file, s.function, s.line, version)
                        for s in cache[(sha, path)]
                    )
            if docs:
                for path, sha in tree(repo, ref, _ERROR_TABLE, (".cc",)):
                    sites.extend(error_table_sites(path, reader.read(sha), version))
                for path, sha in tree(repo, ref, "docs/en/error_codes", (".md",)):
                    sites.extend(error_code_sites(path, reader.read(sha), version))
    finally:
        reader.close()
    return sites


def _generate(repo: Path, spec: NativeSource, project: str, calls: str, docs: bool) -> list[Site]:
    """Read ``project`` at each release and HEAD and write its catalog rows."""
    refs = release_refs(repo, spec.tag)
    sites = _read(repo, spec, project, refs, docs=docs)
    versions = [v for v, _ in refs if any(s.version == v for s in sites)]
    source = {
        "repository": spec.repository,
        "read": spec.note,
        "versions": versions,
        "calls": calls,
    }
    write(project, source, rows_json(group(sites), versions), unheld(sites, versions))
    return sites


def do_hccl(repo: Path) -> list[Site]:
    calls = "HCCL_ERROR, HCCL_WARNING, HCCL_RUN_WARNING; EIxxxx error-code formats"
    return _generate(repo, HCOMM, "hccl", calls, docs=True)


def do_torch_npu(repo: Path) -> list[Site]:
    # one tag per torch_npu release (v5.0.0-pytorch2.1.0 …: the same sources built for
    # several torch releases), then HEAD: the messages changed (HCCL_CHECK_ERROR's
    # "[ERROR] HCCL error in: <file>:<line>" of 5.x/6.x became "HCCL function error: …")
    calls = "TORCH_CHECK, TORCH_NPU_WARN, ASCEND_LOGE/W, oss <<"
    return _generate(repo, TORCH_NPU, "torch_npu", calls, docs=False)
