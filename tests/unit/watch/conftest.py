"""Real processes for the watch tests: small Python programs that write, block, compute,
launch "ranks" (processes with RANK in their environment) or exit, each in its own session,
its whole process group killed at teardown."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

Start = Callable[..., subprocess.Popen[bytes]]

# A program that writes a line every 0.1 s for WRITE_S seconds into the file it is
# given, then blocks for good; "ready" on stdout once it has started writing.
WRITER = textwrap.dedent(
    """
    import sys, threading, time
    path, seconds = sys.argv[1], float(sys.argv[2])
    with open(path, "a") as out:
        print("ready", flush=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            out.write("step\\n"); out.flush(); time.sleep(0.1)
    threading.Event().wait()
    """
)

# Blocks for good (a rank stuck in a wait), once it said "ready".
BLOCKER = 'import threading\nprint("ready", flush=True)\nthreading.Event().wait()\n'

# Computes for good at a varying depth of recursion (its main thread is somewhere else
# at almost every sample, as a training step's Python is). 400 depths, not 60: on a loaded
# machine a stall period may hold only two samples, and two at one depth by chance (1 in
# 60 per period) read as nothing moved.
COMPUTE = textwrap.dedent(
    """
    import random

    def walk(depth):
        if depth:
            return walk(depth - 1)
        return sum(i * i for i in range(2000))

    print("ready", flush=True)
    while True:
        walk(random.randrange(400))
    """
)

# A launcher: after DELAY seconds it starts N "ranks" (a Python that blocks) with their
# own RANK, through a shell (the ranks are its grandchildren), then waits for them.
LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    delay, n = float(sys.argv[1]), int(sys.argv[2])
    print("ready", flush=True)
    time.sleep(delay)
    procs = []
    for i in range(n):
        env = dict(os.environ, RANK=str(i), LOCAL_RANK=str(i), WORLD_SIZE=str(n))
        rank = [sys.executable, "-c", "import threading; threading.Event().wait()"]
        procs.append(subprocess.Popen(["sh", "-c", 'exec "$0" "$@"', *rank], env=env))
    for p in procs:
        p.wait()
    """
)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """start(program_text, *args, env=None): a started program, once it said "ready"."""
    started: list[subprocess.Popen[bytes]] = []

    def run(program: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        script = tmp_path / f"program{len(started)}.py"
        script.write_text(program)
        clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
        proc = subprocess.Popen(
            [sys.executable, str(script), *args], stdout=subprocess.PIPE,
            env={**clean, **(env or {})}, start_new_session=True,
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        return proc

    yield run
    for proc in started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
