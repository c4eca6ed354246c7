"""Rank sets as text: ranges, strides, the legend, and the parser that reads them back.

``analyzer/ranges.py`` is the one writer of rank sets for every renderer, so what is
pinned here is what the terminal, the Markdown summary and the page all print.
"""

from __future__ import annotations

import random

import pytest

from hangdoc.analyzer.ranges import (
    LEGEND,
    MIN_STRIDE_RUN,
    format_ranks,
    has_stride,
    parse_ranks,
    plural_ranks,
    rank_runs,
)


@pytest.mark.parametrize(
    ("ranks", "text"),
    [
        ([], ""),
        ([5], "5"),
        ([0, 1, 2, 3, 5, 7, 8], "0-3,5,7-8"),
        (range(3, 1020, 8), "3-1019:8"),  # a data-parallel group of 128 ranks
        ([*range(3, 1012, 8), 1019], "3-1019:8"),
        ([*range(1, 330, 8), *range(345, 1018, 8)], "1-329:8,345-1017:8"),  # one rank gone
        ([1, 3, 5], "1,3,5"),  # too short for a stride: the plain list reads better
        ([1, 3, 5, 7], "1-7:2"),
        ([0, 2, 3, 4, 5], "0,2-5"),  # consecutive ranks stay a plain range
        ([0, 8, 16, 24, 25, 26, 27], "0-24:8,25-27"),
    ],
)
def test_sets_are_written_as_ranges_and_strides(ranks: list[int], text: str) -> None:
    assert format_ranks(ranks) == text
    assert parse_ranks(text) == sorted(set(ranks))


def test_the_1019_stride_from_the_brief() -> None:
    # 3,11,19,…,1019 used to print as "3,11,19,…(+115 more)"
    assert format_ranks(range(3, 1020, 8)) == "3-1019:8"
    assert plural_ranks(range(3, 1020, 8)) == "ranks 3-1019:8"


def test_runs_are_first_last_step() -> None:
    assert rank_runs([0, 1, 2, 10, 20, 30, 40, 41]) == [(0, 2, 1), (10, 40, 10), (41, 41, 1)]
    assert MIN_STRIDE_RUN == 4


def test_random_sets_round_trip() -> None:
    rng = random.Random(7)
    for _ in range(300):
        ranks = rng.sample(range(200), rng.randint(1, 120))
        text = format_ranks(ranks, max_parts=10_000)
        assert parse_ranks(text) == sorted(ranks), text


def test_long_sets_are_cut_with_a_count() -> None:
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61]
    text = format_ranks(primes)
    assert text.endswith("…(+5 more)") and text.count(",") == 12


def test_stride_detection_for_the_legend() -> None:
    assert has_stride("3-1019:8")
    assert has_stride("ranks 1-329:8,345-1017:8 wait")
    assert not has_stride("ranks 0-7 wait in all_reduce at 22:13:30")
    assert not has_stride("2026-11-25T09:00:00Z")
    assert "3-1019:8" in LEGEND


@pytest.mark.parametrize("bad", ["3-1019:0", "a-b", "1-2:x"])
def test_parse_rejects_malformed_sets(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_ranks(bad)
