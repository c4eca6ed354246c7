"""Every recorded real hang (fixtures/dumps/*, made by fixtures/record.py) is diagnosed
as its EXPECTED.json says; and each skeleton rule has a recorded positive and negative.

These run in milliseconds on the recorded dumps, so they guard the rules in every CI run
even where live jobs cannot start.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loader import load_paths

DUMPS = Path(__file__).resolve().parents[3] / "fixtures" / "dumps"
CASES = sorted(p.name for p in DUMPS.iterdir()) if DUMPS.exists() else []

# rule -> (recorded dumps where it must fire, recorded dumps where it must not)
RULE_CASES: dict[str, tuple[list[str], list[str]]] = {
    "HD001": (["checkpoint", "checkpoint-barrier", "dataloader-teardown"], ["killed", "slow"]),
    "HD002": (["eval-mismatch"], ["checkpoint", "killed", "slow"]),
    "HD003": (["killed"], ["checkpoint", "eval-mismatch", "slow"]),
    "HD004": (["slow"], ["checkpoint", "killed", "dataloader-teardown"]),
}
# Causes in the stacks and the node (issue 7).
RULE_CASES.update({
    "HD100": (["dataloader-worker", "dataloader-teardown"],
              ["checkpoint", "lock-deadlock", "io-stall", "slow"]),
    "HD101": (["lock-deadlock"], ["gil-held", "dataloader-worker", "checkpoint", "io-stall"]),
    "HD102": (["gil-held"], ["lock-deadlock", "slow", "pipeline-healthy", "slow-save"]),
    "HD103": (["io-stall"], ["checkpoint", "slow-save", "lock-deadlock", "dataloader-worker"]),
    "HD104": (["slow-save"], ["io-stall", "checkpoint", "gil-held", "pipeline-healthy"]),
    "HD105": (["p2p-deadlock", "p2p-deadlock-locals"],
              ["pipeline-healthy", "slow", "uneven-ddp"]),
    "HD106": (["uneven-ddp", "uneven-after-eval", "steps-per-epoch", "steps-per-epoch-locals"],
              ["eval-gather-tuple", "eval-mismatch", "final-save", "gil-held", "slow"]),
    "HD107": (["final-save"], ["eval-gather-tuple", "checkpoint", "uneven-ddp", "eval-mismatch"]),
    "HD002": (["eval-mismatch", "eval-gather-tuple"], ["checkpoint", "killed", "slow"]),
    "HD004": (["slow", "pipeline-healthy"], ["checkpoint", "killed", "dataloader-teardown"]),
})  # fmt: skip


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


@pytest.mark.parametrize(
    ("rule", "name", "fires"),
    [(r, n, True) for r, (pos, _) in RULE_CASES.items() for n in pos]
    + [(r, n, False) for r, (_, neg) in RULE_CASES.items() for n in neg],
)
def test_rule_positive_and_negative(rule: str, name: str, fires: bool) -> None:
    findings = _diagnose(name)["findings"]
    assert isinstance(findings, list)
    rules = {
        f["rule"]
        for f in findings
        if f["severity"] != "info" or f["category"] == "not_a_hang_slow_or_benign"
    }
    assert (rule in rules) is fires, findings


def test_every_recording_is_covered() -> None:
    assert set(CASES) >= {n for pos, neg in RULE_CASES.values() for n in pos + neg}
