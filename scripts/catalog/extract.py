"""Regenerate hangdoc's message catalog from the sources that print the messages.

    python scripts/catalog/extract.py --nccl /work/.mirror/NVIDIA+nccl/repo \\
        --gloo /work/.mirror/facebookincubator+gloo/repo \\
        --torch 2.13.0=/path/to/site-packages --torch 2.14.1=/tmp/torch-2.14.1 \\
        --torch-cpp /tmp/c10d_src --strings 2.13.0=/tmp/strings_cpu.txt …

Writes ``analyzer/parsers/catalog/data/<project>.json`` (the rows: template, keyword,
where each comes from and in which versions) and ``docs/catalog.md`` (the coverage
table). Meanings are not generated: ``analyzer/parsers/catalog/meanings.toml`` is
written by people; the coverage table counts the rows it gives a meaning.

The sources are read, never copied: a git mirror (NCCL, gloo: every release tag), an
unpacked torch (its ``torch/distributed`` Python and its C++ headers), a folder of torch's
C++ sources (``torch/csrc/distributed/c10d/*.cpp``, from a checkout or read file by file),
and the literal strings of the torch binaries (``strings -n 6 libtorch_*.so``) as a
cross-check of which C++ messages a release holds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import nccl, report
from catalog.ascend import do_hccl, do_torch_npu
from catalog.launchers import INDEXED, do_cupy, do_indexed, do_ompi, do_slurm
from catalog.native import NATIVE, do_native
from catalog.others import (
    FRAMEWORKS,
    do_cuda,
    do_framework,
    do_gloo,
    do_kernel,
    do_rocr,
    do_transformer_engine,
)
from catalog.rows import Strings, rows_json, unheld, write
from catalog.sources import Site, git, group
from catalog.torchsrc import c10d_literals, literal_sites, provenance, torch_cpp, torch_python

ROOT = Path(__file__).resolve().parents[2]


def do_nccl(repo: Path) -> tuple[list[str], list[Site]]:
    versions, sites = nccl.extract(repo)
    sites = [s for s in sites if s.level in {"WARN", "INFO"}]
    head = git(repo, "rev-parse", "HEAD").strip()
    rows = rows_json(group(sites), versions)
    source = {
        "repository": "github.com/NVIDIA/nccl",
        "read": "every release tag (the last build of each version), src/**",
        "versions": versions,
        "mirror_head": head,
        "calls": "WARN(fmt, …) and INFO(flags, fmt, …) (src/include/debug.h)",
    }
    write("nccl", source, rows, unheld(sites, versions))
    return versions, sites


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nccl", type=Path, help="git dir of an NVIDIA/nccl mirror")
    parser.add_argument("--gloo", type=Path, help="git dir of a facebookincubator/gloo mirror")
    parser.add_argument(
        "--torch",
        action="append",
        default=[],
        metavar="VERSION=ROOT",
        help="a folder holding torch/distributed (site-packages, an unpacked wheel)",
    )
    parser.add_argument(
        "--torch-cpp", type=Path, help="torch C++ sources (paths from the repo root)"
    )
    parser.add_argument(
        "--torch-cpp-version", default="main", help="what --torch-cpp is (a commit)"
    )
    parser.add_argument(
        "--strings",
        action="append",
        default=[],
        metavar="VERSION=FILE",
        help="strings -n 6 of a torch release's libtorch_*.so (cross-check of C++ rows)",
    )
    parser.add_argument(
        "--framework",
        action="append",
        default=[],
        metavar="PROJECT=GITDIR",
        help=f"a mirror of one of {sorted(FRAMEWORKS)}",
    )
    parser.add_argument(
        "--transformer-engine", type=Path, help="git dir of an NVIDIA/TransformerEngine mirror"
    )
    parser.add_argument(
        "--native",
        action="append",
        default=[],
        metavar="PROJECT=GITDIR",
        help=f"a mirror of one of {sorted(NATIVE)} (native libraries' C/C++ messages)",
    )
    parser.add_argument("--rocr", type=Path, help="git dir of a ROCm/ROCR-Runtime mirror")
    parser.add_argument("--slurm", type=Path, help="git dir of a SchedMD/slurm mirror")
    parser.add_argument("--ompi", type=Path, help="git dir of an open-mpi/ompi mirror")
    parser.add_argument("--cupy", type=Path, help="git dir of a cupy/cupy mirror")
    parser.add_argument(
        "--indexed",
        action="append",
        default=[],
        metavar="PROJECT=FOLDER",
        help=f"files of one of {sorted(INDEXED)} read through the code index",
    )
    parser.add_argument("--cudart", type=Path, help="libcudart.so.* (error strings)")
    parser.add_argument("--c10-cuda", type=Path, help="a torch release's libc10_cuda.so")
    parser.add_argument("--kernel", type=Path, help="kernel/driver C sources (see do_kernel)")
    parser.add_argument(
        "--torch-so",
        action="append",
        default=[],
        metavar="VERSION=STRINGS",
        help="strings -n 6 of a release's libtorch_cpu/cuda.so: c10d's literals become rows",
    )
    parser.add_argument("--hccl", type=Path, help="git dir of a hicann/hcomm mirror (HCCL)")
    parser.add_argument("--torch-npu", type=Path, help="git dir of an Ascend/pytorch mirror")
    parser.add_argument("--only", help="regenerate one project's data only")
    args = parser.parse_args(argv)
    stats: dict[str, object] = {}
    if args.nccl and args.only in (None, "nccl"):
        stats["nccl"] = do_nccl(args.nccl)
    if args.gloo and args.only in (None, "gloo"):
        stats["gloo"] = do_gloo(args.gloo)
    if args.kernel and args.only in (None, "kernel"):
        stats["kernel"] = do_kernel(args.kernel)
    if args.cudart and args.only in (None, "cuda"):
        stats["cuda"] = do_cuda(args.cudart, args.c10_cuda)
    if args.transformer_engine and args.only in (None, "transformer_engine"):
        stats["transformer_engine"] = do_transformer_engine(args.transformer_engine)
    if args.rocr and args.only in (None, "rocr"):
        stats["rocr"] = do_rocr(args.rocr)
    if args.slurm and args.only in (None, "slurm"):
        stats["slurm"] = do_slurm(args.slurm)
    if args.ompi and args.only in (None, "ompi"):
        stats["ompi"] = do_ompi(args.ompi)
    if args.cupy and args.only in (None, "cupy"):
        stats["cupy"] = do_cupy(args.cupy, ROOT / "analyzer/parsers/catalog/data/cuda.json")
    if args.hccl and args.only in (None, "hccl"):
        stats["hccl"] = do_hccl(args.hccl)
    if args.torch_npu and args.only in (None, "torch_npu"):
        stats["torch_npu"] = do_torch_npu(args.torch_npu)
    for spec in args.indexed:
        project, folder = spec.split("=", 1)
        if args.only in (None, project):
            stats[project] = do_indexed(project, Path(folder))
    for spec in args.native:
        project, gitdir = spec.split("=", 1)
        if args.only in (None, project):
            stats[project] = do_native(project, Path(gitdir))
    for spec in args.framework:
        project, gitdir = spec.split("=", 1)
        if args.only in (None, project):
            stats[project] = do_framework(project, Path(gitdir))
    if args.torch and args.only in (None, "torch"):
        specs = [(s.split("=", 1)[0], Path(s.split("=", 1)[1])) for s in args.torch]
        versions, py_sites = torch_python(specs)
        cpp_sites = torch_cpp(specs, args.torch_cpp, args.torch_cpp_version)
        all_versions = versions + ([args.torch_cpp_version] if args.torch_cpp else [])
        collected: dict[str, list[str]] = {}
        for spec in args.strings:
            version, file = spec.split("=", 1)
            with open(file, encoding="utf-8", errors="replace") as handle:
                # c10d's units only: the cross-check is about c10d's messages
                lines = [line.rstrip("\n") for line in handle]
            collected.setdefault(version, []).extend(c10d_literals(lines))
        strings = {version: Strings(lines) for version, lines in collected.items()}
        cpp_sites += literal_sites(args.torch_so, py_sites + cpp_sites)
        for spec in args.torch_so:
            if spec.split("=", 1)[0] not in all_versions:
                all_versions.append(spec.split("=", 1)[0])
        rows = rows_json(group(py_sites + cpp_sites), all_versions, strings or None)
        source = {
            "repository": "github.com/pytorch/pytorch",
            "read": "torch/distributed/**.py and torch/utils/data/**.py of each release; "
            "the C++ headers it ships (torch/include/torch/csrc/distributed/c10d); "
            "c10d's C++ sources of one commit",
            "versions": all_versions,
            "binaries": sorted(strings),
            "cpp_files": provenance(args.torch_cpp) if args.torch_cpp else {},
        }
        write("torch", source, rows, unheld(py_sites + cpp_sites, all_versions))
        stats["torch"] = (all_versions, py_sites + cpp_sites)
    del stats
    report.write_docs(ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
