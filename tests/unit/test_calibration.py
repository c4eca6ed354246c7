"""Calibrated confidence (analyzer/calibration.py): a rule's stated confidence is pulled
toward its precision measured on the casebook's train split, in proportion to the cases."""

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
    calibration._table.cache_clear()
    yield path
    calibration._table.cache_clear()


def _finding(rule: str, confidence: float) -> Finding:
    return Finding(rule, Category.RANK_DEAD, Severity.ERROR, "t", "e", "f", confidence=confidence)


def test_a_measured_rule_moves_toward_its_precision(table: Path) -> None:
    calibration.write_table({"HD030": (30, 30), "HD031": (10, 5)}, "a test")
    assert json.loads(table.read_text())["rules"]["HD030"] == {"cases": 30, "right": 30}
    # 30 right of 30, own 0.6: (30 + 10 * 0.6) / 40 = 0.9
    assert calibration.calibrated(_finding("HD030", 0.6)).confidence == 0.9
    # 5 right of 10, own 0.9: (5 + 9) / 20 = 0.7
    assert calibration.calibrated(_finding("HD031", 0.9)).confidence == 0.7


def test_unmeasured_rules_and_no_cause_keep_their_own(table: Path) -> None:
    calibration.write_table({"HD030": (30, 30)}, "a test")
    assert calibration.calibrated(_finding("HD200", 0.6)).confidence == 0.6
    assert calibration.calibrated(_finding("HD030", 0.0)).confidence == 0.0


def test_a_damaged_table_changes_nothing(table: Path) -> None:
    table.write_text("{not json")
    assert calibration.calibrated(_finding("HD030", 0.6)).confidence == 0.6
