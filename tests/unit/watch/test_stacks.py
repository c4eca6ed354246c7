"""Stack samples that confirm a stall: py-spy's JSON (recorded dumps of real hung jobs,
and live dumps of a process that computes)."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest

from hangdoc.collectors import pyspy
from hangdoc.collectors.watch import stacks
from tests.unit.watch.conftest import COMPUTE, Start

ROOT = Path(__file__).resolve().parents[3]
HUNG = ROOT / "fixtures" / "dumps" / "checkpoint" / "rank3"


def _shot(path: Path) -> stacks.StackShot:
    return stacks.StackShot(1, stacks.parse(path.read_bytes()))


def test_a_hung_rank_is_at_the_same_frames_in_both_samples() -> None:
    first, second = _shot(HUNG / "pyspy.0.json"), _shot(HUNG / "pyspy.1.json")
    main = [t for t in first.threads.values() if t.main]
    assert len(main) == 1 and main[0].frames[2][0] == "StuckFile.write"
    assert stacks.change(first, second) is None


def test_junk_is_no_threads() -> None:
    assert stacks.parse(b"not json") == {}
    assert stacks.parse(b'{"a": 1}') == {}
    assert stacks.parse(b'[{"thread_id": "x"}, 3]') == {}


def test_only_the_main_thread_and_running_threads_count() -> None:
    idle = stacks.ThreadShot("timer", main=False, active=False, frames=(("wait", "t.py", 1),))
    woke = stacks.ThreadShot("timer", main=False, active=False, frames=(("tick", "t.py", 9),))
    main = stacks.ThreadShot("MainThread", main=True, active=False, frames=(("f", "m.py", 3),))
    before = stacks.StackShot(1, {1: main, 2: idle})
    assert stacks.change(before, stacks.StackShot(1, {1: main, 2: woke})) is None
    moved = stacks.ThreadShot("MainThread", main=True, active=True, frames=(("g", "m.py", 7),))
    change = stacks.change(before, stacks.StackShot(1, {1: moved, 2: idle}))
    assert change == "main thread moved from f (m.py:3) to g (m.py:7)"


@pytest.mark.skipif(pyspy.find_pyspy() is None or os.geteuid() != 0, reason="needs py-spy as root")
def test_a_process_that_computes_moves_between_samples(start: Start) -> None:
    proc = start(COMPUTE)
    exe = pyspy.find_pyspy()
    shots = []
    for _ in range(8):
        shots.append(stacks.take(proc.pid, exe, timeout_s=10))
        time.sleep(0.3)
    # A non-blocking read of a process that runs can catch it mid-change: py-spy then fails
    # ("Failed to copy PyCodeObject … Bad address") or sees no thread. Such a shot says why
    # (the loop notes it and decides nothing from it); the shots that read show the move.
    read = [s for s in shots if s.error is None and s.threads]
    assert len(read) >= 3, shots
    assert any(stacks.change(a, b) for a, b in itertools.pairwise(read))


def test_a_dump_that_failed_while_frames_moved_is_taken_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # py-spy's own message when a nonblocking read races a running process (the CI run of
    # 2026-11-27 printed it for a process that computes)
    raced = pyspy.PySpyResult(
        None, 0.01, pyspy.Failure.OTHER,
        "py-spy exited with status 1: Error: Failed to get stack traces Caused by: 0: Failed "
        "to copy PyFrameObject 2: Bad address (os error 14)",
    )  # fmt: skip
    read = pyspy.PySpyResult((HUNG / "pyspy.0.json").read_bytes(), 0.01)
    answers = iter([raced, raced, read])
    calls: list[int] = []

    def dump(pid: int, **_: object) -> pyspy.PySpyResult:
        calls.append(pid)
        return next(answers)

    monkeypatch.setattr(pyspy, "dump_stacks", dump)
    shot = stacks.take(7, None, timeout_s=1)
    assert shot.error is None and shot.threads and calls == [7, 7, 7]


def test_a_failure_a_retry_cannot_fix_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    denied = pyspy.PySpyResult(None, 0.01, pyspy.Failure.PTRACE_DENIED, "denied")
    calls: list[int] = []

    def dump(pid: int, **_: object) -> pyspy.PySpyResult:
        calls.append(pid)
        return denied

    monkeypatch.setattr(pyspy, "dump_stacks", dump)
    assert stacks.take(7, None, timeout_s=1).error == "denied" and calls == [7]


def test_an_interpreter_search_that_raced_the_process_is_taken_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # py-spy's message when its search for the interpreter read memory the running process
    # was writing (the CI run of 2026-11-28, and 1 in 200 dumps of COMPUTE here)
    missed = pyspy.PySpyResult(
        None, 0.01, pyspy.Failure.NOT_PYTHON,
        "not a Python process (py-spy found no interpreter in it)",
    )  # fmt: skip
    stderr = "Error: Failed to find a python interpreter in the .data section"
    assert pyspy.classify_failure(1, stderr, alive=True)[0] is pyspy.Failure.NOT_PYTHON
    read = pyspy.PySpyResult((HUNG / "pyspy.0.json").read_bytes(), 0.01)
    answers = iter([missed, read])
    monkeypatch.setattr(pyspy, "dump_stacks", lambda pid, **_: next(answers))
    shot = stacks.take(7, None, timeout_s=1)
    assert shot.error is None and shot.threads and not shot.raced


def test_a_shot_that_kept_racing_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    missed = pyspy.PySpyResult(None, 0.01, pyspy.Failure.NOT_PYTHON, "no interpreter")
    monkeypatch.setattr(pyspy, "dump_stacks", lambda pid, **_: missed)
    shot = stacks.take(7, None, timeout_s=1)
    assert shot.error == "no interpreter" and shot.raced
