"""The metamorphic check of naming a death's cause (hangdoc/death_variants.py): HD030's
deaths at first sight in the train split, told with other paths, other names of the job's
own code, other words beyond the exception's type and errno; how many keep their label.

    python scripts/death_variants.py          # the table, then each case that lost it
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.death_variants import casebook_deaths, first_sight_deaths, table, tell

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    named, crashes = first_sight_deaths(ROOT)
    every = casebook_deaths(ROOT)
    for title, names in (
        ("HD030's wrong answers at first sight, a cause named", named),
        ("HD030's right answers at first sight, crashes", crashes),
        ("the casebook's train deaths told by an exception", every),
    ):
        told = tell(ROOT, names)
        print(f"{title} ({len(names)} cases)")
        print(table(told))
        right = {t.case for t in told if t.variant == "as is" and t.right}
        for t in told:
            if not t.right and t.variant != "as is" and t.case in right:
                print(f"  {t.case} [{t.variant}]: {t.label} -> {t.got}")


if __name__ == "__main__":
    main()
