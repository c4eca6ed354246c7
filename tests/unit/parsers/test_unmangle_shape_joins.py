"""A wrap at word boundaries whose lengths show no width (parsers/unmangle.py
``_shape_joins``): a one-line paste broken once or twice, or one message printed many
times and broken alike, shows too few breaks short of the edge for ``_word_width``. A
break is joined where the joined line is a record of a known shape (a traceback's frame,
an NCCL header and its level, an OSError with its file names, a message the catalog or
the log readers know) and the piece alone is not; and at a column wrap's boundary a seam
between two words gets its space back (``_word_seam``), where a word cut in two does not.
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.unmangle import _word_break, unmangle
from hangdoc.paste_mangling import hard_wrap, word_wrap

_BARRIER = (
    "Waiting in store based barrier to initialize process group for rank: 0, key: "
    "store_based_barrier_key:1 (world_size=4, worker_count=2, timeout=0:30:00)\n"
)
_ELASTIC = (
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 "
    "(pid: 4242) of binary: /usr/bin/python3\n"
)
_FRAME = (
    "[rank1]: Traceback (most recent call last):\n"
    '[rank1]:   File "/opt/conda/envs/train/lib/python3.10/site-packages/torch/distributed/'
    'pipelining/schedules.py", line 599, in step\n'
    "[rank1]:     self._step_microbatches(args_split)\n"
)
_NCCL = (
    "[2025-04-08 08:39:46] node-17:589012:591652 [0] transport/nvls.cc:254 NCCL WARN Cuda "
    "failure 1 'invalid argument'\n"
)
_OS_ERROR = (
    "FileNotFoundError: [Errno 2] No such file or directory: "
    "'output/run_1/checkpoint_tmp.pth.tar' -> 'output/run_1/checkpoint_last.pth.tar'\n"
)


@pytest.mark.parametrize("text", [_BARRIER * 3, _ELASTIC, _FRAME, _NCCL, _OS_ERROR])
@pytest.mark.parametrize("width", [80, 120])
def test_a_record_broken_at_word_boundaries_is_joined_whole(text: str, width: int) -> None:
    mangled = word_wrap(text, width)
    fixed = unmangle(mangled)
    if mangled == text:
        assert fixed is None
        return
    assert fixed is not None, mangled
    assert fixed.text == text


def test_the_joined_lines_keep_their_origin() -> None:
    mangled = word_wrap(_BARRIER * 3, 80)
    fixed = unmangle(mangled)
    assert fixed is not None
    assert len(mangled.splitlines()) == 6
    assert fixed.line_map == (1, 3, 5)


def test_a_seam_between_two_words_gets_its_space_back() -> None:
    # one line broken once at a space: the lengths say a column cut it ("on" / "rank")
    text = (
        "RuntimeError: Timed out initializing process group in store based barrier on "
        "rank: 0, for key: store_based_barrier_key:1 (world_size=2, worker_count=1, "
        "timeout=0:30:00)\n"
    )
    fixed = unmangle(word_wrap(text, 80))
    assert fixed is not None
    assert fixed.text == text


def test_a_word_a_column_cut_stays_one_word() -> None:
    # a terminal cuts "subprocess" and "timeout" inside the word: no space goes back
    text = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: the subprocess "
        "exited after its timeout while the store was waiting for the other ranks to join\n"
    )
    for width in range(60, 100):
        fixed = unmangle(hard_wrap(text, width))
        assert fixed is None or fixed.text == text, width


@pytest.mark.parametrize(
    "text",
    [
        # a rule, then a path's warning: two lines
        "-----------------------------------------\n"
        "/home/user/envs/train/lib/python3.10/site-packages/torchvision/io/image.py:13: "
        "UserWarning: Failed to load image Python extension\n",
        # a sentence's end, then the next record
        "RuntimeError: [2]: params[4] in this process with sizes [243, 256] appears not to "
        "match sizes of the same param in process 0.\nnumber of params: 16818120\n",
        # an exception's class alone on its line, then the failed script
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "experiments/train model.py FAILED\n",
    ],
)
def test_whole_lines_stay_apart(text: str) -> None:
    fixed = unmangle(text)
    assert fixed is None or fixed.text == text


def test_a_frame_lines_end_is_a_whole_lines_end_to_a_word_wrap() -> None:
    # GIVEN the last piece of a frame line whose path a wrap broke, near the edge, and a
    # source line pasted at the margin (a traceback that lost its indentation): CPython's
    # traceback writes the source on a line of its own (traceback.format_frame_summary)
    piece = 'ges/transformers/training_args.py", line 1891, in main_process_first'
    rest = "torch.distributed.barrier()"
    # THEN the boundary says nothing of a wrap (lengths alone would call it a break)
    assert len(piece) + 1 + len(rest) > 80
    assert _word_break(piece, rest, 80) is None
    # while a piece that is not a frame line's end still reads as broken there
    assert _word_break(piece.replace('", line', " line"), rest, 80) is True
