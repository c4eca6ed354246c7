"""py-spy runs: success, each failure cause with its remedy, and never a paused target."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hangdoc.collectors import procfs, pyspy
from hangdoc.collectors.pyspy import Failure

if TYPE_CHECKING:
    from conftest import Spawn

# What py-spy 0.4.3 really prints, captured on Linux.
PERMISSION_STDERR = (
    "Permission Denied: Try running again with elevated permissions by going "
    "'sudo env \"PATH=$PATH\" !!'\n"
)
NOT_PYTHON_STDERR = "Error: Failed to find python version from target process\n"
GONE_STDERR = (
    "Error: Failed to get process executable name. Check that the process is running.\n\n"
    "Caused by:\n    0: No such file or directory (os error 2)\n\n"
    "Stack backtrace:\n   0: <E as anyhow::context::ext::StdError>::ext_context\n"
)


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_find_pyspy_prefers_path_then_the_interpreters_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin").mkdir()
    on_path = _executable(tmp_path / "bin" / "py-spy", "#!/bin/sh\n")
    venv = tmp_path / "venv"
    venv.mkdir()
    beside = _executable(venv / "py-spy", "#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert pyspy.find_pyspy() == on_path
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert pyspy.find_pyspy() == beside
    beside.unlink()
    assert pyspy.find_pyspy() is None


def test_build_command_flags() -> None:
    exe = Path("/x/py-spy")
    assert pyspy.build_command(exe, 7, native=False, subprocesses=False, nonblocking=False) == [
        "/x/py-spy",
        "dump",
        "--pid",
        "7",
        "--json",
    ]
    assert pyspy.build_command(exe, 7, native=True, subprocesses=True, nonblocking=True)[5:] == [
        "--native",
        "--subprocesses",
        "--nonblocking",
    ]


@pytest.mark.parametrize(
    ("stderr", "alive", "failure", "words"),
    [
        (PERMISSION_STDERR, True, Failure.PTRACE_DENIED, "Permission Denied"),
        (
            "Error: Operation not permitted (os error 1)",
            True,
            Failure.PTRACE_DENIED,
            "not permitted",
        ),
        (NOT_PYTHON_STDERR, True, Failure.NOT_PYTHON, "not a Python process"),
        (GONE_STDERR, True, Failure.EXITED, "process exited"),
        ("Error: whatever", False, Failure.EXITED, "process exited"),
        (
            "Error: unsupported version 9.9\n\nStack backtrace:\n 0: frame",
            True,
            Failure.OTHER,
            "status 1: Error: unsupported version 9.9",
        ),
    ],
)
def test_classify_failure(stderr: str, alive: bool, failure: Failure, words: str) -> None:
    got, reason = pyspy.classify_failure(1, stderr, alive=alive)
    assert got is failure
    assert words in reason
    assert "backtrace" not in reason


def test_missing_pyspy_is_a_failure_with_the_install_remedy() -> None:
    result = pyspy.dump_stacks(os.getpid(), exe=None)
    assert result.failure is Failure.MISSING
    assert result.status == "failed"
    assert result.remedy is not None and "pip install py-spy" in result.remedy


def test_dump_of_a_blocked_rank(spawn: Spawn, pyspy_exe: Path) -> None:
    target = spawn("plain", rank=0)
    result = pyspy.dump_stacks(target.pid, exe=pyspy_exe, timeout_s=20)
    assert result.ok, result.reason
    assert result.output is not None
    threads = json.loads(result.output)
    names = [f["name"] for t in threads for f in t["frames"]]
    assert "save_checkpoint" in names
    assert pyspy.dumped_pids(result.output) == {target.pid}
    assert 0 < result.duration_s < 20


def test_dump_of_a_non_python_process(tmp_path: Path, pyspy_exe: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        result = pyspy.dump_stacks(sleeper.pid, exe=pyspy_exe)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result.failure is Failure.NOT_PYTHON
    assert result.status == "failed"


def test_timeout_kills_pyspy_only(tmp_path: Path, spawn: Spawn) -> None:
    # GIVEN a py-spy that never answers, and a live target
    pid_file = tmp_path / "fake.pid"
    fake = _executable(tmp_path / "py-spy", f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    target = spawn("plain")
    # WHEN it overruns its timeout
    result = pyspy.dump_stacks(target.pid, exe=fake, timeout_s=0.5)
    # THEN it is reported, the fake py-spy is gone, the target lives on untouched
    assert result.failure is Failure.TIMEOUT
    assert result.status == "timeout"
    assert "0.5s" in (result.reason or "")
    assert 0.5 <= result.duration_s < 10
    assert not Path(f"/proc/{pid_file.read_text().strip()}").exists()
    assert procfs.is_alive(target.pid)
    assert target.proc.poll() is None


def test_killing_pyspy_mid_dump_never_leaves_the_target_paused(
    spawn: Spawn, pyspy_exe: Path
) -> None:
    # GIVEN a target that burns CPU (so a pause would show as a stopped state)
    target = spawn("busy")
    # WHEN py-spy is killed at various points of its attach/read/detach
    for timeout in (0.001, 0.003, 0.005, 0.007, 0.01, 0.03, 0.1):
        pyspy.dump_stacks(target.pid, exe=pyspy_exe, timeout_s=timeout)
        st = procfs.read_stat(target.pid)
        assert st is not None and st.state not in ("T", "t"), f"stopped after {timeout}s"
    # THEN it keeps running: its CPU time still grows
    first = procfs.read_stat(target.pid)
    assert first is not None
    deadline = time.monotonic() + 10
    while (now := procfs.read_stat(target.pid)) is not None and now.cpu_ticks <= first.cpu_ticks:
        assert time.monotonic() < deadline, "target made no progress after py-spy was killed"


def test_ptrace_denied_names_the_remedy(spawn: Spawn, unprivileged_pyspy: Path) -> None:
    # GIVEN py-spy run as an unprivileged user against a root-owned target
    target = spawn("plain")
    result = pyspy.dump_stacks(target.pid, exe=unprivileged_pyspy, timeout_s=20)
    assert result.failure is Failure.PTRACE_DENIED
    assert result.remedy is not None
    assert "SYS_PTRACE" in result.remedy and "ptrace_scope" in result.remedy
    assert procfs.is_alive(target.pid)


def test_merge_dumps() -> None:
    main = b'[{"pid": 1, "frames": []}]'
    assert pyspy.merge_dumps(main, []) is main
    merged = pyspy.merge_dumps(main, [b'[{"pid": 2, "frames": []}]', b'[{"pid": 1, "frames": []}]'])
    assert [t["pid"] for t in json.loads(merged)] == [1, 2]
    assert pyspy.dumped_pids(merged) == {1, 2}
    assert pyspy.dumped_pids(b"oops") == set()
