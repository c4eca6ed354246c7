"""Reports scored at first sight: the only measure of hangdoc on tickets it was not built on.

The casebook (fixtures/cases) is a development set: every reader was written or checked
against it, so its accuracy is in-sample, and a calibration fitted on it alone promises
more than an unseen ticket delivers. A batch of reports collected by someone who never ran
hangdoc, scored once by the code as it stood before anyone looked at them, is not: its
answers are recorded here (``fixtures/first_sight/<batch>.json``: the commit that scored
it, and per case the answer, its rule and strength, and whether it was right) before the
batch joins the casebook. ``analyzer/calibration.py`` reads every such record to temper
the fitted map (``unseen_factor``).

    python -m hangdoc.first_sight BATCH_DIR --name 2026-11-27 [--out FILE]

scores a batch folder (the casebook format) and writes its record; it prints the numbers
the issue's "scored at first sight" asks for: where the artifacts show the cause, how
often hangdoc named it exactly; of the causes it named, how many were right; culprits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hangdoc.analyzer.calibration import UnseenAnswer, UnseenBatch
from hangdoc.analyzer.model import Category, Strength
from hangdoc.casebook import read_casebook
from hangdoc.casebook_eval import CaseResult, run_case

RECORDS = Path("fixtures") / "first_sight"


@dataclass(frozen=True, slots=True)
class BatchScore:
    """The first-sight numbers of one batch."""

    cases: int
    named: int  # cases whose label names a cause (the artifacts show it)
    named_exact: int  # of those, the primary category is the label's
    answered: int  # answers that name a cause
    answered_right: int
    culprit_cases: int
    culprit_right: int
    refusals: int

    def lines(self) -> list[str]:
        def share(part: int, whole: int) -> str:
            return f"{part / whole:.0%} ({part} of {whole})" if whole else "n/a"

        return [
            f"cases: {self.cases}, refused: {self.refusals}",
            f"cause named where the artifacts show it (exact): "
            f"{share(self.named_exact, self.named)}",
            f"answers that name a cause, right: {share(self.answered_right, self.answered)}",
            f"culprit exact where the thread names one: "
            f"{share(self.culprit_right, self.culprit_cases)}",
        ]


def score_batch(results: Sequence[CaseResult]) -> BatchScore:
    named = [r for r in results if r.case.category is not Category.UNKNOWN]
    answered = [r for r in results if r.predicted is not Category.UNKNOWN and not r.refused]
    culprits = [r for r in results if r.culprit_scored]
    return BatchScore(
        cases=len(results),
        named=len(named),
        named_exact=sum(r.predicted is r.case.category for r in named),
        answered=len(answered),
        answered_right=sum(r.correct for r in answered),
        culprit_cases=len(culprits),
        culprit_right=sum(r.culprit_right for r in culprits),
        refusals=sum(r.refused for r in results),
    )


def record_of(name: str, commit: str, results: Sequence[CaseResult]) -> dict[str, object]:
    """The JSON record of a batch: what each case got, with the rule and strength of the
    answer, so that a later calibration can ask how often each strength was right."""
    score = score_batch(results)
    return {
        "batch": name,
        "scored_by": commit,
        "scored_on": dt.date.today().isoformat(),
        "about": "answers given at first sight by the code of scored_by, before anyone "
        "developing hangdoc looked at these reports (hangdoc/first_sight.py)",
        "score": {
            "cases": score.cases,
            "named": score.named,
            "named_exact": score.named_exact,
            "answered": score.answered,
            "answered_right": score.answered_right,
            "culprit_cases": score.culprit_cases,
            "culprit_right": score.culprit_right,
            "refusals": score.refusals,
        },
        "answers": [
            {
                "case": r.case.case_id,
                "label": r.case.category.value,
                "predicted": r.predicted.value,
                "rule": r.rule,
                "strength": r.findings[0].strength.word if r.findings else None,
                "confidence": round(r.confidence, 3),
                "right": r.correct,
                "culprits": list(r.culprits),
                "culprits_labelled": list(r.case.culprit_ranks or ()),
            }
            for r in results
        ],
    }


def read_batches(folder: Path) -> list[UnseenBatch]:
    """Every first-sight record under ``folder``, as calibration reads them: per answer
    that named a cause, its rule, strength and whether it was right; or, for a batch
    recorded before strengths existed, its totals and the confidence it stated."""
    batches: list[UnseenBatch] = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        answers = [
            UnseenAnswer(str(a["rule"]), Strength[str(a["strength"]).upper()], bool(a["right"]))
            for a in doc.get("answers", [])
            if isinstance(a, dict)
            and a.get("predicted") != Category.UNKNOWN.value
            and a.get("rule")
            and a.get("strength") in {s.word for s in Strength}
        ]
        totals = doc.get("totals")
        if isinstance(totals, dict):
            batches.append(
                UnseenBatch(
                    str(doc.get("batch", path.stem)),
                    (),
                    answered=int(totals["answered"]),
                    right=int(totals["right"]),
                    mean_stated=float(totals["mean_stated"]),
                )
            )
        elif answers:
            batches.append(UnseenBatch(str(doc.get("batch", path.stem)), tuple(answers)))
    return batches


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score a batch of new reports at first sight.")
    parser.add_argument("batch", type=Path, help="a folder of cases in the casebook format")
    parser.add_argument("--name", required=True, help="the batch's name (a date)")
    parser.add_argument("--out", type=Path, help="write the record here (JSON)")
    args = parser.parse_args(argv)
    cases, problems = read_casebook(args.batch)
    for problem in problems:
        sys.stderr.write(f"{problem}\n")
    results = [run_case(case) for case in cases]
    for line in score_batch(results).lines():
        sys.stdout.write(line + "\n")
    if args.out is not None:
        doc = record_of(args.name, _commit(), results)
        args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        sys.stdout.write(f"wrote {args.out}\n")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
