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
import hashlib
import itertools
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import cppstream, csource, nccl, pysource, report
from catalog.sources import BlobReader, Row, Site, git, group, ranges, tree

from hangdoc.analyzer.parsers.catalog.template import (
    Part,
    Slot,
    display,
    keywords_of,
    literal_length,
    parts_to_json,
    safe_words,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "analyzer" / "parsers" / "catalog" / "data"
_PY_LEVELS = {"raise", "logger", "warnings", "rank_zero_warn", "rank_zero_info", "log_dist"}
MIN_LITERAL = 12  # letters/digits of literal text for a row to be matched at run time
# Words too common in ordinary training logs to be a row's keyword.
_STOP = {
    "the",
    "and",
    "for",
    "with",
    "from",
    "that",
    "this",
    "not",
    "was",
    "are",
    "but",
    "has",
    "have",
    "been",
    "will",
    "can",
    "when",
    "which",
    "than",
    "then",
    "into",
    "only",
    "should",
    "must",
    "may",
    "use",
    "using",
    "your",
    "you",
    "please",
    "set",
    "get",
    "all",
    "any",
    "rank",
    "error",
    "Error",
    "failed",
    "Failed",
    "loss",
    "step",
    "epoch",
    "value",
    "true",
    "false",
    "None",
    "size",
    "time",
    "data",
    "model",
    "train",
    "training",
    "INFO",
    "WARN",
    "WARNING",
    "ERROR",
    "DEBUG",
    "NCCL",
    "torch",
    "Using",
    "does",
    "Could",
    "could",
    "Invalid",
    "invalid",
    "supported",
    "expected",
    "Expected",
    "got",
    "found",
    "device",
    "tensor",
    "Tensor",
    "type",
    "name",
    "number",
    "more",
    "other",
    "one",
    "two",
    "some",
}


def row_id(row: Row) -> str:
    digest = hashlib.sha1(f"{row.project}|{row.level}|{display(row.parts)}".encode()).hexdigest()
    return f"{row.project}.{digest[:10]}"


def choose_keyword(row: Row, df: Counter[str]) -> str | None:
    """The row's rarest literal word that prints as a word of its own: one glued to a
    slot ("layer_%s", "%sms") prints as a different word and would hide the row."""
    safe = set(safe_words(row.parts))
    words = [w for w in keywords_of(row.parts) if len(w) >= 4 and w not in _STOP]
    if not words:
        words = [w for w in keywords_of(row.parts) if len(w) >= 3]
    if not words:
        return None
    return min(words, key=lambda w: (w not in safe, df[w], -len(w), w))


def rows_json(
    rows: dict[tuple[str, str, tuple[object, ...]], Row],
    versions: list[str],
    strings: dict[str, Strings] | None = None,
) -> list[dict[str, object]]:
    df: Counter[str] = Counter()
    for row in rows.values():
        df.update(set(keywords_of(row.parts)))
    out: list[dict[str, object]] = []
    for row in rows.values():
        keyword = choose_keyword(row, df)
        sources = []
        present: set[str] = set()
        for (file, function), seen in sorted(row.where.items()):
            latest = max(seen, key=lambda v: versions.index(v) if v in versions else -1)
            sources.append(
                {
                    "file": file,
                    "function": function,
                    "line": seen[latest],
                    "versions": ranges(versions, set(seen)),
                }
            )
            present |= set(seen)
        entry: dict[str, object] = {
            "id": row_id(row),
            "level": row.level,
            "template": display(row.parts),
            "parts": parts_to_json(row.parts),
            "keyword": keyword,
            "matchable": bool(keyword) and literal_length(row.parts) >= MIN_LITERAL,
            "versions": ranges(versions, present),
            "sources": sources,
        }
        if strings is not None:
            longest = max((p for p in row.parts if isinstance(p, str)), key=len, default="")
            probe = longest.strip().split("\n")[0][:80]
            if row.level.split()[0].split(".")[0] in _PY_LEVELS:
                pass
            else:
                entry["in_binary"] = sorted(
                    v for v, s in strings.items() if probe and _in(probe, s)
                )
        out.append(entry)
    out.sort(key=lambda e: str(e["id"]))
    return out


def _in(probe: str, strings: Strings) -> bool:
    return probe in strings.exact or probe in strings.joined


class Strings:
    """A binary's literal strings: as a set, and joined (a literal the linker merged into
    the tail of a longer one is only found as a substring)."""

    def __init__(self, lines: list[str]) -> None:
        kept = lines
        self.exact = set(kept)
        self.joined = "\n".join(kept)


def unheld(sites: list[Site], versions: list[str]) -> list[dict[str, object]]:
    """Sites whose format is not a literal: counted in the coverage, never matched."""
    seen: dict[tuple[str, str, str, int], set[str]] = {}
    for site in sites:
        if not site.literal:
            seen.setdefault((site.level, site.file, site.function, site.line), set()).add(
                site.version
            )
    merged: dict[tuple[str, str, str], tuple[int, set[str]]] = {}
    for (level, file, function, line), present in seen.items():
        key = (level, file, function)
        old = merged.get(key)
        merged[key] = (line, present | (old[1] if old else set()))
    return [
        {
            "level": level,
            "file": file,
            "function": function,
            "line": line,
            "versions": ranges(versions, present),
        }
        for (level, file, function), (line, present) in sorted(merged.items())
    ]


def write(
    project: str,
    source: dict[str, object],
    rows: list[dict[str, object]],
    not_held: list[dict[str, object]] | None = None,
) -> None:
    """One row per line: compact to load, readable in a diff."""
    DATA.mkdir(parents=True, exist_ok=True)

    def dump(value: object) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    lines = [
        "{" + f'"project":{dump(project)},',
        f'"source":{dump(source)},',
        '"unheld":[',
        ",\n".join(dump(u) for u in (not_held or [])),
        '],"rows":[',
        ",\n".join(dump(r) for r in rows),
        "]}",
    ]
    (DATA / f"{project}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{project}: {len(rows)} rows", file=sys.stderr)


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
}


def do_framework(project: str, repo: Path) -> list[Site]:
    repository, folders = FRAMEWORKS[project]
    head = git(repo, "rev-parse", "HEAD").strip()
    date = git(repo, "log", "-1", "--format=%cs", "HEAD").strip()
    tags = git(repo, "tag", "--points-at", "HEAD").split()
    version = f"{date} {head[:10]}" + (f" ({tags[0]})" if tags else "")
    reader = BlobReader(repo)
    sites: list[Site] = []
    try:
        for folder in folders:
            for path, sha in tree(repo, "HEAD", folder, (".py", ".cc", ".cpp", ".h")):
                if "/test" in path or "/tests/" in path:
                    continue
                code = reader.read(sha)
                if path.endswith(".py"):
                    sites.extend(pysource.sites_of(code, project, path, version))
                else:
                    sites.extend(cppstream.sites_of(code, project, path, version))
    finally:
        reader.close()
    source = {
        "repository": repository,
        "read": "HEAD: " + ", ".join(folders) + " (tests left out)",
        "versions": [version],
        "calls": "raise, logger.<level>, warnings.warn, rank_zero_*/log_dist; C++ LOG() <<",
    }
    write(project, source, rows_json(group(sites), [version]), unheld(sites, [version]))
    return sites


def _strings(path: Path) -> list[str]:
    import subprocess

    out = subprocess.run(["strings", "-n", "4", str(path)], capture_output=True, text=True)
    return out.stdout.splitlines()


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
            if text.startswith(("CUDA out of memory.", "CUDA kernel errors might be")):
                sites.append(
                    Site("cuda", "c10 CUDA", (text.rstrip(),), c10_cuda.name, "", 0, version)
                )
    source = {
        "repository": "libcudart (pip nvidia-cuda-runtime-cu12) and torch's libc10_cuda",
        "read": f"strings of {cudart.name}: the error-string table after 'cudaSuccess'; "
        + (f"strings of {c10_cuda.name}: 'CUDA out of memory.' literals" if c10_cuda else ""),
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


_PATH_MARK = re.compile(
    r"/pytorch/(?:pytorch/)?(torch|c10|aten|caffe2|third_party)/\S+\.(?:cpp|cu|h|hpp|cuh|cc)$"
)
# Schema strings of registered ops, template names, asserts: literals that are no message.
_NOT_MESSAGE = re.compile(
    r"INTERNAL ASSERT FAILED|\) -> |__torch__|constexpr|\[with T = |Tensor\(a!\)|^\w+\(Tensor"
)
_MESSAGE_LIKE = re.compile(r"^[\s\[(]*[A-Za-z][^\x00]*\s[^\x00]*$")


def c10d_literals(lines: list[str]) -> list[str]:
    """The message-like literals of c10d's compilation units in a torch library's strings.

    The linker keeps each unit's literals together and most units hold their own path
    (``__FILE__`` of a check): the strings between two path markers of c10d files, with no
    other file's marker between them, are c10d's."""
    marks = [
        (i, "distributed/c10d/" in m.group(0))
        for i, s in enumerate(lines)
        if (m := _PATH_MARK.search(s))
        # another file's header inlined into a c10d unit does not end the unit
        and ("distributed/c10d/" in m.group(0) or not m.group(0).endswith((".h", ".hpp", ".cuh")))
    ]
    keep: list[str] = []
    for (start, c10d_a), (end, c10d_b) in itertools.pairwise(marks):
        if not (c10d_a and c10d_b):
            continue
        for text in lines[start + 1 : end]:
            text = text.strip()
            if len(text) < 16 or text.startswith("_Z") or not _MESSAGE_LIKE.match(text):
                continue
            if sum(c.isalpha() for c in text) < len(text) * 0.6 or _NOT_MESSAGE.search(text):
                continue
            keep.append(text)
    return list(dict.fromkeys(keep))


def _torch_python(specs: list[tuple[str, Path]]) -> tuple[list[str], list[Site]]:
    versions = [v for v, _ in specs]
    sites: list[Site] = []
    for version, root in specs:
        for under in ("torch/distributed", "torch/utils/data"):
            if (root / under).is_dir():
                sites.extend(pysource.extract_tree(root, under, "torch", version))
    return versions, sites


def _torch_cpp(specs: list[tuple[str, Path]], cpp_dir: Path | None, cpp_version: str) -> list[Site]:
    sites: list[Site] = []
    for version, root in specs:
        inc = root / "torch" / "include" / "torch" / "csrc" / "distributed" / "c10d"
        for path in sorted(inc.rglob("*.h*")) if inc.is_dir() else []:
            rel = "torch/csrc/distributed/c10d/" + path.relative_to(inc).as_posix()
            sites.extend(
                cppstream.sites_of(path.read_text("utf-8", "replace"), "torch", rel, version)
            )
    if cpp_dir is not None:
        for path in sorted(cpp_dir.rglob("*")):
            if path.suffix not in {".cpp", ".hpp", ".h", ".cu", ".cc"}:
                continue
            rel = path.relative_to(cpp_dir).as_posix()
            sites.extend(
                cppstream.sites_of(path.read_text("utf-8", "replace"), "torch", rel, cpp_version)
            )
    return sites


_COMMIT = re.compile(r"(?:commit|at) ([0-9a-f]{40})")


def _provenance(folder: Path) -> dict[str, str]:
    """path -> the commit its first lines name (excerpts read file by file say where
    from: "… at commit <sha> (read through the code index)")."""
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            head = path.read_text("utf-8", "replace")[:400]
            m = _COMMIT.search(head)
            out[path.relative_to(folder).as_posix()] = m.group(1) if m else "checkout"
    return out


def _literal_sites(specs: list[str], known: list[Site]) -> list[Site]:
    """Rows from the c10d literals of the torch binaries, for the C++ messages whose
    sources were not read; a literal already inside a source row is left out."""
    texts = [p for site in known for p in site.parts if isinstance(p, str) and len(p) >= 16]
    joined = "\n".join(texts)
    sites: list[Site] = []
    for spec in specs:
        version, file = spec.split("=", 1)
        with open(file, encoding="utf-8", errors="replace") as handle:
            lines = [line.rstrip("\n") for line in handle]
        for text in c10d_literals(lines):
            if text in joined:
                continue
            if "{}" in text:
                parts: tuple[Part, ...] = tuple(cppstream.fmt_parts(text, []))
            else:
                parts = (text,) if text.endswith((".", "!")) else (text, Slot("value"))
            sites.append(Site("torch", "literal", parts, Path(file).name, "", 0, version))
    return sites


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
    for spec in args.framework:
        project, gitdir = spec.split("=", 1)
        if args.only in (None, project):
            stats[project] = do_framework(project, Path(gitdir))
    if args.torch and args.only in (None, "torch"):
        specs = [(s.split("=", 1)[0], Path(s.split("=", 1)[1])) for s in args.torch]
        versions, py_sites = _torch_python(specs)
        cpp_sites = _torch_cpp(specs, args.torch_cpp, args.torch_cpp_version)
        all_versions = versions + ([args.torch_cpp_version] if args.torch_cpp else [])
        collected: dict[str, list[str]] = {}
        for spec in args.strings:
            version, file = spec.split("=", 1)
            with open(file, encoding="utf-8", errors="replace") as handle:
                # c10d's units only: the cross-check is about c10d's messages
                lines = [line.rstrip("\n") for line in handle]
            collected.setdefault(version, []).extend(c10d_literals(lines))
        strings = {version: Strings(lines) for version, lines in collected.items()}
        cpp_sites += _literal_sites(args.torch_so, py_sites + cpp_sites)
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
            "cpp_files": _provenance(args.torch_cpp) if args.torch_cpp else {},
        }
        write("torch", source, rows, unheld(py_sites + cpp_sites, all_versions))
        stats["torch"] = (all_versions, py_sites + cpp_sites)
    del stats
    report.write_docs(ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
