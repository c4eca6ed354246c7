"""Calibrated confidence: what hangdoc's "80 %" has meant on real reports.

Rules state a confidence from their own reasoning. The casebook (fixtures/cases, scored
by `hangdoc eval`) measures how often an answer of each stated confidence named the right
category. ``calibration.json`` beside this module holds the fitted map from a rule's own
confidence to the measured one (written by `hangdoc eval --calibrate`, from every split:
the rules were built against the train split, where nearly every answer is right, so a map
fitted there alone promises more than unseen reports deliver; the test split's answers
temper it, and a map of a few knots cannot learn single cases): answers are binned by
their own confidence, each bin's accuracy is pulled toward its mean confidence by
``PRIOR_CASES`` cases' worth of weight (few cases, small correction), and the result is
made non-decreasing (pool adjacent violators). The map is monotone and the engine orders
findings before calibrating, so calibration never reorders two findings: it changes what
the number says, not which finding comes first.
"""

from __future__ import annotations

import bisect
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from hangdoc.analyzer.model import Finding

TABLE = Path(__file__).with_name("calibration.json")
PRIOR_CASES = 5
BIN_EDGES: tuple[float, ...] = (0.0, 0.5, 0.65, 0.8, 0.9, 1.0001)
# Added per unit of own confidence so that a flat stretch of the map keeps the order.
_TIE_BREAK = 1e-4


@functools.cache
def _points() -> tuple[tuple[float, float], ...]:
    """(own confidence, calibrated) knots, from (0, 0) to (1, 1); empty when no table."""
    try:
        doc = json.loads(TABLE.read_text(encoding="utf-8"))
        knots = [(float(a), float(b)) for a, b in doc["points"]]
    except (OSError, ValueError, KeyError, TypeError):
        return ()  # no table (a damaged install): every rule keeps its own confidence
    if not knots:
        return ()
    return ((0.0, 0.0), *sorted(knots), (1.0, 1.0))


def calibrate_value(own: float) -> float:
    """The calibrated value of one own confidence (piecewise linear between knots)."""
    points = _points()
    if not points or own <= 0.0:
        return own
    xs = [x for x, _ in points]
    i = min(max(bisect.bisect_right(xs, own), 1), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    value = y0 if x1 <= x0 else y0 + (y1 - y0) * (own - x0) / (x1 - x0)
    # Squeezed into [0.01, 0.99] (never certain) rather than clipped: clipping tied every
    # finding above the top knot; the tie-break keeps the map strictly increasing.
    squeezed = min(1.0, max(0.0, (1.0 - _TIE_BREAK) * value + _TIE_BREAK * own))
    return 0.01 + 0.98 * squeezed


def calibrated(finding: Finding) -> Finding:
    """The finding with its calibrated confidence (an abstention's 0 stays 0)."""
    if finding.confidence <= 0.0 or not _points():
        return finding
    return replace(finding, confidence=calibrate_value(finding.confidence))


def fit(answers: Iterable[tuple[float, bool]]) -> list[tuple[float, float]]:
    """Knots from (own confidence, was it right) pairs: binned, shrunk toward the bin's own
    mean, then pooled so that the map never decreases."""
    bins: list[list[tuple[float, bool]]] = [[] for _ in BIN_EDGES[:-1]]
    for own, right in answers:
        index = min(bisect.bisect_right(BIN_EDGES, own) - 1, len(bins) - 1)
        bins[max(index, 0)].append((own, right))
    stats = []  # (mean own, shrunk accuracy, weight)
    for content in bins:
        if not content:
            continue
        n = len(content)
        mean = sum(o for o, _ in content) / n
        accuracy = sum(r for _, r in content) / n
        stats.append([mean, (n * accuracy + PRIOR_CASES * mean) / (n + PRIOR_CASES), n])
    return _pooled(stats)


def _pooled(stats: Sequence[list[float]]) -> list[tuple[float, float]]:
    """Pool adjacent violators: merge neighbours until the values never decrease."""
    blocks: list[list[float]] = []  # [mean own, value, weight, count of bins]
    for mean, value, weight in stats:
        blocks.append([mean, value, weight, 1])
        while len(blocks) > 1 and blocks[-2][1] > blocks[-1][1]:
            b = blocks.pop()
            a = blocks[-1]
            w = a[2] + b[2]
            a[0] = (a[0] * a[2] + b[0] * b[2]) / w
            a[1] = (a[1] * a[2] + b[1] * b[2]) / w
            a[2], a[3] = w, a[3] + b[3]
    return [(round(m, 3), round(v, 3)) for m, v, _, _ in blocks]


def write_table(answers: Sequence[tuple[float, bool]], source: str) -> None:
    doc = {
        "about": "knots (own confidence, measured accuracy) of the calibration map, fitted "
        f"on {len(answers)} answers that named a cause: {source}. Written by "
        "`hangdoc eval --calibrate`.",
        "prior_cases": PRIOR_CASES,
        "bin_edges": list(BIN_EDGES),
        "points": [list(p) for p in fit(answers)],
    }
    TABLE.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    _points.cache_clear()
