"""A real Slurm, not a mock: a hung 4-rank gloo job submitted with sbatch, collected with
``hangdoc collect --slurm-job`` (shared file system and streamed), and diagnosed.

scripts/slurm_up.sh starts munged, slurmctld and slurmd on this host (installing Debian's
packages if needed); when it cannot, every test here is skipped with its reason. Daemons
this module started are stopped at the end (scripts/slurm_down.sh), the job is cancelled.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangdoc.scenarios.launch import free_port

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
STATE = Path(os.environ.get("HANGDOC_SLURM_STATE", "/tmp/hangdoc-slurm"))
WORLD = 4
CULPRIT = WORLD - 1


def _started() -> list[str]:
    path = STATE / "started"
    return path.read_text().split() if path.is_file() else []


def _why_not_live() -> str | None:
    """The e2e prerequisites: torch, and py-spy with the right to read other processes."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install -e '.[torch]')"
    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        return "py-spy is not installed"
    if os.geteuid() != 0:
        return "the Slurm test starts daemons and reads other processes: run it as root"
    if shutil.which("bash") is None:
        return "bash is needed for scripts/slurm_up.sh"
    return None


@pytest.fixture(scope="module")
def slurm_env() -> Iterator[dict[str, str]]:
    """The environment that reaches this host's Slurm; starts it when needed."""
    why = _why_not_live()
    if why is not None:
        pytest.skip(why)
    before = _started()
    try:
        done = subprocess.run(
            ["bash", str(SCRIPTS / "slurm_up.sh")],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip("scripts/slurm_up.sh did not finish within 900 s")
    if done.returncode != 0:
        pytest.skip(f"Slurm could not be started: {done.stderr.strip()[-500:]}")
    conf = done.stdout.strip().splitlines()[-1].partition("=")[2]
    env = {**os.environ, "SLURM_CONF": conf}
    started_here = _started() != before
    try:
        yield env
    finally:
        if started_here:
            subprocess.run(["bash", str(SCRIPTS / "slurm_down.sh")], timeout=120, check=False)


def _sbatch(workdir: Path, env: dict[str, str]) -> str:
    """Submit the checkpoint hang: srun-launched ranks, RANK from SLURM_PROCID."""
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
        f"#SBATCH --output={workdir}/slurm-%j.out\n#SBATCH --job-name=hangdoc-test-hang\n"
        f"export MASTER_ADDR=127.0.0.1 MASTER_PORT={free_port()} OMP_NUM_THREADS=1\n"
        f"export HANGDOC_READY_DIR={workdir}/ready PYTHONUNBUFFERED=1\n"
        "export HANGDOC_SCENARIO_TIMEOUT=600\n"
        f"srun --overcommit --ntasks={WORLD} --kill-on-bad-exit=0 {rank}\n"
    )
    (workdir / "ready").mkdir()
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip().split(";")[0]


def _wait_ready(workdir: Path, job: str, env: dict[str, str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all((workdir / "ready" / f"ready-{r}").exists() for r in range(WORLD)):
            return
        state = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, env=env,
            timeout=30, check=False,
        ).stdout.strip()  # fmt: skip
        if state in ("", "FAILED", "CANCELLED", "COMPLETED", "TIMEOUT"):
            logs = "\n".join(p.read_text()[-2000:] for p in workdir.glob("slurm-*.out"))
            pytest.fail(f"job {job} ended ({state or 'gone'}) before its ranks were ready\n{logs}")
        time.sleep(0.5)
    pytest.fail(f"job {job}: ranks not ready after {timeout} s")


@pytest.fixture(scope="module")
def hung_job(slurm_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("slurm-job")
    job = _sbatch(workdir, slurm_env)
    try:
        _wait_ready(workdir, job, slurm_env)
        yield job
    finally:
        subprocess.run(["scancel", job], env=slurm_env, timeout=60, check=False)
        for _ in range(60):
            gone = subprocess.run(
                ["squeue", "-h", "-j", job], capture_output=True, text=True, env=slurm_env,
                timeout=30, check=False,
            ).stdout.strip()  # fmt: skip
            if not gone:
                break
            time.sleep(0.5)


def _hangdoc(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hangdoc", *args],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("transfer", ["shared", "stream"])
def test_collect_slurm_job_names_the_culprit(
    hung_job: str, slurm_env: dict[str, str], tmp_path: Path, transfer: str
) -> None:
    # GIVEN a running Slurm job whose rank 3 is stuck saving a checkpoint
    out = tmp_path / "job"
    # WHEN the whole job is collected through Slurm and analyzed
    began = time.monotonic()
    collected = _hangdoc(
        "collect", "--slurm-job", hung_job, "--out", str(out), "--transfer", transfer,
        "--interval", "1", env=slurm_env,
    )  # fmt: skip
    collect_s = time.monotonic() - began
    assert collected.returncode == 0, collected.stderr + collected.stdout
    print(f"\nslurm collect ({transfer}) of job {hung_job}: {collect_s:.2f} s")
    manifest = json.loads((out / "job.json").read_text())
    (node,) = manifest["nodes"]
    assert node["status"] == "ok", node
    assert node["transfer"] == transfer
    assert sorted(node["ranks"]) == list(range(WORLD))
    assert node["clock_offset_s"] is not None
    assert (out / node["dir"] / "summary.json").is_file()
    findings = tmp_path / "findings.json"
    analyzed = _hangdoc("analyze", str(out), "--json", str(findings), "-q", env=slurm_env)
    assert analyzed.returncode == 0, analyzed.stderr
    # THEN the checkpoint hang of rank 3 is the primary finding
    doc = json.loads(findings.read_text())
    assert doc["verdict"] == "hang"
    primary = doc["findings"][0]
    assert primary["category"] == "checkpoint_save_hang", primary
    assert primary["culprit_ranks"] == [CULPRIT], primary
    assert doc["ranks"]["seen"] == list(range(WORLD))
    kinds = {i["kind"] for i in doc["inputs"]}
    assert {"hangdoc_summary", "hangdoc_job"} <= kinds


def test_a_job_that_is_not_running_is_refused(slurm_env: dict[str, str], tmp_path: Path) -> None:
    # GIVEN a job id Slurm does not know
    done = _hangdoc("collect", "--slurm-job", "999999", "--out", str(tmp_path / "x"), env=slurm_env)
    # THEN collect says so in one line, with nothing written
    assert done.returncode == 3, done.stderr
    assert "999999" in done.stderr
    assert not (tmp_path / "x").exists()
