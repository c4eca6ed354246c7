"""A process group's ranks as a node summary carries them (``hangdoc.summary/4``): runs of
evenly spaced ranks, ``[[first, count, step], ...]``, under the group's ``rank_runs``.

Why: every node's summary lists the job's process groups, and a group's members are
the job's ranks (the world group has them all; a data-parallel group one rank of each
node): written one by one, the groups of a node of a 16,384-rank job were 208 KB of its
828 KB, and the 2,048 nodes repeated them, so reading the summaries grew with the square
of the ranks (4.5 s of JSON parsing alone). Groups are built by rank arithmetic (a
world, a stride, a block), so their ranks are a few runs; a summary reader also shares
one tuple of the ranks among the nodes that give the same runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

# A group of more ranks than any job has is a damaged summary (or one built to make the
# reader build gigabytes from a few bytes).
MAX_GROUP_RANKS = 1 << 22
# Shorter lists are written as they are (a run costs three numbers).
MIN_RANKS_AS_RUNS = 8

_SHARED: dict[tuple[tuple[int, int, int], ...], tuple[int, ...]] = {}


def rank_runs(ranks: Sequence[int]) -> list[list[int]] | None:
    """The ranks as runs ``[first, count, step]`` (each the longest from its first rank),
    or None when runs would not be shorter than the list."""
    if len(ranks) < MIN_RANKS_AS_RUNS:
        return None
    runs: list[list[int]] = []
    index = 0
    while index < len(ranks):
        first = ranks[index]
        if index + 1 == len(ranks):
            runs.append([first, 1, 1])
            break
        step = ranks[index + 1] - first
        count = 2
        while (
            index + count < len(ranks) and ranks[index + count] - ranks[index + count - 1] == step
        ):
            count += 1
        runs.append([first, count, step])
        index += count
        if 3 * len(runs) >= len(ranks):
            return None
    return runs


def ranks_of_runs(raw: Any) -> tuple[int, ...]:
    """The ranks of ``rank_runs`` as written; raises (TypeError, ValueError) on damaged
    runs, as the rest of a summary's decoding does. Nodes that give the same runs share
    one tuple."""
    if not isinstance(raw, list):
        raise TypeError("a group's rank runs are not a list")
    key = tuple(tuple(run) for run in raw)
    found = _SHARED.get(key)
    if found is not None:
        return found
    total = 0
    for run in key:
        if len(run) != 3 or not all(type(n) is int for n in run) or run[1] < 1:
            raise ValueError("a group's rank run is not [first, count, step]")
        total += run[1]
    if total > MAX_GROUP_RANKS:
        raise ValueError("a group of more ranks than any job has")
    ranks = tuple(
        itertools.chain.from_iterable(
            range(first, first + count * step, step) if step else itertools.repeat(first, count)
            for first, count, step in key
        )
    )
    _SHARED[key] = ranks
    return ranks
