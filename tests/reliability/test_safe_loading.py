"""Safe loading: no code in input runs, no file is read whole, archives stay in their box.

* The product code never calls ``pickle.load``, ``eval``, ``exec``, ``torch.load``... on
  anything (an AST scan, so comments and strings do not count).
* A 10 GB (sparse) file of each format is loaded in bounded time and memory.
* Malicious pickles — reducers that would create a file, open a socket, import a module
  — are refused wherever they sit (a loose file, a dump, an archive), nothing happens,
  and the rest of the analysis goes on.
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import socket
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import InputKind
from tests.reliability.stats import count

ROOT = Path(__file__).resolve().parents[2]
# The package, and the folders that are its subpackages through symlinks (either way).
PRODUCT = {"hangdoc": ROOT / "hangdoc", **{f"hangdoc.{n}": ROOT / n for n in
           ("analyzer", "collectors", "rules")}}  # fmt: skip
BANNED_CALLS = {
    "eval", "exec", "compile", "__import__", "execfile", "input",
}  # fmt: skip
BANNED_ATTRS = {
    ("pickle", "load"), ("pickle", "loads"), ("pickle", "Unpickler"), ("cPickle", "loads"),
    ("marshal", "load"), ("marshal", "loads"), ("torch", "load"), ("yaml", "load"),
    ("yaml", "unsafe_load"), ("dill", "loads"), ("dill", "load"), ("shelve", "open"),
    ("os", "system"), ("os", "popen"), ("jsonpickle", "decode"), ("numpy", "load"),
    ("np", "load"), ("runpy", "run_path"), ("runpy", "run_module"), ("importlib", "import_module"),
}  # fmt: skip
# Where a banned name is legitimate, and why (by module). None of these sees input data.
ALLOWED = {
    ("hangdoc.common.safe_unpickle", "pickle.Unpickler"): "the restricted unpickler itself",
    ("hangdoc.hook", "runpy.run_path"): "runs the job's own script (`python -m hangdoc.hook`)",
    ("hangdoc.hook", "runpy.run_module"): "runs the job's own module",
    ("hangdoc.rules", "importlib.import_module"): "imports its own constant rule list",
    ("hangdoc.collectors.gpu", "importlib.import_module"): 'imports the constant "pynvml"',
    ("hangdoc.cli_exits", "importlib.import_module"): "imports click's exception modules "
    "by constant names (typer._click or click)",
    ("hangdoc.analyzer.summaries.codec", "exec"): "compiles decoders from dataclass field names",
    ("hangdoc.scenarios.job", "input"): "the login-prompt scenario's rank waits at a terminal "
    "prompt, as a tracker's login does: a recorded test job, it reads no user data",
}
FIXTURE_DUMP = ROOT / "fixtures" / "dumps" / "checkpoint"


def _product_files() -> dict[str, Path]:
    """Every product module by name, once, whichever side of the symlinks holds it."""
    files: dict[str, Path] = {}
    for package, base in PRODUCT.items():
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            name = ".".join([package, *parts]).removesuffix(".__init__")
            files.setdefault(name, path)
    return files


def _violations(path: Path, rel: str) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id if node.func.id in BANNED_CALLS else None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            pair = (node.value.id, node.attr)
            name = f"{pair[0]}.{pair[1]}" if pair in BANNED_ATTRS else None
        elif isinstance(node, ast.keyword) and node.arg == "shell":
            safe = isinstance(node.value, ast.Constant) and node.value.value is False
            name = None if safe else "shell=True"
        if name and (rel, name) not in ALLOWED:
            found.append(f"{rel}:{getattr(node, 'lineno', '?')}: {name}")
    return found


def test_no_product_code_deserialises_or_evaluates_input() -> None:
    files = _product_files()
    assert len(files) > 50  # the scan sees the package
    problems = [v for name, path in files.items() for v in _violations(path, name)]
    assert problems == []


def test_the_scan_would_catch_each_banned_call(tmp_path: Path) -> None:
    probe = tmp_path / "bad.py"
    probe.write_text(
        textwrap.dedent("""
        import pickle, os, subprocess
        pickle.loads(b"")
        eval("1")
        exec("x = 1")
        os.system("true")
        subprocess.run("true", shell=True)
    """)
    )
    names = sorted(v.rsplit(": ", 1)[1] for v in _violations(probe, "hangdoc.bad"))
    assert names == ["eval", "exec", "os.system", "pickle.loads", "shell=True"]


# --- 10 GB sparse files ---------------------------------------------------------------

TEN_GB = 10 * 1024**3
SPARSE_PROBE = textwrap.dedent(
    """
    import json, re, sys, time
    from pathlib import Path
    from hangdoc.analyzer.loading.loader import load_paths
    from hangdoc.errors import BadInputError
    out = {}
    for arg in sys.argv[1:]:
        began = time.monotonic()
        try:
            inputs = [(i.kind.value, i.error) for i in load_paths([Path(arg)]).inputs]
        except BadInputError as exc:
            inputs = [("refused", str(exc))]
        out[Path(arg).stem] = {"seconds": time.monotonic() - began, "inputs": inputs}
    # the probe's own peak (VmHWM; ru_maxrss would keep the parent's across fork and exec)
    status = open("/proc/self/status").read()
    rss_mb = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) // 1024
    print(json.dumps({"files": out, "rss_mb": rss_mb}))
    """
)
SPARSE_SEEDS = {
    "log": "fixtures/logs/recorded/missing_rank.log",
    "pyspy_json": "fixtures/dumps/checkpoint/rank0/pyspy.0.json",
    "pyspy_text": "tests/unit/parsers/samples/pyspy/dump.txt",
    "faulthandler": "tests/unit/parsers/samples/faulthandler_sigusr1.txt",
    "hangdoc_process": "fixtures/dumps/checkpoint/rank0/process.json",
    "flight_recorder_pickle": "fixtures/fr/torch_samples/fr_pickle/comm_lib_trace_rank_0",
    "flight_recorder_json": "fixtures/fr/torch_samples/fr_json/comm_lib_trace_rank_0.json",
}
# Address space for the probe: an interpreter with pandas maps ~1 GB before any input.
PROBE_ADDRESS_SPACE = 3 * 1024**3


def sparse_file(path: Path, seed: bytes, size: int = TEN_GB) -> Path:
    """``seed`` at the start and at the end of a ``size``-byte file that is a hole between."""
    with path.open("wb") as handle:
        handle.write(seed)
        handle.truncate(size)
        handle.seek(size - len(seed))
        handle.write(seed)
    return path


def run_bounded(
    code: str, *args: str, timeout: float = 60, memory: int = PROBE_ADDRESS_SPACE
) -> subprocess.CompletedProcess[str]:
    """A Python child with ``memory`` bytes of address space: reading 10 GB fails the
    child, not the host."""

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True,
        timeout=timeout, preexec_fn=limit, cwd=ROOT, check=False,
    )  # fmt: skip


def test_a_10gb_sparse_file_is_read_by_its_ends_never_whole(tmp_path: Path) -> None:
    # GIVEN a 10 GB file (a hole between a real head and tail) of each format
    paths = [
        sparse_file(tmp_path / f"{kind}.big", (ROOT / seed).read_bytes())
        for kind, seed in sorted(SPARSE_SEEDS.items())
    ]
    # WHEN each is loaded, in a child whose address space could not hold one
    done = run_bounded(SPARSE_PROBE, *map(str, paths))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    count("safe loading: 10 GB sparse files loaded", len(paths))
    # THEN each took seconds, memory stayed far below one file's size, each is listed
    assert set(result["files"]) == set(SPARSE_SEEDS)
    for kind, outcome in result["files"].items():
        assert outcome["seconds"] < 20, (kind, outcome)
        assert outcome["inputs"], kind
    assert result["rss_mb"] < 1500
    # one-document formats are refused by size, not read
    for kind in ("flight_recorder_pickle", "flight_recorder_json"):
        assert "512 MiB" in json.dumps(result["files"][kind]["inputs"])


LOG_PARSER_PROBE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hangdoc.analyzer.parsers.logs import LogParser
    parsed = LogParser().parse(Path(sys.argv[1]), "big.log")
    print(len(parsed.job_log_events), parsed.error)
    """
)


def test_log_parser_alone_reads_a_10gb_line_by_its_ends(tmp_path: Path) -> None:
    seed = (ROOT / SPARSE_SEEDS["log"]).read_bytes()
    path = sparse_file(tmp_path / "big.log", seed)
    done = run_bounded(LOG_PARSER_PROBE, str(path), timeout=90, memory=1024**3)
    assert done.returncode == 0, done.stderr[-2000:]


MEMO_BOMB_PROBE = textwrap.dedent(
    """
    import re, sys
    from hangdoc.common.safe_unpickle import safe_loads
    # PROTO 2, BININT1 1, LONG_BINPUT 2**28, STOP: ten bytes
    bomb = b"\\x80\\x02K\\x01r" + (1 << 28).to_bytes(4, "little") + b"."
    try:
        safe_loads(bomb)
    except Exception as exc:
        print(type(exc).__name__, file=sys.stderr)
    # This process's own peak (VmHWM): ru_maxrss keeps the parent's across fork and exec,
    # so it read the RSS of the pytest run that started the probe.
    status = open("/proc/self/status").read()
    print(int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) // 1024)
    """
)


def test_a_tiny_pickle_cannot_make_the_unpickler_allocate_gigabytes() -> None:
    done = subprocess.run([sys.executable, "-c", MEMO_BOMB_PROBE], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 500  # MB of peak memory for ten bytes of input
    assert "OversizedPickleError" in done.stderr


@pytest.mark.parametrize(
    "bomb",
    [
        pytest.param(b"\x80\x02K\x01p268435456\n.", id="PUT-text-index"),
        pytest.param(b"\x80\x02K\x01r" + (1 << 30).to_bytes(4, "little") + b".", id="LONG_BINPUT"),
        pytest.param(
            b"\x80\x03B" + (1 << 31).to_bytes(4, "little") + b"xx.", id="BINBYTES-claims-2GiB"
        ),
        pytest.param(
            b"\x80\x02X" + (0xFFFFFFF0).to_bytes(4, "little") + b"ab.", id="BINUNICODE-claims-4GiB"
        ),
    ],
)
def test_size_claims_in_a_pickle_are_refused_and_the_limit_restored(
    bomb: bytes, tmp_path: Path
) -> None:
    import resource

    from hangdoc.analyzer.parsers.flight_recorder import read_document
    from hangdoc.common.safe_unpickle import (
        OversizedPickleError,
        describe_load_error,
        safe_loads,
    )

    before = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(OversizedPickleError) as refused:
        safe_loads(bomb)
    assert "Nothing in it was executed" in describe_load_error(refused.value)
    path = tmp_path / "comm_lib_trace_rank_0"
    path.write_bytes(bomb)
    with pytest.raises(OversizedPickleError):
        read_document(path)
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_the_ceiling_keeps_a_tighter_limit_the_user_set() -> None:
    import resource

    from hangdoc.common.safe_unpickle import memory_ceiling

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    tight = 64 << 30 if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_AS, (tight, hard))
    try:
        with memory_ceiling(1 << 60):
            assert resource.getrlimit(resource.RLIMIT_AS) == (tight, hard)
        with memory_ceiling(1 << 20):
            assert resource.getrlimit(resource.RLIMIT_AS)[0] < tight
        assert resource.getrlimit(resource.RLIMIT_AS) == (tight, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# --- malicious pickles ------------------------------------------------------------------


class _Reducer:
    """Pickles as ``func(*args)``: what a hostile flight recorder file would carry."""

    def __init__(self, func: Callable[..., object], *args: object) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        return self.func, self.args


def _attacks(marker: Path, port: int, module: str) -> dict[str, object]:
    import builtins
    import importlib
    import shutil

    touch = f"open({str(marker)!r}, 'w').close()"
    return {
        "os.system-creates-file": _Reducer(os.system, f"touch {marker}"),
        "subprocess-creates-file": _Reducer(subprocess.Popen, ["touch", str(marker)]),
        "eval-creates-file": _Reducer(builtins.eval, touch),
        "exec-creates-file": _Reducer(builtins.exec, touch),
        "open-creates-file": _Reducer(open, str(marker), "w"),
        "socket-connects": _Reducer(socket.create_connection, ("127.0.0.1", port)),
        "import-runs-module": _Reducer(importlib.import_module, module),
        "dunder-import-runs-module": _Reducer(builtins.__import__, module),
        "rmtree-deletes": _Reducer(shutil.rmtree, str(marker.parent / "victim")),
    }


def _fr_shaped(payload: object) -> dict[str, object]:
    """A dump the FR sniffer accepts (its keys in the head), the payload in an entry."""
    return {"version": "2.10", "pg_config": {}, "entries": [
        {"record_id": 0, "profiling_name": "nccl:all_reduce", "collective_seq_id": 1,
         "x": payload}]}  # fmt: skip


def test_malicious_pickles_are_refused_everywhere_and_nothing_happens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a listening socket, a module that leaves a marker when imported, a victim dir
    marker = tmp_path / "pwned"
    (tmp_path / "victim").mkdir()
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    module = "hangdoc_evil_probe"
    (module_dir / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(module_dir))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    # AND every attack, at every pickle protocol, as a loose file, inside a dump and
    # inside an archive, next to one good py-spy file
    cases = tmp_path / "cases"
    cases.mkdir()
    dump = tmp_path / "dump"
    import shutil

    shutil.copytree(FIXTURE_DUMP, dump)
    archive = tmp_path / "attachments.tar.gz"
    tried = 0
    with tarfile.open(archive, "w:gz") as tar:
        for name, attack in _attacks(marker, port, module).items():
            for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
                data = pickle.dumps(_fr_shaped(attack), protocol=protocol)
                file = f"comm_lib_trace_rank_{tried % 4}.{name}.p{protocol}"
                (cases / file).write_bytes(data)
                (dump / "rank1" / f"flight_recorder.file.{file}").write_bytes(data)
                info = tarfile.TarInfo(f"att/{file}")
                info.size = len(data)
                import io

                tar.addfile(info, io.BytesIO(data))
                tried += 3
    good = ROOT / "fixtures" / "dumps" / "checkpoint" / "rank0" / "pyspy.0.json"
    # WHEN everything is loaded
    evidence = load_paths([cases, dump, archive, good])
    count("safe loading: malicious pickles tried", tried)
    # THEN nothing ran: no file, no connection, no import, nothing deleted
    assert not marker.exists()
    assert (tmp_path / "victim").is_dir()
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    assert module not in sys.modules
    # AND each sniffed pickle is an input with its reason; the rest was analyzed
    refused = [i for i in evidence.inputs if i.error and "refused" in i.error]
    protocols_sniffed = pickle.HIGHEST_PROTOCOL + 1 - 2  # protocols 0-1 have no FR header
    assert len(refused) >= len(_attacks(marker, port, module)) * protocols_sniffed * 3
    assert all(i.kind is InputKind.FLIGHT_RECORDER for i in refused)
    assert {0, 1, 2, 3} <= {p.rank for p in evidence.processes}
