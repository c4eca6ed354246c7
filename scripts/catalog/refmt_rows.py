"""Re-read the catalog rows of C++ calls that format with fmt but were held as streams.

    python scripts/catalog/refmt_rows.py --project torch --level recordError

A call of a function that takes a fmt format and its values (c10d's socket.cpp
``recordError(fmt::string_view format, Args&&... args)``) was read as a stream of pieces
before ``cppstream.fmt_wrappers`` knew such functions: its format stayed one literal with
``{}`` in it and its values became slots after it ("The client socket has failed to connect
to {} {}.<addr><err>"), a pattern no printed line matches. A stored row of that shape holds
everything a re-read of its source gives: the format (its first literal) and the values'
expressions (its slots, in order). This script gives such rows the parts
``cppstream.fmt_parts`` makes of them, as ``extract.py`` now does when it reads the source,
for the data files whose sources are not on this machine (torch's rows come from fourteen
releases' site-packages and binaries and from c10d's sources read file by file); the rows'
sources, versions and ``in_binary`` stay (the binaries hold the format, so they hold each
of its literal pieces).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import cppstream, report
from catalog.rows import DATA, MIN_LITERAL, choose_keyword, row_id, write
from catalog.sources import Row

from hangdoc.analyzer.parsers.catalog.template import (
    Part,
    Slot,
    display,
    keywords_of,
    literal_length,
    normalise,
    parts_from_json,
    parts_to_json,
)

ROOT = Path(__file__).resolve().parents[2]
_FIELD = re.compile(r"(?<!\{)\{(?:[^{}]*)\}(?!\})")


def refmt(parts: tuple[Part, ...]) -> tuple[Part, ...] | None:
    """The parts a fmt call's row has, from the parts it was held with as a stream: its
    first literal the format, as many slots after it as the format has fields, nothing
    else. None where the row is not of that shape."""
    if not parts or not isinstance(parts[0], str):
        return None
    fields = len(_FIELD.findall(parts[0]))
    values = parts[1:]
    if not fields or len(values) != fields or not all(isinstance(p, Slot) for p in values):
        return None
    names = [p.name for p in values if isinstance(p, Slot)]
    return normalise(cppstream.fmt_parts(parts[0], names))


def refit(project: str, levels: set[str]) -> int:
    """Rows of ``project`` at ``levels`` re-read as fmt calls; the data file rewritten."""
    path = DATA / f"{project}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    rows: list[dict[str, object]] = data["rows"]
    df: Counter[str] = Counter()
    for row in rows:
        df.update(set(keywords_of(parts_from_json(row["parts"]))))  # type: ignore[arg-type]
    changed = 0
    for row in rows:
        if row["level"] not in levels:
            continue
        parts = refmt(parts_from_json(row["parts"]))  # type: ignore[arg-type]
        if parts is None:
            continue
        held = Row(project, str(row["level"]), parts)
        keyword = choose_keyword(held, df)
        row.update(
            id=row_id(held),
            template=display(parts),
            parts=parts_to_json(parts),
            keyword=keyword,
            matchable=bool(keyword) and literal_length(parts) >= MIN_LITERAL,
        )
        changed += 1
    rows.sort(key=lambda r: str(r["id"]))
    write(project, data["source"], rows, data.get("unheld", []))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default="torch")
    parser.add_argument(
        "--level", action="append", default=[], help="a fmt-formatting call's level"
    )
    args = parser.parse_args(argv)
    changed = refit(args.project, set(args.level or ["recordError"]))
    print(f"{args.project}: {changed} rows re-read as fmt calls", file=sys.stderr)
    report.write_docs(ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
