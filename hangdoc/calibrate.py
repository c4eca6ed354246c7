"""`hangdoc eval DIR --calibrate`: fit the confidence calibration to a casebook and write
it into the source tree that holds the casebook — never into an installed package.

The fitted table is project data: it is committed beside the code that reads it
(hangdoc/analyzer/calibration.json) and reviewed like code. A refit therefore goes where the
casebook is, the clone of the repository (``DIR``'s nearest ancestor that has
``pyproject.toml`` and ``hangdoc/analyzer/calibration.json``), or to ``--calibration-out``. An
installed hangdoc (site-packages, or any copy that is not a source tree) is never
written: its table is what was released.
"""

from __future__ import annotations

import site
import sysconfig
from pathlib import Path

from hangdoc.analyzer import calibration
from hangdoc.analyzer.calibration import (
    Answer,
    CalibrationTable,
    Ranked,
    fit,
    table_doc,
    tempered_by_strength,
    unseen_factor,
)
from hangdoc.casebook_eval import SplitScore, evaluate
from hangdoc.errors import OutputPathError

TABLE_IN_TREE = Path("hangdoc") / "analyzer" / "calibration.json"


def target_for(casebook: Path, explicit: Path | None) -> Path:
    """Where the fitted table goes: ``explicit``, else the table of the source tree that
    holds ``casebook``. Raises ``OutputPathError`` when there is none, or when the place
    is an installed package."""
    if explicit is not None:
        target = explicit
    else:
        found = next(
            (
                folder / TABLE_IN_TREE
                for folder in [casebook.resolve(), *casebook.resolve().parents]
                if (folder / "pyproject.toml").is_file() and (folder / TABLE_IN_TREE).is_file()
            ),
            None,
        )
        if found is None:
            raise OutputPathError(
                f"{casebook}: no hangdoc source tree holds this casebook "
                f"(no {TABLE_IN_TREE} beside a pyproject.toml above it)",
                help_text="Pass --calibration-out FILE, or run from a clone of the repository.",
            )
        target = found
    if _installed(target):
        raise OutputPathError(
            f"{target}: inside an installed hangdoc; its calibration is what was released",
            help_text="Calibrate in a clone of the repository (or pass --calibration-out "
            "FILE outside the installation) and commit the table there.",
        )
    if not target.parent.is_dir():
        raise OutputPathError(f"{target}: its folder does not exist")
    return target


def _installed(target: Path) -> bool:
    """True when ``target`` lies in an installed package: in a site-packages folder, or
    inside the folder hangdoc runs from when that is not a source tree."""
    resolved = target.resolve()
    sites = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    sites.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    sites.add(site.getusersitepackages())
    for folder in sites:
        if folder and resolved.is_relative_to(Path(folder).resolve()):
            return True
    shipped = calibration.TABLE.resolve()  # hangdoc/analyzer/calibration.json, wherever it runs
    package = shipped.parent.parent  # the hangdoc package folder
    # A clone keeps the package beside its pyproject.toml (docs/architecture.md: the code
    # lives in hangdoc/, the top-level analyzer/ is a link into it); an install does not.
    source_tree = (package.parent / "pyproject.toml").is_file()
    return not source_tree and resolved.is_relative_to(package)


def answers_of(split: SplitScore) -> list[Answer]:
    """The answers that named a cause, with the strength of the finding that gave them
    (an answer that names a cause is never inconclusive: its first finding is the cause)."""
    return [
        Answer(r.findings[0].rule, r.findings[0].strength, r.correct)
        for r in split.answered
        if not r.refused and r.findings
    ]


def ranked_of(split: SplitScore) -> list[Ranked]:
    """Every order a casebook answer holds between its primary finding and the findings
    of the same severity below it (the ones the strength alone put below)."""
    out = []
    for r in split.answered:
        if not r.findings:
            continue
        primary, *rest = r.findings
        for other in rest:
            if (other.says_not_hung, other.severity) == (primary.says_not_hung, primary.severity):
                out.append(Ranked((primary.rule, primary.strength), (other.rule, other.strength)))
    return out


def calibrate(root: Path, target: Path) -> tuple[CalibrationTable, str]:
    """Fit the table to the casebook under ``root`` (the rules' own strengths, every
    split), temper it by the batches scored at first sight (``first_sight_folder``),
    write it to ``target``, and say what was fitted; also fit on the train split alone,
    to record how such a map fares on the test split."""
    from hangdoc.first_sight import read_batches

    _cases, _problems, raw = evaluate(root, calibrate=False)
    every: SplitScore = raw["all"]
    fitted = fit(answers_of(every), ranked_of(every))
    unseen = unseen_factor(fitted, read_batches(first_sight_folder(root)))
    table = tempered_by_strength(fitted, unseen)
    train_only = tempered_by_strength(
        fit(answers_of(raw["train"]), ranked_of(raw["train"])), unseen
    )
    by_split = {name: answers_of(raw[name]) for name in ("train", "test")}
    n = len(answers_of(every))
    source = f"all {every.cases} cases, both splits ({n} answers that name a cause)"
    doc = table_doc(table, by_split, train_only, source, unseen)
    calibration.write_table(target, doc)
    said = (
        f"calibration fitted on {source}, odds of error scaled by {unseen.factor} after "
        f"{unseen.answers} answers on reports scored at first sight "
        f"({unseen.errors} wrong where {unseen.predicted_errors} were predicted); "
        f"written to {target}"
    )
    return table, said


def first_sight_folder(casebook: Path) -> Path:
    """The first-sight records beside the casebook: fixtures/first_sight for
    fixtures/cases."""
    return casebook.resolve().parent / "first_sight"
