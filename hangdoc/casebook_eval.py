"""Score hangdoc on the casebook: the numbers of docs/accuracy.md and CI's floor.

Each case's artifacts go through the same path as a user's files (``load_paths`` then the
rule engine); the primary finding is the answer. What counts:

* cause named in the label, exact (the headline): over the cases whose label names a
  cause, right when the primary category is the label's own; alternatives do not count,
  and abstaining (``unknown``) never scores, so a tool cannot rise on it by saying less;
* category: right when the primary category is the case's or one of its alternatives
  (an inconclusive verdict answers ``unknown``); as many labels accept ``unknown``, this
  rewards abstaining, so each split is also scored for a tool that always says
  ``unknown`` (``always_unknown``), printed beside it;
* culprit: scored on cases that name culprit ranks: right when hangdoc names exactly
  those ranks, partly right when the sets overlap;
* refusal: the analysis raised, or every artifact was refused unread;
* calibration: answers that name a cause bucketed by their stated confidence, each
  bucket's accuracy beside its mean confidence, so "90 %" can be checked to be right nine
  times in ten; abstentions (``unknown``) are scored apart, by how often they were right.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.calibration import CalibrationTable
from hangdoc.analyzer.loading.loader import NOTHING_FOUND
from hangdoc.analyzer.model import Category, Finding, Verdict
from hangdoc.casebook import Case, read_casebook

CONFIDENCE_BUCKETS: tuple[tuple[float, float], ...] = (
    (0.0, 0.2),
    (0.2, 0.4),
    (0.4, 0.6),
    (0.6, 0.8),
    (0.8, 1.01),
)
CALIBRATION_TOLERANCE = 0.15
# The map is tempered by reports scored at first sight (analyzer/calibration.py), so on the
# casebook, where the rules were built, answers are right more often than stated: that much
# under-confidence is by design; over-confidence beyond the tolerance never is. (Raised from
# 0.25 when batch h's first-sight answers joined the fit: the casebook's hint-level answers
# are right 26 of 28 in-sample, stated 51 %, the lower end of the first-sight evidence; and
# to 0.35 when batch i joined: hints right 33 of 35 in-sample, stated 51 %, while the hints
# of the twelve batches scored at first sight were right 11 of 26, 42 %; to 0.40 when batch m
# joined: hints right 49 of 52 in-sample, stated 49 %, while the hints of the sixteen batches
# scored at first sight were right 19 of 40, 48 %: the stated number is what unseen reports
# bear out, 0.003 under the old margin's floor.)
CASEBOOK_UNDERCONFIDENCE = 0.40
# CI fails when the train split falls below these (docs/accuracy.md); raised as it improves.
TRAIN_FLOOR = 0.72  # category right
TRAIN_EXACT_FLOOR = 0.75  # cause named in the label, exact (the headline)


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: Case
    predicted: Category
    confidence: float
    culprits: tuple[int, ...]
    rule: str | None
    verdict: str
    seconds: float
    refused: bool
    error: str | None = None
    # Every finding of the answer, in order (the calibration fit reads their strengths).
    findings: tuple[Finding, ...] = ()

    @property
    def correct(self) -> bool:
        return not self.refused and self.predicted in self.case.accepted

    @property
    def exact(self) -> bool:
        """The label's own category, alternatives aside."""
        return not self.refused and self.predicted is self.case.category

    @property
    def culprit_scored(self) -> bool:
        return bool(self.case.culprit_ranks)

    @property
    def culprit_right(self) -> bool:
        return set(self.culprits) == set(self.case.culprit_ranks or ())

    @property
    def culprit_overlap(self) -> bool:
        return bool(set(self.culprits) & set(self.case.culprit_ranks or ()))


def run_case(
    case: Case, *, calibrate: bool = True, table: CalibrationTable | None = None
) -> CaseResult:
    """Analyze one case's artifacts as a user's loose files; never raises. Without
    ``calibrate`` the strengths' stated confidences are kept (to measure them); with
    ``table``, that calibration rather than the shipped one."""
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.loading.loader import load_paths

    began = time.perf_counter()
    try:
        evidence = load_paths(case.artifact_paths())
        diagnosis = analyze(evidence, calibrate=calibrate, table=table)
    except Exception as exc:  # a crash is a refusal, scored as such
        return CaseResult(
            case, Category.UNKNOWN, 0.0, (), None, "error", time.perf_counter() - began,
            refused=True, error=f"{type(exc).__name__}: {exc}",
        )  # fmt: skip
    seconds = time.perf_counter() - began
    refused = bool(evidence.inputs) and all(
        i.error is not None and i.error != NOTHING_FOUND for i in evidence.inputs
    )
    primary = diagnosis.primary
    inconclusive = diagnosis.verdict is Verdict.INCONCLUSIVE
    predicted = Category.UNKNOWN if inconclusive or primary is None else primary.category
    return CaseResult(
        case=case,
        predicted=predicted,
        confidence=primary.confidence if primary is not None else 0.0,
        culprits=primary.culprit_ranks if primary is not None else (),
        rule=primary.rule if primary is not None else None,
        verdict=diagnosis.verdict.value,
        seconds=seconds,
        refused=refused,
        findings=tuple(diagnosis.findings),
    )


@dataclass(slots=True)
class SplitScore:
    """The numbers of one split."""

    name: str
    results: list[CaseResult] = field(default_factory=list)

    @property
    def cases(self) -> int:
        return len(self.results)

    @property
    def accuracy(self) -> float:
        return _share(r.correct for r in self.results)

    @property
    def named(self) -> list[CaseResult]:
        """Cases whose label names a cause: a split of mostly bare timeouts (labelled
        `unknown`) scores high by abstaining, so these are counted apart."""
        return [r for r in self.results if r.case.category is not Category.UNKNOWN]

    @property
    def named_accuracy(self) -> float:
        return _share(r.correct for r in self.named)

    @property
    def named_exact(self) -> float:
        """The headline: of the cases whose label names a cause, the share where the
        primary category is that cause (alternatives do not count)."""
        return _share(r.exact for r in self.named)

    def always_unknown(self) -> SplitScore:
        """The same cases answered by a tool that always says ``unknown``: the baseline
        that every number of this split is to be read against."""
        abstained = [
            dataclasses.replace(
                r, predicted=Category.UNKNOWN, confidence=0.0, culprits=(), rule=None,
                verdict=Verdict.INCONCLUSIVE.value, refused=False, error=None,
            )
            for r in self.results
        ]  # fmt: skip
        return SplitScore(f"{self.name} (always unknown)", abstained)

    @property
    def precision(self) -> float:
        """Of the answers that name a cause, the share that is right."""
        return _share(r.correct for r in self.answered)

    @property
    def refusals(self) -> int:
        return sum(r.refused for r in self.results)

    @property
    def abstention_rate(self) -> float:
        return _share(r.predicted is Category.UNKNOWN for r in self.results)

    @property
    def culprit_cases(self) -> list[CaseResult]:
        return [r for r in self.results if r.culprit_scored]

    @property
    def culprit_accuracy(self) -> float:
        return _share(r.culprit_right for r in self.culprit_cases)

    @property
    def culprit_overlap(self) -> float:
        return _share(r.culprit_overlap for r in self.culprit_cases)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)

    def per_category(self) -> list[tuple[Category, int, int, float, float, float]]:
        """(category, cases labelled, cases predicted, precision, recall, recall with the
        label's own category only) per category."""
        rows = []
        for cat in Category:
            labelled = [r for r in self.results if r.case.category is cat]
            predicted = [r for r in self.results if r.predicted is cat]
            if not labelled and not predicted:
                continue
            precision = _share(r.correct for r in predicted)
            recall = _share(r.correct for r in labelled)
            exact = _share(r.exact for r in labelled)
            rows.append((cat, len(labelled), len(predicted), precision, recall, exact))
        return rows

    def confusion(self) -> Counter[tuple[Category, Category]]:
        return Counter((r.case.category, r.predicted) for r in self.results)

    @property
    def answered(self) -> list[CaseResult]:
        """Results that name a cause: the ones a stated confidence is about."""
        return [r for r in self.results if r.predicted is not Category.UNKNOWN]

    @property
    def abstentions_right(self) -> float:
        """How often ``unknown`` was the right answer when hangdoc gave it."""
        return _share(r.correct for r in self.results if r.predicted is Category.UNKNOWN)

    def calibration(self) -> list[tuple[str, int, float, float]]:
        """(bucket, cases, mean stated confidence, accuracy) per confidence bucket.

        Over the answers that name a cause: an abstention (``unknown``) states no
        confidence in a cause, and is scored on its own (``abstentions_right``).
        """
        rows = []
        for low, high in CONFIDENCE_BUCKETS:
            inside = [r for r in self.answered if low <= r.confidence < high]
            if not inside:
                continue
            mean = sum(r.confidence for r in inside) / len(inside)
            label = f"{low:.0%}–{min(high, 1.0):.0%}"
            rows.append((label, len(inside), mean, _share(r.correct for r in inside)))
        return rows

    def calibrated(self, min_cases: int = 5) -> bool:
        """Every bucket with enough cases states no more than the tolerance above its
        accuracy, and no more than ``CASEBOOK_UNDERCONFIDENCE`` below the least accuracy its
        cases make plausible (the casebook is in-sample: the map promises what unseen
        reports bear out, which is less). The lower end of the accuracy's 95 % Wilson
        interval, not the share itself: eleven right answers out of eleven do not show
        that a bucket is right every time, only that it is right at least 74 % of it."""
        return all(
            mean - acc <= CALIBRATION_TOLERANCE
            and mean >= _wilson_low(acc, n) - CASEBOOK_UNDERCONFIDENCE
            for _, n, mean, acc in self.calibration()
            if n >= min_cases
        )


def _wilson_low(share: float, n: int, z: float = 1.96) -> float:
    """The lower end of the Wilson score interval of a share of ``n`` trials."""
    centre = share + z * z / (2 * n)
    spread = z * math.sqrt((share * (1 - share) + z * z / (4 * n)) / n)
    return (centre - spread) / (1 + z * z / n)


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else 0.0


def score(
    cases: Sequence[Case], *, calibrate: bool = True, table: CalibrationTable | None = None
) -> dict[str, SplitScore]:
    """Run every case; scores for ``train``, ``test`` and ``all``."""
    splits = {name: SplitScore(name) for name in ("train", "test", "all")}
    for case in cases:
        result = run_case(case, calibrate=calibrate, table=table)
        splits[case.split].results.append(result)
        splits["all"].results.append(result)
    return splits


def evaluate(
    root: Path, *, calibrate: bool = True, table: CalibrationTable | None = None
) -> tuple[list[Case], list[str], dict[str, SplitScore]]:
    """Read the casebook under ``root`` and score every valid case."""
    cases, problems = read_casebook(root)
    return cases, problems, score(cases, calibrate=calibrate, table=table)
