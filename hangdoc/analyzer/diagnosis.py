"""The result of an analysis, and its JSON form (schema ``hangdoc.findings/1``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoc.analyzer.model import Category, Evidence, Finding, RuleDoc, Verdict
from hangdoc.analyzer.views.activity import RankActivity

SCHEMA = "hangdoc.findings/1"


@dataclass(frozen=True, slots=True)
class NotEvaluated:
    rule: str
    reason: str


@dataclass(slots=True)
class Diagnosis:
    verdict: Verdict
    findings: list[Finding]
    evidence: Evidence
    activities: dict[int, RankActivity]
    expected_world_size: int | None
    seen_ranks: list[int]
    missing_ranks: list[int]
    not_evaluated: list[NotEvaluated] = field(default_factory=list)
    # The docs of the rules that fired, for the report's appendix (renderers import no rule).
    rule_docs: tuple[RuleDoc, ...] = ()

    @property
    def primary(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @property
    def primary_category(self) -> Category:
        return self.primary.category if self.primary else Category.UNKNOWN

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "verdict": self.verdict.value,
            "ranks": {
                "expected": self.expected_world_size,
                "seen": self.seen_ranks,
                "missing": self.missing_ranks,
            },
            "findings": [f.to_json() for f in self.findings],
            "not_evaluated": [{"rule": n.rule, "reason": n.reason} for n in self.not_evaluated],
            "inputs": [i.to_json() for i in self.evidence.inputs],
        }
