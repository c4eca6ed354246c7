"""The rank that did not time out (analyzer/views/silence.py, ``Silence.gap``): hand-built
evidence, then the real pastes it was drawn from (yolov5 #4409, Ultra-Fast-Lane-Detection-v2
#119)."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, LogEvent, ProcessEvidence
from hangdoc.analyzer.views.silence import Gap, silence
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.analyzer.vocabulary import EventKind

CASES = Path(__file__).resolve().parents[3] / "fixtures" / "cases"


def quiet_rank(evidence: Evidence) -> Gap | None:
    return silence(evidence, Timeline(evidence)).gap


def _timed_out(rank: int, world: int | None = None) -> ProcessEvidence:
    event = LogEvent(EventKind.COLLECTIVE_TIMEOUT.value, f"[Rank {rank}] Watchdog …", "c", rank)
    return ProcessEvidence(rank=rank, world_size=world, log_events=[event])


def test_the_one_rank_below_the_reporters_that_did_not_time_out_is_named() -> None:
    evidence = Evidence(processes=[_timed_out(1), _timed_out(2), _timed_out(3)])
    quiet = quiet_rank(evidence)
    assert quiet is not None and quiet.rank == 0
    assert quiet.waiters == (1, 2, 3) and not quiet.world_known


def test_world_size_bounds_the_gap() -> None:
    evidence = Evidence(processes=[_timed_out(r, world=4) for r in (0, 1, 2)])
    quiet = quiet_rank(evidence)
    assert quiet is not None and quiet.rank == 3 and quiet.world_known


def test_no_guess_when_every_rank_or_several_did_not_time_out() -> None:
    assert quiet_rank(Evidence(processes=[_timed_out(r) for r in (0, 1, 2)])) is None
    assert quiet_rank(Evidence(processes=[_timed_out(3)])) is None  # 0, 1, 2 all silent
    assert quiet_rank(Evidence()) is None


def test_a_rank_that_only_printed_other_lines_is_no_waiter() -> None:
    other = ProcessEvidence(
        rank=0, log_events=[LogEvent(EventKind.PHASE.value, "Evaluating", "c", 1)]
    )
    evidence = Evidence(processes=[other, _timed_out(1)])
    assert silence(evidence, Timeline(evidence)).timed_out == (1,)
    quiet = quiet_rank(evidence)
    assert quiet is not None and quiet.rank == 0


def test_real_pastes_name_rank_0() -> None:
    for case, name in (
        ("yolov5-4409-val-rank0-broadcast-timeout", "console.txt"),
        ("ufld-119-evaluating-results-allreduce-timeout", "console.txt"),
    ):
        quiet = quiet_rank(load_paths([CASES / case / name]))
        assert quiet is not None and quiet.rank == 0 and quiet.waiters == (1, 2, 3)
