"""A rule that raises costs the user that rule only: the others run, the analysis ends,
and the failure is named (never a traceback)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Finding
from hangdoc.rules import all_rules
from hangdoc.rules.base import RuleContext

DUMP = Path(__file__).resolve().parents[3] / "fixtures" / "dumps" / "checkpoint"


def test_a_failing_rule_does_not_stop_the_analysis() -> None:
    # GIVEN every rule, plus one whose check raises
    first = all_rules()[1]

    class Broken(first):  # type: ignore[misc,valid-type]
        id = "HD999"

        def check(self, ctx: RuleContext) -> Iterable[Finding]:
            raise IndexError("list index out of range")

    # WHEN the recorded checkpoint hang is analyzed
    diagnosis = analyze(load_paths([DUMP]), rules=(Broken, *all_rules()))
    # THEN the diagnosis is the usual one, and the broken rule is named with its error
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD001"
    failed = {n.rule: n.reason for n in diagnosis.not_evaluated}
    assert "IndexError" in failed["HD999"]
    assert any("rule HD999 failed" in note for note in diagnosis.evidence.notes)
