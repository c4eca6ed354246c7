"""py-spy frames pasted without py-spy's Process/Thread lines (parsers/stacks/pyspy_frames.py).

The frame format is py-spy's own (src/dump.rs; shared/FORMATS.md §4): ``NAME (FILE:LINE)``,
``NAME (FILE)`` when the line is 0, innermost first, four spaces in.
"""

from __future__ import annotations

from tests.unit.stacks.helpers import scan, threads

RANK3 = """\
rank 3:
    all_gather (torch/distributed/distributed_c10d.py:4287)
    consolidate_state_dict (train.py:555)
    save_final_model (train.py:561)
    <module> (train.py:632)

    MetricsLogger.flush_forever (train.py:292)
    Thread.run (threading.py:982)
    Thread._bootstrap (threading.py:1002)
"""


def test_frames_without_thread_lines_are_a_dump_of_the_labelled_rank() -> None:
    [proc] = scan(RANK3).processes
    assert proc.rank == 3
    [sample] = proc.text_stacks  # the blank line parts threads, not samples
    main, worker = sample.threads
    assert [f.function for f in main.frames][:2] == ["all_gather", "consolidate_state_dict"]
    assert main.frames[0].file == "torch/distributed/distributed_c10d.py"
    assert main.frames[0].line == 4287
    assert main.is_main and not worker.is_main  # <module> at the bottom is the main thread
    assert worker.active is None  # what py-spy's thread line said is unknown


def test_the_main_thread_is_the_one_ending_in_module_wherever_it_is() -> None:
    text = RANK3.split("\n\n")[1] + "\n" + RANK3.split("\n", 1)[1].split("\n\n")[0] + "\n"
    [proc] = scan(text).processes
    flusher, main = threads(proc)
    assert main.is_main and main.frames[-1].function == "<module>"
    assert not flusher.is_main


def test_one_frame_or_prose_in_parentheses_is_no_stack() -> None:
    assert scan("    all_gather (torch/distributed/distributed_c10d.py:4287)\n").processes == []
    prose = "Loading model (7b)\nSaving weights (done)\n"
    assert scan(prose).processes == []


def test_native_frames_and_line_zero_are_read() -> None:
    text = "    clock_nanosleep (libc.so.6)\n    time.sleep (<built-in>)\n    main (train.py)\n"
    text += "    <module> (train.py:9)\n"
    [thread] = threads(scan(text).processes[0])
    assert thread.frames[0].native and thread.frames[0].file == "libc.so.6"
    assert thread.frames[2].line is None and thread.frames[3].line == 9


# A real rank's last sample (fixtures/dumps/reducer-thread, rank 3) as frames only: its
# main thread's script has ended (a KeyError) and it sits in threading's _shutdown, one
# frame; the reducer thread it never joined waits on its queue.
_SHUTDOWN = "    _shutdown (threading.py:1590)\n"
_REDUCER = """\
    Condition.wait (threading.py:327)
    Queue.get (queue.py:171)
    BackgroundReducer._reduction_loop (train.py:1363)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
"""


def test_a_one_frame_thread_beside_a_run_of_frames_is_a_thread_of_the_dump() -> None:
    # GIVEN a one-frame thread, a thread gap and a run of frames, under a rank label
    [proc] = scan("rank 3:\n" + _SHUTDOWN + "\n" + _REDUCER).processes
    # THEN one sample of two threads, the one-frame thread the main one
    [sample] = proc.text_stacks
    main, reducer = sample.threads
    assert proc.rank == 3 and [f.function for f in main.frames] == ["_shutdown"]
    assert main.is_main and main.frames[0].line == 1590 and not reducer.is_main


def test_a_one_frame_thread_after_the_runs_is_read_too_and_is_the_main_one() -> None:
    # GIVEN the same threads in the other order (no <module> frame: the thread threading
    # did not start is the main one)
    [proc] = scan(_REDUCER + "\n" + _SHUTDOWN).processes
    reducer, main = threads(proc)
    assert [f.function for f in main.frames] == ["_shutdown"]
    assert main.is_main and not reducer.is_main


def test_a_log_line_shaped_like_a_frame_is_no_thread() -> None:
    # GIVEN a log message that ends in a file and line (words: not a code name), a gap, and
    # a dump's frames; and a lone frame with nothing of its shape around it
    [proc] = scan("Loading weights from disk (loader.py:88)\n\n" + _REDUCER).processes
    [reducer] = threads(proc)
    assert reducer.frames[0].function == "Condition.wait"
    assert scan(_SHUTDOWN + "\nstep 4 loss 0.1\n" + _SHUTDOWN).processes == []


# Hand-made after DeepSpeed #7461's paste: ZeRO-3 ranks cut below the collective, some in
# the optimizer step's all_reduce, others still in the backward's reduce_scatter.
ALL_REDUCE = """\
    all_reduce (torch/distributed/distributed_c10d.py:2924)
    wrapper (torch/distributed/c10d_logger.py:81)
    all_reduce (deepspeed/comm/comm.py:654)
    step (deepspeed/runtime/zero/stage3.py:2120)
"""
REDUCE_SCATTER = """\
    reduce_scatter_tensor (torch/distributed/distributed_c10d.py:4450)
    wrapper (torch/distributed/c10d_logger.py:81)
    reduce_scatter_coalesced (deepspeed/runtime/comm/coalesced_collectives.py:205)
    decorate_context (torch/utils/_contextlib.py:120)
"""
FLUSHER = """\
    MetricsLogger.flush_forever (train.py:292)
    Thread.run (threading.py:982)
    Thread._bootstrap (threading.py:1002)
"""


def test_two_runs_in_collectives_parted_by_a_gap_are_two_processes() -> None:
    # GIVEN two ranks' frames, no header, a blank line between them
    procs = scan(ALL_REDUCE + "\n" + REDUCE_SCATTER).processes
    # THEN each is a process of its own whose main thread waits in its collective
    assert [[t.frames[0].function for t in threads(p)] for p in procs] == [
        ["all_reduce"],
        ["reduce_scatter_tensor"],
    ]
    assert all(threads(p)[0].is_main and p.rank is None for p in procs)


def test_a_thread_started_by_threading_stays_a_thread_of_the_dump_above() -> None:
    # GIVEN a rank's main thread in a collective, then a worker thread, then another rank
    procs = scan(ALL_REDUCE + "\n" + FLUSHER + "\n" + REDUCE_SCATTER).processes
    first, second = procs
    assert [t.is_main for t in threads(first)] == [True, False]
    assert threads(first)[1].frames[-1].function == "Thread._bootstrap"
    assert [t.frames[0].function for t in threads(second)] == ["reduce_scatter_tensor"]


def test_two_runs_that_end_in_module_are_two_processes() -> None:
    main = RANK3.split("\n", 1)[1].split("\n\n")[0] + "\n"
    other = main.replace("all_gather (", "broadcast (")
    procs = scan(main + "\n" + other).processes
    assert [threads(p)[0].frames[0].function for p in procs] == ["all_gather", "broadcast"]
