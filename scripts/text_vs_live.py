"""Text agrees with live: every recorded dump (fixtures/dumps) pasted as a person would
(hangdoc/paste_forms.py), diagnosed, and compared with the live dump's own diagnosis.

    python scripts/text_vs_live.py          # the table, then every answer that differs

A pasted form agrees when it gives the live dump's primary category and culprit ranks, or
a less specific answer (``unknown``, or the same category without culprits).
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


def answer(paths: list[Path]) -> tuple[Category, tuple[int, ...]]:
    diagnosis = analyze(load_paths(paths))
    primary = diagnosis.primary
    if diagnosis.verdict is Verdict.INCONCLUSIVE or primary is None:
        return Category.UNKNOWN, ()
    return primary.category, tuple(sorted(primary.culprit_ranks))


def main() -> int:
    names = sorted(p.name for p in DUMPS.iterdir())
    rows: dict[str, list[str]] = {}
    differ: list[str] = []
    same = less = other = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            live = answer([DUMPS / name])
            ranks = read_ranks(DUMPS / name)
            for number, form in enumerate(FORMS):
                got = answer(write_form(form, ranks, Path(tmp) / name / str(number)))
                if got == live:
                    mark, same = "=", same + 1
                elif got[0] is Category.UNKNOWN or (got[0] is live[0] and not got[1]):
                    mark, less = "~", less + 1
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
    total = same + less + other
    print(f"\nsame {same}/{total}, less specific {less}, other answer {other}")
    print("\n".join(differ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
