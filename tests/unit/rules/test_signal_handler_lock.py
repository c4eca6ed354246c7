"""HD101 on a lock wait inside a Python signal handler (views/signal_frames.py): CPython
runs the handler on the main thread on top of the frame it interrupted, so a handler that
takes a lock the interrupted code holds waits on its own thread. Hand-built ranks shaped
like the recorded requeue-signal dump (a SIGUSR1 handler saving a checkpoint)."""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, Frame
from hangdoc.analyzer.views.signal_frames import signal_handler

from . import causes_stacks as C

INTERRUPTED = [
    C.f("Tracker.on_batch_end", line=87),
    C.f("fit", line=140),
    C.f("<module>", line=200),
]


def _main(handler: str, **locals_: str) -> list[Frame]:
    return [
        C.f("Tracker.snapshot", line=91),
        C.f("Connector.save_for_requeue", line=113),
        C.f(handler, line=108, **locals_),
        *INTERRUPTED,
    ]


def _rank3(main: list[Frame], samples: int = 2) -> C.Evidence:
    sample = C.Sample([C.T(main, 1003)])
    return C.evidence(*C.victims(), C.rank(3, *(sample for _ in range(samples))))


def test_a_futex_wait_inside_a_signal_handler_is_a_self_deadlock() -> None:
    # GIVEN rank 3's only thread asleep on a futex, twice, inside a SIGTERM handler
    diag = analyze(_rank3(_main("Connector.on_sigterm_handler")))
    primary = diag.findings[0]
    # THEN HD101 names the handler and the line it interrupted
    assert primary.rule == "HD101"
    assert primary.category is Category.PYTHON_DEADLOCK
    assert primary.culprit_ranks == (3,)
    assert primary.waiting_ranks == (0, 1, 2)
    assert "signal handler" in primary.title
    assert "Tracker.on_batch_end (train.py:87)" in primary.explanation
    assert "signal handler" in primary.fix


def test_a_handler_known_by_its_arguments_in_locals() -> None:
    main = _main("Connector.react", signum="10", frame="<frame at 0x7f00>")
    assert analyze(_rank3(main)).findings[0].rule == "HD101"


def test_the_same_wait_without_a_handler_is_not_called_a_deadlock() -> None:
    # An idle main thread on a futex in its own code may be in work.wait() of an async op.
    diag = analyze(_rank3(_main("Connector.handle_batch")))
    assert all(f.rule != "HD101" for f in diag.findings)


def test_one_sample_is_not_enough() -> None:
    diag = analyze(_rank3(_main("Connector.sigusr_handler"), samples=1))
    assert all(f.rule != "HD101" for f in diag.findings)


def test_a_handler_at_the_bottom_interrupted_nothing() -> None:
    frames = (C.f("Worker.signal_handler", line=5),)
    assert signal_handler(frames) is None
    found = signal_handler((C.f("cleanup"), C.f("_sigint_handler", line=3), C.f("<module>")))
    assert found is not None
    assert (found.handler.function, found.interrupted.function, found.depth) == (
        "_sigint_handler",
        "<module>",
        1,
    )
