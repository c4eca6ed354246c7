"""Calibrated confidence (analyzer/calibration.py): a monotone map from a rule's own
confidence to the accuracy measured on the casebook's train split."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangdoc.analyzer import calibration
from hangdoc.analyzer.model import Category, Finding, Severity


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "calibration.json"
    monkeypatch.setattr(calibration, "TABLE", path)
    calibration._points.cache_clear()
    yield path
    calibration._points.cache_clear()


def _finding(rule: str, confidence: float) -> Finding:
    return Finding(rule, Category.RANK_DEAD, Severity.ERROR, "t", "e", "f", confidence=confidence)


def test_underconfident_answers_are_raised_and_the_order_is_kept(table: Path) -> None:
    # GIVEN answers at 0.6-0.75 that were right 19 times in 20, and 0.9 ones right 9 in 10
    answers = [(0.6, True)] * 10 + [(0.75, True)] * 9 + [(0.75, False)] + [(0.9, True)] * 9
    answers += [(0.9, False)]
    calibration.write_table(answers, "a test")
    assert json.loads(table.read_text())["points"]
    low, mid, high = (calibration.calibrate_value(v) for v in (0.6, 0.75, 0.9))
    # THEN the 0.6 answers say more than 0.6, and no two answers change places
    assert 0.6 < low <= mid <= high < 0.99
    assert low < mid < high  # strictly: findings never swap places


def test_pooled_map_never_decreases() -> None:
    knots = calibration.fit([(0.55, True)] * 20 + [(0.85, False)] * 20)
    values = [v for _, v in knots]
    assert values == sorted(values)


def test_no_cause_keeps_zero_and_a_damaged_table_changes_nothing(table: Path) -> None:
    calibration.write_table([(0.6, True)] * 10, "a test")
    assert calibration.calibrated(_finding("HD000", 0.0)).confidence == 0.0
    table.write_text("{not json")
    calibration._points.cache_clear()
    assert calibration.calibrated(_finding("HD030", 0.6)).confidence == 0.6
