"""Evidence pointers shared by rules: a claim about a rank points at the file it came from."""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import EvidenceRef
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.rules.activity import RankActivity

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
