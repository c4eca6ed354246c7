"""Fixtures of the reliability tests: live targets that say when they are blocked, and
fake py-spy programs that misbehave in each way a real one can.

Every target runs in its own session; teardown kills its process group (ours only).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability.stats import write_stats

READY_TIMEOUT_S = 30.0

# A rank stand-in: RANK in its environment, "ready" on stdout once blocked in a frame
# named save_checkpoint. Every catchable signal it receives is logged to a file (argv 2).
# With a third argument, a thread ticks every millisecond and logs each gap longer than
# 2 ms between ticks (with its end time): how long the process was paused, measured by
# the process itself.
TARGET = textwrap.dedent(
    """
    import os, signal, sys, threading, time

    log = open(sys.argv[2], "a", buffering=1) if len(sys.argv) > 2 else None

    def on_signal(signum, frame):
        if log:
            log.write(f"signal {signum}\\n")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1,
                signal.SIGUSR2, signal.SIGCONT, signal.SIGALRM, signal.SIGPIPE):
        signal.signal(sig, on_signal)

    def ticker(path):
        last = time.perf_counter()
        with open(path, "a", buffering=1) as out:
            while True:
                time.sleep(0.001)
                now = time.perf_counter()
                gap, last = now - last, now
                if gap > 0.002:
                    out.write(f"{time.time():.6f} {gap:.6f}\\n")

    def save_checkpoint():
        threading.Event().wait()

    if __name__ == "__main__":
        if len(sys.argv) > 3:
            threading.Thread(target=ticker, args=(sys.argv[3],), daemon=True).start()
        print("ready", flush=True)
        save_checkpoint()
    """
)


@dataclass
class Target:
    proc: subprocess.Popen[bytes]
    signal_log: Path
    tick_log: Path | None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signals_received(self) -> list[str]:
        return self.signal_log.read_text().split("\n")[:-1] if self.signal_log.exists() else []


Spawn = Callable[..., Target]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start rank stand-ins; each is killed (its own process group) at teardown."""
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    started: list[subprocess.Popen[bytes]] = []

    def start(rank: int = 0, *, env: dict[str, str] | None = None, timing: bool = False) -> Target:
        n = len(started)
        signal_log = tmp_path / f"signals{n}.log"
        tick_log = tmp_path / f"ticks{n}.log" if timing else None
        full_env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": "4", **(env or {})}  # fmt: skip
        cmd = [sys.executable, str(script), "run", str(signal_log)]
        if tick_log is not None:
            cmd.append(str(tick_log))
        proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, start_new_session=True)
        started.append(proc)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        assert ready and proc.stdout.readline().strip() == b"ready", "target never got ready"
        return Target(proc, signal_log, tick_log)

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


FAKE_PYSPY = {
    # Crashes the way a broken binary does: killed by SIGSEGV, a few bytes out.
    "segfault": 'echo "partial" ; kill -SEGV $$',
    # Exits 0 but prints something that is not JSON.
    "garbage": 'printf "\\x00\\xff not json at all {{{{"',
    # Never answers: stuck on its own (as an attach to a hung process can be).
    "hang": "exec sleep 600",
    # Floods stdout forever.
    "flood": "exec yes hangdoc-flood",
    # Valid JSON, wrong shape.
    "wrong-json": 'echo \'{"not": "a list of threads"}\'',
    # Not allowed to run at all.
    "not-executable": None,
}


@pytest.fixture
def fake_pyspy(tmp_path: Path) -> Callable[[str], Path]:
    """A fake ``py-spy`` of a given misbehaviour (``--version`` answers normally)."""

    def make(kind: str) -> Path:
        path = tmp_path / f"py-spy-{kind}"
        body = FAKE_PYSPY[kind]
        path.write_text(
            "#!/bin/sh\n"
            'if [ "$1" = "--version" ]; then echo "py-spy 0.0-fake"; exit 0; fi\n'
            + (body or "exit 0")
            + "\n"
        )
        path.chmod(0o644 if body is None else 0o755)
        return path

    return make


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    write_stats()
