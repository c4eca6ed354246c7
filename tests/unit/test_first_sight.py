"""Reports scored at first sight (hangdoc/first_sight.py) and how they temper the
calibration (analyzer/calibration.py: unseen_factor, tempered)."""

from __future__ import annotations

import json
from pathlib import Path

from hangdoc.analyzer.calibration import (
    PRIOR_UNSEEN_ANSWERS,
    CalibrationTable,
    UnseenAnswer,
    UnseenBatch,
    tempered,
    tempered_by_strength,
    unseen_factor,
)
from hangdoc.analyzer.model import Strength
from hangdoc.first_sight import main, read_batches
from tests.unit.test_calibration import _tree

TABLE = CalibrationTable(
    {"all": {Strength.HINT: 0.8, Strength.SIGNAL: 0.9, Strength.CONCLUSIVE: 0.98}}
)


def test_answers_as_right_as_predicted_leave_the_map_alone() -> None:
    right = tuple(UnseenAnswer("HD030", Strength.CONCLUSIVE, True) for _ in range(20))
    unseen = unseen_factor(TABLE, [UnseenBatch("b", right)])
    assert unseen.errors == 0 and unseen.factor == 1.0
    assert tempered(TABLE, unseen.factor) == TABLE


def test_more_errors_than_predicted_lower_every_cell_and_keep_the_order() -> None:
    # GIVEN 20 conclusive answers of which 4 were wrong (0.4 errors predicted)
    answers = tuple(UnseenAnswer("HD030", Strength.CONCLUSIVE, i >= 4) for i in range(20))
    unseen = unseen_factor(TABLE, [UnseenBatch("b", answers)])
    # THEN the factor is (4 + 1) / (0.4 + 1), and every probability's odds of error grow by it
    assert unseen.errors == 4 and unseen.predicted_errors == 0.4
    assert abs(unseen.factor - 5 / 1.4) < 1e-3
    cells = tempered(TABLE, unseen.factor).maps["all"]
    assert cells[Strength.CONCLUSIVE] == round(0.98 / (0.98 + unseen.factor * 0.02), 3)
    # a weak cell keeps a meaning: odds, not the error itself, are scaled (0.8 -> 0.53)
    assert cells[Strength.HINT] == round(0.8 / (0.8 + unseen.factor * 0.2), 3)
    assert cells[Strength.HINT] < cells[Strength.SIGNAL] < cells[Strength.CONCLUSIVE]
    assert all(0.05 <= p < TABLE.maps["all"][s] for s, p in cells.items())


def test_a_batch_known_by_its_totals_counts_with_the_confidence_it_stated() -> None:
    old = UnseenBatch("old", (), answered=45, right=39, mean_stated=0.94)
    unseen = unseen_factor(TABLE, [old])
    assert (unseen.answers, unseen.errors) == (45, 6)
    assert unseen.predicted_errors == round(45 * 0.06, 2)
    assert unseen.factor > 1


def test_no_record_no_change() -> None:
    assert unseen_factor(TABLE, []).factor == 1.0


def test_a_batch_is_scored_recorded_and_read_back(tmp_path: Path) -> None:
    # GIVEN a batch of two cases in the casebook format (one right, one wrong)
    book = _tree(tmp_path / "clone")
    out = tmp_path / "batch.json"
    # WHEN it is scored at first sight
    assert main([str(book), "--name", "demo", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    # THEN the record holds each case's answer, rule and strength, and the totals
    assert doc["batch"] == "demo" and doc["score"]["cases"] == 2
    by_case = {a["case"]: a for a in doc["answers"]}
    assert by_case["crash"]["right"] is True and by_case["wrong"]["right"] is False
    assert by_case["crash"]["strength"] in {s.word for s in Strength}
    # AND calibration reads back the answers that named a cause
    [batch] = read_batches(tmp_path)
    assert {a.right for a in batch.answers} == {True, False}


def test_damaged_records_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[]")
    assert read_batches(tmp_path) == []


def test_the_project_records_are_readable() -> None:
    folder = Path(__file__).resolve().parents[2] / "fixtures" / "first_sight"
    batches = read_batches(folder)
    assert batches and all(b.answers or b.answered for b in batches)


def test_each_strength_is_tempered_by_how_its_own_unseen_answers_fared() -> None:
    # GIVEN unseen answers: 20 conclusive all right, 20 hints of which 8 were wrong
    good = tuple(UnseenAnswer("HD030", Strength.CONCLUSIVE, True) for _ in range(20))
    weak = tuple(UnseenAnswer("HD030", Strength.HINT, i >= 8) for i in range(20))
    unseen = unseen_factor(TABLE, [UnseenBatch("b", good + weak)])
    # THEN the hints' tempered probability errs as they did, drawn toward what the
    # overall factor predicted for them (PRIOR_UNSEEN_ANSWERS answers' worth)
    hint = unseen.factor_of(Strength.HINT)
    overall_error = 1 - tempered(TABLE, unseen.factor).maps["all"][Strength.HINT]
    target = (8 + PRIOR_UNSEEN_ANSWERS * overall_error) / (20 + PRIOR_UNSEEN_ANSWERS)
    hinted = tempered_by_strength(TABLE, unseen).maps["all"][Strength.HINT]
    assert abs((1 - hinted) - target) < 2e-3
    assert hint > unseen.factor
    # and the conclusive answers, right as predicted, are tempered less than the overall
    assert 1.0 <= unseen.factor_of(Strength.CONCLUSIVE) < unseen.factor
    # a strength no unseen answer had takes the overall factor
    assert unseen.factor_of(Strength.SIGNAL) == unseen.factor
    cells = tempered_by_strength(TABLE, unseen).maps["all"]
    overall = tempered(TABLE, unseen.factor).maps["all"]
    assert cells[Strength.HINT] < overall[Strength.HINT]
    assert cells[Strength.CONCLUSIVE] > overall[Strength.CONCLUSIVE]


def test_tempering_by_strength_never_puts_a_weaker_cell_above_a_stronger_one() -> None:
    # GIVEN two families and unseen hints that were all right, signals often wrong
    table = CalibrationTable(
        {
            "all": {Strength.HINT: 0.9, Strength.SIGNAL: 0.95, Strength.CONCLUSIVE: 0.98},
            "stacks": {Strength.HINT: 0.85, Strength.SIGNAL: 0.97, Strength.CONCLUSIVE: 0.99},
        }
    )
    hints = tuple(UnseenAnswer("HD030", Strength.HINT, True) for _ in range(30))
    signals = tuple(UnseenAnswer("HD030", Strength.SIGNAL, i >= 10) for i in range(30))
    unseen = unseen_factor(table, [UnseenBatch("b", hints + signals)])
    assert unseen.factor_of(Strength.SIGNAL) > unseen.factor_of(Strength.HINT)
    maps = tempered_by_strength(table, unseen).maps
    # THEN no hint of any family shows more than the least signal of any family
    least_signal = min(cells[Strength.SIGNAL] for cells in maps.values())
    assert all(cells[Strength.HINT] <= least_signal for cells in maps.values())
    assert all(cells[Strength.SIGNAL] <= cells[Strength.CONCLUSIVE] for cells in maps.values())
