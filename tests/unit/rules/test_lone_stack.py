"""HD108: the only stack in the inputs (a ticket's one py-spy dump) still says what that
process was doing. Inputs: single files of the recorded checkpoint hang (fixtures/dumps)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Strength

DUMP = Path(__file__).resolve().parents[3] / "fixtures" / "dumps" / "checkpoint"


def _lone(rank: int, tmp_path: Path, dump: Path = DUMP) -> Path:
    tmp_path.mkdir(exist_ok=True)
    target = tmp_path / f"pyspy_rank{rank}.json"  # as a user attaches it: rank in the name
    shutil.copyfile(dump / f"rank{rank}" / "pyspy.1.json", target)
    return target


def test_the_saving_rank_alone_is_a_checkpoint_hang(tmp_path: Path) -> None:
    diagnosis = analyze(load_paths([_lone(3, tmp_path)]), calibrate=False)
    primary = diagnosis.primary
    assert primary is not None and primary.rule == "HD108"
    assert primary.category is Category.CHECKPOINT_SAVE and primary.culprit_ranks == (3,)
    # one rank's view, nothing to compare it with: at most one direct signal
    assert Strength.HINT <= primary.strength <= Strength.SIGNAL


def test_a_waiting_rank_alone_or_several_ranks_do_not_fire(tmp_path: Path) -> None:
    # a rank in DDP's gradient all_reduce, alone: a bare collective names no cause
    uneven = DUMP.parent / "uneven-ddp"
    waiting = analyze(load_paths([_lone(0, tmp_path / "w", uneven)]))
    assert all(f.rule != "HD108" for f in waiting.findings)
    both = analyze(load_paths([_lone(0, tmp_path), _lone(3, tmp_path)]))
    assert all(f.rule != "HD108" for f in both.findings)  # the cross-rank rules compare them
    assert both.primary is not None and both.primary.rule == "HD001"
