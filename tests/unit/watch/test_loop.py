"""The watch loop on real processes, with a handler that records what it is handed.

The handler stands for the reporter (tested on its own in test_report.py); the loop's
signals, stacks, clocks and endings are the real ones.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hangdoc.collectors.watch import stacks
from hangdoc.collectors.watch.loop import LoopOptions, Scope, Watcher, WatchResult
from hangdoc.collectors.watch.stall import Outcome, Stall
from tests.unit.watch.conftest import COMPUTE, WRITER, Start


class Recorder:
    """Records stalls; after ``stop_after`` of them, stops the watch."""

    def __init__(self, stop: threading.Event, outcome: Outcome, stop_after: int = 1) -> None:
        self.stop = stop
        self.outcome = outcome
        self.stop_after = stop_after
        self.stalls: list[tuple[float, Stall]] = []
        self.resumes: list[list[str]] = []
        self.lines: list[str] = []

    def stalled(self, stall: Stall) -> Outcome:
        self.stalls.append((time.time(), stall))
        if len(self.stalls) >= self.stop_after:
            self.stop.set()
        return self.outcome

    def resumed(self, reasons: list[str]) -> None:
        self.resumes.append(reasons)

    def collecting(self) -> bool:
        return False

    def say(self, text: str) -> None:
        self.lines.append(text)


def _watch(
    pids: list[int], handler: Recorder, stop: threading.Event, stall_after: float = 1.5,
    timeout: float = 40.0,
) -> WatchResult:  # fmt: skip
    options = LoopOptions(
        scope=Scope(pids=tuple(pids)), stall_after_s=stall_after, poll_s=0.2, confirm_s=0.4
    )
    timer = threading.Timer(timeout, stop.set)
    timer.start()
    try:
        return Watcher(options, handler, handler.say, stop).run()
    finally:
        timer.cancel()


def test_a_process_that_stops_writing_is_a_stall_after_stall_after(
    start: Start, tmp_path: Path
) -> None:
    # GIVEN a rank that writes its log for 2 s, then blocks
    log = tmp_path / "rank0.log"
    proc = start(WRITER, str(log), "2")
    stop = threading.Event()
    handler = Recorder(stop, Outcome.REPORTED)
    # WHEN watched with --stall-after 1.5
    result = _watch([proc.pid], handler, stop)
    # THEN one stall, handed over at least 1.5 s after its last write, naming the rank
    assert result.why_ended == "told to stop"
    (at, stall), *_ = handler.stalls
    last_write = log.stat().st_mtime
    assert at - last_write >= 1.5, handler.lines
    assert stall.quiet_since >= last_write - 0.5
    assert stall.pids == (proc.pid,)
    assert stall.confirmed_at >= stall.detected_at >= stall.quiet_since


def test_a_process_that_computes_without_output_is_not_a_stall(start: Start) -> None:
    # GIVEN a rank that computes (its main thread moves) but writes nothing
    proc = start(COMPUTE)
    stop = threading.Event()
    handler = Recorder(stop, Outcome.REPORTED)
    # WHEN watched for several stall periods THEN nothing is handed over
    _watch([proc.pid], handler, stop, stall_after=1.0, timeout=8.0)
    assert handler.stalls == [], handler.lines
    assert any("not stuck" in line and "moved" in line for line in handler.lines), handler.lines


def test_an_unreadable_sample_between_two_that_differ_is_not_a_stall(
    start: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a rank quiet on every cheap signal whose middle sample of each check is
    # unreadable (py-spy raced the moving frames), the others read at different frames
    proc = start(WRITER, str(tmp_path / "c.log"), "0.3")
    count = [0]

    def take(pid: int, exe: object, timeout_s: float) -> stacks.StackShot:
        count[0] += 1
        if count[0] % 3 == 2:
            return stacks.StackShot(pid, {}, "py-spy exited with status 1: Bad address")
        where = (("walk", "job.py", count[0]),)
        return stacks.StackShot(pid, {1: stacks.ThreadShot("MainThread", True, True, where)})

    monkeypatch.setattr(stacks, "take", take)
    stop = threading.Event()
    handler = Recorder(stop, Outcome.REPORTED)
    # WHEN watched THEN each read sample is compared with the last read one: it moved
    _watch([proc.pid], handler, stop, stall_after=1.0, timeout=6.0)
    assert handler.stalls == [], handler.lines
    assert any("not stuck" in line and "moved" in line for line in handler.lines)


def test_a_stall_the_handler_rechecks_comes_back_and_a_reported_one_does_not(
    start: Start, tmp_path: Path
) -> None:
    proc = start(WRITER, str(tmp_path / "a.log"), "0.3")
    stop = threading.Event()
    recheck = Recorder(stop, Outcome.RECHECK, stop_after=2)
    _watch([proc.pid], recheck, stop, stall_after=1.0)
    assert len(recheck.stalls) == 2  # looked again after another quiet period
    stop = threading.Event()
    reported = Recorder(stop, Outcome.REPORTED, stop_after=2)
    _watch([proc.pid], reported, stop, stall_after=1.0, timeout=6.0)
    assert len(reported.stalls) == 1  # not again until something moves


def test_watch_ends_by_itself_when_the_job_ends(start: Start, tmp_path: Path) -> None:
    proc = start(WRITER, str(tmp_path / "b.log"), "60")
    stop = threading.Event()
    handler = Recorder(stop, Outcome.REPORTED)
    threading.Timer(1.0, proc.kill).start()
    result = _watch([proc.pid], handler, stop, stall_after=30)
    assert result.why_ended.startswith("the job ended"), result
    assert [e.pid for e in result.exited] == [proc.pid]
    assert handler.stalls == []


def _scripted_take(
    monkeypatch: pytest.MonkeyPatch, script: list[stacks.StackShot | None]
) -> list[int]:
    """stacks.take answering from ``script`` (None: read at a new line each time)."""
    calls: list[int] = []

    def take(pid: int, exe: object, timeout_s: float) -> stacks.StackShot:
        calls.append(pid)
        shot = script[len(calls) - 1] if len(calls) <= len(script) else None
        if shot is not None:
            return shot
        where = (("walk", "job.py", len(calls)),)
        return stacks.StackShot(pid, {1: stacks.ThreadShot("MainThread", True, True, where)})

    monkeypatch.setattr(stacks, "take", take)
    return calls


def test_a_rank_whose_samples_all_raced_it_is_sampled_again(
    start: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a rank quiet on every cheap signal whose first three dumps failed as reads race
    # a running process (py-spy found no interpreter in the memory it was changing)
    proc = start(WRITER, str(tmp_path / "c.log"), "0.3")
    raced = stacks.StackShot(proc.pid, {}, "no interpreter", raced=True)
    calls = _scripted_take(monkeypatch, [raced, raced, raced])
    stop = threading.Event()
    handler = Recorder(stop, Outcome.REPORTED)
    # WHEN watched THEN more samples are taken, and the two read ones show it moved
    _watch([proc.pid], handler, stop, stall_after=1.0, timeout=6.0)
    assert handler.stalls == [], handler.lines
    assert len(calls) >= 5
    assert any("not stuck" in line and "moved" in line for line in handler.lines)


def test_a_rank_py_spy_cannot_read_is_confirmed_after_three_samples(
    start: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a quiet rank py-spy may not read at all (a failure no retry can fix)
    proc = start(WRITER, str(tmp_path / "c.log"), "0.3")
    denied = stacks.StackShot(proc.pid, {}, "ptrace denied")
    calls = _scripted_take(monkeypatch, [denied] * 10)
    stop = threading.Event()
    handler = Recorder(stop, Outcome.REPORTED)
    # WHEN watched THEN its stall is handed over after the usual three samples, saying why
    _watch([proc.pid], handler, stop, stall_after=1.0, timeout=8.0)
    (_, stall), *_ = handler.stalls
    assert len(calls) == 3
    assert any("ptrace denied" in note for note in stall.notes)
