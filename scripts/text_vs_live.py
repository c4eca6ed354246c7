"""Text agrees with live: every recorded dump (fixtures/dumps) pasted as a person would
(hangdoc/paste_forms.py), diagnosed, and compared with the live dump's own diagnosis.

    python scripts/text_vs_live.py          # the table, then every answer that differs

A pasted form agrees when it gives the live dump's primary category and culprit ranks, or
a less specific answer (``unknown``, or the same category without culprits; ``g``: the
generic divergence category with the live culprits; ``c``: a reading the live diagnosis
makes too, below its primary). ``X`` is another answer.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Verdict
from hangdoc.paste_forms import FORMS, read_ranks, write_form

ROOT = Path(__file__).resolve().parent.parent
DUMPS = ROOT / "fixtures" / "dumps"


Answer = tuple[Category, tuple[int, ...]]


def answer(paths: list[Path]) -> tuple[Answer, set[Answer]]:
    """The primary answer, and every reading the diagnosis makes (each finding's category
    with its culprits, or with none)."""
    diagnosis = analyze(load_paths(paths))
    primary = diagnosis.primary
    named = [f for f in diagnosis.findings if f.category is not Category.UNKNOWN]
    readings = {(f.category, tuple(sorted(f.culprit_ranks))) for f in named}
    readings |= {(f.category, ()) for f in named}
    if diagnosis.verdict is Verdict.INCONCLUSIVE or primary is None:
        return (Category.UNKNOWN, ()), readings
    return (primary.category, tuple(sorted(primary.culprit_ranks))), readings


def main() -> int:
    names = sorted(p.name for p in DUMPS.iterdir())
    rows: dict[str, list[str]] = {}
    differ: list[str] = []
    same = less = generic = coarser = other = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            live, readings = answer([DUMPS / name])
            ranks = read_ranks(DUMPS / name)
            for number, form in enumerate(FORMS):
                got, _ = answer(write_form(form, ranks, Path(tmp) / name / str(number)))
                if got == live:
                    mark, same = "=", same + 1
                elif got[0] is Category.UNKNOWN or (got[0] is live[0] and not got[1]):
                    mark, less = "~", less + 1
                elif got == (Category.RANK_DIVERGENCE, live[1]):
                    mark, generic = "g", generic + 1
                elif got in readings:
                    mark, coarser = "c", coarser + 1
                else:
                    mark, other = "X", other + 1
                rows.setdefault(name, []).append(mark)
                if mark != "=":
                    differ.append(
                        f"{mark} {name} [{form.name}]: live {live[0].value} "
                        f"{list(live[1])} -> {got[0].value} {list(got[1])}"
                    )
    print("| dump | " + " | ".join(str(i) for i in range(len(FORMS))) + " |")
    print("|---" * (len(FORMS) + 1) + "|")
    for name, marks in rows.items():
        print(f"| {name} | " + " | ".join(marks) + " |")
    print()
    for i, form in enumerate(FORMS):
        print(f"{i}: {form.name}")
    total = same + less + generic + coarser + other
    print(
        f"\nsame {same}/{total}, less specific {less} (~), the generic divergence with the "
        f"live culprits {generic} (g), another of the live diagnosis's readings {coarser} "
        f"(c), other answer {other} (X)"
    )
    print("\n".join(differ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
