"""Every recorded real hang (fixtures/dumps/*, made by fixtures/record.py) is diagnosed
as its fixtures/expected/<name>.json says.

These run in milliseconds on the recorded dumps, so they guard the rules in every CI run
even where live jobs cannot start. Each rule's own positive and negative cases (many on
these dumps) are in fixtures/rule_cases/ (tests/unit/rules/test_rule_cases.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths

DUMPS = Path(__file__).resolve().parents[3] / "fixtures" / "dumps"
CASES = sorted(p.name for p in DUMPS.iterdir()) if DUMPS.exists() else []


def _diagnose(name: str) -> dict[str, object]:
    return analyze(load_paths([DUMPS / name])).to_json()


@pytest.mark.parametrize("name", CASES)
def test_recorded_dump_matches_expected(name: str) -> None:
    expected = json.loads((DUMPS.parent / "expected" / f"{name}.json").read_text())
    doc = _diagnose(name)
    findings = doc["findings"]
    assert isinstance(findings, list)
    primary = findings[0]
    assert doc["verdict"] == expected["verdict"], findings
    assert primary["category"] == expected["category"], findings
    if "rule" in expected:
        assert primary["rule"] == expected["rule"], findings
    if "culprit_ranks" in expected:
        assert primary["culprit_ranks"] == expected["culprit_ranks"], findings


def test_every_recording_has_an_expected_diagnosis() -> None:
    expected = sorted(p.stem for p in (DUMPS.parent / "expected").glob("*.json"))
    assert expected == CASES
