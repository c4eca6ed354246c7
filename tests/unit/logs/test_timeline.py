"""Ordering and cause/consequence classification (analyzer/views/timeline.py)."""

from __future__ import annotations

from hangdoc.analyzer.model import Evidence, LogEvent, ProcessEvidence
from hangdoc.analyzer.parsers.logs.errors import finish_payload
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.payloads.launch import ExceptionRaised, LauncherReport, SignalName
from hangdoc.analyzer.views.deaths import DeathHow, death_of, first_deaths
from hangdoc.analyzer.views.timeline import Timeline, before, precedes_wave, wave
from hangdoc.analyzer.vocabulary import Clock, EventKind
from hangdoc.rules.base import RuleContext


def ev(
    kind: EventKind,
    source: str,
    line: int,
    time: float | None = None,
    payload: EventPayload = NO_PAYLOAD,
    pid: int | None = None,
) -> LogEvent:
    """An event as the log parser makes it: its payload finished (the signs of its error
    read, parsers/logs/errors.py)."""
    text = f"{kind.value} line {line}"
    return LogEvent(
        kind,
        text,
        source,
        line,
        time,
        payload=finish_payload(payload, text),
        pid=pid,
        clock=Clock.LOCAL if time is not None else None,
    )


def raised(exc_type: str, message: str) -> ExceptionRaised:
    return ExceptionRaised(exc_type=exc_type, message=message)


def exited(code: int, signal: SignalName | None = None) -> LauncherReport:
    return LauncherReport(exit_code=code, signal=signal)


def evidence(*ranked: tuple[int, LogEvent], job: tuple[LogEvent, ...] = ()) -> Evidence:
    procs: dict[int, ProcessEvidence] = {}
    for rank, event in ranked:
        procs.setdefault(rank, ProcessEvidence(rank=rank)).log_events.append(event)
    return Evidence(processes=list(procs.values()), job_log_events=list(job))


def test_same_file_follows_line_order_even_against_coarse_stamps() -> None:
    a = ev(EventKind.EXCEPTION, "f", 10, None, raised("ValueError", "x"))
    b = ev(EventKind.COLLECTIVE_TIMEOUT, "f", 20, 100.5)
    c = ev(EventKind.CHILD_FAILURE, "f", 30, 100.0, exited(1))  # whole seconds: earlier stamp
    tl = Timeline(evidence((1, a), (0, b), (1, c)))
    order = [p.event.line for p in tl.events]
    assert order == [10, 20, 30]
    pa, pb = tl.events[0], tl.events[1]
    assert before(pa, pb) is True and before(pb, pa) is False


def test_files_are_ordered_by_time_only_on_the_same_clock() -> None:
    a = ev(EventKind.CUDA_OOM, "rank2.log", 5, 1000.0)
    b = ev(EventKind.COLLECTIVE_TIMEOUT, "rank0.log", 1, 1600.0)
    c = LogEvent(EventKind.COLLECTIVE_TIMEOUT, "t", "other.log", 1, 1000.0, clock=Clock.EPOCH)
    tl = Timeline(evidence((2, a), (0, b), (1, c)))
    pa = next(p for p in tl.events if p.event is a)
    pb = next(p for p in tl.events if p.event is b)
    pc = next(p for p in tl.events if p.event is c)
    assert before(pa, pb) is True
    assert before(pa, pc) is None  # local vs epoch clocks: not comparable
    close = ev(EventKind.COLLECTIVE_TIMEOUT, "rank1.log", 1, 1001.0)
    tl2 = Timeline(evidence((2, a), (1, close)))
    assert before(tl2.events[0], tl2.events[1]) is None  # within host clock skew


def test_untimed_lines_borrow_the_time_of_their_file() -> None:
    a = ev(EventKind.EXCEPTION, "f", 1, None, raised("KeyError", "k"))
    b = ev(EventKind.AGENT_TERMINATING, "f", 2, 50.0, pid=1)
    tl = Timeline(evidence((0, a), job=(b,)))
    assert tl.events[0].when == 50.0


def test_consequences_are_not_causes() -> None:
    tl = Timeline(Evidence())
    cases = {
        (
            EventKind.EXCEPTION,
            "RuntimeError",
            "[gloo/unbound_buffer.cc:78] Timed out waiting 4000ms",
        ): False,
        (EventKind.EXCEPTION, "torch.distributed.DistBackendError", "NCCL error in: x"): False,
        (EventKind.EXCEPTION, "RuntimeError", "Connection closed by peer [10.0.0.1]:5"): False,
        (EventKind.EXCEPTION, "ValueError", "bad batch"): True,
        (EventKind.EXCEPTION, "KeyboardInterrupt", ""): False,
    }
    for (kind, exc, msg), is_cause in cases.items():
        placed = Timeline(evidence((0, ev(kind, "f", 1, payload=raised(exc, msg))))).events[0]
        assert (death_of(placed) is not None) is is_cause, (exc, msg)
    del tl
    sigterm = Timeline(
        evidence((0, ev(EventKind.CHILD_FAILURE, "f", 1, None, exited(-15, SignalName.SIGTERM))))
    )
    assert death_of(sigterm.events[0]) is None
    sigkill = Timeline(
        evidence((0, ev(EventKind.CHILD_FAILURE, "f", 1, None, exited(-9, SignalName.SIGKILL))))
    )
    death = death_of(sigkill.events[0])
    assert death is not None and death.how is DeathHow.SIGNAL and death.certain
    assert death.signal is SignalName.SIGKILL
    bare = Timeline(evidence((0, ev(EventKind.WORKER_FAILED, "f", 1, None, exited(1)))))
    death = death_of(bare.events[0])
    assert death is not None and not death.certain


def test_first_deaths_skip_ranks_that_timed_out_first_and_agent_kills() -> None:
    events = evidence(
        (0, ev(EventKind.COLLECTIVE_TIMEOUT, "f", 1, 10.0)),
        (
            0,
            ev(EventKind.EXCEPTION, "f", 2, None, raised("ValueError", "after the timeout")),
        ),
        (1, ev(EventKind.CHILD_FAILURE, "f", 3, 11.0, exited(-9, SignalName.SIGKILL), pid=77)),
        (2, ev(EventKind.CHILD_FAILURE, "f", 4, 11.0, exited(-9, SignalName.SIGKILL), pid=78)),
        job=(
            ev(
                EventKind.AGENT_TERMINATING,
                "f",
                0,
                9.0,
                LauncherReport(signal=SignalName.SIGTERM),
                pid=78,
            ),
        ),
    )
    deaths = first_deaths(Timeline(events))
    assert [d.rank for d in deaths] == [1]


def test_precedes_wave() -> None:
    tl = Timeline(evidence(
        (2, ev(EventKind.CUDA_OOM, "a", 1, 5.0)),
        (0, ev(EventKind.COLLECTIVE_TIMEOUT, "b", 1, 600.0)),
        (1, ev(EventKind.CUDA_OOM, "c", 1, 900.0)),
    ))  # fmt: skip
    w = wave(tl)
    early = next(p for p in tl.events if p.rank == 2)
    late = next(p for p in tl.events if p.rank == 1)
    assert precedes_wave(early, w) is True
    assert precedes_wave(late, w) is False


def test_timeline_is_built_once_per_analysis() -> None:
    e = evidence((0, ev(EventKind.CUDA_OOM, "a", 1)))
    ctx = RuleContext(evidence=e, activities={})
    assert ctx.timeline is ctx.timeline
    e.processes[0].log_events.append(ev(EventKind.CUDA_OOM, "a", 2))
    # a new analysis (a new context) sees the new event; nothing outlives the context
    assert len(RuleContext(evidence=e, activities={}).timeline.events) == 2
