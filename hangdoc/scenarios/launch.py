"""Start a scenario job as N real processes and know when every rank is blocked.

Each rank runs in its own session so that ``stop()`` can kill it with its dataloader
workers; stdout/stderr go to files (as under a batch scheduler), which also lets
``hangdoc collect`` see output grow in a job that is alive.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

# Ranks that never become ready, per scenario: the culprit of "killed" dies instead.
_DIES = {"killed", "crash-at-startup", "worker-segfault"}
# A process left over from an earlier run, started before the ranks (job.py's HELPERS),
# per scenario: no process of the job, and older than it.
LEFTOVERS = {"flock-stale": "leftover-cache-builder", "fused-kernels": "interrupted-kernel-build"}
# How much older than the job a leftover is (in the field: minutes or hours).
LEFTOVER_AGE_S = 3.0
# Variables the culprit's launch line does not export, per scenario (its node was started
# by a line of its own).
UNEXPORTED = {"slurm-init": ("MASTER_PORT",)}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (by /proc ppid), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for child in parents.get(current, []):
            out.append(child)
            frontier.append(child)
    return out


@dataclass
class ScenarioJob:
    scenario: str
    world_size: int
    workdir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    agent: subprocess.Popen[bytes] | None = None
    leftovers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ready_dir(self) -> Path:
        return self.workdir / "ready"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def rank_pids(self) -> list[int]:
        """Pids of the rank processes (under torchrun: the agent's worker children)."""
        if self.agent is None:
            return [p.pid for p in self.procs]
        pids = []
        for child in _children(self.agent.pid):
            try:
                environ = Path(f"/proc/{child}/environ").read_bytes()
            except OSError:
                continue
            if b"\0LOCAL_RANK=" in b"\0" + environ and _parent(child) == self.agent.pid:
                pids.append(child)
        return sorted(pids)

    def live_rank_pids(self) -> set[int]:
        """Pids of the rank processes still running now."""
        if self.agent is None:
            return {p.pid for p in self.procs if p.poll() is None}
        return {pid for pid in self.rank_pids() if Path(f"/proc/{pid}").exists()}

    def expected_ready(self) -> list[int]:
        culprit = self.world_size - 1
        if self.scenario in _DIES:
            return [r for r in range(self.world_size) if r != culprit]
        return list(range(self.world_size))

    def wait_ready(self, ranks: Iterable[int] | None = None, timeout: float = 120.0) -> None:
        """Block until every rank wrote its ready marker; fail fast if a rank died early."""
        wanted = list(self.expected_ready() if ranks is None else ranks)
        deadline = time.monotonic() + timeout
        while True:
            missing = [r for r in wanted if not (self.ready_dir / f"ready-{r}").exists()]
            if not missing:
                break
            dead = self._unexpected_exits()
            if dead:
                raise RuntimeError(f"scenario {self.scenario}: {dead}\n{self.logs_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"scenario {self.scenario}: ranks {missing} not ready after {timeout}s\n"
                    + self.logs_tail()
                )
            time.sleep(0.05)
        if self.scenario in _DIES:
            self._wait_culprit_dead(deadline)

    def _wait_culprit_dead(self, deadline: float) -> None:
        culprit = self.world_size - 1
        while time.monotonic() < deadline:
            if self.agent is None and self.procs[culprit].poll() is not None:
                return
            if self.agent is not None and len(self.rank_pids()) < self.world_size:
                return
            time.sleep(0.05)
        raise TimeoutError(f"scenario {self.scenario}: rank {culprit} did not die")

    def _unexpected_exits(self) -> str:
        if self.agent is not None:
            code = self.agent.poll()
            return "" if code is None else f"torchrun agent exited with {code}"
        culprit = self.world_size - 1
        for index, proc in enumerate(self.procs):
            code = proc.poll()
            if code is not None and not (self.scenario in _DIES and index == culprit):
                return f"rank {index} exited with {code}"
        return ""

    def logs_tail(self, limit: int = 3000) -> str:
        parts = []
        for path in sorted(self.log_dir.glob("*")):
            text = path.read_text(errors="replace")[-limit:]
            if text.strip():
                parts.append(f"--- {path.name}\n{text}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Kill every process of the job (ranks, workers, agent) and reap them."""
        roots = [p.pid for p in [*self.procs, *self.leftovers]]
        roots += [self.agent.pid] if self.agent else []
        victims: list[int] = []
        for root in roots:
            victims.extend(_children(root))
        for root in roots:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(root, signal.SIGKILL)
        for pid in [*victims, *roots]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for proc in [*self.procs, *self.leftovers, *([self.agent] if self.agent else [])]:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)

    def __enter__(self) -> ScenarioJob:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _start_leftover(job: ScenarioJob, cmd: list[str], env: dict[str, str]) -> None:
    """Start an earlier run's leftover and wait until it holds what it holds."""
    with (job.log_dir / "leftover.err").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, *cmd], env=env, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True,
        )  # fmt: skip
    job.leftovers.append(proc)
    deadline = time.monotonic() + 120.0
    while not (job.ready_dir / "ready-leftover").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            job.stop()
            raise RuntimeError(f"scenario {job.scenario}: the leftover did not start\n"
                               + job.logs_tail())  # fmt: skip
        time.sleep(0.05)
    time.sleep(LEFTOVER_AGE_S)


def launch(
    scenario: str,
    world_size: int,
    workdir: Path,
    *,
    torchrun: bool = False,
    extra_env: dict[str, str] | None = None,
) -> ScenarioJob:
    """Start the job; call ``wait_ready()`` next and ``stop()`` (or use ``with``) at the end."""
    job = ScenarioJob(scenario=scenario, world_size=world_size, workdir=workdir)
    job.ready_dir.mkdir(parents=True, exist_ok=True)
    job.log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "HANGDOC_READY_DIR": str(job.ready_dir),
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        **(extra_env or {}),
    }
    # Run a copy of the program as the user's own script (train.py), as in a real job:
    # its frames are user code, wherever hangdoc itself is installed.
    script = workdir / "train.py"
    here = Path(__file__).parent
    if scenario.startswith("own-"):
        # Scenarios under the job's own names (own_code.py) use job.py's helpers.
        shutil.copyfile(here / "own_code.py", script)
        shutil.copyfile(here / "job.py", workdir / "jobkit.py")
    else:
        shutil.copyfile(here / "job.py", script)
    job_cmd = [str(script), scenario]
    if scenario in LEFTOVERS:
        _start_leftover(job, [str(script), LEFTOVERS[scenario]], env)
    if torchrun:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
            "--nproc-per-node", str(world_size), "--master-addr", "127.0.0.1",
            "--master-port", str(port), *job_cmd,
        ]  # fmt: skip
        with (
            (job.log_dir / "agent.out").open("wb") as out,
            (job.log_dir / "agent.err").open("wb") as err,
        ):
            job.agent = subprocess.Popen(
                cmd, env=env, stdout=out, stderr=err, start_new_session=True
            )
        return job
    for rank in range(world_size):
        rank_env = {
            **env,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_WORLD_SIZE": str(world_size),
            "GROUP_RANK": "0",
        }
        if rank == world_size - 1:
            for name in UNEXPORTED.get(scenario, ()):
                rank_env.pop(name, None)
        with (
            (job.log_dir / f"rank{rank}.out").open("wb") as out,
            (job.log_dir / f"rank{rank}.err").open("wb") as err,
        ):
            job.procs.append(
                subprocess.Popen(
                    [sys.executable, *job_cmd],
                    env=rank_env,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            )
    return job
