"""scripts/bench_all.py's phases: a raw run's peak memory told apart by its workers.

The 16,384-rank memory target is judged by straight lines through smaller runs; a line
through the whole run's peaks mixes phases (the text phase's constant workers at 1,024
ranks, another phase at 4,096), so each phase's peak must be its own."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench_all import _Phases


def test_each_set_of_workers_is_a_phase_and_the_command_alone_after_them_is_the_analysis() -> None:
    phases = _Phases()
    phases.sample(10_240, frozenset())  # start-up: the command alone, before any worker
    phases.sample(40_960, frozenset({11, 12}))  # the text workers
    phases.sample(51_200, frozenset({11, 12}))
    phases.sample(20_480, frozenset())  # between the phases
    phases.sample(61_440, frozenset({21, 22}))  # the flight recorder workers
    phases.sample(30_720, frozenset({21}))  # one of them ended: still that phase
    phases.sample(35_840, frozenset())  # the analysis
    phases.sample(25_600, frozenset())
    assert phases.as_mb() == {
        "text_phase_pss_mb": 50,
        "fr_phase_pss_mb": 60,
        "analysis_phase_pss_mb": 35,
    }


def test_a_run_without_workers_has_only_the_analysis() -> None:
    phases = _Phases()
    phases.sample(10_240, frozenset())
    assert phases.as_mb() == {"analysis_phase_pss_mb": 10}


def test_the_resource_tracker_is_no_phase() -> None:
    """A fork server's pool starts multiprocessing's resource tracker, which stays until the
    command ends: counted as workers it would hide the analysis phase behind the last."""
    from multiprocessing import resource_tracker

    from bench_all import _helper

    resource_tracker.ensure_running()
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    assert tracker is not None
    # (until it has exec'd, the new process's command line is still this one's)
    deadline = time.monotonic() + 10
    while not _helper(tracker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _helper(tracker)
    assert not _helper(os.getpid())
