"""The stage torch's own C++ check sites show: which function of which torch release holds
the line a c10d message prints, and whether that function sets a communicator or the
store up or runs collectives.

    python scripts/catalog/torch_stages.py --torch <git mirror with pytorch's release tags> \\
        --gloo /work/.mirror/facebookincubator+gloo/repo

Writes ``hangdoc/analyzer/parsers/catalog/data/stages/torch.json``, read by
``parsers/catalog/torch_stages.py``. torch prints the place of a failure in several
messages: ``NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, …``
(the ``C10D_NCCL_CHECK`` macros of NCCLUtils.hpp, ``__FILE__:__LINE__`` of the check),
``Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:672`` (a
c10::Error's source location: a ``TORCH_CHECK``, ``C10_THROW_ERROR``…), the place glog
and c10's logging put before a line (``[W socket.cpp:426] …``, ``[E ProcessGroupNCCL.cpp:
828] …``), and gloo's ``[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection
closed by peer`` (``GLOO_ENFORCE`` and ``GLOO_THROW_IO_EXCEPTION``). The table holds, for
each of those files and each line where a release has such a call, the enclosing function
and the releases in which that line is that call.

Which torch releases it reads is what a mirror holds: pytorch/pytorch itself is too big
to bring here whole, and the search index holds single files of forks at development
commits, not releases; the one fork that could be brought with its history and tags
(jasperzhong/swift) holds the tags of releases 1.0.0–1.9.0. Lines printed by 1.10 and
later are therefore not in the table, and their lookups say nothing. gloo's pair.cc is
read at the gloo commit each of those releases pins (``third_party/gloo``).

Which stage a function belongs to is a meaning given by people (``stage_of`` below). Not
copied: the sources themselves; the table holds names and numbers only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import csource
from catalog.sources import BlobReader, git
from catalog.stages import runs

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "hangdoc" / "analyzer" / "parsers" / "catalog" / "data" / "stages" / "torch.json"

# c10d's files whose places torch's messages print, under either of the two folders c10d
# has lived in (torch/lib/c10d until 1.9, torch/csrc/distributed/c10d since).
_C10D_FILES = (
    "ProcessGroupNCCL.cpp",
    "NCCLUtils.hpp",
    "NCCLUtils.cpp",
    "Utils.hpp",
    "TCPStore.cpp",
    "socket.cpp",
    "ProcessGroupGloo.cpp",
)
_C10D_DIRS = ("torch/lib/c10d", "torch/csrc/distributed/c10d")
_GLOO_FILES = ("gloo/transport/tcp/pair.cc",)
_RELEASE_TAG = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")

# Calls that print their own place: the NCCL checks (C10D_NCCL_CHECK and its
# _NONBLOCKING/_TIMEOUT forms, C10D_NCCL_ASSERT), c10's checks and errors (TORCH_CHECK*,
# TORCH_INTERNAL_ASSERT*, AT_ERROR, C10_THROW_ERROR, C10D_THROW_ERROR, TORCH_WARN*),
# c10d's socket checks (SYSCHECK*), logging (LOG(…), C10D_WARNING/ERROR/INFO…), gloo's
# GLOO_ENFORCE* and GLOO_THROW*.
_PLACED_CALL = re.compile(
    r"\b(?:C10D_NCCL_\w+|TORCH_CHECK\w*|TORCH_INTERNAL_ASSERT\w*|AT_ERROR|AT_ASSERT\w*"
    r"|C10_THROW_ERROR|C10D_THROW_ERROR|TORCH_WARN\w*|SYSCHECK\w*|LOG|VLOG|LOG_IF"
    r"|C10D_(?:WARNING|ERROR|INFO|DEBUG|CHECK)|GLOO_ENFORCE\w*|GLOO_THROW\w*|GLOO_ERROR)\s*\("
)

SETUP, DATA = "setup", "data"

# A communicator's creation and the exchange of its unique id through the store
# (ProcessGroupNCCL's getNCCLComm, broadcastUniqueNCCLID, NCCLComm::create and split),
# the store's and its socket's connection (TCPStore's constructors and connect, socket.cpp's
# connect and listen), gloo's pairs connecting: all run while a process group is set up.
_SETUP_FUNCTIONS = re.compile(
    r"^(?:getNCCLComm|broadcastUniqueNCCLID|getNcclId|initNCCLComm|create|split|createNCCLComm"
    r"|ncclCommInitRank\w*|connect\w*|tcpConnect|listen\w*|tryListen|tryConnect\w*"
    r"|waitForWorkers|validate|handleConnected|handleListening|waitUntilConnected"
    r"|TCPStore|ProcessGroupNCCL|ProcessGroupGloo)$"
)
# What runs once collectives run: the launch of a collective is not here (a collective's
# first launch may connect NCCL's peers on first use: either stage); the watchdog's
# checks of work in flight, a work's wait and its timeout, gloo's reads and writes of a
# connected pair are.
_DATA_FUNCTIONS = re.compile(
    r"^(?:checkTimeout|ncclCommWatchdog\w*|workCleanupLoop|watchdogHandler|checkForNCCLErrors\w*"
    r"|handleNCCLGuard|handleException|synchronizeInternal|wait|isCompleted|finishedGPUExecution"
    r"|read|write|handleRead\w*|handleWrite\w*|readComplete|writeComplete|send|recv|sendNotify\w*"
    r"|recvNotify\w*|signalException|signalAndThrowException|heartbeatMonitor|runHookLoop)$"
)
# Names that mean a stage only in some files: ``create``/``split`` are NCCLComm's there;
# ``read``/``write``/``send``/``recv`` are a collective's only in gloo's pair, ``wait`` only
# in a process group (a store's wait and recv serve the rendezvous and barriers too).
_SETUP_ONLY_IN = {
    "create": ("NCCLUtils.hpp", "NCCLUtils.cpp"),
    "split": ("NCCLUtils.hpp", "NCCLUtils.cpp"),
}
_DATA_ONLY_IN = {
    **{
        name: ("pair.cc",)
        for name in ("read", "write", "send", "recv", "handleReadWrite", "readComplete")
    },
    "wait": ("ProcessGroupNCCL.cpp", "ProcessGroupGloo.cpp"),
}


def stage_of(file: str, function: str) -> str:
    """The stage a function of c10d (or gloo's pair) runs in: set-up, data, or "" (either,
    or a helper both call: Utils.hpp's sendBytes/recvBytes serve the store in both)."""
    name = function.split("::")[-1]
    base = file.rsplit("/", 1)[-1]
    if not name or name.startswith("#define"):
        return ""
    if _SETUP_FUNCTIONS.match(name):
        only = _SETUP_ONLY_IN.get(name)
        return SETUP if only is None or base in only else ""
    if _DATA_FUNCTIONS.match(name):
        only = _DATA_ONLY_IN.get(name)
        return DATA if only is None or base in only else ""
    return ""


def _placed(clean: str) -> list[tuple[int, int]]:
    """(line, offset) of each call that prints its place, with the lines its arguments run
    on (``__LINE__`` of a macro spread over lines is that of its last line with GCC, of its
    first with others: the table keeps both)."""
    out: list[tuple[int, int]] = []
    for m in _PLACED_CALL.finditer(clean):
        start = m.start()
        first = clean.count("\n", 0, start) + 1
        parsed = csource.balanced_args(clean, m.end() - 1)
        end = parsed[1] if parsed is not None else start
        last = clean.count("\n", 0, max(end, start)) + 1
        for line in range(first, min(last, first + 6) + 1):
            out.append((line, start))
    return out


def release_tags(repo: Path) -> list[tuple[str, str]]:
    """(version, tag) of every release tag, in version order."""
    found: list[tuple[tuple[int, int, int], str]] = []
    for tag in git(repo, "tag", "--list", "v*").split():
        m = _RELEASE_TAG.match(tag)
        if m:
            found.append(((int(m[1]), int(m[2]), int(m[3])), tag))
    return [(".".join(map(str, v)), tag) for v, tag in sorted(found)]


def _blob(repo: Path, ref: str, path: str) -> str | None:
    line = git(repo, "ls-tree", ref, "--", path).strip()
    if not line:
        return None
    meta = line.split("\t", 1)[0].split()
    return meta[2] if meta[1] in {"blob", "commit"} else None


def extract(torch_repo: Path, gloo_repo: Path | None) -> dict[str, object]:
    tags = release_tags(torch_repo)
    where: dict[str, dict[int, dict[str, set[str]]]] = {}
    provenance: dict[str, dict[str, str]] = {}
    cache: dict[str, list[tuple[int, str]]] = {}

    def add(reader: BlobReader, sha: str, file: str, version: str) -> None:
        if sha not in cache:
            clean = csource.blank_comments(reader.read(sha))
            spans = csource.function_spans(clean)
            cache[sha] = [
                (line, csource.enclosing(spans, offset)) for line, offset in _placed(clean)
            ]
        for line, function in cache[sha]:
            if function and not function.startswith("#define"):
                by_fn = where.setdefault(file, {}).setdefault(line, {})
                by_fn.setdefault(function, set()).add(version)

    reader = BlobReader(torch_repo)
    gloo_reader = BlobReader(gloo_repo) if gloo_repo is not None else None
    try:
        for version, tag in tags:
            ref = f"refs/tags/{tag}"
            commit = git(torch_repo, "rev-list", "-n", "1", ref).strip()
            provenance[version] = {"tag": tag, "commit": commit}
            for folder in _C10D_DIRS:
                for name in _C10D_FILES:
                    sha = _blob(torch_repo, ref, f"{folder}/{name}")
                    if sha is not None:
                        add(reader, sha, name, version)
            gloo_commit = _blob(torch_repo, ref, "third_party/gloo")
            if gloo_reader is None or gloo_repo is None or gloo_commit is None:
                continue
            provenance[version]["gloo"] = gloo_commit
            for path in _GLOO_FILES:
                try:
                    sha = _blob(gloo_repo, gloo_commit, path)
                except subprocess.CalledProcessError:  # the mirror lacks that commit
                    sha = None
                if sha is not None:
                    add(gloo_reader, sha, path.rsplit("/", 1)[-1], version)
    finally:
        reader.close()
        if gloo_reader is not None:
            gloo_reader.close()
    # Releases before c10d (0.x) hold none of these files: left out.
    held = {
        v
        for lines in where.values()
        for by_fn in lines.values()
        for vs in by_fn.values()
        for v in vs
    }
    versions = [v for v, _ in tags if v in held]
    provenance = {v: provenance[v] for v in versions}
    files: dict[str, object] = {}
    for file in sorted(where):
        lines = where[file]
        functions = sorted({f for by_fn in lines.values() for f in by_fn})
        index = {f: i for i, f in enumerate(functions)}
        files[file] = {
            "functions": [[f, stage_of(file, f)] for f in functions],
            "lines": {
                str(line): [[index[f], runs(versions, vs)] for f, vs in sorted(by_fn.items())]
                for line, by_fn in sorted(lines.items())
            },
        }
    return {
        "project": "torch",
        "source": {
            "repository": "github.com/pytorch/pytorch (release tags, as a fork holds them)",
            "mirror": "github.com/jasperzhong/swift (a fork with pytorch's history and tags)",
            "read": "c10d's ProcessGroupNCCL.cpp, NCCLUtils.hpp/.cpp, Utils.hpp, TCPStore.cpp, "
            "socket.cpp, ProcessGroupGloo.cpp of each release tag, and gloo's "
            "transport/tcp/pair.cc at the commit each release pins: the lines of the calls "
            "that print their place (C10D_NCCL_CHECK, TORCH_CHECK, C10_THROW_ERROR, LOG, "
            "SYSCHECK, GLOO_ENFORCE…)",
            "not_held": "releases after 1.9.0: no mirror here holds their tags",
            "generator": "scripts/catalog/torch_stages.py",
            "stages": "by function, scripts/catalog/torch_stages.py stage_of (people's meaning)",
        },
        "versions": versions,
        "releases": provenance,
        "files": files,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", type=Path, required=True, help="a git mirror with torch's tags")
    parser.add_argument("--gloo", type=Path, help="a git mirror of facebookincubator/gloo")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    table = extract(args.torch, args.gloo)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(table, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(f"{args.out}: {len(table['files'])} files", file=sys.stderr)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
