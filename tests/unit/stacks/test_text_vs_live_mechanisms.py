"""What the frames of a pasted stack say, and what they cannot (issue 21, text agrees with
live): head's and tail's file headers name a rank; more ranks stopped together than wait
name no side; frames without py-spy's idle mark do not say whether a backward() waits in
DDP's all-reduce or a network call is blocked; two threads stopped in one object's methods
outrank the object's names."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Frame, ThreadStack
from hangdoc.analyzer.parsers.stacks import markers
from hangdoc.analyzer.views.activity import (
    RankActivity,
    classify_process,
    may_wait_in_gradient_sync,
)
from hangdoc.analyzer.views.locks import shared_object_wait
from hangdoc.rules.causes import cause_of
from tests.unit.stacks.helpers import scan

_FRAMES = """\
    all_reduce (torch/distributed/distributed_c10d.py:3252)
    step (train.py:159)
"""
# The job's own log lines under each rank's stack: "[rank2]" just above rank 3's header.
_TAIL = "[rank{r}] epoch 0 step 4\n"


def test_head_and_tail_file_headers_name_the_rank_of_the_file() -> None:
    # GIVEN `tail -n 40 rank*.txt` pasted whole (coreutils: "==> NAME <==" over each file)
    assert markers.label_rank("==> rank3.txt <==") == 3
    assert markers.label_rank("==> logs/rank_0.log <==") == 0
    assert markers.label_rank("==> /tmp/dump-r12-sample1.txt <==") == 12
    # a file whose name says no rank names none, and is still a file's header
    assert markers.label_rank("==> node-1.txt <==") is None
    assert markers.file_header("==> node-1.txt <==")
    assert not markers.file_header("==> rank3.txt")


def test_a_file_header_outranks_the_log_line_of_the_file_above() -> None:
    # GIVEN each rank's frames and log tail under tail's header, the previous file's last
    # line ("[rank2] …") right above the next header
    text = "".join(f"==> rank{r}.txt <==\n{_FRAMES}\n{_TAIL.format(r=r)}" for r in range(4))
    # WHEN scanned THEN each stack is its header's rank, not the log line's above it
    ranks = [p.rank for p in scan(text).processes if p.text_stacks]
    assert ranks == [0, 1, 2, 3]


def _thread(*frames: tuple[str, str], main: bool = False, name: str = "t") -> ThreadStack:
    return ThreadStack(
        frames=tuple(Frame(function, file, 10) for function, file in frames),
        name=name,
        is_main=main,
    )


def test_two_threads_stopped_in_one_objects_methods() -> None:
    # GIVEN the main thread stopped in MetricsLogger.log, no frame below it, and a thread
    # stopped in MetricsLogger.flush_forever (both waiting on the logger's lock)
    main = _thread(("MetricsLogger.log", "train.py"), ("main", "train.py"), main=True)
    flusher = _thread(
        ("MetricsLogger.flush_forever", "train.py"),
        ("Thread.run", "/usr/lib/python3.11/threading.py"),
        name="metrics-flusher",
    )
    # THEN the frames show two threads inside one object
    found = shared_object_wait(main, (main, flusher))
    assert found is not None and found.other is flusher
    assert found.main.function == "MetricsLogger.log"


def test_not_one_object_when_a_frame_is_below_or_the_class_differs() -> None:
    # a library call below the main thread's own frame says what it does (a queue's get)
    waiting = _thread(
        ("Queue.get", "/usr/lib/python3.11/queue.py"),
        ("MetricsLogger.log", "train.py"),
        main=True,
    )
    flusher = _thread(("MetricsLogger.flush_forever", "train.py"))
    assert shared_object_wait(waiting, (waiting, flusher)) is None
    # another class's thread, a module function, or a closure: no object shared
    main = _thread(("ShardWriter.persist", "train.py"), main=True)
    for other in (
        _thread(("Heartbeat.run", "train.py")),
        _thread(("flush_forever", "train.py")),
        _thread(("outer.<locals>.ShardWriter.loop", "train.py")),
    ):
        assert shared_object_wait(main, (main, other)) is None
    # the same class in another file is another class
    assert shared_object_wait(main, (main, _thread(("ShardWriter.loop", "io.py")))) is None


_BACKWARD = """\
    _engine_run_backward (torch/autograd/graph.py:979)
    backward (torch/autograd/__init__.py:395)
    Tensor.backward (torch/_tensor.py:623)
    train_one_epoch (train.py:482)
"""
_UPLOAD = """\
    HTTPConnection.send (http/client.py:1009)
    HTTPConnection.request (http/client.py:1294)
    CheckpointUploader.upload (train.py:709)
    main (train.py:790)
"""


def _activity(text: str) -> RankActivity:
    [proc] = scan(text).processes
    activity = classify_process(3, proc)
    assert activity is not None
    return activity


def test_backward_without_an_idle_mark_may_wait_in_ddps_all_reduce() -> None:
    # GIVEN a rank's frames pasted without py-spy's thread line: in backward(), idle or not
    frames_only = _activity(f"rank 3:\n{_BACKWARD}")
    # THEN it may be computing or waiting for DDP's all-reduce: neither known
    assert may_wait_in_gradient_sync(frames_only) and not frames_only.in_collective
    # WHEN py-spy's thread line says idle THEN it waits in DDP's all-reduce
    idle = _activity(f'rank 3:\nThread 857 (idle): "MainThread"\n{_BACKWARD}')
    assert idle.in_collective and not may_wait_in_gradient_sync(idle)
    # WHEN it says active THEN it computes
    active = _activity(f'rank 3:\nThread 857 (active): "MainThread"\n{_BACKWARD}')
    assert not active.in_collective and not may_wait_in_gradient_sync(active)


def test_a_network_call_outranks_the_callers_names() -> None:
    # GIVEN an upload in http.client's send, its frames without an idle mark
    cause = cause_of(_activity(f"rank 3:\n{_UPLOAD}"))
    # THEN the caller's name ("CheckpointUploader") does not make it a checkpoint save:
    # blocked or transferring, the frames cannot say; the generic category
    assert cause.category is Category.RANK_DIVERGENCE
    assert "HTTPConnection.send" in cause.doing
    # WHEN py-spy says the thread is idle THEN it waits on the network
    idle = cause_of(_activity(f'rank 3:\nThread 9 (idle): "MainThread"\n{_UPLOAD}'))
    assert idle.category is Category.IO_STALL


_LOCKED = """\
    cache_lock (train.py:882)
    _GeneratorContextManager.__enter__ (contextlib.py:137)
    prepare_cache (train.py:891)
"""
_BARRIER = """\
    barrier (torch/distributed/distributed_c10d.py:5356)
    prepare_cache (train.py:928)
"""


def _answer(text: str, tmp_path: Path) -> tuple[str | None, tuple[int, ...]]:
    path = tmp_path / "pasted.txt"
    path.write_text(text)
    primary = analyze(load_paths([path])).primary
    return (primary.rule, primary.culprit_ranks) if primary is not None else (None, ())


def test_more_ranks_stopped_together_than_wait_name_no_side(tmp_path: Path) -> None:
    # GIVEN three ranks stopped at one line of their own code (a file lock's flock: a C
    # call, no frame) and one rank in a barrier
    text = "".join(f"rank {r}:\n{_LOCKED}\n" for r in range(3)) + f"rank 3:\n{_BARRIER}"
    # THEN the three are not named as culprits outside the collective: the one in the
    # barrier may hold what they wait on
    assert _answer(text, tmp_path)[0] != "HD001"
    # WHEN one rank only stands there THEN it is the one outside the collective
    text = f"rank 0:\n{_LOCKED}\n" + "".join(f"rank {r}:\n{_BARRIER}\n" for r in (1, 2, 3))
    assert _answer(text, tmp_path) == ("HD001", (0,))
