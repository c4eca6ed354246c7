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
