"""Which processes on this node are ranks of the job.

Two ways in, both resolved to :class:`~hangdoc.collectors.extras.RankTarget`:

* ``--pid P``: P itself, unless P is a launcher, in which case the ranks it launched.
* ``--all``: every process whose start environment has RANK or LOCAL_RANK, minus
  hangdoc itself and its ancestors, launchers, and subprocesses of a rank.

A *launcher* (torchrun's agent, torch.distributed.launch, a wrapper script) is a process
with children whose RANK / LOCAL_RANK / GROUP_RANK differ from its own: it gave them
their identity. A rank's dataloader workers inherit its values unchanged, which is how
a worker is told apart from a rank. Whether the agent itself carries RANK does not
matter (Kubernetes' PyTorchJob sets RANK to the node rank on the agent's pod). The
command line (``torchrun``, ``torch.distributed.run``) is only a hint, used to explain
an agent whose ranks are all gone.

The rank numbers come from /proc/PID/environ: the environment the process was started
with, which is where torchrun, Slurm and Kubernetes operators put them. Ranks that set
RANK from Python after start (``mp.spawn`` programs) are invisible to the scan; name
them with ``--pid``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hangdoc.collectors import procfs
from hangdoc.collectors.extras import RankTarget
from hangdoc.errors import CollectionError, UsageError

RANK_ENV_NAMES: tuple[str, ...] = ("RANK", "LOCAL_RANK")
# Rank identity: a subprocess that inherits these unchanged belongs to the same rank; a
# child whose values differ from its parent's was launched as a rank by that parent.
_IDENTITY_ENV_NAMES: tuple[str, ...] = ("RANK", "LOCAL_RANK", "GROUP_RANK")
LAUNCHER_MARKERS: tuple[str, ...] = (
    "torchrun",
    "torch.distributed.run",
    "torch.distributed.launch",
)

HOW_PID = "pid"
HOW_AGENT_CHILD = "torchrun-agent-child"
HOW_ENV_SCAN = "env-scan"


class _GoneError(CollectionError):
    """A pid named with --pid has exited (or is a zombie): fatal only if all have."""


@dataclass(frozen=True, slots=True)
class DiscoveredRank:
    """A target plus what the manifest records about how it was found."""

    target: RankTarget
    how_found: str
    local_world_size: int | None
    group_rank: int | None
    start_ticks: int | None  # identifies the process beyond its pid (reuse guard)
    note: str | None = None  # why the rank is unknown, when it is


@dataclass(frozen=True, slots=True)
class Discovery:
    ranks: list[DiscoveredRank]
    notes: list[str]  # things the person should know (skipped launchers, unknown ranks)


def parse_pid_args(values: Iterable[str]) -> list[int]:
    """``--pid`` values, each a pid or a comma-separated list, deduplicated in order."""
    pids: list[int] = []
    for value in values:
        parts = [part.strip() for part in value.split(",")]
        if not any(parts):
            raise UsageError(f"--pid {value!r}: no process id given")
        for part in parts:
            if not part:
                continue  # tolerate "1,2," from shell loops
            if not part.isdigit() or int(part) <= 0:
                raise UsageError(
                    f"--pid {value!r}: {part!r} is not a process id",
                    help_text="Give positive integers: --pid 1234 --pid 1235, or --pid 1234,1235.",
                )
            if int(part) not in pids:
                pids.append(int(part))
    return pids


def discover(pids: Iterable[int] = (), *, scan_all: bool = False) -> Discovery:
    """Resolve explicit pids and/or an environment scan into ranks, sorted by rank."""
    pids = list(pids)
    if not pids and not scan_all:
        raise UsageError(
            "no process to inspect",
            help_text="Name the ranks with --pid PID (a torchrun agent's pid works), or use --all.",
        )
    host = socket.gethostname()
    table = procfs.process_table()
    envs = _EnvCache()
    notes: list[str] = []
    found: dict[int, DiscoveredRank] = {}
    gone: list[CollectionError] = []
    for pid in pids:
        try:
            resolved = _resolve_pid(pid, table, envs, host, notes)
        except _GoneError as exc:
            # One rank that exited must not cost the others' dump: said, and skipped.
            gone.append(exc)
            notes.append(f"{exc} before collection started; not collected")
            continue
        for rank in resolved:
            found.setdefault(rank.target.pid, rank)
    if gone and not found and not scan_all:
        raise (
            gone[0]
            if len(gone) == 1
            else CollectionError(
                "none of the processes exists any more: "
                + ", ".join(str(p) for p in pids)
                + " (they have exited)",
                help_text=gone[0].help_text,
            )
        )
    if scan_all:
        for rank in _scan(table, envs, host, notes):
            found.setdefault(rank.target.pid, rank)
    if scan_all and not found:
        raise CollectionError(
            "no rank process found: no process on this node has RANK or LOCAL_RANK in its "
            "environment" + (f" ({'; '.join(notes)})" if notes else ""),
            help_text=(
                "Run hangdoc on a node of the job, as root or as the job's user; or name "
                "the processes with --pid PID."
            ),
        )
    ranks = sorted(found.values(), key=_sort_key)
    return Discovery(ranks=ranks, notes=notes)


def looks_like_launcher(cmdline: list[str]) -> bool:
    """A torchrun / torch.distributed.run / torch.distributed.launch command line."""
    return any(marker in word for word in cmdline for marker in LAUNCHER_MARKERS)


class _EnvCache:
    """Environments read lazily: a scan reads each at most once."""

    def __init__(self) -> None:
        self._envs: dict[int, dict[str, str] | None] = {}
        self.errors: dict[int, str] = {}

    def get(self, pid: int) -> dict[str, str] | None:
        if pid not in self._envs:
            try:
                self._envs[pid] = procfs.read_environ(pid)
            except OSError as exc:
                self._envs[pid] = None
                self.errors[pid] = f"cannot read /proc/{pid}/environ: {exc.strerror or exc}"
        return self._envs[pid]

    def has_rank_env(self, pid: int) -> bool:
        env = self.get(pid)
        return env is not None and any(name in env for name in RANK_ENV_NAMES)


def _resolve_pid(
    pid: int, table: Mapping[int, procfs.Stat], envs: _EnvCache, host: str, notes: list[str]
) -> list[DiscoveredRank]:
    st = table.get(pid) or procfs.read_stat(pid)
    if st is None or st.state in ("Z", "X"):
        raise _GoneError(
            f"process {pid} does not exist" + (" (it has exited)" if st is not None else ""),
            help_text=f"Check it with `ps -p {pid} -o pid,stat,cmd`; the rank may have exited. "
            "Use --all to find the ranks that are still running.",
        )
    if pid == os.getpid():
        raise UsageError(f"process {pid} is hangdoc itself")
    workers = _launched_ranks(pid, table, envs)
    cmdline = procfs.read_cmdline(pid) or []
    if workers:
        return [_make_rank(w, envs, host, HOW_AGENT_CHILD, table) for w in workers]
    if looks_like_launcher(cmdline):
        notes.append(
            f"pid {pid} looks like a torchrun agent but has no worker process with RANK or "
            "LOCAL_RANK; inspecting the agent itself"
        )
    return [_make_rank(pid, envs, host, HOW_PID, table)]


def _launched_ranks(pid: int, table: Mapping[int, procfs.Stat], envs: _EnvCache) -> list[int]:
    """Children of ``pid`` that it launched as ranks (their rank identity differs from its)."""
    mine = _identity(envs.get(pid))
    return [
        child
        for child in procfs.children(table, pid)
        if envs.has_rank_env(child) and _identity(envs.get(child)) != mine
    ]


def _identity(env: Mapping[str, str] | None) -> tuple[str | None, ...]:
    env = env or {}
    return tuple(env.get(name) for name in _IDENTITY_ENV_NAMES)


def _scan(
    table: Mapping[int, procfs.Stat], envs: _EnvCache, host: str, notes: list[str]
) -> list[DiscoveredRank]:
    me = os.getpid()
    excluded = {me, *procfs.ancestors(table, me)}
    candidates = {
        pid
        for pid, st in table.items()
        if pid not in excluded and st.state not in ("Z", "X") and envs.has_rank_env(pid)
    }
    launchers = {pid for pid in candidates if _launched_ranks(pid, table, envs)}
    for pid in sorted(launchers):
        notes.append(f"skipped pid {pid}: a launcher (torchrun agent) of rank processes")
    ranks: list[DiscoveredRank] = []
    for pid in sorted(candidates - launchers):
        owners = [a for a in procfs.ancestors(table, pid) if a in candidates - launchers]
        if owners:
            continue  # a subprocess of rank owners[0] (dataloader worker...), not a rank
        ranks.append(_make_rank(pid, envs, host, HOW_ENV_SCAN, table))
    unreadable = len(envs.errors)
    if unreadable and os.geteuid() != 0:
        notes.append(
            f"{unreadable} processes' environments could not be read (not root); "
            "ranks of other users are not listed"
        )
    return ranks


def _make_rank(
    pid: int, envs: _EnvCache, host: str, how: str, table: Mapping[int, procfs.Stat]
) -> DiscoveredRank:
    env = envs.get(pid)
    note: str | None = None
    if env is None:
        note = envs.errors.get(pid, "environment unreadable")
    elif not any(name in env for name in RANK_ENV_NAMES):
        note = "no RANK or LOCAL_RANK in the process environment"
    env = env or {}
    st = table.get(pid)
    return DiscoveredRank(
        target=RankTarget(
            pid=pid,
            rank=_int(env.get("RANK")),
            local_rank=_int(env.get("LOCAL_RANK")),
            world_size=_int(env.get("WORLD_SIZE")),
            host=host,
            env=dict(env),
        ),
        how_found=how,
        local_world_size=_int(env.get("LOCAL_WORLD_SIZE")),
        group_rank=_int(env.get("GROUP_RANK")),
        start_ticks=st.start_ticks if st is not None else None,
        note=note,
    )


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _sort_key(rank: DiscoveredRank) -> tuple[int, int, int]:
    t = rank.target
    return (t.rank is None, t.rank if t.rank is not None else 0, t.pid)


# --- hangdoc watch: ranks that come and go (issue 22) -------------------------------------


@dataclass(frozen=True, slots=True)
class WatchScan:
    """One look at the node for ``hangdoc watch``: the ranks now, and the roots still alive."""

    ranks: list[DiscoveredRank]
    live_roots: list[int]  # the --pid processes that still run (a launcher may have no rank yet)
    notes: list[str]


def scan_for_watch(roots: Iterable[int] = (), *, scan_all: bool = False) -> WatchScan:
    """The rank processes under each root pid, and every rank on the node with ``scan_all``.

    Unlike :func:`discover`, made to be repeated while a job starts, restarts and ends:
    nothing raises, a root that is gone is simply not in ``live_roots``, and a launcher
    without ranks yet (torchrun's agent, a shell script, srun) gives none, not itself. A
    root's ranks are found at any depth (a shell script that runs torchrun, which starts
    the workers); a root that launched no rank but carries RANK or LOCAL_RANK is a rank
    itself; a Python program with no rank identity anywhere (``mp.spawn``) is watched
    with its Python subprocesses. An ``srun`` root stands for the ranks of its job on this
    node: srun's tasks are children of slurmstepd, not of srun, so they are the rank
    processes whose SLURM_JOB_ID is srun's.
    """
    host = socket.gethostname()
    table = procfs.process_table()
    envs = _EnvCache()
    notes: list[str] = []
    found: dict[int, DiscoveredRank] = {}
    live: list[int] = []
    scanned: list[DiscoveredRank] | None = None
    for root in roots:
        st = table.get(root)
        if st is None or st.state in ("Z", "X"):
            continue
        live.append(root)
        cmdline = procfs.read_cmdline(root) or []
        if cmdline and cmdline[0].rsplit("/", 1)[-1] == "srun":
            job = (envs.get(root) or {}).get("SLURM_JOB_ID")
            if scanned is None:
                scanned = _scan(table, envs, host, [])
            pids = [
                d.target.pid for d in scanned if job and d.target.env.get("SLURM_JOB_ID") == job
            ]
        else:
            pids = _launched_deep(root, table, envs)
            if not pids and envs.has_rank_env(root):
                pids = [root]
            elif not pids and _plain_python(root, cmdline):
                # No rank identity anywhere (mp.spawn sets RANK from Python): the process
                # and its Python subprocesses are the job.
                pids = [root, *procfs.python_descendants(table, root)]
        for pid in pids:
            how = HOW_PID if pid == root else HOW_AGENT_CHILD
            found.setdefault(pid, _make_rank(pid, envs, host, how, table))
    if scan_all:
        for rank in scanned if scanned is not None else _scan(table, envs, host, notes):
            found.setdefault(rank.target.pid, rank)
    return WatchScan(sorted(found.values(), key=_sort_key), live, notes)


def _plain_python(pid: int, cmdline: list[str]) -> bool:
    """A Python interpreter that is not a known launcher (torchrun and its modules)."""
    exe = procfs.read_exe(pid) or (cmdline[0] if cmdline else "")
    return "python" in exe.rsplit("/", 1)[-1] and not looks_like_launcher(cmdline)


def _launched_deep(root: int, table: Mapping[int, procfs.Stat], envs: _EnvCache) -> list[int]:
    """Descendants of ``root`` launched as ranks: a process with a rank identity of its own
    (not its parent's); below a rank only its workers follow, so the walk stops there,
    unless that process launched ranks itself (an agent that carries the node's RANK)."""
    by_parent: dict[int, list[int]] = {}
    for pid, st in table.items():
        by_parent.setdefault(st.ppid, []).append(pid)
    ranks: list[int] = []
    queue = sorted(by_parent.get(root, []))
    while queue:
        pid = queue.pop(0)
        st = table[pid]
        if st.state in ("Z", "X"):
            continue
        launched = envs.has_rank_env(pid) and _identity(envs.get(pid)) != _identity(
            envs.get(st.ppid)
        )
        if launched and not _launched_ranks(pid, table, envs):
            ranks.append(pid)
            continue
        queue.extend(sorted(by_parent.get(pid, [])))
    return ranks
