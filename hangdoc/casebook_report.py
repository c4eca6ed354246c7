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
from hangdoc.casebook_eval import (
    CALIBRATION_TOLERANCE,
    CASEBOOK_UNDERCONFIDENCE,
    TRAIN_EXACT_FLOOR,
    SplitScore,
    evaluate,
)

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
        "| split | cases | cause named in label, exact | always unknown | category right "
        "| always unknown | cause named in label: right | answers right | culprit exact "
        "| culprit overlap | abstained (unknown) | abstentions right | refusals | ms per case |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("train", "test", "all"):
        s = splits[name]
        if not s.cases:
            continue
        per_case = s.seconds / s.cases
        baseline = s.always_unknown()
        exact = sum(r.exact for r in s.named)
        lines.append(
            f"| {name} | {s.cases} | **{_pct(s.named_exact)}** ({exact} of {len(s.named)}) | "
            f"{_pct(baseline.named_exact)} | "
            f"{_pct(s.accuracy)} ({sum(r.correct for r in s.results)}) | "
            f"{_pct(baseline.accuracy)} | "
            f"{_pct(s.named_accuracy)} of {len(s.named)} | "
            f"{_pct(s.precision)} of {len(s.answered)} | "
            f"{_pct(s.culprit_accuracy)} of {len(s.culprit_cases)} | {_pct(s.culprit_overlap)} | "
            f"{_pct(s.abstention_rate)} | {_pct(s.abstentions_right)} | {s.refusals} | "
            f"{per_case * 1000:.0f} |"
        )
    return lines


def _headline(split: SplitScore) -> str:
    """One line: the headline and the abstainer's score beside each number."""
    baseline = split.always_unknown()
    return (
        f"{split.name}: cause named in label, exact {_pct(split.named_exact)} of "
        f"{len(split.named)} (always unknown: {_pct(baseline.named_exact)}); "
        f"category right {_pct(split.accuracy)} of {split.cases} "
        f"(always unknown: {_pct(baseline.accuracy)})"
    )


def _per_category(s: SplitScore) -> list[str]:
    lines = [
        "| category | labelled | predicted | precision | recall | recall, exact |",
        "|---|---|---|---|---|---|",
    ]
    for cat, labelled, predicted, precision, recall, exact in s.per_category():
        p = _pct(precision) if predicted else "–"
        r = _pct(recall) if labelled else "–"
        e = _pct(exact) if labelled else "–"
        lines.append(f"| {cat.value} | {labelled} | {predicted} | {p} | {r} | {e} |")
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
        fits = -CALIBRATION_TOLERANCE <= gap <= CASEBOOK_UNDERCONFIDENCE
        flag = "" if fits or n < 5 else " ⚠"
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


def _reading(cases: list[Case]) -> str:
    """Why the headline is the exact one: how many labels accept `unknown` as right."""
    unknown_label = sum(c.category is Category.UNKNOWN for c in cases)
    unknown_alt = sum(Category.UNKNOWN in c.alternatives for c in cases)
    accepting = unknown_label + unknown_alt
    share = accepting / len(cases) if cases else 0.0
    with_alts = sum(bool(c.alternatives) for c in cases)
    return (
        f"How to read these numbers. {_pct(share)} of the cases ({accepting} of {len(cases)}: "
        f"{unknown_label} labelled `unknown`, {unknown_alt} more listing it as an alternative) "
        "accept `unknown` as a right answer, so *category right* rewards abstaining: a tool "
        "that always says `unknown` scores the *always unknown* column beside it without "
        "reading a line. The headline, **cause named in label, exact**, is scored only on "
        "the cases whose label names a cause, and only the label's own category counts "
        f"({with_alts} cases list alternatives, kept where their artifacts support two "
        "readings); saying `unknown` never scores there, so the always-`unknown` tool gets "
        "0 %. Category right: the primary finding's category is the label or an accepted "
        "alternative (an inconclusive verdict answers `unknown`). Cause named in label: "
        "right: the same over the cases whose label names a cause, alternatives counting. "
        "Answers right: of the answers that name a cause, the share that is right. Culprit: "
        "on cases whose label names culprit ranks, exact = the same set, overlap = at least "
        "one in common."
    )


def render_accuracy(
    cases: list[Case], splits: dict[str, SplitScore], floor: float, exact_floor: float
) -> str:
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
        f"CI fails when the train split falls below {_pct(exact_floor)} cause named in "
        f"label, exact, or below {_pct(floor)} category right.",
        "",
        *_summary(splits),
        "",
        _reading(cases),
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
            f"should state at most {_pct(CALIBRATION_TOLERANCE)} more than their accuracy, "
            f"and at most {_pct(CASEBOOK_UNDERCONFIDENCE)} less (the map is tempered by "
            "reports scored at first sight, fixtures/first_sight: the casebook, where the "
            f"rules were built, is right more often): {'yes' if s.calibrated() else 'no'}.",
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
    exact_floor: float = TRAIN_EXACT_FLOOR,
) -> tuple[str, int]:
    """The `hangdoc eval` command: score the casebook, optionally write docs/accuracy.md.

    With ``calibrate_to``, first fit the calibration to the casebook's answers (the
    rules' own strengths, per rule family: hangdoc/calibrate.py, analyzer/calibration.py)
    and write it there; the scores then use that table. Returns the summary to print and
    the exit status: 1 when a case file is broken or the train split is below
    ``exact_floor`` (cause named in label, exact) or ``floor`` (category right),
    else 0.
    """
    fitted, said = (None, "") if calibrate_to is None else calibrate(root, calibrate_to)
    cases, problems, splits = evaluate(root, table=fitted)
    if write is not None:
        text = render_accuracy(cases, splits, floor, exact_floor)
        write.write_text(text, encoding="utf-8")
    lines = [*problems, *([said] if said else []), *_summary(splits)]
    chosen = splits[split]
    if chosen.cases:
        lines.append(_headline(chosen))
    train = splits["train"]
    below = False
    if train.named and train.named_exact < exact_floor:
        below = True
        lines.append(
            f"train split below its floor: cause named in label, exact "
            f"{train.named_exact:.0%} < {exact_floor:.0%}"
        )
    if train.cases and train.accuracy < floor:
        below = True
        lines.append(f"train split below its floor: {train.accuracy:.0%} < {floor:.0%}")
    return "\n".join(lines), 1 if problems or below else 0
