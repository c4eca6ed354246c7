"""The crashes hangdoc reads as a cause, one line each: what the deaths view took, where
its traceback was raised, whether the message catalog knows its words, and the label.

For every casebook case (and recorded dump) whose primary finding is one of ``--rules``
(HD030 by default), and every case HD030 finds a death in, it prints the death HD030
chose (or the first one), the exception's type and message, the stage its frames show
(``ExceptionRaised.stage``), whether a collective raised it (in its wait, or refusing its
arguments), the catalog's meaning of its words, the strength HD030 states and the case's
label and alternatives. It is how the question "is this crash the cause, has it a more
specific cause, or is it a consequence?" is audited on what hangdoc has seen; the
answers on reports it has not seen are fixtures/first_sight's.

    python scripts/crash_audit.py                  # HD030's
    python scripts/crash_audit.py --rules HD030,HD200,HD060,HD061
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, Finding
from hangdoc.analyzer.payloads.launch import ExceptionRaised
from hangdoc.analyzer.views.activity import classify_ranks
from hangdoc.analyzer.views.deaths import Death, first_deaths
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.casebook import read_casebook
from hangdoc.rules.base import RuleContext
from hangdoc.rules.hd030_rank_died_first import RankDiedFirst

ROOT = Path(__file__).resolve().parent.parent


def _chosen(deaths: list[Death], hd030: Finding | None) -> Death | None:
    """The death HD030's finding names (its first culprit's), else the first one."""
    if hd030 is not None and hd030.culprit_ranks:
        for death in deaths:
            if death.rank in hd030.culprit_ranks:
                return death
    return deaths[0] if deaths else None


def _line(name: str, label: str, evidence: Evidence, rules: set[str]) -> str | None:
    diagnosis = analyze(evidence)
    primary = diagnosis.findings[0] if diagnosis.findings else None
    ctx = RuleContext(evidence=evidence, activities=classify_ranks(evidence))
    hd030 = next(iter(RankDiedFirst().check(ctx)), None)
    if (primary is None or primary.rule not in rules) and hd030 is None:
        return None
    death = _chosen(first_deaths(Timeline(evidence)), hd030)
    answer = f"{primary.rule}/{primary.category.value}" if primary else "-"
    head = f"{name}\n    label {label}; answer {answer}"
    if hd030 is not None:
        head += f"; HD030 {hd030.category.value} at {hd030.strength.name.lower()}"
    if death is None:
        return head + "\n    no death read"
    payload = death.payload
    raised = death.placed.event.payload_as(ExceptionRaised)
    said = f"{payload.exc_type or ''}: {payload.message or ''}".strip(": ")
    facts = [f"how {death.how.value}", f"rank {death.rank}"]
    if raised is not None:
        stage = raised.stage.value if raised.stage else "none shown"
        facts += [f"stage {stage}", f"catalog {'knows' if raised.known else 'does not know'}"]
        facts += [f"means {raised.known_as}"] if raised.known_as else []
        facts += ["raised by a collective"] if raised.in_collective else []
    facts += [f"signs {','.join(s.value for s in payload.signs)}"] if payload.signs else []
    return f"{head}\n    {'; '.join(facts)}\n    {said[:150] or death.summary}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", default="HD030", help="primary rules to list (comma-separated)")
    args = parser.parse_args(argv)
    rules = set(args.rules.split(","))
    cases, _problems = read_casebook(ROOT / "fixtures" / "cases")
    for case in cases:
        labels = [case.category.value, *(a.value for a in case.alternatives)]
        evidence = load_paths(list(case.artifact_paths()))
        line = _line(f"case {case.folder.name}", " | ".join(labels), evidence, rules)
        if line is not None:
            print(line)
    for dump in sorted((ROOT / "fixtures" / "dumps").iterdir()):
        if dump.is_dir():
            line = _line(f"dump {dump.name}", "(recorded)", load_paths([dump]), rules)
            if line is not None:
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
