"""The mechanisms built for the blind live hangs of live-2026-11-29g (issue 21): a rank
whose last iteration had less data than every one before it (views/short_last.py) names
the odd pipeline stage (HD105) and, ahead of the others in its log and past their call in
its stack, a rank that ran out of work (HD106, not HD002's type mismatch); a rank that runs
its own data code on CPU with no worker is its own loop diverging, not a data loader
hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.views.short_last import amount_of, short_last_lines
from tests.unit.views.conftest import log_evidence

ROOT = Path(__file__).resolve().parents[3]
DUMPS = ROOT / "fixtures" / "dumps"


@pytest.mark.parametrize(
    ("line", "amount"),
    [
        ("stage 0 step 2: 8 samples", (8,)),
        ("rank 3 rollout 2: completion lengths [1, 2, 1, 2]", (1, 2, 1, 2)),
        ("epoch 1 step 5 | 120 samples/s", None),  # a rate
        ("loaded 3/10 shards", None),  # a fraction: progress
        ("step 4: loss 0.25", None),  # no amount
        ("batch 3: 16 samples, loss 0.25", None),  # a number that is not whole follows
    ],
)
def test_the_amount_of_a_line_is_what_its_own_words_count(
    line: str, amount: tuple[int, ...] | None
) -> None:
    assert amount_of(line) == amount


def test_a_rank_whose_last_iteration_had_less_data_is_short() -> None:
    # GIVEN the first stage's log: two full batches, then a short one
    logs = {0: [f"stage 0 step {s}: {n} samples" for s, n in enumerate((16, 16, 8))], 1: []}
    short = short_last_lines(log_evidence(logs))
    # THEN it is short, cited against its earlier line
    assert set(short) == {0}
    assert short[0].amount == (8,) and short[0].earlier_amount == (16,)


def test_every_rank_ending_on_the_same_short_batch_is_no_one_short() -> None:
    # GIVEN an epoch whose short last batch (drop_last=False) every rank got alike
    logs = {
        r: [f"rank {r} step {s}: {n} samples" for s, n in enumerate((16, 16, 8))] for r in (0, 1)
    }
    # THEN nobody is short: the amount is not less than the other ranks' last one
    assert short_last_lines(log_evidence(logs)) == {}


def test_a_short_rank_ahead_of_the_others_counts_its_prints() -> None:
    # GIVEN three ranks that printed two rollouts, one that printed a third, shorter one
    full = [f"rollout {i}: completion lengths [8, 11]" for i in range(2)]
    logs = {r: list(full) for r in range(3)} | {3: [*full, "rollout 2: completion lengths [1, 2]"]}
    short = short_last_lines(log_evidence(logs))
    assert set(short) == {3}
    assert (short[3].prints, short[3].others_prints) == (3, 2)


@pytest.mark.parametrize(
    ("name", "rule", "category", "culprits"),
    [
        ("pipeline-short-batch", "HD105", Category.P2P_DEADLOCK, (0,)),
        ("rollout-eos", "HD106", Category.UNEVEN_DATA, (3,)),
        ("token-stream", "HD001", Category.RANK_DIVERGENCE, (3,)),
    ],
)
def test_the_recorded_hangs_of_the_batch(
    name: str, rule: str, category: Category, culprits: tuple[int, ...]
) -> None:
    primary = analyze(load_paths([DUMPS / name])).findings[0]
    assert (primary.rule, primary.category, primary.culprit_ranks) == (rule, category, culprits)


@pytest.mark.parametrize("name", ["oom-skip", "eval-mismatch", "async-checkpoint"])
def test_ranks_in_different_collectives_without_a_short_iteration_stay_hd002s(name: str) -> None:
    # (oom-skip's HD106 finding of the gradient-sync shape, weakened there, is older)
    findings = analyze(load_paths([DUMPS / name])).findings
    assert not any("ran out of work" in f.title for f in findings)


@pytest.mark.parametrize("name", ["dataloader-worker", "thread-died", "remote-shards"])
def test_a_rank_waiting_on_its_data_loader_stays_a_data_loader_hang(name: str) -> None:
    primary = analyze(load_paths([DUMPS / name])).findings[0]
    assert primary.category is Category.DATALOADER
