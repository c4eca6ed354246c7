"""Which catalog rows each regular-expression branch of today's log parsers recognises.

    python scripts/catalog/branches.py [--rows 4]

For every module-level compiled pattern of ``analyzer/parsers/logs/*.py``, the catalog
rows whose sample line (the template, slots filled by type) the pattern finds: the rows a
branch could be replaced by once the scanner reads the catalog. A branch with no row is a
format the catalog does not hold (a table, a prefix, a block, a framework's own text).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re

from hangdoc.analyzer.parsers import logs
from hangdoc.analyzer.parsers.catalog import default_catalog
from hangdoc.analyzer.parsers.catalog.template import sample


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4)
    args = parser.parse_args()
    rows = [r for r in default_catalog().rows if r.matchable and r.meaning is not None]
    samples = [(r, sample(r.parts)) for r in rows]
    with_rows = without = 0
    for info in sorted(pkgutil.iter_modules(logs.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{logs.__name__}.{info.name}")
        for name, value in sorted(vars(module).items()):
            if not isinstance(value, re.Pattern) or not name.startswith("_"):
                continue
            found = [r for r, line in samples if value.search(line)]
            if found:
                with_rows += 1
                found.sort(key=lambda r: -r.specificity)
                shown = "; ".join(f"{r.project}:{r.template[:70]!r}" for r in found[: args.rows])
                print(f"{info.name}.{name} ({len(found)} rows): {shown}")
            else:
                without += 1
                print(f"{info.name}.{name}: no row")
    print(f"branches with rows: {with_rows}, without: {without}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
