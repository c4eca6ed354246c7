"""Tracebacks cut before their exception line (python_tb.py, headless.py): kept only when
the innermost frame shown is a call whose deeper frames can only be inside it."""

from __future__ import annotations

from pathlib import Path

from tests.unit.stacks.helpers import only_process, scan, threads

CASES = Path(__file__).resolve().parents[3] / "fixtures" / "cases"


def _case(case: str, name: str) -> str:
    return (CASES / case / name).read_text()


def test_a_headed_traceback_cut_inside_new_group_is_kept() -> None:
    # colossalai issue 2500: new_group → _new_process_group_helper → ProcessGroupGloo(...)
    text = _case("colossalai-2500-64gpu-gloo-new-group-timeout", "traceback.txt")
    [thread] = threads(only_process(text))
    assert [f.function for f in thread.frames[:2]] == ["_new_process_group_helper", "new_group"]
    assert thread.exception is None


def test_a_headed_traceback_cut_in_a_collective_wrapper_is_dropped() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/test.py", line 9, in run\n'
        "    dist.all_reduce(tensor)\n"
        '  File "/x/torch/distributed/c10d_logger.py", line 75, in wrapper\n'
        "    return func(*args, **kwargs)\n"
    )
    assert not scan(text).processes


def test_a_headed_traceback_cut_in_user_code_is_dropped() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 209, in <module>\n'
        "    main()\n"
        '  File "train.py", line 169, in main\n'
        "    build()\n"
    )
    assert not scan(text).processes


def test_a_headless_traceback_cut_in_os_makedirs_is_kept() -> None:
    # NVIDIA-NeMo/Automodel PR 3686: rank 8's FileExistsError line is cut.
    text = _case("automodel-3686-rank8-ckpt-makedirs-race", "traceback.txt")
    proc = only_process(text)
    assert proc.rank == 8
    [thread] = threads(proc)
    assert [f.function for f in thread.frames[:2]] == ["makedirs", "_create_dirs"]
