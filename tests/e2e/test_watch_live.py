"""``hangdoc watch`` beside real jobs (gloo on CPU, py-spy as root), started with the job.

Each hang scenario trains a few steps first (it moves), then hangs for real; watch, given
the ranks' pids as they start, must write the report while the ranks are still alive
(their process-group timeout is 150 s), within 120 s of the hang, naming the right
category and culprit, and run --on-hang with the paths. When the job is gone, watch ends
by itself with status 5 (a hang was reported). A healthy slow job gets no report and
watch ends with 0; a job that hangs twice gets two reports. CI uses --stall-after 15;
scripts/bench_watch.py runs the same jobs with --stall-after 30 and prints the latencies.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from hangdoc.collectors.discovery import scan_for_watch
from hangdoc.collectors.extras import RankTarget
from hangdoc.collectors.procfs import read_environ as procfs_env
from hangdoc.collectors.watch.probes import FlightRecorderProbe
from hangdoc.errors import ExitStatus
from hangdoc.scenarios.launch import launch

from .watching import hung_at, pids_text, start_watch

pytestmark = pytest.mark.e2e

STALL_AFTER = "15"
ENV = {
    "HANGDOC_SCENARIO_TIMEOUT": "150",
    "HANGDOC_SCENARIO_WARMUP_STEPS": "6",
    "HANGDOC_SCENARIO_STEP_S": "0.5",
}
# Pages nobody: writes its arguments into the report folder.
ON_HANG = shlex.join([
    sys.executable, "-c",
    "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(' '.join(sys.argv[2:]))",
]) + " {dir}/paged.txt {category} {culprits} {md}"  # fmt: skip

HANGS = [
    # scenario, what hangs, category, culprits
    ("checkpoint", "stuck checkpoint writer", "checkpoint_save_hang", [3]),
    ("lock-deadlock", "lock deadlock", "python_deadlock_gil_or_lock", [3]),
    ("killed", "dead rank", "rank_dead_or_crashed", [3]),
    ("upload", "stuck upload", "io_or_filesystem_stall", [3]),
    ("upload-socket", "stuck upload (socket.sendall)", "io_or_filesystem_stall", [3]),
]


@pytest.mark.parametrize(("scenario", "what", "category", "culprits"), HANGS)
def test_watch_reports_a_live_hang_while_the_ranks_still_hang(
    tmp_path: Path, scenario: str, what: str, category: str, culprits: list[int]
) -> None:
    # GIVEN a job that trains, then hangs (its collective timeout: 150 s), watched from
    # its start
    with launch(scenario, 4, tmp_path / "job", extra_env=ENV) as job:
        watch = start_watch(
            tmp_path, "--pid", pids_text(job), "--stall-after", STALL_AFTER, "--on-hang", ON_HANG
        )
        job.wait_ready(timeout=240)
        # WHEN it hangs THEN the report comes while every surviving rank still hangs
        hang = watch.wait_report(timeout=150)
        alive = [p.poll() is None for p in job.procs]
        latency = hang["reported_at"] - hung_at(job)
    print(f"\n{what} ({scenario}): report {latency:.1f} s after the hang")
    expected_alive = [True] * 4 if scenario != "killed" else [True, True, True, False]
    assert alive == expected_alive, watch.output()
    assert latency < 120, watch.output()
    assert hang["verdict"] == "hang", hang
    assert (hang["category"], hang["culprit_ranks"]) == (category, culprits), hang
    folder = Path(hang["paths"]["json"]).parent
    assert {p.name for p in folder.iterdir()} >= {
        "dump", "report.html", "findings.json", "summary.md", "hang.json", "on-hang.log",
    }  # fmt: skip
    findings = json.loads((folder / "findings.json").read_text())
    assert findings["findings"][0]["category"] == category
    assert (folder / "paged.txt").read_text() == (
        f"{category} {','.join(map(str, culprits))} {folder / 'summary.md'}"
    )
    assert hang["on_hang"]["status"] == 0
    if scenario == "killed":
        # its exit status is read only if watch sees it before its parent reaps it
        assert [e["rank"] for e in hang["exited"]] == [3], hang
    # AND once the job is gone, watch ends by itself: a hang was reported
    assert watch.wait_exit(timeout=60) == ExitStatus.HANG_REPORTED, watch.output()
    output = watch.output()
    assert "HANG REPORTED" in output and str(folder) in output
    assert len(watch.reports()) == 1, output  # one hang, one report
    assert "Traceback" not in output


def test_a_launcher_pid_stands_for_ranks_that_start_later(tmp_path: Path) -> None:
    # GIVEN torchrun's agent, watched before it has started any worker
    with launch("checkpoint", 4, tmp_path / "job", torchrun=True, extra_env=ENV) as job:
        assert job.agent is not None
        watch = start_watch(tmp_path, "--pid", str(job.agent.pid), "--stall-after", STALL_AFTER)
        job.wait_ready(timeout=240)
        workers = set(job.rank_pids())
        # WHEN the job hangs THEN the report covers the workers the agent started
        hang = watch.wait_report(timeout=150)
    assert {r["pid"] for r in hang["ranks"]} == workers, hang
    assert (hang["category"], hang["culprit_ranks"]) == ("checkpoint_save_hang", [3])
    assert watch.wait_exit(timeout=60) == ExitStatus.HANG_REPORTED, watch.output()


def test_a_job_that_resumes_and_hangs_again_gets_a_new_report(tmp_path: Path) -> None:
    # GIVEN a job whose checkpoint write stalls 45 s, twice, with training in between
    env = {**ENV, "HANGDOC_SCENARIO_STALL_S": "45"}
    with launch("stall-twice", 4, tmp_path / "job", extra_env=env) as job:
        watch = start_watch(tmp_path, "--pid", pids_text(job), "--stall-after", STALL_AFTER)
        # THEN two reports, and watch ends by itself when the job finishes
        first = watch.wait_report(1, timeout=240)
        second = watch.wait_report(2, timeout=240)
        code = watch.wait_exit(timeout=120)
    assert code == ExitStatus.HANG_REPORTED, watch.output()
    for hang in (first, second):
        assert (hang["category"], hang["culprit_ranks"]) == ("checkpoint_save_hang", [3])
    assert second["quiet_since"] > first["reported_at"]
    output = watch.output()
    assert "the job moves again" in output and "the job ended" in output
    assert "Traceback" not in output


@pytest.mark.parametrize("scenario", ["slow", "slow-silent"])
def test_a_healthy_slow_job_gets_no_report(tmp_path: Path, scenario: str) -> None:
    # GIVEN a healthy job with slow, uneven steps (slow-silent prints nothing at all)
    env = {"HANGDOC_SCENARIO_STEP_S": "3"}
    with launch(scenario, 3, tmp_path / "job", extra_env=env) as job:
        watch = start_watch(tmp_path, "--pid", pids_text(job), "--stall-after", "10")
        job.wait_ready(timeout=240)
        # WHEN it is watched for a while (more than six stall periods)
        time.sleep(75)
        reports = watch.reports()
    # THEN no report, and watch ends by itself with 0 when the job is gone
    assert reports == [], watch.output()
    assert not list(watch.out.glob("hang-*")), watch.output()
    assert watch.wait_exit(timeout=60) == ExitStatus.OK, watch.output()
    assert "the job ended" in watch.output()
    assert "Traceback" not in watch.output()


def test_watch_all_takes_ranks_that_start_after_it(tmp_path: Path) -> None:
    # GIVEN watch --all started before the job
    watch = start_watch(tmp_path, "--all", "--stall-after", "60")
    try:
        time.sleep(2)
        with launch("slow", 2, tmp_path / "job") as job:
            job.wait_ready(timeout=240)
            pids = [p.pid for p in job.procs]
            # THEN it watches the job's ranks as they appear
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if all(f"(pid {pid}) is watched" in watch.output() for pid in pids):
                    break
                time.sleep(0.5)
            assert all(f"(pid {pid}) is watched" in watch.output() for pid in pids), watch.output()
        # AND when the job is gone (and no other job's rank runs here), watch ends
        others = scan_for_watch(scan_all=True).ranks
        if others:
            watch.stop()
            pytest.skip(f"other rank processes run on this node: {others[0].target.pid}")
        assert watch.wait_exit(timeout=60) == ExitStatus.OK, watch.output()
    finally:
        watch.stop()
    assert "Traceback" not in watch.output()


def test_the_flight_recorder_of_a_live_rank_is_a_signal(tmp_path: Path) -> None:
    from tests.e2e.test_fr_live import record

    # GIVEN a job with hangdoc's hook and the flight recorder on, hung in a collective
    with record.launch("mismatched_op", log_dir=tmp_path) as job:
        probe = FlightRecorderProbe(every_s=0.0)
        targets = [
            RankTarget(pid, rank, rank, 4, "localhost", procfs_env(pid))
            for rank, pid in sorted(job.pids.items())
        ]
        # WHEN asked twice THEN every rank's recorder is read, and nothing moved
        first = [probe.poll(time.monotonic(), t) for t in targets]
        second = [probe.poll(time.monotonic(), t) for t in targets]
    assert first == [None] * 4 and second == [None] * 4
    assert sorted(probe.last) == sorted(job.pids.values())
    assert all(entries >= 1 for entries, _, _ in probe.last.values()), probe.last
