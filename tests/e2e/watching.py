"""Run the real ``hangdoc watch`` beside a scenario job, as a user would start it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangdoc.scenarios.launch import ScenarioJob


@dataclass
class WatchProcess:
    proc: subprocess.Popen[bytes]
    out: Path  # watch's --out
    log: Path  # its stdout and stderr
    started: float  # POSIX time it was started

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def reports(self) -> list[Path]:
        return sorted(self.out.glob("hang-*/hang.json"), key=lambda p: int(p.parent.name[5:]))

    def wait_report(self, count: int = 1, timeout: float = 180.0) -> dict[str, Any]:
        """hang.json of the ``count``-th report, once it is written."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.reports()
            if len(found) >= count:
                doc: dict[str, Any] = json.loads(found[count - 1].read_text())
                return doc
            if self.proc.poll() is not None:
                raise AssertionError(f"watch exited ({self.proc.returncode})\n{self.output()}")
            time.sleep(0.2)
        raise AssertionError(f"no report {count} within {timeout:g} s\n{self.output()}")

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"watch did not end within {timeout:g} s\n{self.output()}"
            ) from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_watch(tmp_path: Path, *args: str) -> WatchProcess:
    out = tmp_path / "watch"
    log = tmp_path / "watch.out"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hangdoc", "watch", "--out", str(out), *args],
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
    return WatchProcess(proc, out, log, time.time())


def hung_at(job: ScenarioJob) -> float:
    """When the job hung: the last ready marker (each rank writes it just before the call
    that blocks)."""
    return max(p.stat().st_mtime for p in job.ready_dir.glob("ready-*"))


def pids_text(job: ScenarioJob) -> str:
    return ",".join(str(p.pid) for p in job.procs)
