"""HD002 on stacks whose ranks no input names: processes told apart by the paste (a file
each, a dump each, a main thread each) that wait in different collectives are parted,
with no side known to be odd and no culprit. Hand-made after DeepSpeed #7461's paste
(ZeRO-3 ranks in the optimizer step's all_reduce and in the backward's reduce_scatter)."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Finding, Strength

ALL_REDUCE = """\
Thread 33550 (active): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2924)
    wrapper (torch/distributed/c10d_logger.py:81)
    all_reduce (deepspeed/comm/comm.py:654)
    step (deepspeed/runtime/zero/stage3.py:2120)
"""
REDUCE_SCATTER = """\
Thread 33549 (active): "MainThread"
    reduce_scatter_tensor (torch/distributed/distributed_c10d.py:4450)
    wrapper (torch/distributed/c10d_logger.py:81)
    reduce_scatter_coalesced (deepspeed/runtime/comm/coalesced_collectives.py:205)
    decorate_context (torch/utils/_contextlib.py:120)
"""


def _frames_only(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("Thread"))


def _primary(tmp_path: Path, *texts: str) -> Finding | None:
    paths = []
    for k, text in enumerate(texts):
        path = tmp_path / f"stacks_{chr(ord('a') + k)}.txt"
        path.write_text(text)
        paths.append(path)
    return analyze(load_paths(paths), calibrate=False).primary


def test_files_of_unnamed_processes_in_different_collectives_are_a_mismatch(
    tmp_path: Path,
) -> None:
    primary = _primary(tmp_path, ALL_REDUCE, REDUCE_SCATTER)
    assert primary is not None and primary.rule == "HD002"
    assert primary.category is Category.COLLECTIVE_TYPE_MISMATCH
    assert primary.culprit_ranks == ()
    # which side is odd, and how many ranks each holds, is unknown: weaker than ranks'
    assert primary.strength <= Strength.HINT


def test_one_paste_of_several_processes_with_or_without_headers(tmp_path: Path) -> None:
    for text in (
        ALL_REDUCE + "\n" + REDUCE_SCATTER,  # py-spy's thread lines, no Process lines
        ALL_REDUCE + REDUCE_SCATTER,  # the same, no gap
        _frames_only(ALL_REDUCE) + "\n" + _frames_only(REDUCE_SCATTER),  # frames only
        ALL_REDUCE + "\n" + _frames_only(REDUCE_SCATTER),  # one header of two
    ):
        primary = _primary(tmp_path, text)
        assert primary is not None and primary.rule == "HD002", text
        assert primary.culprit_ranks == ()


def test_unnamed_processes_in_one_collective_are_no_mismatch(tmp_path: Path) -> None:
    same = REDUCE_SCATTER.replace("33549", "33548")
    primary = _primary(tmp_path, REDUCE_SCATTER, same)
    assert primary is None or primary.rule != "HD002"


def test_ranks_that_agree_beside_an_unnamed_process_elsewhere_name_no_culprit(
    tmp_path: Path,
) -> None:
    ranked = "".join(f"[rank{r}]: {line}\n" for r in (0, 1) for line in ALL_REDUCE.splitlines())
    primary = _primary(tmp_path, ranked, REDUCE_SCATTER)
    assert primary is not None and primary.rule == "HD002"
    assert primary.culprit_ranks == ()


def test_a_traceback_of_an_unnamed_process_is_not_compared(tmp_path: Path) -> None:
    # a traceback says where a thread raised, perhaps long before the ranks' dumps
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 10, in <module>\n'
        "    dist.broadcast(t, 0)\n"
        '  File "torch/distributed/distributed_c10d.py", line 2200, in broadcast\n'
        "    work.wait()\n"
        "KeyboardInterrupt\n"
    )
    ranked = "".join(f"[rank{r}]: {line}\n" for r in (0, 1) for line in ALL_REDUCE.splitlines())
    primary = _primary(tmp_path, ranked, traceback)
    assert primary is None or primary.rule != "HD002"
