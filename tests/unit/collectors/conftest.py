"""Live target processes for the collector tests.

Each target is a real Python process that says "ready" on its stdout once it is blocked
in a recognisable function, so a test waits on that line, never on a sleep. Every
target runs in its own session and its whole process group is killed at teardown.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from hangdoc.collectors import procfs, pyspy

READY_TIMEOUT_S = 30.0
FAKE_HF_TOKEN = "hf_" + "Zq8rT2" * 6  # shaped like an HF token, valid nowhere
FAKE_HUB_TOKEN = "s3cr3t-hub-token-value-9f8e7d"

TARGET = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys, threading

    def worker_loop(started):
        started.set()
        threading.Event().wait()

    def save_checkpoint():
        threading.Event().wait()

    def spin_forever():
        while True:
            pass

    if __name__ == "__main__":
        mode = sys.argv[1]
        sys.stderr.write("hello\\n")
        sys.stderr.flush()
        if mode == "worker":
            ctx = mp.get_context("fork")
            started = ctx.Event()
            ctx.Process(target=worker_loop, args=(started,), daemon=True).start()
            started.wait()
        print("ready", flush=True)
        spin_forever() if mode == "busy" else save_checkpoint()
    """
)

# A stand-in for torchrun: its command line names torch.distributed.run, it starts
# ranks with their own RANK/LOCAL_RANK, and says ready once they all are.
LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, threading
    target, n = sys.argv[1], int(sys.argv[4])
    children = []
    for i in range(n):
        env = dict(os.environ, RANK=str(i), LOCAL_RANK=str(i), WORLD_SIZE=str(n),
                   LOCAL_WORLD_SIZE=str(n), GROUP_RANK="0", TORCHELASTIC_RUN_ID="test")
        children.append(subprocess.Popen([sys.executable, target, "plain"], env=env,
                                          stdout=subprocess.PIPE))
    for child in children:
        assert child.stdout.readline().strip() == b"ready"
    print("ready " + " ".join(str(c.pid) for c in children), flush=True)
    threading.Event().wait()
    """
)


@dataclass
class Target:
    proc: subprocess.Popen[bytes]
    ready_line: str
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


class Spawn(Protocol):
    def __call__(
        self,
        mode: str = "plain",
        *,
        rank: int | None = None,
        env: dict[str, str] | None = None,
        launcher_ranks: int = 0,
    ) -> Target: ...


def rank_env(rank: int, world_size: int = 4) -> dict[str, str]:
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        "HF_TOKEN": FAKE_HF_TOKEN,
        "TORCH_HUB_TOKEN": FAKE_HUB_TOKEN,
        "NCCL_DEBUG": "INFO",
    }


def _wait_ready(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
    assert ready, f"target {proc.pid} did not get ready in {READY_TIMEOUT_S}s"
    line = proc.stdout.readline().decode().strip()
    assert line.startswith("ready"), f"target {proc.pid} said {line!r}"
    return line


def _wait_blocked(pid: int) -> None:
    """Wait until the target sleeps in a futex: past "ready", inside its blocking call.

    "ready" is printed just before the target blocks, so a sample taken at once could
    still see it running the line in between.
    """
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        st = procfs.read_stat(pid)
        wchan = Path(f"/proc/{pid}/wchan").read_text() if st is not None else ""
        if st is not None and st.state == "S" and ("futex" in wchan or wchan.strip() in ("", "0")):
            return
        assert time.monotonic() < deadline, f"target {pid} never blocked (state {st})"
        time.sleep(0.005)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start targets; kill each one's process group (target, workers, ranks) at teardown."""
    target_py = tmp_path / "target.py"
    target_py.write_text(TARGET)
    launcher_py = tmp_path / "fake_launcher.py"
    launcher_py.write_text(LAUNCHER)
    started: list[subprocess.Popen[bytes]] = []

    def start(
        mode: str = "plain",
        *,
        rank: int | None = None,
        env: dict[str, str] | None = None,
        launcher_ranks: int = 0,
    ) -> Target:
        full_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
        if rank is not None:
            full_env.update(rank_env(rank))
        full_env.update(env or {})
        if launcher_ranks:
            cmd = [
                sys.executable,
                str(launcher_py),
                str(target_py),
                "-m",
                "torch.distributed.run",
                str(launcher_ranks),
            ]
        else:
            cmd = [sys.executable, str(target_py), mode, "--hf-token", FAKE_HF_TOKEN]
        stderr_path = tmp_path / f"target{len(started)}.err"
        with stderr_path.open("wb") as err:
            proc = subprocess.Popen(
                cmd, env=full_env, stdout=subprocess.PIPE, stderr=err, start_new_session=True
            )
        started.append(proc)
        line = _wait_ready(proc)
        if mode != "busy" and not launcher_ranks:
            _wait_blocked(proc.pid)
        return Target(proc, line, stderr_path)

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # our own child's group only
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="session")
def pyspy_exe() -> Path:
    """py-spy, or skip: stack tests need it (and ptrace rights, which root has)."""
    exe = pyspy.find_pyspy()
    if exe is None:
        pytest.skip("py-spy is not installed")
    return exe


@pytest.fixture
def fake_secrets() -> tuple[str, ...]:
    """The secret values every target carries; none may appear in a dump."""
    return (FAKE_HF_TOKEN.removeprefix("hf_"), FAKE_HUB_TOKEN)


@pytest.fixture
def unprivileged_pyspy(tmp_path: Path, pyspy_exe: Path) -> Path:
    """A py-spy that runs as user nobody: ptrace on our (root) targets is denied to it."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to drop privileges")
    wrapper = tmp_path / "py-spy-nobody"
    wrapper.write_text(
        f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {pyspy_exe} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper
