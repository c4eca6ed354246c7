"""The death-kind table (analyzer/views/death_kind.py) alone on the deaths HD030 named
wrongly at first sight: for each such case of fixtures/first_sight, the dying event (the
first death the deaths view reads, else the first exception, CUDA error or fatal signal
the logs hold, before HD030's later filters), the table's row and category, and whether
that category is the case's label (or, for a label of rank_dead_or_crashed, that it
names none: HD030 keeps the crash). A label of ``unknown`` is never caught: the table
names categories, and whether HD030's yielding leaves the answer unknown is the rest of
the engine's business.

    python scripts/death_kinds.py            # the table
    python scripts/death_kinds.py --json     # one JSON object per case
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.payloads.launch import ExceptionRaised, FatalSignal
from hangdoc.analyzer.views.death_kind import DeathKind, facts_of, kind_of
from hangdoc.analyzer.views.deaths import DeathHow, death_of, deaths_at, watchdog_cuda_error
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.casebook import read_case

ROOT = Path(__file__).resolve().parent.parent
_RAW = frozenset({EventKind.EXCEPTION, EventKind.CUDA_ERROR, EventKind.FATAL_SIGNAL})


def wrong_at_first_sight(rule: str = "HD030") -> list[str]:
    """The cases ``rule`` named a wrong cause for, over every scored batch."""
    out: list[str] = []
    for path in sorted((ROOT / "fixtures" / "first_sight").glob("2026-*.json")):
        for answer in json.loads(path.read_text()).get("answers", []):
            if answer.get("rule") == rule and not answer["right"] and answer["case"] not in out:
                out.append(answer["case"])
    return out


def dying_event(tl: Timeline) -> tuple[Placed, bool] | None:
    """The first death the deaths view reads (True), else the first exception, CUDA error
    or fatal signal with words (False)."""
    for d in deaths_at(tl):
        if d is not None:
            return d.placed, True
    for p in tl.events:
        if _failure(p) or watchdog_cuda_error(p) is not None:
            return p, False
    return None


def _failure(p: Placed) -> bool:
    return p.kind in _RAW and bool(p.event.payload.exc_type or p.event.payload.message)


def table_reading(tl: Timeline) -> tuple[Placed, bool, DeathKind | None] | None:
    """What the table says ended the job: the first failure (an exception, a CUDA error,
    a fatal signal, a death) up to the dying event whose own facts the table reads a
    kind of, else the dying event with none: a death after a failure the table names is
    that failure's consequence (HD030 yields to it)."""
    dying = dying_event(tl)
    if dying is None:
        return None
    at = deaths_at(tl)
    for p in tl.events[: dying[0].index + 1]:
        if not (_failure(p) or at[p.index] is not None or watchdog_cuda_error(p) is not None):
            continue
        kind = table_kind(p)
        if kind is not None:
            return p, at[p.index] is not None, kind
    return dying[0], dying[1], None


def table_kind(p: Placed) -> DeathKind | None:
    """The table's reading of one event, as the deaths view reads a death's facts."""
    raised = p.event.payload_as(ExceptionRaised)
    fatal = p.event.payload_as(FatalSignal)
    stage = raised.stage if raised is not None else fatal.stage if fatal is not None else None
    death = death_of(p)
    oom = (death is not None and death.how == DeathHow.CUDA_OOM) or p.kind == EventKind.CUDA_OOM
    return kind_of(facts_of(p.event.payload, stage, cuda_oom=oom))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args()
    names = args.cases or wrong_at_first_sight()
    caught = 0
    for name in names:
        case = read_case(ROOT / "fixtures" / "cases" / name)
        tl = Timeline(load_paths(list(case.artifact_paths())))
        found = table_reading(tl)
        kind = found[2] if found is not None else None
        label = case.category
        got = kind.category if kind is not None else None
        # right: the table's category is the label, or it names none where the label is a
        # crash (HD030 keeps it); a label of unknown is never the table's to give
        ok = got == label or (label is Category.RANK_DEAD and got is None)
        caught += ok
        row = {
            "case": name,
            "split": case.split,
            "label": label.value,
            "event": found[0].event.text.strip()[:100] if found else None,
            "a_death": found[1] if found else None,
            "row": kind.row.name if kind is not None else None,
            "category": got.value if got is not None else None,
            "caught": ok,
        }
        if args.json:
            print(json.dumps(row))
        else:
            print(
                f"{'Y' if ok else '-'} {case.split:5} {name:60} label={label.value:45} "
                f"row={row['row']} -> {row['category']}"
            )
    if not args.json:
        print(f"caught by the table alone: {caught} of {len(names)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
