"""Horovod's stall check: the ranks that never submitted a collective.

Horovod's coordinator (rank 0) warns when some ranks have submitted a tensor for a
collective and others have not for longer than HOROVOD_STALL_CHECK_TIME_SECONDS (60 s):
"One or more tensors were submitted to be reduced, gathered or broadcasted by subset of
ranks and are waiting for remainder of ranks for more than 60 seconds. … Stalled ops:"
then one line per tensor, ``<tensor name> [missing ranks: 1, 3]`` (horovod/common/
operations.cc, CheckForStalledTensors; horovod issue 1012 shows it under mpirun's
``[1,0]<stderr>:`` prefix). The ranks named are the ones the others wait for.

Also Horovod's shut-down error (SHUT_DOWN_ERROR, below): the echo of another rank's failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.torch_pg import Backend, ConnectionLost, MissingRanks
from hangdoc.analyzer.vocabulary import EventKind

_MISSING = re.compile(r"(?P<op>[\w./:\-]{1,200}) \[missing ranks: ?(?P<ranks>\d+(?:, ?\d+)*)\]")


# horovod/common/operations.cc SHUT_DOWN_ERROR, raised on every rank whose background thread
# stopped: "Horovod has been shut down. This was caused by an exception on one of the ranks
# or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished
# execution. …" (as TensorFlow's UnknownError/AbortedError, torch's HorovodInternalError).
# The rank that prints it lost its peers; the cause is another rank's (an echo, not a crash).
_SHUT_DOWN = re.compile(r"Horovod has been shut down\. This was caused by an exception on one")


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
# ("ready ranks": the one-line report of Horovod before mid-2018, which main's 0c80395
# reads.)
NEED = Need.words(("Horovod has been shut down", "missing ranks", "ready ranks"))


def match_horovod(text: str) -> Hit | None:
    """One stalled op of Horovod's stall warning, with the ranks that did not submit it;
    Horovod's shut-down error (a peer failed or finished)."""
    if not NEED.admits(text):
        return None
    if "Horovod has been shut down" in text and _SHUT_DOWN.search(text):
        lost = ConnectionLost(backend=Backend.HOROVOD, message="Horovod has been shut down")
        return Hit(EventKind.CONNECTION_LOST, payload=lost, key=("horovod_shutdown",))
    if "missing ranks" not in text:
        return None
    m = _MISSING.search(text)
    if m is None:
        return None
    ranks = tuple(int(r) for r in m.group("ranks").split(","))
    missing = MissingRanks(ranks=ranks, op=m.group("op")[-120:], library=Backend.HOROVOD)
    # One event per set of missing ranks: a stall lists every stalled tensor.
    return Hit(EventKind.MISSING_RANKS, payload=missing, key=("missing_ranks", ranks))


# Horovod ≥ 0.20's StallInspector (horovod/common/stall_inspector.cc,
# CheckForStalledTensors): the same warning, then "Stalled ranks:" and one line per rank
# that has not submitted, "6: [horovod_allreduce.0, horovod_allreduce.1, … ...]" ("6!:"
# when that rank is past the shut-down time). Under mpirun each line carries
# "[1,0]<stderr>:"; pasted bare, "6: " looks like an srun label, so the scanner passes the
# rank it peeled from there.
STALLED_HEADER = re.compile(r"(?:Stalled|Missing) ranks:\s*$")
_STALLED_LINE = re.compile(r"^\s*(?:(?P<rank>\d+)(?P<gone>!?): )?\[(?P<ops>[^\]]*)\]?\s*$")


@dataclass(slots=True)
class HorovodStallBlock:
    """The "Stalled ranks:" list of Horovod's stall inspector: the ranks the others wait for."""

    ranks: list[int] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)

    @staticmethod
    def start(text: str) -> HorovodStallBlock | None:
        return HorovodStallBlock() if STALLED_HEADER.search(text) else None

    def feed_tagged(self, text: str, peeled_rank: int | None) -> bool:
        """One line of the list (False ends it). ``peeled_rank``: the rank the prefix
        peeler took from a bare "6: " at the line's start."""
        m = _STALLED_LINE.match(text)
        if m is None:
            return False
        rank = m.group("rank")
        if rank is not None:
            self.ranks.append(int(rank))
        elif peeled_rank is not None:
            self.ranks.append(peeled_rank)
        else:
            return False
        self.ops.append(m.group("ops").split(",")[0].strip())
        return True

    def finish(self) -> Hit | None:
        if not self.ranks:
            return None
        ranks = tuple(sorted(set(self.ranks)))
        missing = MissingRanks(ranks=ranks, op=self.ops[0][-120:], library=Backend.HOROVOD)
        return Hit(EventKind.MISSING_RANKS, payload=missing, key=("missing_ranks", ranks))
