"""Progress (views/progress.py, HD004) reads live samples only, thread by thread: a stack
read from text (a traceback in a log, a stall dump the job printed, a pasted dump) has no
time and is never compared with a live sample, whatever thread it shows
(analyzer/model.py: live samples and text)."""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import (
    Evidence,
    Frame,
    OutputSizes,
    ProcessEvidence,
    ProcSample,
    StackSample,
    StackTextKind,
    TextStack,
    ThreadStack,
    Verdict,
)
from hangdoc.analyzer.views.activity import classify_process
from hangdoc.analyzer.views.progress import rank_progress

_C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
T0 = 1_700_000_000.0


def _frames(*functions: str) -> tuple[Frame, ...]:
    """Innermost first: the first function is where the thread is."""
    return tuple(Frame(f, "/job/train.py", 10 + i) for i, f in enumerate(functions))


def _live(index: int, *threads: ThreadStack) -> StackSample:
    return StackSample(index=index, time=T0 + index, threads=threads, source=f"pyspy.{index}.json")


def _main(pid: int, *functions: str) -> ThreadStack:
    frames = _frames(*functions)
    return ThreadStack(frames=frames, os_thread_id=pid, name="MainThread", is_main=True)


def _all_reduce(pid: int) -> ThreadStack:
    frames = (Frame("all_reduce", _C10D, 3252), *_frames("average_gradients", "train"))
    return ThreadStack(frames=frames, os_thread_id=pid, name="MainThread", is_main=True)


def _died(name: str) -> TextStack:
    """What ``threading.excepthook`` prints for a thread that died, as the scanner reads it:
    the thread named by the "Exception in thread" line, not main, its exception on it."""
    thread = ThreadStack(
        frames=_frames("read_shard", "read_ahead", "run"),
        name=name,
        exception="FileNotFoundError: shard-00001.pt",
        source="stderr.log",
    )
    return TextStack(0, (thread,), (StackTextKind.TRACEBACK,), "stderr.log", 2)


def _stall_dump(pid_thread: int, *functions: str) -> TextStack:
    """A faulthandler dump the job printed: pthread ids only, function names unqualified."""
    main = ThreadStack(frames=_frames(*functions), thread_id=pid_thread, is_main=True)
    return TextStack(1, (main,), (StackTextKind.FAULTHANDLER,), "stderr.log", 20)


def _idle_proc(index: int) -> ProcSample:
    return ProcSample(index=index, time=T0 + index, output_sizes=OutputSizes(stderr=617))


def test_a_thread_traceback_and_a_stall_dump_beside_live_samples_are_not_progress() -> None:
    # GIVEN rank 3 blocked in Queue.get at both live samples, and in its log a dead
    # thread's traceback and a stall dump whose main thread prints unqualified names
    blocked = ("Condition.wait", "Queue.get", "ShardPrefetcher.next_batch", "train")
    process = ProcessEvidence(
        rank=3,
        pid=103,
        stack_samples=[_live(0, _main(103, *blocked)), _live(1, _main(103, *blocked))],
        text_stacks=[_died("shard-prefetcher"), _stall_dump(7, "wait", "get", "next_batch")],
    )
    # WHEN progress is read THEN the rank did not move: text is never a sample
    progress = rank_progress(process)
    assert progress.samples == 2 and not progress.stack_moved and not progress.progressed
    # AND what the rank is doing is its live main thread; the dead thread is evidence
    # about that thread, named, with its exception, not the rank's main thread
    activity = classify_process(3, process)
    assert activity is not None and activity.main is not None
    assert activity.main.thread.os_thread_id == 103 and activity.read_from_text is None
    [(thread, text)] = activity.raised
    assert thread.name == "shard-prefetcher" and not thread.is_main
    assert thread.exception == "FileNotFoundError: shard-00001.pt" and text.line == 2


def test_live_samples_compare_the_same_thread_by_its_os_thread_id() -> None:
    # GIVEN a rank whose first live sample lists a helper thread first and no thread is
    # marked main, and whose main thread moved between the samples
    helper = ThreadStack(frames=_frames("sleep", "heartbeat"), os_thread_id=201)
    first = ThreadStack(frames=_frames("forward", "train"), os_thread_id=200)
    later = ThreadStack(frames=_frames("backward", "train"), os_thread_id=200)
    process = ProcessEvidence(
        rank=0,
        pid=200,
        stack_samples=[_live(0, first, helper), _live(1, helper, later)],
    )
    # THEN the thread that moved is found by its id in the last sample: progress
    assert rank_progress(process).stack_moved
    # AND a thread that is gone from the last sample is not compared with another one
    gone = ProcessEvidence(rank=0, pid=200, stack_samples=[_live(0, first), _live(1, helper)])
    assert not rank_progress(gone).stack_moved


def test_two_pasted_dumps_of_a_rank_are_not_progress() -> None:
    # GIVEN two pasted py-spy dumps of one rank that differ (text: no time)
    one = TextStack(0, (_main(9, "forward", "train"),), (StackTextKind.PYSPY,), "paste.txt", 1)
    two = TextStack(1, (_main(9, "backward", "train"),), (StackTextKind.PYSPY,), "paste.txt", 9)
    process = ProcessEvidence(rank=0, pid=9, text_stacks=[one, two])
    # THEN progress reads none of them; the last one says what the rank is doing
    assert rank_progress(process).samples == 0 and not rank_progress(process).progressed
    assert process.latest_stacks() is two and process.stack_series() == [one, two]


def test_hd004_does_not_call_a_job_slow_because_of_text_in_a_log() -> None:
    # GIVEN the recorded thread-died job's shape: ranks 0-2 in all_reduce, rank 3 in
    # Queue.get, unmoved at two live samples; each rank's log holds a stall dump (rank 3's
    # also its dead prefetcher's traceback) whose frames differ from py-spy's in name
    processes = []
    for rank in range(4):
        pid = 100 + rank
        if rank == 3:
            main = _main(pid, "Condition.wait", "Queue.get", "ShardPrefetcher.next_batch")
            texts = [_died("shard-prefetcher"), _stall_dump(7, "wait", "get", "next_batch")]
        else:
            main = _all_reduce(pid)
            texts = [_stall_dump(7, "all_reduce", "wrapper", "average_gradients")]
        processes.append(
            ProcessEvidence(
                rank=rank,
                pid=pid,
                world_size=4,
                stack_samples=[_live(0, main), _live(1, main)],
                proc_samples=[_idle_proc(0), _idle_proc(1)],
                text_stacks=texts,
            )
        )
    # WHEN analyzed THEN no rule says "not hung", and no rank moved
    diagnosis = analyze(Evidence(processes=processes))
    assert not any(f.says_not_hung for f in diagnosis.findings)
    assert not any(f.rule == "HD004" for f in diagnosis.findings)
    assert diagnosis.verdict is Verdict.HANG
    assert diagnosis.primary is not None and diagnosis.primary.culprit_ranks == (3,)
