"""``hangdoc watch`` through the installed console script: usage errors, nothing to watch,
and a short watch of a real process that ends (status 0), all without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hangdoc.errors import ExitStatus
from tests.unit.cli.conftest import run_hangdoc
from tests.unit.watch.conftest import WRITER


@pytest.mark.parametrize(
    "args",
    [
        ("watch",),
        ("watch", "--out", "OUT"),
        ("watch", "--out", "OUT", "--slurm-job", "1", "--all"),
        ("watch", "--out", "OUT", "--all", "--on-hang", "page {report}"),
        ("watch", "--out", "OUT", "--all", "--on-hang", ""),
        ("watch", "--out", "OUT", "--all", "--stall-after", "1"),
        ("watch", "--out", "OUT", "--pid", "abc"),
    ],
)
def test_usage_errors_are_one_line_and_status_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = run_hangdoc(*(str(tmp_path / a) if a == "OUT" else a for a in args))
    assert done.returncode == ExitStatus.USAGE, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "OUT").exists()


def test_a_pid_that_does_not_exist_is_status_3(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    done = run_hangdoc("watch", "--pid", str(gone.pid), "--out", str(tmp_path / "w"))
    assert done.returncode == ExitStatus.COLLECTION_FAILED, done.stderr
    assert f"none of the processes exists: {gone.pid}" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_job_that_ends_without_a_hang_ends_watch_with_0(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(WRITER.replace("threading.Event().wait()", "pass"))
    job = subprocess.Popen([sys.executable, str(script), str(tmp_path / "log"), "2"],
                           stdout=subprocess.PIPE)  # fmt: skip
    done = run_hangdoc(
        "watch", "--pid", str(job.pid), "--out", str(tmp_path / "w"), "--stall-after", "30",
        timeout=60,
    )  # fmt: skip
    job.wait()
    assert done.returncode == ExitStatus.OK, done.stdout + done.stderr
    assert "watch ended: the job ended" in done.stdout and "0 hang(s) reported" in done.stdout
    assert (tmp_path / "w" / "watch.log").read_text().count("\n") >= 3
