"""Calibrated confidence: what each strength of evidence has meant, per rule family, on
the casebook.

Rules state how strong their evidence is (``Strength``: "the artifact states the cause",
"two independent signals agree" …), not a number. The casebook (fixtures/cases, scored
by `hangdoc eval`) measures how often an answer of each strength named the right
category, and ``calibration.json`` beside this module holds the fitted probability of
each (rule family, strength); `hangdoc eval --calibrate` writes it into the source tree
(hangdoc/calibrate.py), and the package only reads it.

Families are ranges of rule ids, because the ids are allocated by the evidence a rule
reads (docs/rules.md): the same strength read off NCCL's lines and off a rank's stacks
need not be right equally often. A family with fewer than ``MIN_ANSWERS`` casebook
answers has no map of its own and uses its parent's (the kind of evidence: stacks, logs;
then every rule): a handful of cases would only fit noise.

The fit (``fit``): each cell's accuracy is pulled toward its parent's value (the root's
toward the strength's stated probability) by ``PRIOR_CASES`` cases' worth of weight, so a
cell of few answers moves little; then cells are pooled (weighted means) until the map
never decreases with the strength within a family, and never puts a finding the casebook
ranked below another above it (the engine orders by strength before calibrating, so
the order cannot change; this keeps the numbers a report shows in that order too).

Tempered by reports never seen (``unseen_factor``): the casebook is where the rules were
built, so even both splits are nearly all right; batches of new reports scored at first
sight (hangdoc/first_sight.py, fixtures/first_sight/) show how much more often an answer
is wrong on a ticket nobody tuned for. Every probability's error (1 − p) is multiplied by
the ratio of the errors those batches made to the errors the map predicted for them, so
the map keeps its order and its shape but states what unseen tickets bear out.

Why every split, not the train split alone: the rules were built against the train
split, where nearly every answer is right, so a map fitted there alone promises more
than unseen reports deliver; the test split's answers temper it. The price is that the
test split no longer checks the map out of sample: `--calibrate` also fits on the train
split alone and records how that map fares on the test split (docs/confidence.md).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hangdoc.analyzer.model import Finding, Strength

TABLE = Path(__file__).with_name("calibration.json")
PRIOR_CASES = 5
MIN_ANSWERS = 20
# Never certain: a casebook of a few hundred answers cannot tell 99 % from 100 %.
CEILING = 0.99
# A finding the engine ranks as a cause is never shown as less likely than this.
FLOOR = 0.05
# The strengths a map gives a probability to: NONE is an abstention, always 0.
GRADED: tuple[Strength, ...] = tuple(s for s in Strength if s is not Strength.NONE)


@dataclass(frozen=True, slots=True)
class Family:
    """Rules calibrated together: a range of rule numbers, or (``first`` < 0) a parent
    that pools its children when they have too few answers of their own."""

    name: str
    reads: str
    parent: str | None
    first: int = -1
    last: int = -1


FAMILIES: tuple[Family, ...] = (
    Family("all", "every rule", None),
    Family("stacks", "stacks and process state", "all"),
    Family("logs", "log lines and driver messages", "all"),
    Family("skeleton", "every rank's stacks side by side", "stacks", 0, 9),
    Family("flight_recorder", "flight recorder records matched across ranks", "all", 10, 29),
    Family("torch_logs", "torch's and the job's own log lines", "logs", 30, 99),
    Family("rank_and_node", "one rank's stacks, /proc, node state and reports", "stacks", 100, 199),
    Family("nccl", "NCCL's log lines and the network", "logs", 200, 299),
    Family("gpu", "GPU, driver and kernel messages", "logs", 300, 399),
)
_BY_NAME = {f.name: f for f in FAMILIES}


def family_of(rule: str) -> Family:
    """The leaf family of a rule id (``HD203`` → nccl); the root for an unknown id."""
    try:
        number = int(rule.removeprefix("HD"))
    except ValueError:
        return _BY_NAME["all"]
    return next((f for f in FAMILIES if f.first <= number <= f.last), _BY_NAME["all"])


def lineage(family: Family) -> list[Family]:
    """The family, its parent, … up to the root."""
    out = [family]
    while out[-1].parent is not None:
        out.append(_BY_NAME[out[-1].parent])
    return out


@dataclass(frozen=True, slots=True)
class CalibrationTable:
    """The fitted map: for each family that has one, a probability per strength."""

    maps: Mapping[str, Mapping[Strength, float]]

    def owner(self, rule: str) -> Family | None:
        """The family whose map a rule's findings use: its own, or the nearest parent's."""
        return next((f for f in lineage(family_of(rule)) if f.name in self.maps), None)

    def probability(self, rule: str, strength: Strength) -> float:
        if strength is Strength.NONE:
            return 0.0
        owner = self.owner(rule)
        if owner is None or strength not in self.maps[owner.name]:
            return strength.stated
        return self.maps[owner.name][strength]


def read_table(path: Path) -> CalibrationTable | None:
    """The table in ``path``; None when it is missing or damaged (a broken install:
    every finding then shows its strength's stated probability)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        maps = {
            name: {Strength[word.upper()]: float(p) for word, p in entry["map"].items()}
            for name, entry in doc["families"].items()
            if "map" in entry
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return CalibrationTable(maps) if maps else None


@functools.cache
def shipped() -> CalibrationTable | None:
    """The table the package ships (``calibration.json`` beside this module)."""
    return read_table(TABLE)


def calibrated(finding: Finding, table: CalibrationTable | None = None) -> Finding:
    """The finding with the calibrated probability of its (family, strength); an
    abstention stays 0. Without a table (``table`` or the shipped one), unchanged."""
    table = table or shipped()
    if table is None:
        return finding
    return replace(finding, probability=table.probability(finding.rule, finding.strength))


@dataclass(frozen=True, slots=True)
class Answer:
    """One casebook answer that named a cause: its rule, strength, and whether it was right."""

    rule: str
    strength: Strength
    right: bool


@dataclass(frozen=True, slots=True)
class Ranked:
    """An order a casebook diagnosis holds: ``above`` came before ``below`` (same
    severity), so the calibrated probability of ``below`` must not exceed ``above``'s."""

    above: tuple[str, Strength]
    below: tuple[str, Strength]


Cell = tuple[str, Strength]  # (family that owns a map, strength)


def owners(answers: Sequence[Answer]) -> dict[str, int]:
    """Families that get a map of their own, with their answer count: the root, and
    every family with at least ``MIN_ANSWERS`` answers under it."""
    counts = dict.fromkeys((f.name for f in FAMILIES), 0)
    for answer in answers:
        for family in lineage(family_of(answer.rule)):
            counts[family.name] += 1
    return {name: n for name, n in counts.items() if n >= MIN_ANSWERS or name == "all"}


def fit(answers: Sequence[Answer], ranked: Iterable[Ranked] = ()) -> CalibrationTable:
    """The table fitted to ``answers`` (shrunk toward the parent, pooled until monotone
    in strength and consistent with every order in ``ranked``)."""
    owning = owners(answers)
    table = CalibrationTable({name: {} for name in owning})
    tally: dict[Cell, list[int]] = {}  # cell → [answers, right], per owning family
    for answer in answers:
        for family in lineage(family_of(answer.rule)):
            if family.name in owning:
                counts = tally.setdefault((family.name, answer.strength), [0, 0])
                counts[0] += 1
                counts[1] += answer.right
    values: dict[Cell, float] = {}
    weights: dict[Cell, float] = {}
    # Parents first, so that a child's prior is its parent's fitted value.
    for family in sorted((_BY_NAME[n] for n in owning), key=lambda f: len(lineage(f))):
        parent = next((p for p in lineage(family)[1:] if p.name in owning), None)
        for strength in GRADED:
            n, right = tally.get((family.name, strength), [0, 0])
            prior = strength.stated if parent is None else values[(parent.name, strength)]
            values[(family.name, strength)] = (right + PRIOR_CASES * prior) / (n + PRIOR_CASES)
            weights[(family.name, strength)] = n + PRIOR_CASES
        _monotone(values, weights, [[(family.name, s) for s in GRADED]], [])
    # A stronger finding never shows less than a weaker one, whatever their families
    # (the engine orders by strength); within a strength, families differ.
    edges = [
        ((weaker, low), (stronger, high))
        for weaker in owning
        for stronger in owning
        for low, high in itertools.pairwise(GRADED)
    ]
    for order in ranked:
        below, above = _cell(table, order.below), _cell(table, order.above)
        if below is not None and above is not None and below != above:
            edges.append((below, above))
    _monotone(values, weights, [[cell] for cell in values], edges)
    maps = {name: {s: round(min(values[(name, s)], CEILING), 3) for s in GRADED} for name in owning}
    return CalibrationTable(maps)


@dataclass(frozen=True, slots=True)
class UnseenAnswer:
    """An answer that named a cause on a report scored at first sight."""

    rule: str
    strength: Strength
    right: bool


@dataclass(frozen=True, slots=True)
class UnseenBatch:
    """A batch scored at first sight: its answers one by one, or (a batch recorded before
    strengths existed) its totals and the mean confidence it stated."""

    name: str
    answers: tuple[UnseenAnswer, ...]
    answered: int = 0
    right: int = 0
    mean_stated: float = 0.0


@dataclass(frozen=True, slots=True)
class Unseen:
    """How the map fared on reports it never saw: the errors they made, the errors the map
    predicted for them, and the factor (≥ 1) that the map's errors are scaled by."""

    answers: int
    errors: int
    predicted_errors: float
    factor: float
    by_strength: tuple[StrengthTally, ...] = ()

    def factor_of(self, strength: Strength) -> float:
        """The factor of answers of this strength; the overall one where none was scored."""
        return next((t.factor for t in self.by_strength if t.strength is strength), self.factor)


@dataclass(frozen=True, slots=True)
class StrengthTally:
    """The unseen answers of one strength: how many, how many wrong, how many the map
    predicted wrong, and the factor their odds of error are scaled by."""

    strength: Strength
    answers: int
    errors: int
    predicted_errors: float
    factor: float


def unseen_factor(table: CalibrationTable, batches: Sequence[UnseenBatch]) -> Unseen:
    """(errors + 1) / (predicted errors + 1) over every batch, never below 1: the map is
    never made surer than the casebook says, and one wrong answer of a few cannot make it
    a coin toss (the +1 on both sides)."""
    answers = errors = 0
    predicted = 0.0
    for batch in batches:
        if batch.answers:
            answers += len(batch.answers)
            errors += sum(not a.right for a in batch.answers)
            predicted += sum(1 - table.probability(a.rule, a.strength) for a in batch.answers)
        else:
            answers += batch.answered
            errors += batch.answered - batch.right
            predicted += batch.answered * (1 - batch.mean_stated)
    factor = max(1.0, (errors + 1) / (predicted + 1)) if answers else 1.0
    tallies = _by_strength(table, batches, factor)
    return Unseen(answers, errors, round(predicted, 2), round(factor, 3), tallies)


# How many answers' worth the overall factor's prediction weighs against a strength's
# own unseen answers: a strength with a handful stays near it, one with many speaks for
# itself. 25 is the least multiple of 5 under which the casebook's own answers are not
# under-confident beyond casebook_eval.CASEBOOK_UNDERCONFIDENCE (at 10 and 20, hints the
# casebook shows right every time stated 26 % and 35 %): the unseen batches hold 12 hints.
PRIOR_UNSEEN_ANSWERS = 25
_MAX_FACTOR = 10_000.0


def _by_strength(
    table: CalibrationTable, batches: Sequence[UnseenBatch], overall: float
) -> tuple[StrengthTally, ...]:
    """Each strength's own factor: the one whose tempered map predicts, for that
    strength's unseen answers, the error rate they had, drawn toward what the overall
    factor predicts for them (``PRIOR_UNSEEN_ANSWERS`` answers' worth); never below 1.
    Solved on the tempered probabilities themselves, not on odds: the casebook's map is
    near its ceiling for most strengths (in-sample), and a first-order estimate could not
    bring 0.99 down to the 0.5 that a strength's unseen answers showed. Why per strength:
    evidence a report states in so many words and a hint read from a rank's last lines
    do not fail on new reports alike (at first sight, up to 2026-11-27d: stated 13 of 13
    right, hint 5 of 12), and one factor for both makes the first under-confident and the
    second over-confident. Batches known by their totals only (recorded before strengths
    existed) count in the overall factor alone."""
    tallies = []
    for strength in GRADED:
        mine = [a for b in batches for a in b.answers if a.strength is strength]
        if not mine:
            continue
        said = [table.probability(a.rule, a.strength) for a in mine]
        errors = sum(not a.right for a in mine)
        expected = sum(_error(p, overall) for p in said)
        target = (errors + PRIOR_UNSEEN_ANSWERS * expected / len(mine)) / (
            len(mine) + PRIOR_UNSEEN_ANSWERS
        )
        factor = _factor_for(said, target)
        predicted = sum(1 - p for p in said)
        tallies.append(
            StrengthTally(strength, len(mine), errors, round(predicted, 2), round(factor, 3))
        )
    return tuple(tallies)


def _error(p: float, factor: float) -> float:
    """The error a probability states once its odds of error are scaled by ``factor``."""
    return 1 - _tempered_p(p, factor)


def _tempered_p(p: float, factor: float) -> float:
    """``p`` with its odds of error scaled by ``factor``, never below the floor."""
    return max(FLOOR, p / (p + factor * (1 - p)))


def _factor_for(said: Sequence[float], target: float) -> float:
    """The factor (≥ 1) whose tempered probabilities err ``target`` on average (the mean
    error grows with the factor: bisection on its logarithm)."""

    def mean_error(factor: float) -> float:
        return sum(_error(p, factor) for p in said) / len(said)

    if mean_error(1.0) >= target:
        return 1.0
    low, high = 0.0, math.log(_MAX_FACTOR)
    if mean_error(_MAX_FACTOR) <= target:
        return _MAX_FACTOR
    for _ in range(60):
        middle = (low + high) / 2
        if mean_error(math.exp(middle)) < target:
            low = middle
        else:
            high = middle
    return math.exp((low + high) / 2)


def tempered(table: CalibrationTable, factor: float) -> CalibrationTable:
    """Every probability's odds of error scaled by ``factor`` (order and shape kept):
    ``p / (p + factor·(1 − p))``. For the small errors of strong evidence this is the error
    times ``factor``, as ``unseen_factor`` measures it; scaling the error itself would send
    every probability below ``1 − 1/factor`` to the floor (with a factor of 3, a finding
    right 70 % of the time on the casebook would state 10 %, whatever it was right on)."""
    maps = {
        name: {s: round(_tempered_p(p, factor), 3) for s, p in cells.items()}
        for name, cells in table.maps.items()
    }
    return CalibrationTable(maps)


def tempered_by_strength(table: CalibrationTable, unseen: Unseen) -> CalibrationTable:
    """Each cell's odds of error scaled by its strength's factor (``Unseen.factor_of``),
    then the order the fit held put back by lowering only: no cell of a strength shows more
    than the least of the strength above it, whatever their families (the engine orders
    findings by strength; a weaker one must not read as surer)."""
    maps = {
        name: {s: _tempered_p(p, unseen.factor_of(s)) for s, p in cells.items()}
        for name, cells in table.maps.items()
    }
    cap = CEILING
    for strength in reversed(GRADED):
        holding = [cells for cells in maps.values() if strength in cells]
        for cells in holding:
            cells[strength] = min(cells[strength], cap)
        cap = min((cells[strength] for cells in holding), default=cap)
    rounded = {name: {s: round(p, 3) for s, p in cells.items()} for name, cells in maps.items()}
    return CalibrationTable(rounded)


def _cell(table: CalibrationTable, found: tuple[str, Strength]) -> Cell | None:
    rule, strength = found
    owner = table.owner(rule)
    if owner is None or strength is Strength.NONE:
        return None
    return (owner.name, strength)


def _monotone(
    values: dict[Cell, float],
    weights: dict[Cell, float],
    chains: list[list[Cell]],
    edges: list[tuple[Cell, Cell]],
) -> None:
    """Pool cells (weighted means) until every chain never decreases and every edge
    (low, high) has value(low) <= value(high). Pooling a violated pair at a time ends:
    each pooling joins two blocks, and one block satisfies every constraint inside it."""
    block = {cell: i for i, cell in enumerate(values)}
    members: dict[int, list[Cell]] = {i: [cell] for cell, i in block.items()}
    pairs = list(edges) + [(a, b) for chain in chains for a, b in itertools.pairwise(chain)]

    def level(i: int) -> float:
        return values[members[i][0]]

    while True:
        violated = next(
            ((block[a], block[b]) for a, b in pairs
             if block[a] != block[b] and level(block[a]) > level(block[b]) + 1e-12),
            None,
        )  # fmt: skip
        if violated is None:
            return
        keep, gone = violated
        cells = members[keep] + members.pop(gone)
        total = sum(weights[c] for c in cells)
        mean = sum(values[c] * weights[c] for c in cells) / total
        for cell in cells:
            values[cell] = mean
            block[cell] = keep
        members[keep] = cells


def table_doc(
    table: CalibrationTable,
    answers_by_split: Mapping[str, Sequence[Answer]],
    train_only: CalibrationTable,
    source: str,
    unseen: Unseen | None = None,
) -> dict[str, object]:
    """The JSON written to calibration.json: the maps, and what they were fitted on
    (per leaf family and strength: the answers and right ones of each split, the
    fitted probability, and that of a fit on the train split alone)."""
    every = [a for split in answers_by_split.values() for a in split]
    counts = owners(every)
    families: dict[str, object] = {}
    for family in FAMILIES:
        n = sum(1 for a in every if family in lineage(family_of(a.rule)))
        entry: dict[str, object] = {"rules": _rules_text(family), "reads": family.reads}
        entry["answers"] = n
        if family.name in table.maps:
            entry["map"] = {s.word: table.maps[family.name][s] for s in GRADED}
        else:
            pooled = next(p for p in lineage(family)[1:] if p.name in counts)
            entry["pooled_into"] = pooled.name
        families[family.name] = entry
    measured = []
    for family in FAMILIES:
        if family.first < 0:
            continue
        for strength in GRADED:
            row: dict[str, object] = {"family": family.name, "strength": strength.word}
            seen = False
            for split, answers in sorted(answers_by_split.items()):
                mine = [
                    a for a in answers if family_of(a.rule) is family and a.strength is strength
                ]
                row[split] = [len(mine), sum(a.right for a in mine)]
                seen = seen or bool(mine)
            if not seen:
                continue
            rule = f"HD{family.first:03d}"
            row["stated"] = strength.stated
            row["fitted"] = table.probability(rule, strength)
            row["train_only"] = train_only.probability(rule, strength)
            measured.append(row)
    test = answers_by_split.get("test", [])
    held_out = {
        "answers": len(test),
        "right": sum(a.right for a in test),
        "mean_stated": _mean(a.strength.stated for a in test),
        "mean_train_only": _mean(train_only.probability(a.rule, a.strength) for a in test),
        "mean_fitted": _mean(table.probability(a.rule, a.strength) for a in test),
    }
    return {
        "about": "Probability of each (rule family, strength of evidence), fitted on the "
        f"casebook: {source}. Written by `hangdoc eval --calibrate`; "
        "analyzer/calibration.py says how, docs/confidence.md shows it.",
        "prior_cases": PRIOR_CASES,
        "min_answers": MIN_ANSWERS,
        "ceiling": CEILING,
        "families": families,
        "measured": measured,
        "test_split": held_out,
        "unseen": None
        if unseen is None
        else {
            "answers": unseen.answers,
            "errors": unseen.errors,
            "predicted_errors": unseen.predicted_errors,
            "factor": unseen.factor,
            "by_strength": [
                {
                    "strength": t.strength.word,
                    "answers": t.answers,
                    "errors": t.errors,
                    "predicted_errors": t.predicted_errors,
                    "factor": t.factor,
                }
                for t in unseen.by_strength
            ],
        },
    }


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return round(sum(items) / len(items), 3) if items else 0.0


def _rules_text(family: Family) -> str:
    if family.first < 0:
        children = [f.name for f in FAMILIES if f.parent == family.name]
        return "pools " + ", ".join(children)
    return f"HD{family.first:03d}-HD{family.last:03d}"


def write_table(path: Path, doc: Mapping[str, object]) -> None:
    """Write the table (whole, then renamed: a reader never sees half a file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(path)
    if path.resolve() == TABLE.resolve():
        shipped.cache_clear()
