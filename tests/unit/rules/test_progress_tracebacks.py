"""A traceback is where an exception was raised, not a sample of a live stack: beside a
py-spy sample of the same rank it must not read as "the stack moved" (HD004, not hung)."""

from __future__ import annotations

from hangdoc.analyzer.model import Frame, ProcessEvidence, StackSample, ThreadStack
from hangdoc.analyzer.views.progress import rank_progress


def _sample(index: int, function: str, exception: str | None = None) -> StackSample:
    thread = ThreadStack(
        frames=(Frame(function, "/job/train.py", 10 + index),),
        is_main=True,
        exception=exception,
    )
    return StackSample(index=index, time=None, threads=(thread,))


def test_a_traceback_beside_a_live_sample_is_not_progress() -> None:
    process = ProcessEvidence(
        rank=0,
        stack_samples=[_sample(0, "all_reduce", "DistBackendError: timeout"), _sample(1, "step")],
    )
    assert not rank_progress(process).progressed


def test_two_live_samples_that_differ_are_progress() -> None:
    process = ProcessEvidence(rank=0, stack_samples=[_sample(0, "forward"), _sample(1, "step")])
    assert rank_progress(process).progressed
