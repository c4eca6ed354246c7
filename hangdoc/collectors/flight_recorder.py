"""Flight recorder retrieval for ``hangdoc collect``, one rank at a time.

Sources, in order of preference (FORMATS.md §5, §4), each recorded as a manifest step:

1. ``file``: dumps the job already wrote — ``<prefix><rank>`` with the prefix from the
   rank's environment (TORCH_FR_DUMP_TEMP_FILE, then its older name
   TORCH_NCCL_DEBUG_INFO_TEMP_FILE, then torch's defaults), host-prefixed names
   included. A file older than the process is an earlier run's and is skipped.
2. ``worker_server``: a live dump from torch's own per-rank worker server (HTTP over
   the unix socket in TORCH_WORKER_SERVER_SOCKET).
3. ``debug_server``: the same server as ``torch.distributed.debug`` runs it, on a TCP
   port the rank wrote into the job's store (``torch_debug``).
4. ``hook``: hangdoc's in-process hook (``hangdoc.hook``), which also returns
   all-thread stacks (faulthandler) and a CUDA memory summary; those are fetched from
   the hook even when the flight recorder itself came from a file.

Paths are tried as the collector sees them and then through ``/proc/<pid>/root`` (the
target's own mount namespace: a container's /tmp). Nothing here signals the job; every
socket has a timeout; nothing raises.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hangdoc.collectors.dumpformat import StepRecord, StepStatus
from hangdoc.collectors.extras import ExtraContext, register
from hangdoc.collectors.hook_client import (
    HookArtifact,
    ask_hook,
    hook_socket_candidates,
    http_over_tcp,
    http_over_unix,
    resolve,
)
from hangdoc.collectors.torch_debug import DebugServerUnavailable, find_worker_server
from hangdoc.common.atomic import write_bytes_atomic

__all__ = [
    "HookArtifact",
    "ask_hook",
    "collect_flight_recorder",
    "dump_prefixes",
    "matches_rank",
    "process_start_time",
]

STEP = "flight_recorder"
MAX_FILE_BYTES = 512 * 1024 * 1024
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_WORKER_HANDLERS = (("fr_trace_json", "json"), ("dump_nccl_trace_json", "nccl.json"))


@dataclass(slots=True)
class _Run:
    ctx: ExtraContext
    deadline: float
    records: list[StepRecord]

    def remaining(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def step(
        self,
        source: str,
        status: StepStatus,
        reason: str | None,
        began: float,
        file: str | None = None,
    ) -> None:
        target = self.ctx.target
        self.records.append(
            {
                "step": f"{STEP}:{source}",
                "status": status,
                "rank": target.rank,
                "pid": target.pid,
                "sample": None,
                "reason": reason,
                "duration_s": round(time.monotonic() - began, 3),
                "file": file,
            }
        )

    def write(self, name: str, data: bytes) -> str:
        path = self.ctx.rank_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
        return (
            str(path.relative_to(self.ctx.dump_dir))
            if _is_under(path, self.ctx.dump_dir)
            else str(path)
        )


@register(STEP)
def collect_flight_recorder(ctx: ExtraContext) -> list[StepRecord]:
    """Fetch the rank's flight recorder (and the hook's extras); never raises."""
    run = _Run(ctx=ctx, deadline=time.monotonic() + ctx.timeout_s, records=[])
    got_fr = False
    sources = (
        ("file", _from_files),
        ("worker_server", _from_worker_server),
        ("debug_server", _from_debug_server),
    )
    for source, fetch in sources:
        began = time.monotonic()
        if got_fr:
            run.step(source, "skipped", "flight recorder already retrieved", began)
            continue
        try:
            got_fr = fetch(run)
        except Exception as exc:  # a collector must never raise
            run.step(source, "failed", f"{type(exc).__name__}: {exc}", began)
    began = time.monotonic()
    try:
        _from_hook(run, want_fr=not got_fr)
    except Exception as exc:
        run.step("hook", "failed", f"{type(exc).__name__}: {exc}", began)
    return run.records


# --- 1. files the job wrote ------------------------------------------------------------


def dump_prefixes(env: dict[str, str]) -> list[str]:
    """Where torch writes FR dumps for this environment, most specific first."""
    out: list[str] = []
    for name in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
        if env.get(name):
            out.append(env[name])
    home = env.get("HOME")
    cache = env.get("XDG_CACHE_HOME") or (f"{home}/.cache" if home else "/tmp/.cache")
    out.append(f"{cache}/torch/comm_lib_trace_rank_")
    if home:
        out.append(f"{home}/.cache/torch/comm_lib_trace_rank_")
    out.append("/tmp/nccl_trace_rank_")
    return list(dict.fromkeys(out))


def matches_rank(name: str, base: str, rank: int) -> bool:
    """``<base><rank>``, or ``<base><host>_<rank>`` (a host baked into the name)."""
    if not name.startswith(base):
        return False
    rest = re.sub(r"\.(json|pkl|pickle)$", "", name[len(base) :])
    if rest == str(rank):
        return True
    return rest.endswith(str(rank)) and not rest[: -len(str(rank))][-1:].isdigit() and rest != ""


def _candidates(run: _Run) -> list[Path]:
    target = run.ctx.target
    env = target.env
    found: list[Path] = []
    dynamic = env.get("TORCH_FR_DUMP_DYNAMIC_FILE_NAME") == "1"
    for prefix in dump_prefixes(env):
        roots: tuple[str, ...]
        if os.path.isabs(prefix):
            roots = ("", f"/proc/{target.pid}/root")
        else:  # relative to the job's working directory
            roots = (f"/proc/{target.pid}/cwd/",)
        base = os.path.basename(prefix)
        for root in roots:  # the first root where the path exists is the job's view
            if dynamic and prefix == env.get("TORCH_FR_DUMP_TEMP_FILE"):
                exact = Path(root + prefix)
                if exact.is_file():
                    found.append(exact)
                    break
            parent = os.path.dirname(prefix)
            directory = Path(root + parent) if root or parent else None
            if target.rank is None or directory is None or not directory.is_dir():
                continue
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            found.extend(directory / n for n in names if matches_rank(n, base, target.rank))
            break
        if found:
            break  # the first prefix that has files is the one this job uses
    return found


def _from_files(run: _Run) -> bool:
    began = time.monotonic()
    candidates = _candidates(run)
    if not candidates:
        run.step("file", "skipped", "no flight recorder file at the job's dump prefix", began)
        return False
    started = process_start_time(run.ctx.target.pid)
    fresh: list[tuple[float, Path]] = []
    for path in candidates:
        stat = path.stat()
        if started is not None and stat.st_mtime < started - 1:
            run.step("file", "skipped", f"{path} predates the process (an earlier run)", began)
        elif stat.st_size > MAX_FILE_BYTES:
            run.step("file", "skipped", f"{path} is {stat.st_size} bytes, over the cap", began)
        else:
            fresh.append((stat.st_mtime, path))
    if not fresh:
        return False
    _, newest = max(fresh)
    name = "flight_recorder.file." + _SAFE_NAME.sub("_", newest.name)
    written = run.write(name, newest.read_bytes())
    run.step("file", "ok", f"copied {newest}", began, file=written)
    return True


def process_start_time(pid: int) -> float | None:
    """POSIX start time of ``pid`` from /proc (boot time + start ticks)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return None


# --- 2. torch's worker server ----------------------------------------------------------


def _from_worker_server(run: _Run) -> bool:
    began = time.monotonic()
    target = run.ctx.target
    configured = target.env.get("TORCH_WORKER_SERVER_SOCKET")
    if not configured:
        run.step("worker_server", "skipped", "the job runs no torch worker server", began)
        return False
    path = resolve(configured, target.pid)
    if path is None:
        run.step("worker_server", "failed", f"socket {configured} does not exist", began)
        return False
    return _ask_worker_server(
        run,
        "worker_server",
        configured,
        lambda endpoint: http_over_unix(path, endpoint, run.remaining()),
    )


def _from_debug_server(run: _Run) -> bool:
    """The worker server ``torch.distributed.debug.start_debug_server()`` runs (TCP)."""
    began = time.monotonic()
    try:
        address = find_worker_server(run.ctx.target.env, min(run.remaining(), 3.0))
    except DebugServerUnavailable as why:
        run.step("debug_server", "skipped" if why.skipped else "failed", str(why), began)
        return False

    def post(endpoint: str) -> tuple[int, bytes]:
        # the address the rank wrote (its host name), then this node's loopback: the
        # server listens on every interface, and hangdoc runs on the rank's node
        last: OSError | None = None
        for host in dict.fromkeys((address.host, "127.0.0.1", "::1")):
            try:
                return http_over_tcp(host, address.port, endpoint, run.remaining())
            except OSError as exc:
                last = exc
        assert last is not None
        raise last

    return _ask_worker_server(run, "debug_server", address.url, post)


def _ask_worker_server(
    run: _Run, source: str, where: str, post: Callable[[str], tuple[int, bytes]]
) -> bool:
    """Fetch the FR handlers from a torch worker server; each answer a step."""
    got = False
    for handler, suffix in _WORKER_HANDLERS:
        began = time.monotonic()
        try:
            status, body = post(f"/handler/{handler}")
        except OSError as exc:
            run.step(
                source, "failed", f"{handler} from {where}: {type(exc).__name__}: {exc}", began
            )
            return got
        if status == 200 and body:
            written = run.write(f"flight_recorder.{source}.{suffix}", body)
            run.step(source, "ok", f"{handler} from {where}", began, file=written)
            got = True
        elif handler == _WORKER_HANDLERS[0][0]:
            reason = f"{handler}: HTTP {status}: {body[:200].decode(errors='replace')}"
            run.step(source, "failed", reason, began)
    return got


# --- 3. hangdoc's own hook -------------------------------------------------------------

_HOOK_OUTPUT = {
    "fr_trace.json": "flight_recorder.hook.json",
    "fr_trace_nccl.json": "flight_recorder.hook.nccl.json",
    "faulthandler.txt": "faulthandler.hook.txt",
    "cuda_memory.txt": "cuda_memory.hook.txt",
    "info.json": "hook_info.json",
}


def _from_hook(run: _Run, *, want_fr: bool) -> None:
    began = time.monotonic()
    target = run.ctx.target
    paths = hook_socket_candidates(target.pid, target.env)
    if not paths:
        run.step(
            "hook",
            "skipped",
            "no hangdoc hook in this process (see docs/flight_recorder.md)",
            began,
        )
        return
    want = ["info", "stacks", "cuda"] + (["fr"] if want_fr else [])
    try:
        artifacts = ask_hook(paths[0], want, run.remaining())
    except ConnectionRefusedError:
        # A socket file nobody listens on: left by an earlier, killed process that had
        # this pid (SIGKILL skips the hook's cleanup). This process runs no hook.
        run.step("hook", "skipped", f"stale hook socket {paths[0]} (nobody listens)", began)
        return
    except (OSError, ValueError) as exc:
        run.step("hook", "failed", f"{paths[0]}: {type(exc).__name__}: {exc}", began)
        return
    artifacts = _fold_stacks(artifacts, run.ctx.rank_dir)
    for artifact in artifacts:
        out_name = _HOOK_OUTPUT.get(artifact.name)
        if out_name is None:
            continue
        if artifact.error:
            run.step("hook", "failed", f"{artifact.name}: {artifact.error}", began)
            continue
        written = run.write(out_name, artifact.data)
        run.step("hook", "ok", f"{artifact.name} from {paths[0]}", began, file=written)
    if want_fr and not any(a.name.startswith("fr_trace") and not a.error for a in artifacts):
        run.step(
            "hook", "failed", "the hook returned no flight recorder (torch not loaded?)", began
        )


def _fold_stacks(artifacts: list[HookArtifact], rank_dir: Path) -> list[HookArtifact]:
    """Keep the hook's stacks out of the analysed samples when py-spy took some.

    The hook's faulthandler text is the rank's stacks when py-spy could not attach (no
    ptrace permission, a container). Next to py-spy samples it would be one more sample
    from another tool, at another moment, naming functions differently (no qualified
    names): a stack that "moved" although the rank did not. So it then goes into
    hook_info.json (key ``faulthandler``), kept for people, not read as a sample.
    """
    if not any(rank_dir.glob("pyspy.*.json")):
        return artifacts
    stacks = next((a for a in artifacts if a.name == "faulthandler.txt" and not a.error), None)
    info = next((a for a in artifacts if a.name == "info.json" and not a.error), None)
    if stacks is None or info is None:
        return artifacts
    try:
        doc = json.loads(info.data)
    except ValueError:
        return artifacts
    if not isinstance(doc, dict):
        return artifacts
    doc["faulthandler"] = stacks.data.decode("utf-8", errors="replace")
    merged = HookArtifact("info.json", json.dumps(doc, indent=1).encode(), None)
    return [merged if a is info else a for a in artifacts if a is not stacks]


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True
