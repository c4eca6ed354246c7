"""Where each rank stands in each process group's sequence, for every rank at once.

The positions are ``scan_rank``'s (``fr_matching``): a rank's newest dump, its last
collective per group and its unfinished ones, the same positions the matching reads.
This view adds what the report's wavefront and map show beside them: the highest
sequence number each rank completed per group, and how many send/recv records each group
holds. Computed once per report, in C-speed passes over each rank's records.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress

from hangdoc.analyzer.model import CollectiveRecord, Evidence, OpState
from hangdoc.analyzer.views.fr_matching import fr_ranks, scan_rank
from hangdoc.analyzer.views.fr_model import GroupPos, RankFR

_GROUP = operator.attrgetter("group")
_SEQ = operator.attrgetter("seq_id")
_STATE = operator.attrgetter("state")
_IS_P2P = operator.attrgetter("is_p2p")
_COMPLETED = OpState.COMPLETED.__eq__


@dataclass(slots=True)
class Positions:
    """Every rank's place in every group it used (collectives only; send/recv counted)."""

    ranks: dict[int, RankFR]
    groups: dict[str, dict[int, GroupPos]]  # group → rank → its position there
    completed: dict[int, dict[str, int]]  # rank → group → highest sequence number completed
    p2p_records: Counter[str]  # group → send/recv records of all ranks


def positions(evidence: Evidence) -> Positions:
    """The positions of every rank with a flight recorder, by group."""
    ranks = {r: scan_rank(r, records) for r, records in sorted(fr_ranks(evidence).items())}
    groups: dict[str, dict[int, GroupPos]] = {}
    completed: dict[int, dict[str, int]] = {}
    p2p: Counter[str] = Counter()
    for rank, fr in ranks.items():
        for name, pos in fr.groups.items():
            groups.setdefault(name, {})[rank] = pos
        records = list(fr.records)  # read once (a RecordRows is row numbers)
        completed[rank] = _completed(records)
        p2p.update(map(_GROUP, compress(records, map(_IS_P2P, records))))
    return Positions(ranks, groups, completed, p2p)


def _completed(records: Sequence[CollectiveRecord]) -> dict[str, int]:
    """Per group, the highest sequence number of a completed collective.

    Records are in buffer order, so a group's sequence numbers increase along them and
    the last completed record of a group holds its highest one.
    """
    done = list(compress(records, map(_COMPLETED, map(_STATE, records))))
    collectives = list(compress(done, map(operator.not_, map(_IS_P2P, done))))
    return dict(zip(map(_GROUP, collectives), map(_SEQ, collectives), strict=True))
