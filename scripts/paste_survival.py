"""The survival table of the casebook under the paste manglings (hangdoc/paste_survival.py).

    python scripts/paste_survival.py                # every mangling, alone and combined
    python scripts/paste_survival.py --only wrap    # the manglings whose name holds "wrap"
    python scripts/paste_survival.py --list         # also list each changed answer

Prints the Markdown table (mangling x right answers kept / right answers) that
docs/pastes.md quotes, then the answers that changed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hangdoc.casebook import read_casebook
from hangdoc.paste_mangling import COMBINED, MANGLINGS, WORD_WRAPS
from hangdoc.paste_survival import survey, survival_table

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=ROOT / "fixtures" / "cases")
    parser.add_argument("--only", default="", help="manglings whose name contains this")
    parser.add_argument("--list", action="store_true", help="list every changed answer")
    args = parser.parse_args(argv)
    cases, problems = read_casebook(args.cases)
    for problem in problems:
        print(problem, file=sys.stderr)
    manglings = [m for m in (*MANGLINGS, *WORD_WRAPS, *COMBINED) if args.only in m.name]
    began = time.perf_counter()
    rows = survey(cases, manglings)
    print(survival_table(rows))
    runs = sum(len(r.outcomes) for r in rows) + len(cases)
    print(f"\n{runs} analyses in {time.perf_counter() - began:.1f} s")
    for row in rows:
        for outcome in row.outcomes:
            if outcome.violation or (args.list and not outcome.same):
                mark = "OTHER" if outcome.violation else "unknown"
                print(f"{mark}: {outcome.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
