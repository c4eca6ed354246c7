"""Calibrated confidence: what a rule's "80 %" has meant on real reports.

Each rule states a confidence from its own reasoning. The casebook's train split
(fixtures/cases, scored by `hangdoc eval`) measures how often each rule, when it was the
primary finding, named the right category. ``calibration.json`` beside this module holds
those counts (written by `hangdoc eval --calibrate`, from the train split only); the
stated confidence is the rule's own, pulled toward its measured precision in proportion to
how many cases measured it (``PRIOR_CASES`` cases' worth of weight for the rule's own
estimate). A rule never seen as primary keeps its own confidence.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

from hangdoc.analyzer.model import Finding

TABLE = Path(__file__).with_name("calibration.json")
PRIOR_CASES = 10


@functools.cache
def _table() -> dict[str, tuple[int, int]]:
    """rule id → (cases where it was primary, cases where its category was right)."""
    try:
        doc = json.loads(TABLE.read_text(encoding="utf-8"))
        rules = doc["rules"]
        return {str(k): (int(v["cases"]), int(v["right"])) for k, v in rules.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # no table (a damaged install): every rule keeps its own confidence


def calibrated(finding: Finding) -> Finding:
    """The finding with its confidence pulled toward its rule's measured precision."""
    measured = _table().get(finding.rule)
    if measured is None or measured[0] == 0 or finding.confidence <= 0.0:
        return finding
    cases, right = measured
    value = (right + PRIOR_CASES * finding.confidence) / (cases + PRIOR_CASES)
    return replace(finding, confidence=round(value, 2))


def write_table(counts: dict[str, tuple[int, int]], source: str) -> None:
    doc = {
        "about": "per rule: cases where it was the primary finding, and where its category "
        f"was right; {source}. Written by `hangdoc eval --calibrate`.",
        "prior_cases": PRIOR_CASES,
        "rules": {rule: {"cases": n, "right": r} for rule, (n, r) in sorted(counts.items())},
    }
    TABLE.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    _table.cache_clear()
