"""What wiring the message catalog into the log scanner could add, on the casebook.

    python scripts/catalog_casebook.py [--cases fixtures/cases] [--show 5]

For every artifact of every case: the lines the catalog's matcher recognises with a
meaning about a hang (a strength other than ``none``), and the log events today's
loader makes of the same file (``load_paths`` on the file alone). A catalog hit *adds*
where no event of today's stands on its line. Printed: how many artifacts (and cases)
have at least one such hit, by event kind and category, with a few examples; and how many
of today's events the catalog also recognises (the rows that could replace a branch).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.catalog import default_matcher, to_event

ROOT = Path(__file__).resolve().parents[1]
_SKIP = {".toml", ".py", ".pickle", ".json", ".gz", ".png"}


def today_lines(path: Path) -> dict[int, set[str]]:
    """Line -> the kinds of today's events on it (line 0: events without a line)."""
    evidence = load_paths([path], summaries=False)
    lines: dict[int, set[str]] = {}
    events = list(evidence.job_log_events)
    for process in evidence.processes:
        events.extend(process.log_events)
    for event in events:
        lines.setdefault(event.line or 0, set()).add(event.kind)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, default=ROOT / "fixtures" / "cases")
    parser.add_argument("--show", type=int, default=3)
    args = parser.parse_args()
    matcher = default_matcher()
    artifacts = adding = cases_adding = kind_adding = cases_kind_adding = 0
    kinds_not_seen: Counter[str] = Counter()
    cases = 0
    added_kinds: Counter[str] = Counter()
    added_categories: Counter[str] = Counter()
    rows_adding: Counter[str] = Counter()
    today_total = today_also = 0
    examples: list[str] = []
    pairs: dict[str, Counter[str]] = defaultdict(Counter)
    for case in sorted(p for p in args.cases.iterdir() if p.is_dir()):
        cases += 1
        case_adds = False
        case_kind_adds = False
        for path in sorted(case.rglob("*")):
            if not path.is_file() or path.suffix in _SKIP:
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            artifacts += 1
            today = today_lines(path)
            hits: dict[int, tuple[str, str]] = {}
            for number, line in enumerate(text.splitlines(), 1):
                found = matcher.match(line)
                if found is None:
                    continue
                draft = to_event(found, matcher)
                if draft.kind is None or draft.strength == "none":
                    continue
                hits[number] = (f"{draft.kind.value}/{draft.category}", found.row.id)
            today_total += len(today)
            today_also += sum(1 for n in today if n in hits)
            for n, kinds in today.items():
                if n in hits:
                    for kind in kinds:
                        pairs[kind][hits[n][1]] += 1
            today_kinds = {k for kinds in today.values() for k in kinds}
            new_kinds = {h[0].split("/")[0] for h in hits.values()} - today_kinds
            if new_kinds:
                kind_adding += 1
                case_kind_adds = True
                kinds_not_seen.update(new_kinds)
            new = {n: h for n, h in hits.items() if n not in today}
            if new:
                adding += 1
                case_adds = True
                for kind_category, row_id in set(new.values()):
                    kind, category = kind_category.split("/", 1)
                    added_kinds[kind] += 1
                    added_categories[category] += 1
                    rows_adding[row_id] += 1
                if len(examples) < args.show * 10:
                    n, (kc, _) = next(iter(new.items()))
                    line = text.splitlines()[n - 1].strip()[:140]
                    examples.append(f"{case.name}/{path.name}:{n} {kc}: {line}")
        cases_adding += case_adds
        cases_kind_adding += case_kind_adds
    print(f"cases: {cases}, artifacts read: {artifacts}")
    print(
        f"artifacts with a meaningful catalog hit on a line today's parsers make no event of: "
        f"{adding} ({cases_adding} cases)"
    )
    print(
        f"artifacts with a meaningful catalog hit of an event kind today's parsers make no "
        f"event of in that file: {kind_adding} ({cases_kind_adding} cases)"
    )
    print("  those kinds:", ", ".join(f"{k} {v}" for k, v in kinds_not_seen.most_common(12)))
    print(
        f"today's events on numbered lines: {today_total}; the catalog also recognises {today_also}"
    )
    print("added, by kind:", ", ".join(f"{k} {v}" for k, v in added_kinds.most_common(12)))
    print("added, by category:", ", ".join(f"{k} {v}" for k, v in added_categories.most_common(12)))
    catalog = matcher.catalog.by_id()
    print("rows that add most:")
    for row_id, count in rows_adding.most_common(15):
        print(f"  {count:3d} {row_id} {catalog[row_id].template[:90]}")
    print(
        "today's event kind -> the catalog rows on the same lines (the branch a row could replace):"
    )
    for kind, counter in sorted(pairs.items(), key=lambda kv: -sum(kv[1].values())):
        top = ", ".join(
            f"{catalog[r].project}:{catalog[r].template[:60]!r} x{c}"
            for r, c in counter.most_common(4)
        )
        print(f"  {kind} ({sum(counter.values())}): {top}")
    print("examples:")
    for example in examples[:: max(1, len(examples) // (args.show * 3))][: args.show * 3]:
        print("  " + example)
    return 0


if __name__ == "__main__":
    sys.exit(main())
