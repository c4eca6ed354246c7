"""Rank sets written as ranges (``0-6,8``), the way STAT and people write them.

At 16,384 ranks a list of numbers is unreadable; ranges keep titles one line long.
"""

from __future__ import annotations

from collections.abc import Iterable


def format_ranks(ranks: Iterable[int], *, max_parts: int = 12) -> str:
    """``[0,1,2,3,5,7,8]`` → ``0-3,5,7-8``; beyond ``max_parts`` runs, the tail is summarised."""
    values = sorted(set(ranks))
    if not values:
        return ""
    runs: list[tuple[int, int]] = []
    start = prev = values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        runs.append((start, prev))
        start = prev = value
    runs.append((start, prev))
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    if len(parts) > max_parts:
        hidden = sum(b - a + 1 for a, b in runs[max_parts:])
        parts = [*parts[:max_parts], f"…(+{hidden} more)"]
    return ",".join(parts)


def parse_ranks(text: str) -> list[int]:
    """Inverse of :func:`format_ranks` for complete range strings (``0-3,5``)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return sorted(set(out))


def plural_ranks(ranks: Iterable[int]) -> str:
    """``rank 3`` or ``ranks 0-2``: for sentences."""
    values = sorted(set(ranks))
    word = "rank" if len(values) == 1 else "ranks"
    return f"{word} {format_ranks(values)}"


def verb(ranks: Iterable[int], singular: str, plural: str) -> str:
    """``is``/``are``, ``waits``/``wait``: agree with the number of ranks."""
    return singular if len(set(ranks)) == 1 else plural
