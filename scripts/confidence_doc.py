"""Refresh the generated tables of docs/confidence.md: the strengths of evidence, the named
reasons that step between them, the rule families and the fitted calibration
(analyzer/calibration.json, written by `hangdoc eval fixtures/cases --calibrate`).

python scripts/confidence_doc.py          # rewrite the tables in docs/confidence.md
python scripts/confidence_doc.py --check  # exit 1 if they are stale (a test runs this)

Each table sits between ``<!-- BEGIN name -->`` and ``<!-- END name -->``; the prose
around them is written by hand.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hangdoc.analyzer import calibration
from hangdoc.analyzer.calibration import FAMILIES
from hangdoc.analyzer.model import Strength
from hangdoc.rules.strength import Shift

OUT = Path(__file__).resolve().parents[1] / "docs" / "confidence.md"


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%" if value < 0.995 else f"{value * 100:.1f}%"


def _strengths() -> list[str]:
    rows = ["| strength | stated | what the evidence is |", "|---|---|---|"]
    rows += [f"| `{s.word}` | {_pct(s.stated)} | {s.meaning} |" for s in reversed(Strength)]
    return rows


def _shifts() -> list[str]:
    rows = ["| reason | step | why |", "|---|---|---|"]
    rows += [f"| `{s.name}` | {s.step:+d} | {s.why} |" for s in Shift]
    return rows


def _families(doc: dict[str, dict[str, object]]) -> list[str]:
    rows = [
        "| family | rules | reads | parent | casebook answers | calibrated by |",
        "|---|---|---|---|---|---|",
    ]
    for family in FAMILIES:
        entry = doc.get(family.name, {})
        own = "its own map" if "map" in entry else f"pooled into `{entry.get('pooled_into')}`"
        rows.append(
            f"| `{family.name}` | {entry.get('rules', '')} | {family.reads} | "
            f"{family.parent or '–'} | {entry.get('answers', 0)} | {own} |"
        )
    return rows


def _maps(doc: dict[str, dict[str, object]]) -> list[str]:
    words = [s.word for s in reversed(Strength) if s is not Strength.NONE]
    rows = [
        "| family | " + " | ".join(words) + " |",
        "|---|" + "---|" * len(words),
        "| (stated) | " + " | ".join(_pct(Strength[w.upper()].stated) for w in words) + " |",
    ]
    for name, entry in doc.items():
        values = entry.get("map")
        if isinstance(values, dict):
            rows.append(f"| `{name}` | " + " | ".join(_pct(values[w]) for w in words) + " |")
    return rows


def _measured(rows_in: list[dict[str, object]]) -> list[str]:
    def split(value: object) -> str:
        n, right = value if isinstance(value, list) else (0, 0)
        return f"{right}/{n}" if n else "–"

    rows = [
        "| family | strength | stated | train: right | test: right | fitted | fit on train only |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows_in:
        rows.append(
            f"| `{row['family']}` | `{row['strength']}` | {_pct(float(str(row['stated'])))} | "
            f"{split(row.get('train'))} | {split(row.get('test'))} | "
            f"{_pct(float(str(row['fitted'])))} | {_pct(float(str(row['train_only'])))} |"
        )
    return rows


def _held_out(test: dict[str, float]) -> list[str]:
    if not test.get("answers"):
        return ["No test-split answers."]
    right = test["right"] / test["answers"]
    return [
        f"On the {test['answers']:.0f} test-split answers that name a cause ({_pct(right)} "
        f"right): the strengths' stated probabilities average {_pct(test['mean_stated'])}, "
        f"a map fitted on the train split alone {_pct(test['mean_train_only'])}, the "
        f"shipped map (fitted on both splits) {_pct(test['mean_fitted'])}."
    ]


def _unseen(unseen: dict[str, Any] | None) -> list[str]:
    if not unseen or not unseen.get("answers"):
        return [
            "No batch scored at first sight is recorded (fixtures/first_sight/): the map is "
            "the casebook's alone."
        ]
    return [
        f"Tempered by {unseen['answers']:.0f} answers that named a cause on reports scored "
        f"at first sight (fixtures/first_sight/): {unseen['errors']:.0f} were wrong where the "
        f"casebook's map predicted {unseen['predicted_errors']}, so every probability's odds "
        f"of error ((1 − p) / p) are multiplied by a factor: {unseen['factor']} overall, and "
        "per strength its own, the one under which that strength's unseen answers err as "
        "they did (drawn toward the overall factor's prediction by "
        f"{calibration.PRIOR_UNSEEN_ANSWERS} answers' worth), since evidence "
        "stated in so many words and a hint do not fail on new reports alike "
        "(analyzer/calibration.py, `unseen_factor`, `tempered_by_strength`): for strong "
        "evidence that is its error times the factor; a weak finding keeps a meaning instead "
        "of falling to the floor. The map keeps its order (a cell is only lowered to put it "
        "back); it states what unseen tickets bear out.",
        "",
        "| strength | unseen answers | wrong | predicted wrong | factor |",
        "|---|---|---|---|---|",
        *(
            f"| `{t['strength']}` | {t['answers']} | {t['errors']} | {t['predicted_errors']} "
            f"| {t['factor']} |"
            for t in unseen.get("by_strength", [])
        ),
    ]


def render(text: str) -> str:
    doc = json.loads(calibration.TABLE.read_text(encoding="utf-8"))
    blocks = {
        "strengths": _strengths(),
        "shifts": _shifts(),
        "families": _families(doc["families"]),
        "maps": _maps(doc["families"]),
        "measured": _measured(doc["measured"]),
        "held-out": _held_out(doc["test_split"]),
        "unseen": _unseen(doc.get("unseen")),
        "source": [f"Fitted on {doc['about'].split('casebook: ', 1)[-1].split('. Written')[0]}."],
    }
    for name, lines in blocks.items():
        pattern = re.compile(rf"(<!-- BEGIN {name} -->\n).*?(<!-- END {name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{OUT}: no <!-- BEGIN {name} --> … <!-- END {name} --> block")
        text = pattern.sub(_filler("\n".join(lines)), text)
    return text


def _filler(body: str) -> Callable[[re.Match[str]], str]:
    """A replacement that keeps the block's markers and puts ``body`` between them."""
    return lambda m: f"{m[1]}{body}\n{m[2]}"


def main() -> int:
    current = OUT.read_text(encoding="utf-8")
    fresh = render(current)
    if "--check" in sys.argv[1:]:
        if fresh != current:
            print(f"{OUT} is stale: run python scripts/confidence_doc.py")
            return 1
        return 0
    OUT.write_text(fresh, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
