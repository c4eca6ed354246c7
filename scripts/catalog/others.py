"""gloo, the CUDA runtime, the kernel and NVIDIA's driver, and the frameworks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from catalog import cppstream, csource, pysource
from catalog.rows import rows_json, unheld, write
from catalog.sources import BlobReader, Site, git, group, tree


def do_gloo(repo: Path) -> list[Site]:
    reader = BlobReader(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    date = git(repo, "log", "-1", "--format=%cs", "HEAD").strip()
    version = f"{date} {head[:10]}"
    sites: list[Site] = []
    try:
        for path, sha in tree(repo, "HEAD", "gloo", (".cc", ".h", ".cu")):
            if "/test" in path or "/benchmark" in path or path.endswith("common/logging.h"):
                continue
            found = cppstream.sites_of(reader.read(sha), "gloo", path, version)
            sites.extend(s for s in found if not s.function.startswith("#define GLOO_"))
    finally:
        reader.close()
    source = {
        "repository": "github.com/facebookincubator/gloo",
        "read": "HEAD, gloo/** without tests and benchmarks",
        "versions": [version],
        "calls": "GLOO_ENFORCE*, GLOO_THROW*, GLOO_ERROR_MSG, GLOO_ERROR/WARN/INFO",
    }
    write("gloo", source, rows_json(group(sites), [version]), unheld(sites, [version]))
    return sites


# The launchers and frameworks most tickets come from: (project, repository, the folders
# whose messages a distributed job prints). Python everywhere; C++ where the library logs
# from C++ (Horovod's controller and stall inspector).
FRAMEWORKS = {
    "accelerate": ("github.com/huggingface/accelerate", ("src/accelerate",)),
    "deepspeed": (
        "github.com/deepspeedai/DeepSpeed",
        (
            "deepspeed/comm",
            "deepspeed/launcher",
            "deepspeed/elasticity",
            "deepspeed/utils",
            "deepspeed/checkpoint",
            "deepspeed/runtime",
        ),
    ),
    "horovod": (
        "github.com/horovod/horovod",
        ("horovod/common", "horovod/torch", "horovod/runner", "horovod/ray"),
    ),
    "megatron": (
        "github.com/NVIDIA/Megatron-LM",
        (
            "megatron/core/distributed",
            "megatron/core/parallel_state.py",
            "megatron/core/pipeline_parallel",
            "megatron/core/dist_checkpointing",
            "megatron/core/utils.py",
            "megatron/training",
        ),
    ),
    "lightning": (
        "github.com/Lightning-AI/pytorch-lightning",
        ("src/lightning/fabric", "src/lightning/pytorch"),
    ),
    # detectron2's launcher and its distributed helpers: launch.py logs the init URL when
    # init_process_group raises (_distributed_worker), comm.py wraps the collectives.
    "detectron2": (
        "github.com/facebookresearch/detectron2",
        ("detectron2/engine/launch.py", "detectron2/utils/comm.py"),
    ),
    # fairseq's distributed helpers: all_gather_list (its "Unable to unpickle data from
    # other workers" when the ranks' buffers do not hold each other's data), the
    # init/launch of its workers, and its legacy DDP; its trainer, which catches a CUDA
    # out-of-memory and tries to go on ("attempting to recover from OOM in forward/backward
    # pass", "OOM: Ran out of memory with exception: …").
    "fairseq": (
        "github.com/facebookresearch/fairseq",
        ("fairseq/distributed", "fairseq/distributed_utils.py", "fairseq/trainer.py"),
    ),
}
# Frameworks read at every release tag too (the tag's version is the pattern's group), not
# only at HEAD: their messages changed (fairseq's all_gather_list message gained a last
# sentence, and its file moved, in 0.10), and the releases people run are old.
# DeepSpeed at the first release of each minor version: ZeRO's cross-rank check
# (deepspeed/runtime/zero/utils.py assert_ints_same_as_other_ranks) said "disagreement
# between rank0 and rank<N>: rank0: […], rank<N>: […]" from 0.5.10 (#1453, 2022-01) until
# #7525 (2025-08) reworded it, and the releases people run are old.
RELEASE_TAGS = {"fairseq": r"v(\d+\.\d+\.\d+)", "deepspeed": r"v(\d+\.\d+)\.\d+"}


def do_framework(project: str, repo: Path) -> list[Site]:
    repository, folders = FRAMEWORKS[project]
    head = git(repo, "rev-parse", "HEAD").strip()
    date = git(repo, "log", "-1", "--format=%cs", "HEAD").strip()
    tags = git(repo, "tag", "--points-at", "HEAD").split()
    version = f"{date} {head[:10]}" + (f" ({tags[0]})" if tags else "")
    refs = [*_release_tags(repo, RELEASE_TAGS.get(project)), (version, "HEAD")]
    reader = BlobReader(repo)
    cache: dict[tuple[str, str], list[Site]] = {}
    sites: list[Site] = []
    try:
        for at, ref in refs:
            for folder in folders:
                for path, sha in tree(repo, ref, folder, (".py", ".cc", ".cpp", ".h")):
                    if "/test" in path or "/tests/" in path:
                        continue
                    if (sha, path) not in cache:
                        code = reader.read(sha)
                        if path.endswith(".py"):
                            cache[(sha, path)] = pysource.sites_of(code, project, path, "")
                        else:
                            cache[(sha, path)] = cppstream.sites_of(code, project, path, "")
                    sites.extend(
                        Site(s.project, s.level, s.parts, s.file, s.function, s.line, at)
                        for s in cache[(sha, path)]
                    )
    finally:
        reader.close()
    versions = [at for at, _ in refs]
    read = "HEAD" if len(refs) == 1 else "release tags and HEAD"
    source = {
        "repository": repository,
        "read": f"{read}: " + ", ".join(folders) + " (tests left out)",
        "versions": versions,
        "calls": "raise, logger.<level>, warnings.warn, rank_zero_*/log_dist; C++ LOG() <<",
    }
    write(project, source, rows_json(group(sites), versions), unheld(sites, versions))
    return sites


def _release_tags(repo: Path, pattern: str | None) -> list[tuple[str, str]]:
    """(version, tag) of each release tag matching ``pattern``, oldest first; none without
    a pattern."""
    if pattern is None:
        return []
    found: dict[str, str] = {}
    for tag in git(repo, "tag").split():
        m = re.fullmatch(pattern, tag)
        if m is not None:
            found.setdefault(m.group(1), tag)
    return sorted(found.items(), key=lambda kv: [int(n) for n in kv[0].split(".")])


# TransformerEngine's userbuffers (the comm+GEMM overlap's own communicators) print their
# failures with printf from CHECK macros (NCCLCHECK: "Failed, NCCL error %s:%d ''", the
# NCCL documentation's example macro) before exit(): no logger, so the stream reader above
# finds none. Read on the release branches, where the C++ userbuffers code lived.
_TE_USERBUFFERS = (
    "transformer_engine/pytorch/csrc/userbuffers",
    "transformer_engine/common/userbuffers",
)
_TE_PRINTS = ("printf", "fprintf")


def do_transformer_engine(repo: Path) -> list[Site]:
    branches = [
        b
        for b in git(repo, "branch", "--format=%(refname:short)").split()
        if re.fullmatch(r"release_v\d+(?:\.\d+)+", b)  # not release_v*.post branches
    ]
    versions = sorted(branches, key=lambda b: [int(n) for n in b[9:].split(".")])
    reader = BlobReader(repo)
    sites: list[Site] = []
    try:
        for version in versions:
            for folder in _TE_USERBUFFERS:
                for path, sha in tree(repo, version, folder, (".cpp", ".cu", ".h")):
                    clean = csource.blank_comments(reader.read(sha))
                    spans = csource.function_spans(clean)
                    for call in csource.find_calls(clean, _TE_PRINTS):
                        args = call.args[1:] if call.name == "fprintf" else call.args
                        lit = csource.literal(args[0]) if args else None
                        if lit is None or not lit.text.strip():
                            continue
                        parts = tuple(csource.printf_parts(lit, args[1:]))
                        function = csource.enclosing(spans, call.offset)
                        sites.append(
                            Site("transformer_engine", call.name, parts, path, function,
                                 call.line, version)
                        )  # fmt: skip
    finally:
        reader.close()
    source = {
        "repository": "github.com/NVIDIA/TransformerEngine",
        "read": "release_v* branches: " + ", ".join(_TE_USERBUFFERS) + " (C++)",
        "versions": versions,
        "calls": "printf/fprintf (the userbuffers CHECK macros)",
    }
    write("transformer_engine", source, rows_json(group(sites), versions), unheld(sites, versions))
    return sites


# ROCm's HSA runtime (ROCR) prints what the GPU's driver reported about a queue to stderr,
# then aborts: a hardware exception (runtime.cpp Runtime::HwExceptionHandler, "HW Exception
# by GPU node-%u (Agent handle: %p) reason :%s", the reason "ECC" or "GPU Hang") and a GPU
# memory fault (VMFaultHandler, "Memory access fault by GPU node-%u …"). Every HIP program,
# torch on ROCm included, runs on it. Read at each rocm-X.Y.Z release tag.
# The file moved from src/ (≤ 6.2) to runtime/hsa-runtime/ (HEAD).
_ROCR_FILES = ("src/core/runtime/runtime.cpp", "runtime/hsa-runtime/core/runtime/runtime.cpp")


def do_rocr(repo: Path) -> list[Site]:
    tags = sorted(
        (t for t in git(repo, "tag").split() if re.fullmatch(r"rocm-\d+\.\d+\.\d+", t)),
        key=lambda t: [int(n) for n in t[5:].split(".")],
    )
    head = git(repo, "rev-parse", "HEAD").strip()
    date = git(repo, "log", "-1", "--format=%cs", "HEAD").strip()
    refs = {**{t: t for t in tags}, "HEAD": f"{date} {head[:10]}"}
    reader = BlobReader(repo)
    sites: list[Site] = []
    present: list[str] = []
    try:
        for ref, version in refs.items():
            for path in _ROCR_FILES:
                found = [sha for p, sha in tree(repo, ref, path, (".cpp",)) if p == path]
                if not found:
                    continue
                if version not in present:
                    present.append(version)
                clean = csource.blank_comments(reader.read(found[0]))
                spans = csource.function_spans(clean)
                for call in csource.find_calls(clean, ("fprintf",)):
                    lit = csource.literal(call.args[1]) if len(call.args) > 1 else None
                    if lit is None or not lit.text.strip():
                        continue
                    parts = tuple(csource.printf_parts(lit, call.args[2:]))
                    function = csource.enclosing(spans, call.offset)
                    sites.append(Site("rocr", "fprintf", parts, path, function, call.line, version))
    finally:
        reader.close()
    source = {
        "repository": "github.com/ROCm/ROCR-Runtime",
        "read": "rocm-X.Y.Z tags and HEAD: " + ", ".join(_ROCR_FILES) + " (C++)",
        "versions": present,
        "calls": "fprintf (the runtime's reports of GPU exceptions and faults before abort)",
    }
    write("rocr", source, rows_json(group(sites), present), unheld(sites, present))
    return sites


def _strings(path: Path) -> list[str]:
    out = subprocess.run(["strings", "-n", "4", str(path)], capture_output=True, text=True)
    return out.stdout.splitlines()


# The caching allocator's out-of-memory message is built from pieces (c10/cuda/
# CUDACachingAllocator.cpp, the OutOfMemoryError of DeviceCachingAllocator::malloc:
# "CUDA out of memory. Tried to allocate " <size> ". GPU " <n> " has a total capacity of " …
# "Of the allocated memory " <n> " is allocated by PyTorch, " "and " <n> " is reserved by
# PyTorch but unallocated." " If reserved but unallocated memory is large try setting
# PYTORCH_CUDA_ALLOC_CONF=…"), each its own literal in the binary. Its later pieces are read
# too, by the words that only that message says: a paste whose first line is cut inside the
# message keeps them (parsers/catalog/cut_body.py), and they say the same as its start.
_OOM_PIECE = re.compile(
    r"(?:allocated|reserved) by PyTorch|Including non-PyTorch memory|"
    r"^ If reserved but unallocated memory is large"
)


def do_cuda(cudart: Path, c10_cuda: Path | None) -> list[Site]:
    """The CUDA runtime's error strings (``cudaGetErrorString``'s table in libcudart),
    as torch prints them (``CUDA error: <string>``, c10/cuda's check), and the CUDA
    caching allocator's out-of-memory messages (the literals of libc10_cuda)."""
    strings = _strings(cudart)
    start = strings.index("cudaSuccess")
    table = strings[start : start + 600]
    errors = [
        s
        for s in table
        if " " in s and not s.startswith("cuda") and s[:1].isalpha() and "%" not in s
    ]
    version = cudart.name
    sites = [
        Site(
            "cuda",
            "CUDA error",
            ("CUDA error: ", text),
            cudart.name,
            "cudaGetErrorString",
            0,
            version,
        )
        for text in dict.fromkeys(errors)
    ]
    if c10_cuda is not None:
        for text in _strings(c10_cuda):
            if text.startswith(("CUDA out of memory.", "CUDA kernel errors might be")) or (
                _OOM_PIECE.search(text) and len(text) < 400
            ):
                sites.append(
                    Site("cuda", "c10 CUDA", (text.rstrip(),), c10_cuda.name, "", 0, version)
                )
    source = {
        "repository": "libcudart (pip nvidia-cuda-runtime-cu12) and torch's libc10_cuda",
        "read": f"strings of {cudart.name}: the error-string table after 'cudaSuccess'; "
        + (
            f"strings of {c10_cuda.name}: 'CUDA out of memory.' literals and the later pieces of "
            "that message"
            if c10_cuda
            else ""
        ),
        "versions": [version],
    }
    write("cuda", source, rows_json(group(sites), [version]))
    return sites


_PRINTK = (
    "pr_err",
    "pr_warn",
    "pr_info",
    "pr_emerg",
    "pr_crit",
    "pr_alert",
    "printk",
    "portDbgPrintf",
)


def do_kernel(root: Path) -> list[Site]:
    """printk-style reports of the Linux kernel (hung task, OOM killer) and of NVIDIA's
    kernel driver (Xid), from C sources under ``root`` (a checkout, or excerpts of the
    files read through the code index: <root>/<repository>/<path>)."""
    sites: list[Site] = []
    version = "as read"
    for path in sorted(root.rglob("*.c")):
        rel = path.relative_to(root).as_posix()
        clean = csource.blank_comments(path.read_text("utf-8", "replace"))
        spans = csource.function_spans(clean)
        for call in csource.find_calls(clean, _PRINTK):
            lit = csource.literal(call.args[0]) if call.args else None
            if lit is None:
                continue
            text = lit.text
            if call.name == "printk" and text[:1] == "\x00":
                text = text[1:]  # KERN_ERR "…": the level marker
            parts = tuple(csource.printf_parts(csource.Literal(text, lit.markers), call.args[1:]))
            function = csource.enclosing(spans, call.offset)
            sites.append(Site("kernel", call.name, parts, rel, function, call.line, version))
    source = {
        "repository": "github.com/torvalds/linux, github.com/NVIDIA/open-gpu-kernel-modules",
        "read": "kernel/hung_task.c, mm/oom_kill.c, src/nvidia/src/kernel/gpu/rc/kernel_rc.c: "
        "their printk/pr_*/portDbgPrintf statements",
        "versions": [version],
    }
    write("kernel", source, rows_json(group(sites), [version]))
    return sites
