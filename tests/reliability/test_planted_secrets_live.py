"""A live job leaks every kind of secret; nothing hangdoc writes carries any of them.

The ``secrets`` scenario (hangdoc/scenarios/job.py) is a real 2-rank gloo job hung in a
checkpoint save. Its environment carries fake secrets of every kind the redaction module
knows (TORCH_* names, so the collector keeps them); it prints each into its stdout and
stderr logs and names a thread after each (py-spy dumps thread names). Then:
``hangdoc collect --archive`` → ``hangdoc analyze`` (the dump and the raw job logs)
``--html --md --json --archive``. Every byte of the dump, both archives, the reports and
the terminal output is scanned for every secret, raw and encoded.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hangdoc.collectors import pyspy
from hangdoc.scenarios.launch import launch
from tests.reliability.plants import archive_bytes, leaks, plants, tree_bytes
from tests.reliability.stats import count

# Shapeless values only their variable's name gives away: collected by name, never printed.
BY_NAME_ONLY = {"TORCH_HUB_TOKEN": "zq7w-shapeless-hub-x91", "HF_TOKEN": "kk3-shapeless-hf-22"}


def _why_not_live() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if pyspy.find_pyspy() is None:
        return "py-spy is not installed"
    if os.geteuid() != 0:
        return "py-spy needs root here"
    return None


def hangdoc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hangdoc", *args], capture_output=True,
                          text=True, timeout=240, check=False)  # fmt: skip


@pytest.mark.e2e
@pytest.mark.skipif(_why_not_live() is not None, reason=str(_why_not_live()))
def test_no_planted_secret_leaves_a_live_job(tmp_path: Path) -> None:
    # GIVEN a hung job whose environment, logs and thread names hold every kind of secret
    planted = plants(seed=2026)
    env = {f"TORCH_PLANT_{i:02d}": p.text for i, p in enumerate(planted)} | BY_NAME_ONLY
    dump = tmp_path / "dump"
    with launch("secrets", 2, tmp_path / "job", extra_env=env) as job:
        job.wait_ready()
        raw_logs = b"".join(p.read_bytes() for p in sorted(job.log_dir.iterdir()))
        pids = ",".join(str(p.pid) for p in job.procs)
        collected = hangdoc("collect", "--pid", pids, "--out", str(dump), "--samples", "2",
                            "--interval", "0.5", "--archive")  # fmt: skip
        logs = sorted(job.log_dir.iterdir())
    assert collected.returncode == 0, collected.stdout + collected.stderr
    # the job really printed them (so this test is not trivially clean)
    assert all(p.secret.encode() in raw_logs for p in planted)
    # WHEN analyzed into every output, with the raw job logs as loose files too
    out = tmp_path / "out"
    out.mkdir()
    analyzed = hangdoc("analyze", str(dump), *map(str, logs), "--html", str(out / "r.html"),
                       "--md", str(out / "r.md"), "--json", str(out / "r.json"),
                       "--archive", str(out / "ticket.tar.gz"))  # fmt: skip
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    (out / "terminal.txt").write_text(collected.stdout + collected.stderr + analyzed.stdout
                                      + analyzed.stderr)  # fmt: skip
    # THEN the collector took logs, environment and stacks into the dump ...
    assert list(dump.glob("rank*/logs/stdout.*")), sorted(p.name for p in dump.rglob("*"))
    assert list(dump.glob("rank*/pyspy.*.json"))
    assert b"<redacted>" in b"".join(p.read_bytes() for p in dump.rglob("*") if p.is_file())
    # ... and no byte anywhere holds a secret, in any encoding
    secrets = [p.secret for p in planted] + list(BY_NAME_ONLY.values())
    archive = dump.with_name("dump.tar.gz")
    assert archive.is_file()
    blobs = [*tree_bytes(dump), *tree_bytes(out), (str(archive), archive.read_bytes())]
    blobs += list(archive_bytes(archive))
    count("secrets: planted in a live job", len(secrets))
    count("secrets: files and archive members scanned (live)", len(blobs))
    assert leaks(blobs, secrets) == []
