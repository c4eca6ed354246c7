"""What the frames of a pasted stack say, and what they cannot (issue 21, text agrees with
live): head's and tail's file headers name a rank; more ranks stopped together than wait
name no side; frames without py-spy's idle mark do not say whether a backward() waits in
DDP's all-reduce or a network call is blocked; two threads stopped in one object's methods
outrank the object's names; a main thread that waits for its one idle thread in a C call
is waiting, not doing what its names say; a label that names a pid ties the log tail under
it to the stacks of that pid."""

from __future__ import annotations

from dataclasses import replace
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
from hangdoc.analyzer.views.locks import idle_helper_wait, shared_object_wait
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


def test_a_label_that_names_the_process_by_its_pid() -> None:
    # GIVEN labels a person types over a rank's py-spy text: the host and pid from ps or
    # the launcher, the command run, each with a rank beside it or not
    label = markers.process_label
    assert label("node-1:24036 (rank 3)") == (3, 24036)
    assert label("$ py-spy dump --pid 24036  # rank 3") == (3, 24036)
    assert label("Rank 3 (pid 24036) py-spy dump") == (3, 24036)
    assert label("PID=24036") == (None, 24036)
    assert label("=== Rank 3 ===") == (3, None)
    # a host and a number alone is how an address and its port are written: no label
    assert label("node-1:29500") is None
    # a log line that names a rank or a pid among other words is no label
    assert label("rank 3: end of epoch 1, validating") is None
    assert label("Connecting to node-1:29500 (rank 3)") is None
    assert label("worker pid 24036 exited with code 1") is None


_OOM = "| WARNING: attempting to recover from OOM in forward/backward pass\n"


def _pid_paste(label: str, headers: bool, pids: tuple[int, ...] = (501, 502)) -> str:
    """Two ranks' py-spy text under a label with each pid, each with its log tail (lines
    that name no rank), rank 1 having run out of memory."""
    parts = []
    for rank, pid in enumerate(pids):
        head = (
            f"Process {pid}: python train.py\nPython v3.11 (python)\n\n"
            f'Thread {pid} (idle): "MainThread"\n'
        )
        parts.append(label.format(rank=rank, pid=pid) + "\n" + (head if headers else ""))
        parts.append(_BARRIER if rank else _FRAMES)
        parts.append("\n| epoch 001 | step 7/8\n")
        if rank:
            parts.append(_OOM)
    return "".join(parts)


def _by_rank(text: str, tmp_path: Path) -> dict[int | None, tuple[int, int]]:
    """Each process's (log events, log lines) of a pasted text."""
    path = tmp_path / "pasted.txt"
    path.write_text(text)
    evidence = load_paths([path])
    out = {p.rank: (len(p.log_events), len(p.log_lines)) for p in evidence.processes}
    out[None] = (len(evidence.job_log_events), len(evidence.job_log_lines))
    return out


def test_the_log_tail_under_a_pid_label_is_the_process_of_that_pid(tmp_path: Path) -> None:
    for label in ("node-1:{pid} (rank {rank})", "$ py-spy dump --pid {pid}  # rank {rank}"):
        for headers in (True, False):
            # GIVEN each rank's stacks and log tail under a label that names its pid
            got = _by_rank(_pid_paste(label, headers), tmp_path)
            # THEN the log tail is the rank's whose stacks carry the pid: rank 1 holds
            # the OOM event and both its lines, and nothing is left to the job
            assert got[1] == (1, 2) and got[0] == (0, 1), (label, headers, got)
            assert got[None] == (0, 0), (label, headers, got)


def test_a_pid_label_of_no_dumped_process_is_a_line_of_the_job(tmp_path: Path) -> None:
    # GIVEN the job's log under a rank label, holding a line shaped like a pid label
    # whose pid no stack of the paste carries
    text = f"rank 1:\n{_BARRIER}\n| epoch 001 | step 7/8\nstep:100 rank:3\n{_OOM}"
    got = _by_rank(text, tmp_path)
    # THEN it opens no section: the OOM under it stays rank 1's
    assert got[1][0] == 1 and got[None][0] == 0, got


def _idle(thread: ThreadStack, active: bool | None = False) -> ThreadStack:
    return replace(thread, active=active)


def test_the_main_thread_waits_for_its_one_idle_thread_in_a_c_call() -> None:
    # GIVEN the main thread in a Future's result, and a pool worker thread that py-spy
    # shows idle at a line of the job's own code, no frame below it (a recv, an acquire)
    main = _idle(
        _thread(
            ("Condition.wait", "threading.py"),
            ("Future.result", "concurrent/futures/_base.py"),
            ("Exporter.push", "train.py"),
            main=True,
        )
    )
    worker = _idle(
        _thread(
            ("Exporter._send", "train.py"),
            ("_WorkItem.run", "concurrent/futures/thread.py"),
            name="exporter_0",
        )
    )
    # THEN the main thread waits for it, in the primitive, whatever the names say
    found = idle_helper_wait(main, (main, worker))
    assert found is not None and found.other is worker
    assert found.waits_in is not None and found.waits_in.function == "Condition.wait"
    assert found.other_frame.function == "Exporter._send"
    # WHEN nothing says the thread is idle (frames only) THEN it may be computing
    assert idle_helper_wait(main, (main, _idle(worker, None))) is None
    # WHEN two threads stand so THEN which one it waits for, nothing says
    other = _idle(_thread(("Heartbeat.beat", "train.py"), name="hb"))
    assert idle_helper_wait(main, (main, worker, other)) is None
    # WHEN the thread waits in the stdlib (a queue's get) THEN its frames say on what
    queued = _idle(_thread(("Queue.get", "queue.py"), ("Exporter._send", "train.py")))
    assert idle_helper_wait(main, (main, queued)) is None
    # WHEN the main thread itself stands in the job's own code THEN it waits on no thread
    own = _idle(_thread(("Exporter.push", "train.py"), main=True))
    assert idle_helper_wait(own, (own, worker)) is None
