"""Horovod ≥ 0.20's stall inspector (horovod/common/stall_inspector.cc,
CheckForStalledTensors): the warning, "Stalled ranks:", then one line per rank that has not
submitted ("6: [horovod_allreduce.0, … ...]", "6!:" past the shut-down time). The lines
are written from that format string, under mpirun's "[1,0]<stderr>:" and bare (where
"6: " also looks like an srun label)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.payloads.torch_pg import MissingRanks
from hangdoc.analyzer.views.stall_report import crossing
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


# Appended for issue 21: the ops of one report, and ranks waiting in different ops.


def _report(tmp_path: Path, text: str) -> MissingRanks:
    log = tmp_path / "horovod.log"
    log.write_text(text, encoding="utf-8")
    [(_, stall)] = events(parse(log), EventKind.MISSING_RANKS.value)
    report = stall.payload_as(MissingRanks)
    assert report is not None
    return report


def test_ranks_missing_different_ops_cross(tmp_path: Path) -> None:
    # stall_inspector.cc since horovod#2289 (2020-09): "Missing ranks:" then "R: [ops]"
    report = _report(
        tmp_path,
        f"{WARNING}\nMissing ranks:\n0: [loss_mean]\n3: [grad_a, grad_b ...]\nEpoch 2/90\n",
    )
    assert {(s.op, s.ranks, s.ready) for s in report.stalled} == {
        ("loss_mean", (0,), False),
        ("grad_a", (3,), False),
        ("grad_b", (3,), False),
    }
    found = crossing(report)
    assert found is not None and found.culprits == (0, 3)


def test_the_smaller_side_of_a_missing_report_is_the_one_that_went_the_other_way(
    tmp_path: Path,
) -> None:
    # Ranks 0-2 have not submitted the loss op rank 3 submitted; rank 3 has not submitted
    # the gradients ranks 0-2 did: rank 3 went the other way, as a "ready" report says it.
    report = _report(
        tmp_path,
        f"{WARNING}\nMissing ranks:\n0: [loss_mean]\n1: [loss_mean]\n2: [loss_mean]\n"
        "3: [grad_a, grad_b]\nEpoch 2/90\n",
    )
    found = crossing(report)
    assert found is not None
    assert (found.culprits, found.others, found.culprit_op) == ((3,), (0, 1, 2), "loss_mean")


def test_one_rank_missing_every_op_does_not_cross(tmp_path: Path) -> None:
    report = _report(tmp_path, f"{WARNING}\nMissing ranks:\n6: [grad_a, grad_b]\n")
    assert crossing(report) is None


def test_old_one_line_report_keeps_the_ready_ranks_of_each_op(tmp_path: Path) -> None:
    # operations.cc before horovod commit 67708e27 (2018-06-27): "Stalled ops: <op> [ready
    # ranks: …], …" on the warning's own line; the missing ranks are not stated.
    report = _report(
        tmp_path,
        f"WARNING: {WARNING}Stalled ops: loss_mean [ready ranks: 3], "
        "grad_a [ready ranks: 2, 0, 1], grad_b [ready ranks: 2, 0\n",
    )
    assert report.ranks == ()
    assert [(s.op, s.ranks, s.ready) for s in report.stalled] == [
        ("loss_mean", (3,), True),
        ("grad_a", (2, 0, 1), True),
        ("grad_b", (2, 0), True),
    ]
    found = crossing(report)
    assert found is not None
    assert (found.culprits, found.others) == ((3,), (0, 1, 2))


def test_old_report_with_every_op_ready_on_the_same_ranks_does_not_cross(
    tmp_path: Path,
) -> None:
    report = _report(
        tmp_path, f"WARNING: {WARNING}Stalled ops: a [ready ranks: 1, 0], b [ready ranks: 0, 1]\n"
    )
    assert crossing(report) is None


# Appended (precision6): ops Horovod named itself, "<kind>.noname.<handle>" (GetOpName in
# horovod/torch/mpi_ops_v2.cc: the kind and the process's running count of ops).


def test_an_auto_named_op_keeps_its_kind_and_count(tmp_path: Path) -> None:
    report = _report(
        tmp_path,
        f"{WARNING}\nMissing ranks:\n0: [allreduce.noname.12, allreduce.loss]\n"
        "1: [allreduce.noname.3.4]\n",
    )
    by_op = {s.op: (s.kind, s.handle) for s in report.stalled}
    assert by_op == {
        "allreduce.noname.12": ("allreduce", 12),
        "allreduce.loss": (None, None),  # a name the caller gave
        "allreduce.noname.3.4": (None, None),  # the optimizer's parameter index, not a count
    }


def test_one_auto_named_kind_at_different_counts_is_out_of_step(tmp_path: Path) -> None:
    # Rank 1 submitted its 3765th op, ranks 2 and 3 their 3873rd: one kind, out of step.
    report = _report(
        tmp_path,
        f"{WARNING}\nMissing ranks:\n0: [broadcast.noname.3765, broadcast.noname.3873]\n"
        "1: [broadcast.noname.3873]\n2: [broadcast.noname.3765]\n3: [broadcast.noname.3765]\n",
    )
    found = crossing(report)
    assert found is not None and found.out_of_step
    assert (found.culprits, found.others) == ((1,), (2, 3))


def test_auto_named_ops_of_different_kinds_are_different_ops(tmp_path: Path) -> None:
    report = _report(
        tmp_path,
        f"{WARNING}\nMissing ranks:\n0: [allreduce.noname.7]\n1: [broadcast.noname.9]\n"
        "2: [broadcast.noname.9]\n",
    )
    found = crossing(report)
    assert found is not None and not found.out_of_step


def test_a_named_crossing_is_preferred_to_an_out_of_step_one(tmp_path: Path) -> None:
    # Ranks 0-1 lag in the auto-named gradients, rank 2 waits in a named loss op as well:
    # the named pair says the ranks are in different ops.
    report = _report(
        tmp_path,
        f"{WARNING}\nMissing ranks:\n0: [allreduce.noname.5, loss_mean]\n"
        "1: [allreduce.noname.5, loss_mean]\n2: [allreduce.noname.6]\n",
    )
    found = crossing(report)
    assert found is not None and not found.out_of_step
