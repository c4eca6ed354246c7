"""A polling loop does not move between samples (views/progress.py): ``while
os.path.exists(lock): time.sleep(s)`` is sampled either asleep on the sleep's line or inside
the existence check on the line above. Frames as py-spy dumps torch 2.13's FileBaton.wait
(torch/utils/file_baton.py lines 49-50, the stdlib's genericpath.exists)."""

from __future__ import annotations

from hangdoc.analyzer.model import Frame, ProcessEvidence, StackSample, ThreadStack
from hangdoc.analyzer.views.progress import rank_progress

_BATON = "/venv/lib/python3.11/site-packages/torch/utils/file_baton.py"
_CPP = "/venv/lib/python3.11/site-packages/torch/utils/cpp_extension.py"
_GENERICPATH = "/usr/lib/python3.11/genericpath.py"
_CALLERS = (
    Frame("_jit_compile", _CPP, 2400),
    Frame("load", _CPP, 1927),
    Frame("load_fused_kernels", "/job/megatron/fused_kernels/__init__.py", 41),
)


def _thread(*frames: Frame, active: bool) -> ThreadStack:
    return ThreadStack(
        frames=(*frames, *_CALLERS), os_thread_id=7, name="MainThread", is_main=True, active=active
    )


def _moved(first: ThreadStack, last: ThreadStack) -> bool:
    samples = [
        StackSample(index=i, time=100.0 + i, threads=(t,)) for i, t in enumerate((first, last))
    ]
    return rank_progress(ProcessEvidence(rank=3, pid=7, stack_samples=samples)).stack_moved


ASLEEP = _thread(Frame("FileBaton.wait", _BATON, 50), active=False)
CHECKING = _thread(
    Frame("exists", _GENERICPATH, 19), Frame("FileBaton.wait", _BATON, 49), active=True
)


def test_a_lock_files_waiter_asleep_then_checking_did_not_move() -> None:
    assert not _moved(ASLEEP, CHECKING)
    assert not _moved(CHECKING, ASLEEP)


def test_the_same_loop_under_another_caller_moved() -> None:
    elsewhere = ThreadStack(
        frames=(
            Frame("exists", _GENERICPATH, 19),
            Frame("FileBaton.wait", _BATON, 49),
            _CALLERS[1],
        ),
        os_thread_id=7,
        name="MainThread",
        is_main=True,
        active=True,
    )
    assert _moved(ASLEEP, elsewhere)


def test_running_its_own_code_on_another_line_moved() -> None:
    # GIVEN the thread asleep in the loop, then running the function's next lines
    running = _thread(Frame("FileBaton.wait", _BATON, 53), active=True)
    # THEN it moved: no existence check at either sample
    assert _moved(ASLEEP, running)


def test_asleep_on_two_lines_of_one_function_moved() -> None:
    # GIVEN two waits in one function (a sleep, then a blocking read further down)
    later = _thread(Frame("FileBaton.wait", _BATON, 56), active=False)
    # THEN the thread went from one to the other
    assert _moved(ASLEEP, later)
