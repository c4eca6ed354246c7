"""The shipped calibration (analyzer/calibration.json) across the casebook: it never
changes an answer, never shows a finding ranked below the primary as more probable, and
its probabilities are as often right as they say (within the tolerance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdoc.analyzer import calibration
from hangdoc.analyzer.calibration import CEILING, FAMILIES, GRADED
from hangdoc.casebook_eval import SplitScore, evaluate

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "cases"


@pytest.fixture(scope="module")
def scored() -> tuple[dict[str, SplitScore], dict[str, SplitScore]]:
    """Every case scored twice: with the shipped calibration, and with the stated one."""
    _cases, problems, calibrated = evaluate(CASES)
    _cases, _problems, stated = evaluate(CASES, calibrate=False)
    assert problems == []
    return calibrated, stated


def test_calibration_never_changes_an_answer(
    scored: tuple[dict[str, SplitScore], dict[str, SplitScore]],
) -> None:
    calibrated, stated = scored
    for with_map, without in zip(calibrated["all"].results, stated["all"].results, strict=True):
        assert with_map.case.case_id == without.case.case_id
        assert (with_map.rule, with_map.predicted, with_map.culprits) == (
            without.rule, without.predicted, without.culprits,
        ), with_map.case.case_id  # fmt: skip


def test_no_finding_below_the_primary_shows_a_higher_probability(
    scored: tuple[dict[str, SplitScore], dict[str, SplitScore]],
) -> None:
    # Findings of the primary's severity are ordered by strength; the calibrated numbers
    # must not say the opposite (a finding shown as likelier than the answer).
    calibrated, _stated = scored
    for result in calibrated["all"].answered:
        primary, *rest = result.findings
        assert primary.probability is not None
        for other in rest:
            if (other.says_not_hung, other.severity) == (primary.says_not_hung, primary.severity):
                assert other.confidence <= primary.confidence, (result.case.case_id, other.rule)


def test_stated_probabilities_are_as_often_right_as_they_say(
    scored: tuple[dict[str, SplitScore], dict[str, SplitScore]],
) -> None:
    calibrated, _stated = scored
    for split in ("train", "test", "all"):
        assert calibrated[split].calibrated(), calibrated[split].calibration()


def test_the_shipped_table_is_monotone_in_strength_and_covers_every_family() -> None:
    doc = json.loads(calibration.TABLE.read_text(encoding="utf-8"))
    assert set(doc["families"]) == {f.name for f in FAMILIES}
    table = calibration.read_table(calibration.TABLE)
    assert table is not None and "all" in table.maps
    for name, values in table.maps.items():
        levels = [values[s] for s in GRADED]
        assert levels == sorted(levels), name
        assert min(levels) > 0.0 and max(levels) <= CEILING
    for entry in doc["families"].values():
        assert ("map" in entry) != ("pooled_into" in entry)
