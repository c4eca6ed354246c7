"""``hangdoc watch --slurm-job`` on the real one-node Slurm of scripts/slurm_up.sh.

A 4-rank gloo job (srun-launched ranks, RANK from SLURM_PROCID) trains a few steps and
hangs (rank 3's checkpoint write never returns); watch, started from the "login node"
once the job runs, puts one watcher per node into the allocation (``srun --overlap``),
and when the node says it stalled, collects the whole job (a second overlapping step)
into one report. When the job is cancelled, watch ends by itself with status 5.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hangdoc.errors import ExitStatus
from hangdoc.scenarios.launch import free_port
from tests.e2e.watching import start_watch
from tests.slurm.test_slurm_collect import ROOT, slurm_env

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]
__all__ = ["slurm_env"]  # the fixture, shared with the collect tests
WORLD = 4


def _sbatch(workdir: Path, env: dict[str, str]) -> str:
    workdir.mkdir(parents=True)
    shutil.copyfile(ROOT / "hangdoc" / "scenarios" / "job.py", workdir / "train.py")
    rank = workdir / "rank.sh"
    rank.write_text(
        "#!/bin/bash\n"
        "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS\n"
        "export LOCAL_WORLD_SIZE=$SLURM_NTASKS GROUP_RANK=$SLURM_NODEID\n"
        f"exec {sys.executable} {workdir / 'train.py'} checkpoint\n"
    )
    rank.chmod(0o755)
    script = workdir / "job.sbatch"
    script.write_text(
        "#!/bin/bash\n"
        f"#SBATCH --ntasks={WORLD}\n#SBATCH --overcommit\n#SBATCH --time=15\n"
        f"#SBATCH --output={workdir}/slurm-%j.out\n#SBATCH --job-name=hangdoc-test-watch\n"
        f"export MASTER_ADDR=127.0.0.1 MASTER_PORT={free_port()} OMP_NUM_THREADS=1\n"
        f"export HANGDOC_READY_DIR={workdir}/ready PYTHONUNBUFFERED=1\n"
        "export HANGDOC_SCENARIO_TIMEOUT=600 HANGDOC_SCENARIO_WARMUP_STEPS=10\n"
        f"srun --overcommit --ntasks={WORLD} --kill-on-bad-exit=0 {rank}\n"
    )
    (workdir / "ready").mkdir()
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip().split(";")[0]


def _running(job: str, env: dict[str, str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, env=env,
            timeout=30, check=False,
        ).stdout.strip()  # fmt: skip
        if state == "RUNNING":
            return
        time.sleep(0.5)
    pytest.fail(f"job {job} did not start within {timeout} s")


def test_watch_slurm_job_reports_one_job_wide_hang(
    slurm_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)  # start_watch passes this environment on
    job = _sbatch(tmp_path / "job", slurm_env)
    try:
        # GIVEN a running Slurm job, watched from outside its allocation
        _running(job, slurm_env)
        watch = start_watch(tmp_path, "--slurm-job", job, "--stall-after", "15")
        # WHEN it hangs THEN one report of the whole job, collected through Slurm
        hang = watch.wait_report(timeout=240)
        ready = max(p.stat().st_mtime for p in (tmp_path / "job" / "ready").glob("ready-*"))
        print(
            f"\nslurm watch of job {job}: report {hang['reported_at'] - ready:.1f} s after the hang"
        )
        assert (hang["category"], hang["culprit_ranks"]) == ("checkpoint_save_hang", [3]), hang
        assert hang["job_id"] == job and hang["stalled_node"], hang
        dump = Path(hang["paths"]["dump"])
        manifest = json.loads((dump / "job.json").read_text())
        (node,) = manifest["nodes"]
        assert node["status"] == "ok" and sorted(node["ranks"]) == list(range(WORLD)), node
        findings = json.loads(Path(hang["paths"]["json"]).read_text())
        assert findings["ranks"]["seen"] == list(range(WORLD))
    finally:
        subprocess.run(["scancel", job], env=slurm_env, timeout=60, check=False)
    # AND when the job is cancelled, watch ends by itself: a hang was reported
    assert watch.wait_exit(timeout=120) == ExitStatus.HANG_REPORTED, watch.output()
    output = watch.output()
    assert len(watch.reports()) == 1, output
    assert "the job ended" in output or "step ended" in output, output
    assert "Traceback" not in output


def test_watching_a_job_that_is_not_running_is_refused(
    slurm_env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hangdoc", "watch", "--slurm-job", "999999", "--out",
         str(tmp_path / "w")],
        capture_output=True, text=True, env=slurm_env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == ExitStatus.COLLECTION_FAILED, done.stderr
    assert "999999" in done.stderr and "Traceback" not in done.stderr + done.stdout
