"""Evidence pointers shared by rules: a claim about a rank points at the file it came from."""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import EvidenceRef
from hangdoc.analyzer.ranges import format_ranks, plural_ranks
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.timeline import Placed

# A finding lists at most this many per-rank pointers; the rest are summarised by range.
MAX_REFS = 8


def stack_refs(activities: Iterable[RankActivity], *, limit: int = MAX_REFS) -> list[EvidenceRef]:
    chosen = sorted(activities, key=lambda a: a.rank)
    refs = [
        EvidenceRef(
            source=a.process.primary_source(),
            detail=f"rank {a.rank}: {a.description()}",
            rank=a.rank,
        )
        for a in chosen[:limit]
    ]
    if len(chosen) > limit:
        rest = [a.rank for a in chosen[limit:]]
        refs.append(
            EvidenceRef(
                source=chosen[limit].process.primary_source(),
                detail=f"{plural_ranks(rest)}: the same",
            )
        )
    return refs


def ranks_text(ranks: Iterable[int]) -> str:
    values = sorted(set(ranks))
    return ("rank " if len(values) == 1 else "ranks ") + format_ranks(values)


def limited_refs(items: Iterable[Placed], limit: int = 8) -> list[EvidenceRef]:
    """Evidence pointers for a finding: the first ``limit``, then one summary line."""
    chosen = list(items)
    refs = [p.ref() for p in chosen[:limit]]
    if len(chosen) > limit:
        rest = sorted({p.rank for p in chosen[limit:] if p.rank is not None})
        more = f" ({ranks_text(rest)})" if rest else ""
        refs.append(
            EvidenceRef(
                source=chosen[limit].event.source,
                detail=f"{len(chosen) - limit} more similar lines{more}",
            )
        )
    return refs
