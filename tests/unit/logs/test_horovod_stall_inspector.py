"""Horovod ≥ 0.20's stall inspector (horovod/common/stall_inspector.cc,
CheckForStalledTensors): the warning, "Stalled ranks:", then one line per rank that has not
submitted ("6: [horovod_allreduce.0, … ...]", "6!:" past the shut-down time). The lines
are written from that format string, under mpirun's "[1,0]<stderr>:" and bare (where
"6: " also looks like an srun label)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import events, fields, parse

WARNING = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
    "ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate "
    "that different ranks are trying to submit different tensors or that only subset of ranks "
    "is submitting tensors, which will cause deadlock. "
)


@pytest.mark.parametrize("prefix", ["[1,0]<stderr>:", ""])
def test_stalled_ranks_are_the_ones_the_others_wait_for(tmp_path: Path, prefix: str) -> None:
    log = tmp_path / "horovod.log"
    log.write_text(
        f"{prefix}[2020-07-15 10:00:00.000000: W horovod/common/stall_inspector.cc:105] "
        f"{WARNING}\n{prefix}Stalled ranks:\n"
        f"{prefix}6: [horovod_allreduce.0, horovod_allreduce.1 ...]\n"
        f"{prefix}7!: [horovod_allreduce.0]\n"
        f"{prefix}Epoch 2/90\n",
        encoding="utf-8",
    )
    [(_, stall)] = events(parse(log), EventKind.MISSING_RANKS.value)
    assert fields(stall)["ranks"] == (6, 7)


def test_a_list_without_its_header_is_not_read(tmp_path: Path) -> None:
    # "3: [a, b]" alone is any output (or an srun label): no stall without its header
    log = tmp_path / "out.log"
    log.write_text("3: [global_tensor_a, global_tensor_b]\n", encoding="utf-8")
    assert events(parse(log), EventKind.MISSING_RANKS.value) == []
