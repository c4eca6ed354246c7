"""Two samples of a main thread are on one call path when their signatures are equal
(views/progress.py ``_same_path``): one shared frames tuple (a node summary's threads of
one shape) says so without comparing, and equal frames in two tuples or frames that differ
only natively still compare by signature."""

from __future__ import annotations

from hangdoc.analyzer.model import Frame, ThreadStack
from hangdoc.analyzer.views.progress import _same_path

_WAIT = Frame(function="wait", file="/x/distributed_c10d.py", line=3)
_STEP = Frame(function="train_step", file="/job/train.py", line=40)
_NATIVE = Frame(function="ncclKernel", file="libnccl.so", native=True)


def test_one_frames_tuple_is_one_path() -> None:
    frames = (_WAIT, _STEP)
    assert _same_path(ThreadStack(frames=frames, os_thread_id=1), ThreadStack(frames=frames))


def test_equal_frames_in_two_tuples_and_native_frames_aside() -> None:
    a = ThreadStack(frames=(_WAIT, _STEP))
    assert _same_path(a, ThreadStack(frames=tuple([_WAIT, _STEP])))
    assert _same_path(a, ThreadStack(frames=(_NATIVE, _WAIT, _STEP)))


def test_another_line_is_another_path() -> None:
    moved = Frame(function="train_step", file="/job/train.py", line=41)
    assert not _same_path(ThreadStack(frames=(_WAIT, _STEP)), ThreadStack(frames=(_WAIT, moved)))
