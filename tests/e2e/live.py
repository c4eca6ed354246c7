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
    report: Path
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
    """A scenario's hang, collected and analyzed. A rank that was alive when the collection
    began and gone when it ended means the job did not hold its hang (a loaded machine can
    break a scenario's timing): that run is not evidence about the analyzer, so it is run
    once more, and a second break fails with both runs' job logs."""
    first = _collect_live(tmp_path / "run1", scenario, world_size, torchrun, use_all,
                          interval, samples)  # fmt: skip
    if isinstance(first, LiveResult):
        return first
    second = _collect_live(tmp_path / "run2", scenario, world_size, torchrun, use_all,
                           interval, samples)  # fmt: skip
    if isinstance(second, LiveResult):
        return second
    raise AssertionError(
        f"scenario {scenario}: the job broke during collection twice\n"
        f"-- first run --\n{first}\n-- second run --\n{second}"
    )


def _collect_live(
    tmp_path: Path,
    scenario: str,
    world_size: int,
    torchrun: bool,
    use_all: bool,
    interval: float,
    samples: int,
) -> LiveResult | str:
    """The analyzed run, or (when the job broke under the collection) why, with its logs."""
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
        running = job.live_rank_pids()
        collected = hangdoc(
            "collect", *target, "--out", str(dump), "--samples", str(samples),
            "--interval", str(interval),
        )  # fmt: skip
        gone = sorted(running - job.live_rank_pids())
        logs = job.logs_tail()
        job_pids = job.rank_pids()
    assert collected.returncode == 0, collected.stdout + collected.stderr + logs
    if gone:
        return f"rank pids {gone} exited during the collection\n{collected.stdout}\n{logs}"
    out_json = tmp_path / "findings.json"
    report = tmp_path / "report.html"
    analyzed = hangdoc("analyze", str(dump), "--json", str(out_json), "--html", str(report))
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    return LiveResult(
        findings=json.loads(out_json.read_text()),
        dump=dump,
        report=report,
        collect_output=collected.stdout + collected.stderr,
        analyze_output=analyzed.stdout + analyzed.stderr,
        job_pids=job_pids,
    )
