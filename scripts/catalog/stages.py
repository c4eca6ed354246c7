"""The stage NCCL's own source lines show: which function of which release each line that
NCCL prints with its place sits in, and whether that function sets a communicator up or
moves data.

    python scripts/catalog/stages.py --nccl /work/.mirror/NVIDIA+nccl/repo

Writes ``hangdoc/analyzer/parsers/catalog/data/stages/nccl.json``, read by
``parsers/catalog/stages.py``. NCCL prints a source place on two kinds of lines: a WARN
(``transport/net_ib.cc:1295 NCCL WARN …``) and the return code each caller logs as a
failure unwinds (``transport/net.cc:853 -> 2``, the ``NCCLCHECK`` family of
src/include/checks.h, ``__FILE__:__LINE__``). The table holds, for each file of ``src/``
and each line where a release has such a call, the enclosing function and the releases in
which that line is that call (a log's line can only come from a release with a call
there, so the lines of one chain narrow the releases it came from).

Which stage a function belongs to is a meaning given by people, by family (``stage_of``
below): the set-up of a communicator and its connections, the data path, or neither (a
helper both call: socket I/O, memory registration, the library wrappers); a function of
the enqueue files that its name leaves to neither is set-up where the sources show only
set-up functions calling it, in every release (``setup_only_callees``: the kernels'
set-up, ncclInitKernelsForDevice, called by init.cc alone). Not copied:
the sources themselves; the table holds names and numbers only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import csource
from catalog.nccl import release_tags
from catalog.sources import BlobReader, git, ranges, tree

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "hangdoc" / "analyzer" / "parsers" / "catalog" / "data" / "stages" / "nccl.json"

# Calls that print their own place: WARN (debug.h prints __FILE__:__LINE__ before the
# message), the checks of include/checks.h that log "file:line -> rc" (NCCLCHECK,
# NCCLCHECKGOTO, NCCLWAIT, SYSCHECK, EQCHECK, …; CUDACHECK and CUCHECK WARN with the
# caller's place) and the few INFO calls that print "-> %d" themselves.
_PLACED_CALL = re.compile(
    r"\b(?:WARN|[A-Z]*CHECK[A-Z]*|NCCLWAIT[A-Z]*)\s*\(|\bINFO\s*\([^;]*->\s*%d", re.S
)
_SUFFIXES = (".cc", ".cu", ".h", ".hpp", ".c", ".cpp", ".cuh")

# ---- what each function's stage is (people's meaning, by family) ----
SETUP, DATA = "setup", "data"

# Files that run only while a communicator is created or connected (also the parser's
# setup files, parsers/logs/nccl.py): creation, the bootstrap, the transports' connection
# set-up, channels, the topology.
_SETUP_FILES = re.compile(
    r"^(?:init\.cc|init\.cu|bootstrap\.cc|bootstrap\.cu|transport\.cc|transport\.cu"
    r"|channel\.cc|channel\.cu|graph/\w+\.(?:cc|h))$"
)
# Teardown and queries inside those files: neither stage.
_NOT_SETUP = re.compile(
    r"(?i)destroy|abort|free|finali[sz]e|reclaim|cleanup|close|dereg|getasyncerror|"
    r"commcount|cudevice|userrank|geterrorstring|getlasterror|revoke|shrink"
)
# A transport's or the network's connection set-up, wherever it is: connecting, listening,
# accepting, the proxies' set-up and connect handlers, device discovery and init, the
# queue pairs of IB brought up, the preconnect of a first collective (enqueue.cc).
_SETUP_NAME = re.compile(
    r"(?:^|[a-z_])(?:[Ss]etup|[Cc]onnect|[Ll]isten|[Aa]ccept|[Ii]nit|[Cc]reateQp|[Rr]trQp"
    r"|[Rr]tsQp|[Cc]anConnect|[Gg]etProperties|[Dd]evices|[Pp]reconnect|[Ff]indInterface"
    r"|[Gg]etAddrFromString|[Ii]nitCommDevBase)"
)
# The data path: the proxies' progress, the network's send, receive, flush and test
# calls, collectives enqueued and launched.
_DATA_NAME = re.compile(
    r"^(?:send|recv|shmSend|shmRecv|shmRecv|p2pSend|p2pRecv|ncclIb\w*|ncclGin\w*)\w*Progress\w*$"
    r"|^ncclIb(?:Isend|Irecv|Iflush|Test|MultiSend|PostFifo)$"
    r"|^ncclNetSocket(?:Isend|Irecv|Test)$"
    r"|^(?:progressOps|ncclProxyProgress|SaveProxy|ncclProxySaveOp|ncclProxyStart|ncclProxyPost"
    r"|ncclProxyAppend|ncclProxyGetPostedOps|doLaunches)$"
)
# Helpers both stages call: memory registration, socket I/O (the bootstrap's too), the
# library wrappers.
_NEUTRAL_NAME = re.compile(r"(?i)regmr|register|dereg|^wrap_|socketsend|socketrecv|socketwait")
_NEUTRAL_FILES = re.compile(r"^misc/|^include/|^os/|^plugin/|^ras/|^register/")
# What a collective's launch calls to connect its channels on first use (lazy connection).
_ENQUEUE_CONNECT = re.compile(r"[Pp]reconnect|[Cc]onnect")


def _enqueue_family(file: str) -> bool:
    """The files of a collective's enqueue and launch (and the collectives' entry points)."""
    enqueue = {"enqueue.cc", "enqueue.cu", "misc/enqueue.cu", "collectives.cc", "ce_coll.cc"}
    return file in enqueue or file.startswith(("collectives/", "rma/"))


def stage_of(file: str, function: str, setup_callees: frozenset[str] = frozenset()) -> str:
    """The stage a function of NCCL's ``src/`` runs in: set-up, data, or "" (either).
    ``setup_callees``: the enqueue files' functions that only set-up calls (see
    :func:`setup_only_callees`)."""
    name = function.split("::")[-1]
    if not name or name.startswith("#define") or _NEUTRAL_NAME.search(name):
        return ""
    if _SETUP_FILES.match(file):
        return "" if _NOT_SETUP.search(name) else SETUP
    if _enqueue_family(file):
        if _ENQUEUE_CONNECT.search(name) or name in setup_callees:
            return SETUP
        return "" if (_NOT_SETUP.search(name) or "Reg" in name or "Init" in name) else DATA
    if file == "group.cc" and _ENQUEUE_CONNECT.search(name):
        return SETUP
    if _DATA_NAME.search(name):
        return DATA
    helper_file = _NEUTRAL_FILES.match(file) and not file.startswith("misc/socket")
    if _NOT_SETUP.search(name) or helper_file:
        return ""
    if file == "proxy.cc":
        return SETUP if re.match(r"ncclProxyConnect|ncclProxyNewConnection|proxyConn", name) else ""
    if _SETUP_NAME.search(name) and file.startswith(("transport/", "misc/socket")):
        return SETUP
    return ""


def _left_to_neither(file: str, function: str) -> bool:
    """A function of the enqueue files that stage_of leaves to neither stage by its name
    alone ("Init" or "Reg" in it: a work element's registration, or the kernels' set-up)."""
    name = function.split("::")[-1]
    return (
        _enqueue_family(file)
        and bool(name)
        and not name.startswith("#define")
        and not _NEUTRAL_NAME.search(name)
        and not _NOT_SETUP.search(name)
        and stage_of(file, function) == ""
    )


def setup_only_callees(
    repo: Path, tags: list[tuple[str, str]], candidates: set[str]
) -> frozenset[str]:
    """Of ``candidates`` (functions of the enqueue files left to neither stage by name),
    those called, in every release that has them, only from set-up functions (stage_of):
    ncclInitKernelsForDevice, defined in enqueue.cc but called only by init.cc's
    communicator creation (ncclCommInitRankFunc, initTransportsRank…), which reads every
    kernel's attributes (cudaFuncGetAttributes, "Cuda failure 'named symbol not found'"
    where the build has no kernel for the GPU) before any collective. A function with no
    call found, or any call from a function of another stage or of none, is left as it was.
    """
    callers: dict[str, set[tuple[str, str]]] = {name: set() for name in candidates}
    spans_of: dict[tuple[str, str], tuple[str, list[tuple[int, int, str]]]] = {}
    for _version, tag in tags:
        for name in sorted(candidates):
            try:
                hits = git(repo, "grep", "-n", "-w", "-e", name, tag, "--", "src")
            except subprocess.CalledProcessError:
                continue  # (git grep exits 1 when nothing matches)
            for hit in hits.splitlines():
                _tag, path, _line, _text = hit.split(":", 3)
                if not path.endswith(_SUFFIXES):
                    continue
                if (tag, path) not in spans_of:
                    clean = csource.blank_comments(git(repo, "show", f"{tag}:{path}"))
                    spans_of[(tag, path)] = (clean, csource.function_spans(clean))
                clean, spans = spans_of[(tag, path)]
                for m in re.finditer(rf"\b{re.escape(name)}\s*\(", clean):
                    caller = csource.enclosing(spans, m.start())
                    if caller and caller.split("::")[-1] != name:
                        callers[name].add((path.removeprefix("src/"), caller))
    return frozenset(
        name
        for name, found in callers.items()
        if found and all(stage_of(file, caller) == SETUP for file, caller in found)
    )


def placed_lines(clean: str) -> list[tuple[int, int]]:
    """(first line, offset) of each call that prints its place, with the lines its
    arguments run on (``__LINE__`` of a call spread over lines is one of them)."""
    out: list[tuple[int, int]] = []
    for m in _PLACED_CALL.finditer(clean):
        start = m.start()
        first = clean.count("\n", 0, start) + 1
        depth, i = 0, clean.find("(", start)
        end = i
        while 0 <= i < len(clean):
            c = clean[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    end = i
                    break
            i += 1
        last = clean.count("\n", 0, max(end, start)) + 1
        for line in range(first, min(last, first + 3) + 1):
            out.append((line, start))
    return out


def runs(versions: list[str], present: set[str]) -> str:
    """'12-20,23': the releases as runs of indexes into ``versions`` (compact)."""
    return ",".join(
        part.replace("–", "-")
        for part in ranges(
            [str(i) for i in range(len(versions))],
            {str(i) for i, v in enumerate(versions) if v in present},
        ).split(", ")
    )


def extract(repo: Path) -> dict[str, object]:
    tags = release_tags(repo)
    versions = [v for v, _ in tags]
    reader = BlobReader(repo)
    # file -> line -> function -> versions
    where: dict[str, dict[int, dict[str, set[str]]]] = {}
    cache: dict[str, list[tuple[int, str]]] = {}
    try:
        for version, tag in tags:
            for path, sha in tree(repo, tag, "src", _SUFFIXES):
                if sha not in cache:
                    clean = csource.blank_comments(reader.read(sha))
                    spans = csource.function_spans(clean)
                    cache[sha] = [
                        (line, csource.enclosing(spans, offset))
                        for line, offset in placed_lines(clean)
                    ]
                file = path.removeprefix("src/")
                for line, function in cache[sha]:
                    if function.startswith("#define") or not function:
                        continue
                    where.setdefault(file, {}).setdefault(line, {}).setdefault(function, set()).add(
                        version
                    )
    finally:
        reader.close()
    candidates = {
        f.split("::")[-1]
        for file, lines in where.items()
        for by_fn in lines.values()
        for f in by_fn
        if _left_to_neither(file, f)
    }
    setup_callees = setup_only_callees(repo, tags, candidates)
    files: dict[str, object] = {}
    for file in sorted(where):
        # A file none of whose functions has a stage shows nothing: left out (its lines
        # would only narrow the releases; the lookup then narrows by the lines it holds).
        lines = where[file]
        if not any(stage_of(file, f, setup_callees) for by_fn in lines.values() for f in by_fn):
            continue
        functions = sorted({f for by_fn in lines.values() for f in by_fn})
        index = {f: i for i, f in enumerate(functions)}
        files[file] = {
            "functions": [[f, stage_of(file, f, setup_callees)] for f in functions],
            "lines": {
                str(line): [[index[f], runs(versions, vs)] for f, vs in sorted(by_fn.items())]
                for line, by_fn in sorted(lines.items())
            },
        }
    return {
        "project": "nccl",
        "source": {
            "repository": "github.com/NVIDIA/nccl",
            "read": "every release tag (the last build of each version), src/**: the lines "
            "of WARN and of the checks that log 'file:line -> rc' (src/include/checks.h)",
            "mirror_head": git(repo, "rev-parse", "HEAD").strip(),
            "generator": "scripts/catalog/stages.py",
            "stages": "by family, scripts/catalog/stages.py stage_of (people's meaning)",
        },
        "versions": versions,  # a line's releases are runs of indexes into this list
        "files": files,
    }


def write_table(
    doc: str, default: Path, extract: Callable[[Path], dict[str, object]], counted: str
) -> int:
    """The command line of a table generated from an NCCL mirror (this module's, and
    nvls_multicast.py's): ``--nccl`` and ``--out``, the table written as one JSON line, how
    many of ``counted`` it holds said on stderr."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--nccl", type=Path, required=True, help="a git mirror of NVIDIA/nccl")
    parser.add_argument("--out", type=Path, default=default)
    args = parser.parse_args()
    table = extract(args.nccl)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(table, ensure_ascii=False, separators=(",", ":"))
    args.out.write_text(text + "\n", encoding="utf-8")
    held = table[counted]
    print(
        f"{args.out}: {len(held) if isinstance(held, dict | list) else 0} {counted}",
        file=sys.stderr,
    )
    return 0


def main() -> int:
    return write_table(__doc__, OUT, extract, "files")


if __name__ == "__main__":
    raise SystemExit(main())
