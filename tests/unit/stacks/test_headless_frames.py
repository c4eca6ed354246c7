"""Stacks pasted without any header (analyzer/parsers/stacks/headless.py), on the real
pastes of the casebook (DeepSpeed #797, xtuner #944, torchtune #2643) and cut variants."""

from __future__ import annotations

from pathlib import Path

from tests.unit.stacks.helpers import only_process, scan, threads

CASES = Path(__file__).resolve().parents[3] / "fixtures" / "cases"


def _case(case: str, name: str) -> str:
    return (CASES / case / name).read_text()


def test_a_faulthandler_dump_without_its_thread_line_is_read_innermost_first() -> None:
    proc = only_process(_case("deepspeed-797-save-checkpoint-rank0-only", "faulthandler_trace.txt"))
    [thread] = threads(proc)
    assert thread.is_main and thread.exception is None
    assert [f.function for f in thread.frames[:2]] == [
        "_checkpoint_tag_validation",
        "save_checkpoint",
    ]
    assert thread.frames[-1].function == "train"


def test_a_headless_traceback_with_its_exception_line_is_the_stack_that_raised() -> None:
    text = _case("xtuner-944-small-dataset-monitored-barrier", "traceback_rank2.txt")
    proc = only_process(text)
    [thread] = threads(proc)
    assert thread.frames[0].function == "monitored_barrier"
    assert thread.exception is not None and thread.exception.startswith("RuntimeError: Rank 2")


def test_a_traceback_cut_at_both_ends_inside_a_collective_is_kept() -> None:
    proc = only_process(_case("torchtune-2643-llama4-lora-save-barrier", "rank6_traceback.txt"))
    assert proc.rank == 6
    [thread] = threads(proc)
    assert [f.function for f in thread.frames[:3]] == ["barrier", "wrapper", "save_checkpoint"]
    assert thread.exception is None


def test_a_traceback_cut_at_both_ends_elsewhere_is_left_alone() -> None:
    # returnn #1621 (better_exchook): the innermost frame shown is DataLoader.__iter__, and
    # the frames under it were cut: where the thread was is unknown.
    text = _case("returnn-1621-eval-rank0-only-socket-timeout", "traceback.txt")
    assert scan(text).processes == []


def test_a_single_frame_line_is_no_stack() -> None:
    assert scan('  File "train.py", line 3, in <module>\nValueError: bad\n').processes == []
    assert scan('  File "train.py", line 3 in main\n').processes == []


def test_a_first_frame_cut_mid_way_keeps_its_place_in_the_stack() -> None:
    # A paste cut at its start loses the first line's leading spaces (issue 21: "the first
    # line of a paste cut mid-way"): its frame sits left of the others, its source line is
    # still indented under it.
    pasted = _case("xtuner-944-small-dataset-monitored-barrier", "traceback_rank2.txt")
    text = pasted.split("\n", 1)[1]  # from its first frame line: '  File "…", line 32, …'
    whole = only_process(text)
    cut = only_process(text.lstrip())
    [whole_thread], [cut_thread] = threads(whole), threads(cut)
    assert text.startswith("  File") and text.lstrip().startswith("File")
    assert cut_thread.frames == whole_thread.frames
    assert cut_thread.exception == whole_thread.exception
