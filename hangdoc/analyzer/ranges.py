"""Rank sets written as ranges (``0-6,8``) and strided ranges (``3-1019:8``).

At 16,384 ranks a list of numbers is unreadable; ranges keep titles one line long. Jobs
lay ranks out in grids (tensor-parallel groups of 8, data-parallel groups across them),
so the sets a reader meets are often "every 8th rank": a data-parallel group of 128
ranks is ``3-1019:8``, where plain ranges would need 128 parts and be cut off after 12.
This module is the one place that writes and reads rank sets; the terminal, Markdown and
HTML reports all go through it, so a set reads the same everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A stride is written only for at least this many ranks: "1,3,5" reads better than
# "1-5:2", while "1-7:2" is already shorter than "1,3,5,7" and grows no longer.
MIN_STRIDE_RUN = 4

LEGEND = "0-6,8 = ranks 0 to 6 and rank 8; 3-1019:8 = every 8th rank from 3 to 1019"

Run = tuple[int, int, int]  # first, last, step
_STRIDED = re.compile(r"(?<![\w.:])\d+-\d+:\d+(?![\w:])")


def rank_runs(ranks: Iterable[int]) -> list[Run]:
    """Sorted ranks as ``(first, last, step)`` runs, greedily from the smallest rank.

    Consecutive ranks always form a run (step 1), so ``0-3`` never turns into a stride;
    a longer step is taken only for ``MIN_STRIDE_RUN`` ranks or more. Greedy is not the
    shortest possible text in every case, but it is linear, deterministic and gives the
    grid layouts of real jobs (one stride, or contiguous blocks) their natural form.
    """
    values = sorted(set(ranks))
    runs: list[Run] = []
    i, n = 0, len(values)
    while i < n:
        if i + 1 == n:
            runs.append((values[i], values[i], 1))
            break
        step = values[i + 1] - values[i]
        j = i + 1
        while j + 1 < n and values[j + 1] - values[j] == step:
            j += 1
        if step == 1 or j - i + 1 >= MIN_STRIDE_RUN:
            runs.append((values[i], values[j], step))
            i = j + 1
        else:
            runs.append((values[i], values[i], 1))
            i += 1
    return runs


def _run_text(run: Run) -> str:
    first, last, step = run
    if first == last:
        return str(first)
    return f"{first}-{last}" if step == 1 else f"{first}-{last}:{step}"


def _run_size(run: Run) -> int:
    first, last, step = run
    return (last - first) // step + 1


def format_ranks(ranks: Iterable[int], *, max_parts: int = 12) -> str:
    """``[0,1,2,3,5,7,8]`` → ``0-3,5,7-8``; ``[3,11,…,1019]`` → ``3-1019:8``.

    Beyond ``max_parts`` runs the tail is summarised as ``…(+N more)``.
    """
    runs = rank_runs(ranks)
    if not runs:
        return ""
    parts = [_run_text(run) for run in runs]
    if len(parts) > max_parts:
        hidden = sum(_run_size(run) for run in runs[max_parts:])
        parts = [*parts[:max_parts], f"…(+{hidden} more)"]
    return ",".join(parts)


def has_stride(text: str) -> bool:
    """Whether ``text`` (a set, or a sentence holding sets) uses the ``a-b:s`` form.

    Renderers show :data:`LEGEND` once when it does: the form is new to most readers.
    """
    return _STRIDED.search(text) is not None


def parse_ranks(text: str) -> list[int]:
    """Inverse of :func:`format_ranks` for complete strings (``0-3,5``, ``3-1019:8``)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        step = 1
        if ":" in part:
            part, step_text = part.split(":", 1)
            step = int(step_text)
            if step < 1:
                raise ValueError(f"rank stride must be positive: {step}")
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1, step))
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
