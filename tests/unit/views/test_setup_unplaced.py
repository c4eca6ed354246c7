"""A set-up report whose rank a paste's cut took was printed by one process, which may be
any of the ranks whose errors it ties to set-up (views/nccl_setup.py
``SetupFailure.unplaced``): HD206 names the failure, not those ranks, where the whole
paste named the one rank whose WARN it was (issue 21 item 3: a less specific answer,
never another one).

The lines are NCCL's rings.cc WARN (``Error : ring %d does not contain rank %d``, behind
NCCL's ``host:pid:tid [dev] file:line NCCL WARN`` header, under srun's ``N: `` label) and
torch's ``NCCL error in: …, invalid usage`` raised from a barrier on two ranks, with
invented values; the cuts are hangdoc/paste_mangling.py's ``cut_first_line``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.paste_mangling import cut_first_line

_WARN = (
    "12: node-7:4411:4502 [4] graph/rings.cc:32 NCCL WARN Error : ring 1 does not contain rank 12\n"
)
_RAISED = "".join(
    f"{r}:     work = group.barrier(opts=opts)\n"
    f"{r}: RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
    "1191, invalid usage, NCCL version 2.14.3\n"
    for r in (12, 14)
)


def _answer(tmp_path: Path, text: str) -> tuple[str | None, tuple[int, ...]]:
    path = tmp_path / "slurm.txt"
    path.write_text(text)
    primary = analyze(load_paths([path])).primary
    return (primary.rule, primary.culprit_ranks) if primary else (None, ())


def test_the_warns_own_rank_is_the_culprit(tmp_path: Path) -> None:
    assert _answer(tmp_path, _WARN + _RAISED) == ("HD206", (12,))


@pytest.mark.parametrize("chars", [12, None])
def test_a_warn_cut_from_its_rank_names_no_rank_of_several(
    tmp_path: Path, chars: int | None
) -> None:
    cut = cut_first_line(_WARN + _RAISED, chars=chars)
    assert not cut.startswith("12:")
    assert _answer(tmp_path, cut) == ("HD206", ())


def test_a_warn_of_no_rank_beside_one_ranks_error_still_places_it(tmp_path: Path) -> None:
    # One rank raised: the WARN of no known rank is its own or tells nothing else.
    one = _RAISED.split("\n")[:2]
    cut = cut_first_line(_WARN + "\n".join(one) + "\n")
    assert _answer(tmp_path, cut) == ("HD206", (12,))
