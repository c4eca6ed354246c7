"""The metamorphic check of the casebook: mangle every case's pastes, compare the answers.

The casebook's ground truth took a person per thread; what must *not* change is free: a
paste quoted, indented, wrapped, stamped by a shipper or cut at its start is the same
evidence (hangdoc/paste_mangling.py), so hangdoc must give the same primary category and
culprit ranks, or abstain (``unknown``, less specific), never a different answer.

Two numbers per mangling:

* **survival**: of the cases hangdoc gets right unmangled, how many keep the very same
  answer (category and culprit ranks) mangled; counted over every right answer, and over
  the right answers that name a cause (an abstention that stays one is cheap);
* **violations**: cases whose mangled answer names another cause or other culprits than
  the unmangled one, right or wrong: what the test forbids. Abstaining, or naming the
  same cause without its culprits, is less specific, not a violation.

A mangling that leaves a case's files as they were (``interleave`` of a one-rank paste)
does not count for that case.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.model import Category
from hangdoc.casebook import Case
from hangdoc.casebook_eval import CaseResult, run_case
from hangdoc.paste_mangling import Mangling


def _answer(result: CaseResult) -> tuple[Category, tuple[int, ...]]:
    if result.predicted is Category.UNKNOWN:
        return result.predicted, ()
    return result.predicted, tuple(sorted(result.culprits))


@dataclass(frozen=True, slots=True)
class Outcome:
    """One case under one mangling."""

    case_id: str
    mangling: str
    original: CaseResult
    mangled: CaseResult

    @property
    def same(self) -> bool:
        return _answer(self.original) == _answer(self.mangled)

    @property
    def less_specific(self) -> bool:
        """Abstained, or named the same cause without naming its culprits."""
        if self.same:
            return False
        after = _answer(self.mangled)
        return after[0] is Category.UNKNOWN or (
            after[0] is self.original.predicted and not after[1]
        )

    @property
    def violation(self) -> bool:
        """Another answer than the unmangled one, not an abstention."""
        return not self.same and not self.less_specific

    def describe(self) -> str:
        before, after = _answer(self.original), _answer(self.mangled)
        return (
            f"{self.case_id} [{self.mangling}]: {before[0].value} {list(before[1])} "
            f"-> {after[0].value} {list(after[1])} ({self.mangled.rule})"
        )


@dataclass(slots=True)
class Row:
    """The outcomes of one mangling over the cases it changed."""

    mangling: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def right(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.original.correct]

    @property
    def right_named(self) -> list[Outcome]:
        return [o for o in self.right if o.original.predicted is not Category.UNKNOWN]

    @property
    def kept(self) -> int:
        return sum(o.same for o in self.right)

    @property
    def kept_named(self) -> int:
        return sum(o.same for o in self.right_named)

    @property
    def violations(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.violation]


def _mangled_copy(case: Case, mangling: Mangling, root: Path) -> Case | None:
    """The case with its artifacts mangled into ``root`` (same file names: a rank in a
    name is a signal); None when the mangling changes none of them, or would stamp a
    made-up clock on several files."""
    if mangling.adds_clock and len(case.artifacts) > 1:
        return None
    changed = False
    root.mkdir(parents=True, exist_ok=True)
    for artifact in case.artifacts:
        data = (case.folder / artifact.file).read_bytes()
        text = data.decode("utf-8", errors="surrogateescape")
        mangled = mangling.apply(text)
        changed = changed or mangled != text
        (root / artifact.file).write_bytes(mangled.encode("utf-8", errors="surrogateescape"))
    return dataclasses.replace(case, folder=root) if changed else None


def survey(
    cases: Sequence[Case],
    manglings: Iterable[Mangling],
    originals: dict[str, CaseResult] | None = None,
) -> list[Row]:
    """Every case under every mangling, next to its unmangled answer."""
    originals = originals if originals is not None else {}
    for case in cases:
        if case.case_id not in originals:
            originals[case.case_id] = run_case(case)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="hangdoc-mangled-") as tmp:
        for number, mangling in enumerate(manglings):
            row = Row(mangling.name)
            for case in cases:
                copy = _mangled_copy(case, mangling, Path(tmp) / f"{number}" / case.case_id)
                if copy is None:
                    continue
                outcome = Outcome(case.case_id, mangling.name, originals[case.case_id],
                                  run_case(copy))  # fmt: skip
                row.outcomes.append(outcome)
            rows.append(row)
    return rows


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "–"


def survival_table(rows: Sequence[Row]) -> str:
    """The Markdown table: per mangling, right answers kept, named causes kept,
    abstentions and violations; a total row last."""
    lines = [
        "| mangling | cases changed | right answers kept | named causes kept "
        "| less specific | other answer |",
        "|---|---|---|---|---|---|",
    ]
    totals = [0, 0, 0, 0, 0, 0]
    for row in rows:
        unknown = sum(o.less_specific for o in row.outcomes)
        values = [
            len(row.outcomes), row.kept, len(row.right), row.kept_named,
            len(row.right_named), unknown,
        ]  # fmt: skip
        totals = [t + v for t, v in zip(totals, values, strict=True)]
        lines.append(
            f"| {row.mangling} | {values[0]} | {_share(row.kept, len(row.right))} "
            f"| {_share(row.kept_named, len(row.right_named))} | {unknown} "
            f"| {len(row.violations)} |"
        )
    others = sum(len(r.violations) for r in rows)
    lines.append(
        f"| **all** | {totals[0]} | {_share(totals[1], totals[2])} "
        f"| {_share(totals[3], totals[4])} | {totals[5]} | {others} |"
    )
    return "\n".join(lines)
