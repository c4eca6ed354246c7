"""docs/accuracy.md: the casebook's numbers as Markdown tables.

Only the train split's misses are listed by name: the test split is looked at as numbers,
so that nobody tunes to its cases.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hangdoc.analyzer.model import Category
from hangdoc.calibrate import calibrate
from hangdoc.casebook import Case
from hangdoc.casebook_eval import CALIBRATION_TOLERANCE, SplitScore, evaluate

_SHORT = {
    Category.RANK_DIVERGENCE: "diverge",
    Category.COLLECTIVE_TYPE_MISMATCH: "type",
    Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH: "size",
    Category.RANK_DEAD: "dead",
    Category.CUDA_OOM: "oom",
    Category.NCCL_NETWORK: "net",
    Category.NCCL_INIT: "init",
    Category.DATALOADER: "loader",
    Category.UNEVEN_DATA: "uneven",
    Category.CHECKPOINT_SAVE: "ckpt",
    Category.EVAL_SOME_RANKS: "eval",
    Category.IO_STALL: "io",
    Category.GPU_HARDWARE: "gpu",
    Category.PYTHON_DEADLOCK: "lock",
    Category.P2P_DEADLOCK: "p2p",
    Category.NOT_A_HANG: "slow",
    Category.UNKNOWN: "unknown",
}


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _summary(splits: dict[str, SplitScore]) -> list[str]:
    lines = [
        "| split | cases | category right | cause named in label: right | answers right | "
        "culprit exact | culprit overlap | abstained (unknown) | abstentions right | refusals "
        "| ms per case |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("train", "test", "all"):
        s = splits[name]
        if not s.cases:
            continue
        per_case = s.seconds / s.cases
        lines.append(
            f"| {name} | {s.cases} | {_pct(s.accuracy)} ({sum(r.correct for r in s.results)}) | "
            f"{_pct(s.named_accuracy)} of {len(s.named)} | "
            f"{_pct(s.precision)} of {len(s.answered)} | "
            f"{_pct(s.culprit_accuracy)} of {len(s.culprit_cases)} | {_pct(s.culprit_overlap)} | "
            f"{_pct(s.abstention_rate)} | {_pct(s.abstentions_right)} | {s.refusals} | "
            f"{per_case * 1000:.0f} |"
        )
    return lines


def _per_category(s: SplitScore) -> list[str]:
    lines = ["| category | labelled | predicted | precision | recall |", "|---|---|---|---|---|"]
    for cat, labelled, predicted, precision, recall in s.per_category():
        p = _pct(precision) if predicted else "–"
        r = _pct(recall) if labelled else "–"
        lines.append(f"| {cat.value} | {labelled} | {predicted} | {p} | {r} |")
    return lines


def _confusion(s: SplitScore) -> list[str]:
    counts = s.confusion()
    cats = [c for c in Category if any(c in pair for pair in counts)]
    head = "| labelled ↓ / predicted → | " + " | ".join(_SHORT[c] for c in cats) + " |"
    lines = [head, "|---" * (len(cats) + 1) + "|"]
    for row in cats:
        cells = [str(counts.get((row, col), "")) for col in cats]
        lines.append(f"| {_SHORT[row]} | " + " | ".join(cells) + " |")
    return lines


def _calibration(s: SplitScore) -> list[str]:
    lines = [
        "| stated confidence | cases | mean stated | right | gap |",
        "|---|---|---|---|---|",
    ]
    for label, n, mean, acc in s.calibration():
        gap = acc - mean
        flag = "" if abs(gap) <= CALIBRATION_TOLERANCE or n < 5 else " ⚠"
        lines.append(f"| {label} | {n} | {_pct(mean)} | {_pct(acc)} | {gap:+.0%}{flag} |")
    return lines


def _misses(s: SplitScore) -> list[str]:
    lines = ["| case | labelled (alternatives) | hangdoc said | rule | confidence |",
             "|---|---|---|---|---|"]  # fmt: skip
    for r in sorted(s.results, key=lambda r: r.case.case_id):
        if r.correct:
            continue
        alts = ", ".join(a.value for a in r.case.alternatives)
        label = r.case.category.value + (f" ({alts})" if alts else "")
        said = "refused: " + (r.error or "every input refused") if r.refused else r.predicted.value
        lines.append(
            f"| {r.case.case_id} | {label} | {said} | {r.rule or '–'} | {_pct(r.confidence)} |"
        )
    return lines


def render_accuracy(cases: list[Case], splits: dict[str, SplitScore], floor: float) -> str:
    projects = Counter(c.project for c in cases)
    labels = Counter(c.category for c in cases)
    out = [
        "# Accuracy on the casebook",
        "",
        "Written by `hangdoc eval fixtures/cases --write docs/accuracy.md`; do not edit by hand.",
        f"The casebook: {len(cases)} public reports from {len(projects)} projects "
        "(fixtures/cases/README.md says how a case is kept and labelled; the split is a hash "
        f"of each thread's URL; the {sum(c.seen for c in cases)} cases whose threads the "
        "project's own fixtures or tests cite were built against, so they count as train). "
        f"CI fails when the train split falls below {_pct(floor)}.",
        "",
        *_summary(splits),
        "",
        "Category right: the primary finding's category is the label or an accepted "
        "alternative (an inconclusive verdict answers `unknown`). Cause named in label: the "
        "same over the cases whose label is not `unknown` (a casebook of bare timeouts "
        "scores high by abstaining; this column does not). Answers right: of the answers "
        "that name a cause, the share that is right. Culprit: on cases whose "
        "label names culprit ranks, exact = the same set, overlap = at least one in common.",
        "",
        "## Labels in the casebook",
        "",
        "| category | cases | test |",
        "|---|---|---|",
    ]
    for cat in Category:
        if labels[cat]:
            test = sum(1 for c in cases if c.category is cat and c.split == "test")
            out.append(f"| {cat.value} | {labels[cat]} | {test} |")
    out += ["", "Projects: " + ", ".join(f"{p} {n}" for p, n in sorted(projects.items())), ""]
    for name in ("train", "test"):
        s = splits[name]
        if not s.cases:
            continue
        out += [
            f"## {name} split",
            "",
            "### Per category",
            "",
            *_per_category(s),
            "",
            "### Confusion",
            "",
            *_confusion(s),
            "",
            "### Is the stated confidence right that often?",
            "",
            *_calibration(s),
            "",
            f"Over the {len(s.answered)} answers that name a cause; buckets of 5 or more "
            f"should be within {_pct(CALIBRATION_TOLERANCE)} of their accuracy: "
            f"{'yes' if s.calibrated() else 'no'}.",
            "",
        ]
    out += ["## Train misses", "", *_misses(splits["train"]), ""]
    return "\n".join(out)


def run_eval(
    root: Path,
    write: Path | None,
    split: str,
    floor: float,
    *,
    calibrate_to: Path | None = None,
) -> tuple[str, int]:
    """The `hangdoc eval` command: score the casebook, optionally write docs/accuracy.md.

    With ``calibrate_to``, first fit the calibration to the casebook's answers (the
    rules' own strengths, per rule family: hangdoc/calibrate.py, analyzer/calibration.py)
    and write it there; the scores then use that table. Returns the summary to print and
    the exit status: 1 when a case file is broken or the train split is below ``floor``,
    else 0.
    """
    fitted, said = (None, "") if calibrate_to is None else calibrate(root, calibrate_to)
    cases, problems, splits = evaluate(root, table=fitted)
    if write is not None:
        write.write_text(render_accuracy(cases, splits, floor), encoding="utf-8")
    lines = [*problems, *([said] if said else []), *_summary(splits)]
    chosen = splits[split]
    if chosen.cases:
        lines.append(f"{split}: {chosen.accuracy:.0%} category right over {chosen.cases} cases")
    train = splits["train"]
    below = train.cases > 0 and train.accuracy < floor
    if below:
        lines.append(f"train split below its floor: {train.accuracy:.0%} < {floor:.0%}")
    return "\n".join(lines), 1 if problems or below else 0
