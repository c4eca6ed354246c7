"""Lay out the files of vLLM, SGLang and Ray that print what a hung or dying serving job
shows, from their released wheels, as the folder ``launchers.do_indexed`` reads.

The three projects are too large to mirror here (the fetch refuses over 500 MB), and the
files one could read through the code index are of whatever commit it stored. Their
releases on PyPI hold the same Python files as the repository (under ``python/`` for SGLang
and Ray) at the version a bug report names ("vllm 0.8.5", "sglang 0.4.6.post5"), so the
catalog reads those: the wheels are downloaded with pip and only the files named in
``FILES`` are taken out of them.

    pip download --no-deps --only-binary :all: --python-version 3.12 \\
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \\
        vllm==0.5.4 vllm==0.6.6.post1 vllm==0.8.5 vllm==0.11.0 vllm==0.33.0 \\
        sglang==0.4.6.post5 sglang==0.5.3 sglang==0.5.23 ray==2.46.0 ray==2.60.0 -d /tmp/wheels
    python scripts/catalog/wheels.py /tmp/wheels/*.whl --root /work/indexed
    python scripts/catalog/extract.py --indexed vllm=/work/indexed --indexed sglang=/work/indexed \\
        --indexed ray=/work/indexed

Each file lands at ``<root>/<owner>/<name>/<repository path>``, its first line naming
where it was read ("# read from github.com/<owner>/<name> at release <version> (commit
<sha>) …", the commit where the wheel records one); the same file of a later release sits
beside it as ``<path>@<version>``. The root stays outside the repository: the sources are
read, never copied.
"""

from __future__ import annotations

import argparse
import re
import zipfile
from pathlib import Path

# project -> (owner/name, prefix of the repository path before the wheel's path, files).
# The files are those whose messages a hung or dying job prints: the process monitors and
# the RPC to the workers, the engine's death, the set-up of the process groups and of the
# NCCL / custom all-reduce communicators, the KV-cache and GPU memory checks, the Ray
# executor's placement groups; ray.exceptions for what a caller of a dead actor raises.
FILES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "vllm": (
        "vllm-project/vllm",
        "",
        (
            "vllm/v1/executor/multiproc_executor.py",
            "vllm/v1/engine/core_client.py",
            "vllm/v1/engine/exceptions.py",
            "vllm/v1/engine/core.py",
            "vllm/v1/worker/gpu_worker.py",
            "vllm/v1/core/kv_cache_utils.py",
            "vllm/v1/executor/ray_utils.py",
            "vllm/v1/executor/ray_distributed_executor.py",
            "vllm/v1/executor/ray_executor.py",
            "vllm/executor/ray_utils.py",
            "vllm/executor/ray_distributed_executor.py",
            "vllm/executor/ray_gpu_executor.py",
            "vllm/executor/multiproc_worker_utils.py",
            "vllm/worker/worker.py",
            "vllm/worker/worker_base.py",
            "vllm/v1/worker/worker_base.py",
            "vllm/distributed/parallel_state.py",
            "vllm/distributed/device_communicators/shm_broadcast.py",
            "vllm/distributed/device_communicators/pynccl.py",
            "vllm/distributed/device_communicators/pynccl_wrapper.py",
            "vllm/distributed/device_communicators/custom_all_reduce.py",
            "vllm/distributed/device_communicators/cuda_communicator.py",
        ),
    ),
    "sglang": (
        "sgl-project/sglang",
        "python/",
        (
            "sglang/srt/entrypoints/engine.py",
            "sglang/srt/managers/scheduler.py",
            "sglang/srt/managers/tp_worker.py",
            "sglang/srt/model_executor/model_runner.py",
            "sglang/srt/distributed/parallel_state.py",
            "sglang/srt/utils.py",
            "sglang/srt/utils/common.py",
        ),
    ),
    "ray": (
        "ray-project/ray",
        "python/",
        (
            "ray/exceptions.py",
            # the job API: what `ray job submit` / `ray job status` print when the job's
            # entrypoint (the training driver) exits or its supervisor dies
            "ray/dashboard/modules/job/job_supervisor.py",
            "ray/dashboard/modules/job/job_manager.py",
        ),
    ),
}
_WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9_]+)-(?P<version>[^-]+)-")
# Where a wheel records the commit it was built from: Ray's ray/_version.py
# (commit = "<sha>"), vLLM's setuptools-scm file (__commit_id__ = commit_id = '<sha>').
_COMMIT_FILES = ("ray/_version.py", "vllm/_version.py")
_COMMIT = re.compile(r"""\bcommit(?:_id)?\s*=\s*["']g?([0-9a-f]{7,40})["']""")


def version_key(version: str) -> tuple[int, ...]:
    """A release's order: its numbers (``0.4.6.post5`` → 0, 4, 6, 5)."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def lay_out(wheels: list[Path], root: Path) -> list[Path]:
    """Take ``FILES`` out of each wheel into ``root``; the oldest release of a file gets its
    plain path, later ones ``<path>@<version>``."""
    found: list[tuple[str, str, Path]] = []
    for wheel in wheels:
        m = _WHEEL.match(wheel.name)
        if m is None or m.group("name") not in FILES:
            continue
        found.append((m.group("name"), m.group("version"), wheel))
    found.sort(key=lambda t: (t[0], version_key(t[1])))
    written: list[Path] = []
    first: set[tuple[str, str]] = set()
    for project, version, wheel in found:
        repo, prefix, paths = FILES[project]
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            commit = ""
            for name in _COMMIT_FILES:
                if name in names:
                    c = _COMMIT.search(archive.read(name).decode("utf-8", "replace"))
                    commit = c.group(1) if c else ""
            for path in paths:
                if path not in names:
                    continue
                text = archive.read(path).decode("utf-8", "replace")
                rel = prefix + path
                target = root / repo / rel
                if (project, rel) in first:
                    target = target.with_name(f"{target.name}@{version}")
                first.add((project, rel))
                target.parent.mkdir(parents=True, exist_ok=True)
                named = f" (commit {commit})" if commit else ""
                header = (
                    f"# read from github.com/{repo} at release {version}{named}: "
                    f"{rel} of the PyPI wheel {wheel.name}\n"
                )
                target.write_text(header + text, encoding="utf-8")
                written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--root", type=Path, required=True)
    args = parser.parse_args(argv)
    for path in lay_out(args.wheels, args.root):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
