"""HD101 (threads deadlocked on locks) and HD102 (a thread holds the GIL), on hand-built
ranks whose frames and /proc states are shaped like the recorded lock-deadlock and
gil-held dumps."""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, Frame, Strength, Verdict
from hangdoc.analyzer.views.activity import classify_ranks

from . import causes_stacks as C

MAIN_LOG = [C.f("MetricsLogger.log", line=301), C.f("scenario", line=312), C.f("<module>")]
FLUSHER = [
    C.f("MetricsLogger.flush_forever", line=292),
    C.f("Thread.run", C.THREADING, 982),
    C.f("Thread._bootstrap", C.THREADING, 1002),
]
NATIVE_LOCK = [
    Frame("PyThread_acquire_lock_timed", "libpython3.11.so.1.0", native=True),
    Frame("lock_PyThread_acquire_lock", "libpython3.11.so.1.0", native=True),
]


def _deadlocked(samples: int = 2, *, main: list[Frame] = MAIN_LOG, flusher: list[Frame] = FLUSHER,
                flusher_gil: bool = False) -> C.Evidence:  # fmt: skip
    pid = 1003
    threads = [C.T(main, pid), C.T(flusher, 2001, "metrics-flusher", gil=flusher_gil)]
    culprit = C.rank(3, *(C.Sample(threads) for _ in range(samples)))
    return C.evidence(*C.victims(), culprit)


def test_abba_deadlock_between_main_and_flusher_is_the_primary_cause() -> None:
    # GIVEN rank 3's main thread and its flusher idle at `with` lines, on futexes, twice
    diag = analyze(_deadlocked())
    primary = diag.findings[0]
    # THEN HD101 names both threads and outranks HD001's generic verdict
    assert diag.verdict is Verdict.HANG
    assert primary.rule == "HD101"
    assert primary.category is Category.PYTHON_DEADLOCK
    assert primary.culprit_ranks == (3,)
    assert primary.waiting_ranks == (0, 1, 2)
    assert "metrics-flusher" in primary.title
    assert "MetricsLogger.flush_forever (train.py:292)" in primary.explanation
    assert "futex_do_wait" in " ".join(e.detail for e in primary.evidence)
    hd001 = next(f for f in diag.findings if f.rule == "HD001")
    assert hd001.category is Category.PYTHON_DEADLOCK  # causes.py agrees with HD101
    assert hd001.strength < primary.strength


def test_one_sample_of_futex_waits_is_not_enough() -> None:
    diag = analyze(_deadlocked(samples=1))
    assert all(f.rule != "HD101" for f in diag.findings)


def test_native_lock_frames_prove_it_in_one_sample() -> None:
    diag = analyze(
        _deadlocked(samples=1, main=NATIVE_LOCK + MAIN_LOG, flusher=NATIVE_LOCK + FLUSHER)
    )
    primary = diag.findings[0]
    assert primary.rule == "HD101"
    assert primary.strength is Strength.CONCLUSIVE
    assert "PyThread_acquire_lock" in primary.explanation


def test_main_thread_alone_on_a_futex_is_not_called_a_deadlock() -> None:
    # An idle main thread in user code on a futex may be in work.wait() of an async op.
    pid = 1003
    sample = C.Sample(
        [C.T(MAIN_LOG, pid), C.T(FLUSHER, 2001, "t", state="S", wchan="do_epoll_wait")]
    )
    diag = analyze(C.evidence(*C.victims(), C.rank(3, sample, sample)))
    assert all(f.rule != "HD101" for f in diag.findings)


def test_main_thread_alone_in_native_lock_acquire_is_a_self_deadlock() -> None:
    pid = 1003
    sample = C.Sample([C.T(NATIVE_LOCK + MAIN_LOG, pid)])
    primary = analyze(C.evidence(*C.victims(), C.rank(3, sample, sample))).findings[0]
    assert primary.rule == "HD101"
    assert "no thread releases" in primary.title


def test_shared_lock_objects_in_locals_are_named() -> None:
    lock = "<_thread.lock at 0x7f00deadbeef>"
    main = [C.f("MetricsLogger.log", line=301, lock_b=lock), *MAIN_LOG[1:]]
    flusher = [C.f("MetricsLogger.flush_forever", line=292, lock_a=lock), *FLUSHER[1:]]
    primary = analyze(_deadlocked(main=main, flusher=flusher)).findings[0]
    assert "0x7f00deadbeef" in primary.explanation


def test_gil_holder_starving_the_main_thread() -> None:
    # GIVEN rank 3's scrubber thread active+gil at the same frame, running, twice
    pid = 1003
    main = [C.f("train_step", line=79), C.f("scenario", line=340)]
    scrub = [C.f("LogScrubber.scrub_forever", line=330), *FLUSHER[1:]]
    samples = [
        C.Sample(
            [
                C.T(main, pid),
                C.T(scrub, 2001, "log-scrubber", active=True, gil=True, state="R", wchan=None,
                    cpu=12 + 94 * i),
            ]
        )
        for i in range(2)
    ]  # fmt: skip
    diag = analyze(C.evidence(*C.victims(), C.rank(3, *samples)))
    primary = diag.findings[0]
    assert primary.rule == "HD102"
    assert primary.category is Category.PYTHON_DEADLOCK
    assert primary.culprit_ranks == (3,)
    assert "log-scrubber" in primary.title
    assert "spinning" in primary.explanation
    assert all(f.rule != "HD101" for f in diag.findings)  # the GIL explains the waits


def test_gil_holder_that_moves_is_just_busy() -> None:
    pid = 1003
    main = [C.f("train_step", line=79)]
    samples = [
        C.Sample([C.T(main, pid), C.T([C.f("compute", line=50 + i)], 2001, "w", active=True,
                                      gil=True, state="R")])
        for i in range(2)
    ]  # fmt: skip
    diag = analyze(C.evidence(*C.victims(), C.rank(3, *samples)))
    assert all(f.rule != "HD102" for f in diag.findings)


def test_idle_backward_is_ddp_all_reduce_unless_another_thread_holds_the_gil() -> None:
    backward = [C.f("_engine_run_backward", C.AUTOGRAD, 979), C.f("train_one_epoch", line=483)]
    ddp = C.rank(0, C.Sample([C.T(backward, 1000)]))
    starved = C.rank(
        1,
        C.Sample(
            [C.T(backward, 1001), C.T(FLUSHER, 2001, "busy", active=True, gil=True, state="R")]
        ),
    )
    computing = C.rank(2, C.Sample([C.T(backward, 1002, active=True)]))
    activities = classify_ranks(C.evidence(ddp, starved, computing))
    call = activities[0].waiting_call
    assert call is not None and call.family == "all_reduce" and call.api == "DDP backward"
    assert activities[1].waiting_call is None
    assert activities[2].waiting_call is None
