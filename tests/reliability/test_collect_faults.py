"""Faults during ``collect``: each leaves a readable dump that says what is missing and why.

Faults injected: a target that exits mid-collection, a zombie, a process really stuck
in the kernel (state D, through the cgroup freezer), /proc reads that block (monkeypatched
— a D-state process whose memory lock is held blocks them), ptrace denied, py-spy
absent, crashing, printing garbage, flooding, hanging or not executable. After each:
the target was never signalled nor left stopped, the manifest names the failed step
and its reason, and ``load_paths`` reads the dump. (Disk full and a killed collector
are in test_collect_output_faults.py.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence
from hangdoc.collectors import procfs, pyspy
from hangdoc.collectors.collect import CollectOptions, CollectResult, run_collect
from hangdoc.collectors.dumpformat import StepRecord
from tests.reliability.conftest import Spawn, Target
from tests.reliability.stats import count

FREEZER = Path("/sys/fs/cgroup/freezer")


def steps(result: CollectResult, step: str, rank: int | None = None) -> list[StepRecord]:
    return [
        s
        for s in result.manifest["steps"]
        if s["step"] == step and (rank is None or s["rank"] == rank)
    ]


def assert_undisturbed(*targets: Target) -> None:
    """Never signalled, never left stopped, still alive."""
    for target in targets:
        assert target.proc.poll() is None, f"target {target.pid} died"
        assert target.signals_received() == []
        st = procfs.read_stat(target.pid)
        assert st is not None and st.state not in ("T", "t"), st


def readable(result: CollectResult) -> Evidence:
    evidence = load_paths([result.out_dir])
    count("faults: dumps read back after a fault")
    return evidence


class Advance:
    """A ProgressSink that runs an action at its n-th advance (after a given sample)."""

    def __init__(self, at: int, action: Callable[[], None]) -> None:
        self.at, self.action, self.calls = at, action, 0

    def start(self, total: int, description: str) -> None:
        pass

    def advance(self, description: str) -> None:
        self.calls += 1
        if self.calls == self.at:
            self.action()

    def warn(self, message: str) -> None:
        pass


def test_a_target_that_exits_between_samples(spawn: Spawn, tmp_path: Path) -> None:
    keep, leaving = spawn(0), spawn(1)

    def leave() -> None:
        leaving.proc.kill()
        leaving.proc.wait()

    opts = CollectOptions(pids=(keep.pid, leaving.pid), out=tmp_path / "d", samples=3,
                          interval_s=0.05, step_timeout_s=10)  # fmt: skip
    result = run_collect(opts, Advance(2, leave))  # after sample 0 of both ranks
    count("faults: injected", 1)
    reasons = [(s["sample"], s["status"], s["reason"]) for s in steps(result, "pyspy", 1)]
    assert reasons[1:] == [(1, "skipped", "process exited"), (2, "skipped", "process exited")]
    evidence = readable(result)
    assert next(p for p in evidence.processes if p.rank == 1).exited
    assert_undisturbed(keep)


def test_a_zombie_target_is_skipped_and_said(spawn: Spawn, tmp_path: Path) -> None:
    alive, dying = spawn(0), spawn(1)
    dying.proc.kill()  # and not reaped: a zombie until the fixture's teardown
    deadline = time.monotonic() + 10
    while (st := procfs.read_stat(dying.pid)) is not None and st.state != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    result = run_collect(CollectOptions(pids=(alive.pid, dying.pid), out=tmp_path / "d",
                                        samples=1, interval_s=0))  # fmt: skip
    count("faults: injected", 1)
    assert [r["pid"] for r in result.manifest["ranks"]] == [alive.pid]
    assert any(f"process {dying.pid}" in w and "exited" in w for w in result.manifest["warnings"])
    evidence = readable(result)
    assert any(f"process {dying.pid}" in n for n in evidence.notes)
    assert_undisturbed(alive)


def test_a_target_that_turns_zombie_mid_collection(spawn: Spawn, tmp_path: Path) -> None:
    target = spawn(0)
    opts = CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=2, interval_s=0)
    result = run_collect(opts, Advance(1, target.proc.kill))  # no wait(): a zombie
    count("faults: injected", 1)
    process = json.loads((result.out_dir / "rank0" / "process.json").read_text())
    assert "zombie" in (process["samples"][-1].get("error") or "")
    assert steps(result, "pyspy")[-1]["status"] == "skipped"
    readable(result)


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """Put ``pid`` in state D (the cgroup v1 freezer), and thaw it on exit."""
    group = FREEZER / f"hangdoc-test-{os.getpid()}-{pid}"
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(str(pid))
        (group / "freezer.state").write_text("FROZEN")
    except OSError as exc:
        pytest.skip(f"cgroup v1 freezer not usable here: {exc}")
    try:
        deadline = time.monotonic() + 10
        while (st := procfs.read_stat(pid)) is None or st.state != "D":
            assert time.monotonic() < deadline, "target never entered state D"
            time.sleep(0.01)
        yield
    finally:
        (group / "freezer.state").write_text("THAWED")
        (FREEZER / "cgroup.procs").write_text(str(pid))
        group.rmdir()


@pytest.mark.skipif(not FREEZER.is_dir() or os.geteuid() != 0, reason="needs root and freezer")
def test_a_target_really_in_state_d(spawn: Spawn, pyspy_exe: Path, tmp_path: Path) -> None:
    # GIVEN a live target frozen in the kernel (state D, wchan __refrigerator)
    target = spawn(0)
    with frozen(target.pid):
        # WHEN collected with short step timeouts
        began = time.monotonic()
        opts = CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=2,
                              interval_s=0.1, step_timeout_s=3)  # fmt: skip
        result = run_collect(opts)
        took = time.monotonic() - began
        count("faults: injected", 1)
    # THEN collection was bounded, the kernel state is recorded, py-spy's failure explained
    assert took < 2 * 2 * 3 + 10
    process = json.loads((result.out_dir / "rank0" / "process.json").read_text())
    assert [s["state"] for s in process["samples"]] == ["D", "D"]
    pyspy_steps = steps(result, "pyspy")
    assert len(pyspy_steps) == 2
    for step in pyspy_steps:
        assert step["status"] == "ok" or "state D" in (step["reason"] or ""), step
    readable(result)
    # AND once thawed the target runs on, never signalled, never left stopped
    assert_undisturbed(target)


@pytest.fixture
def pyspy_exe() -> Path:
    exe = pyspy.find_pyspy()
    if exe is None:
        pytest.skip("py-spy is not installed")
    return exe


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: frees the reads a test made block (their threads were abandoned)."""
    event = threading.Event()
    yield event
    event.set()


def _block_reads_of(
    monkeypatch: pytest.MonkeyPatch, pid: int, names: tuple[str, ...], release: threading.Event
) -> None:
    """Reads of /proc/PID/<name> block until ``release``, as under a held memory lock."""
    real = procfs._read_bytes
    real_environ = procfs.read_environ

    def blocking(path: Path) -> bytes | None:
        if path.parent.name == str(pid) and path.name in names:
            release.wait(60)
        return real(path)

    def blocking_environ(p: int) -> dict[str, str]:
        if p == pid and "environ" in names:
            release.wait(60)
        return real_environ(p)

    monkeypatch.setattr(procfs, "_read_bytes", blocking)
    monkeypatch.setattr(procfs, "read_environ", blocking_environ)


def test_proc_reads_that_block_are_bounded(
    spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    # GIVEN a target whose /proc wchan reads block (every sample) and whose cmdline and
    # environ reads block (discovery, static facts)
    target = spawn(0)
    _block_reads_of(monkeypatch, target.pid, ("wchan", "cmdline", "environ"), release)
    began = time.monotonic()
    opts = CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=2, interval_s=0,
                          step_timeout_s=1)  # fmt: skip
    # WHEN collected
    result = run_collect(opts)
    count("faults: injected", 1)
    # THEN each blocked step cost its timeout, no more, and says why
    assert time.monotonic() - began < 20
    [discover] = steps(result, "discover")
    assert discover["status"] == "timeout" and "state D" in (discover["reason"] or "")
    proc_steps = steps(result, "proc")
    assert [s["status"] for s in proc_steps] == ["timeout"] * 3
    assert all("stuck in the kernel" in (s["reason"] or "") for s in proc_steps)
    assert result.manifest["ranks"][0]["pid"] == target.pid
    assert len(steps(result, "pyspy")) == 2  # stacks are still tried
    readable(result)
    assert_undisturbed(target)


@pytest.mark.parametrize(
    ("kind", "status", "words"),
    [
        ("segfault", "failed", "status -11"),
        ("garbage", "failed", "py-spy printed"),
        ("flood", "failed", "more than 64 MiB"),
        ("hang", "timeout", "did not answer within"),
        ("not-executable", "failed", "cannot run"),
    ],
)
def test_a_misbehaving_pyspy(
    kind: str,
    status: str,
    words: str,
    spawn: Spawn,
    fake_pyspy: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pyspy, "find_pyspy", lambda: fake_pyspy(kind))
    target = spawn(0)
    opts = CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=1, interval_s=0,
                          step_timeout_s=2)  # fmt: skip
    began = time.monotonic()
    result = run_collect(opts)
    count("faults: injected", 1)
    assert time.monotonic() - began < 15
    [step] = steps(result, "pyspy")
    assert step["status"] == status and words in (step["reason"] or ""), step
    assert not (result.out_dir / "rank0" / "pyspy.0.json").exists()
    assert all(s["status"] == "ok" for s in steps(result, "proc"))
    readable(result)
    assert_undisturbed(target)


def test_pyspy_output_that_is_json_of_the_wrong_shape(
    spawn: Spawn, fake_pyspy: Callable[[str], Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(pyspy, "find_pyspy", lambda: fake_pyspy("wrong-json"))
    target = spawn(0)
    result = run_collect(CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=1,
                                        interval_s=0))  # fmt: skip
    count("faults: injected", 1)
    evidence = readable(result)
    bad = [i for i in evidence.inputs if i.path.endswith("pyspy.0.json")]
    assert bad and bad[0].error, evidence.inputs
    assert_undisturbed(target)


def test_pyspy_absent(spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyspy, "find_pyspy", lambda: None)
    target = spawn(0)
    result = run_collect(CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=2,
                                        interval_s=0))  # fmt: skip
    count("faults: injected", 1)
    assert [s["status"] for s in steps(result, "pyspy")] == ["failed", "failed"]
    assert any("pip install py-spy" in w for w in result.manifest["warnings"])
    readable(result)
    assert_undisturbed(target)


def test_ptrace_denied(
    spawn: Spawn, pyspy_exe: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to drop py-spy's privileges")
    wrapper = tmp_path / "py-spy-nobody"
    wrapper.write_text(
        f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {pyspy_exe} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setattr(pyspy, "find_pyspy", lambda: wrapper)
    target = spawn(0)
    result = run_collect(CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=1,
                                        interval_s=0))  # fmt: skip
    count("faults: injected", 1)
    [step] = steps(result, "pyspy")
    assert step["status"] == "failed" and "ptrace" in (step["reason"] or "")
    readable(result)
    assert_undisturbed(target)
