"""A paste whose first line is a traceback's frame line cut by the selection (issue 21
item 3): CPython's ``  File "{filename}", line {lineno}, in {name}`` loses its "File"
keyword, or the start of the file's name too, and the traceback under it no longer
holds the exception that explains the process's exit. The frame's start is put back
(parsers/unmangle.py ``_restored_frame``), so the answer is the whole paste's.

The lines are torch's ``NCCL error in: …, unhandled cuda error`` raised from
``distributed_c10d.broadcast`` and torchrun's ``failed (exitcode: 1)`` report, with
invented values; the cuts are hangdoc/paste_mangling.py's ``cut_first_line``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.unmangle import _restored_frame, unmangle
from hangdoc.paste_mangling import cut_first_line

_TB = (
    '  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", '
    "line 1451, in broadcast\n"
    "    work = default_pg.broadcast([tensor], opts)\n"
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
    "unhandled cuda error, NCCL version 2.14.3\n"
    "ncclUnhandledCudaError: Call to CUDA function failed.\n"
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
    "(pid: 4242) of binary: /usr/bin/python3\n"
)


def _answer(tmp_path: Path, text: str) -> tuple[str, tuple[int, ...]]:
    path = tmp_path / "console.txt"
    path.write_text(text)
    diagnosis = analyze(load_paths([path]))
    primary = diagnosis.primary
    assert primary is not None
    return primary.category.value, primary.culprit_ranks


@pytest.mark.parametrize("chars", [4, 12, None])
def test_a_cut_frame_line_keeps_the_whole_pastes_answer(tmp_path: Path, chars: int | None) -> None:
    whole = _answer(tmp_path, _TB)
    assert _answer(tmp_path, cut_first_line(_TB, chars=chars)) == whole


@pytest.mark.parametrize(
    ("line", "restored"),
    [
        ('le "/a/b.py", line 3, in f', '  File "/a/b.py", line 3, in f'),
        ('"/a/b.py", line 3, in <module>', '  File "/a/b.py", line 3, in <module>'),
        ('b/c.py", line 3, in f', '  File "b/c.py", line 3, in f'),
    ],
)
def test_the_frames_start_is_put_back(line: str, restored: str) -> None:
    assert _restored_frame([line, "    x = 1"]) == (0, restored)


@pytest.mark.parametrize(
    "line",
    [
        '  File "/a/b.py", line 3, in f',  # whole
        'xx "/a/b.py", line 3, in f',  # not the end of "File"
        'b/c.txt", line 3, in f',  # no source file's name
        'stderr:   File "/a/b.py", line 3, in f',  # a prefixed whole frame
    ],
)
def test_no_other_line_is_taken_for_a_cut_frame(line: str) -> None:
    assert _restored_frame([line]) is None


@pytest.mark.parametrize("line", ["x" * 200_000, 'a"' * 100_000, "x" * 3000 + '", line 3, in'])
def test_a_long_hostile_first_line_is_read_in_linear_time(line: str) -> None:
    # GIVEN a first line of a hostile file (the fuzz tests: a long run without the frame's
    # end) THEN the check answers at once (its pattern once backtracked quadratically)
    started = time.perf_counter()
    assert _restored_frame([line]) is None
    unmangle(line + "\nx\n")
    assert time.perf_counter() - started < 5.0
