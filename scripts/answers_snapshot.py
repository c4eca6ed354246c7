"""Every answer hangdoc gives on the project's own inputs, one JSON line each: the
"same answers before and after" check of a refactor.

Runs the casebook (each case as loose files), every recorded dump in fixtures/dumps and
every rule case's inputs through ``load_paths`` + ``analyze``, and prints per input the
verdict and each finding's rule, category, culprits and confidence (rounded). Diff two
runs::

    python scripts/answers_snapshot.py > /tmp/before.jsonl   # on the old commit
    python scripts/answers_snapshot.py > /tmp/after.jsonl
    diff /tmp/before.jsonl /tmp/after.jsonl

``--raw`` leaves the calibration off, so a change of the calibration map alone does not
show.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.casebook import read_casebook

ROOT = Path(__file__).resolve().parent.parent


def _answer(paths: list[Path], *, calibrate: bool) -> dict[str, object]:
    try:
        diagnosis = analyze(load_paths(paths), calibrate=calibrate)
    except Exception as exc:  # a crash is an answer too: it must not change silently
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "verdict": diagnosis.verdict.value,
        "findings": [
            [f.rule, f.category.value, list(f.culprit_ranks), round(f.confidence, 3)]
            for f in diagnosis.findings
        ],
    }


def _inputs() -> list[tuple[str, list[Path]]]:
    out: list[tuple[str, list[Path]]] = []
    cases, _problems = read_casebook(ROOT / "fixtures" / "cases")
    for case in cases:
        out.append((f"case:{case.folder.name}", list(case.artifact_paths())))
    for dump in sorted((ROOT / "fixtures" / "dumps").iterdir()):
        if dump.is_dir():
            out.append((f"dump:{dump.name}", [dump]))
    for toml_path in sorted((ROOT / "fixtures" / "rule_cases").glob("*.toml")):
        data = tomllib.loads(toml_path.read_text())
        for name, case in sorted(data.get("cases", {}).items()):
            paths = [ROOT / p for p in case.get("inputs", [])]
            out.append((f"rule:{toml_path.stem}:{name}", paths))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw", action="store_true", help="rules' own confidences")
    args = parser.parse_args()
    for name, paths in _inputs():
        row = {"input": name, **_answer(paths, calibrate=not args.raw)}
        sys.stdout.write(json.dumps(row, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
