"""Run a scenario, collect it with the real ``hangdoc`` command, analyze it, return the JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangdoc.scenarios.launch import launch


@dataclass
class LiveResult:
    findings: dict[str, Any]
    dump: Path
    collect_output: str
    analyze_output: str
    job_pids: list[int]

    def collected_pids(self) -> set[int]:
        manifest = json.loads((self.dump / "manifest.json").read_text())
        return {int(r["pid"]) for r in manifest["ranks"]}


def hangdoc(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hangdoc", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_live(
    tmp_path: Path,
    scenario: str,
    world_size: int = 4,
    *,
    torchrun: bool = False,
    use_all: bool = False,
    interval: float = 1.0,
    samples: int = 2,
) -> LiveResult:
    dump = tmp_path / "dump"
    with launch(scenario, world_size, tmp_path / "job", torchrun=torchrun) as job:
        job.wait_ready()
        if use_all:
            target = ["--all"]
        elif torchrun:
            assert job.agent is not None
            target = ["--pid", str(job.agent.pid)]
        else:
            alive = [p.pid for p in job.procs if p.poll() is None]
            target = ["--pid", ",".join(map(str, alive))]
        collected = hangdoc(
            "collect", *target, "--out", str(dump), "--samples", str(samples),
            "--interval", str(interval),
        )  # fmt: skip
        logs = job.logs_tail()
        job_pids = job.rank_pids()
    assert collected.returncode == 0, collected.stdout + collected.stderr + logs
    out_json = tmp_path / "findings.json"
    analyzed = hangdoc(
        "analyze", str(dump), "--json", str(out_json), "--html", str(tmp_path / "report.html")
    )
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    return LiveResult(
        findings=json.loads(out_json.read_text()),
        dump=dump,
        collect_output=collected.stdout + collected.stderr,
        analyze_output=analyzed.stdout + analyzed.stderr,
        job_pids=job_pids,
    )
