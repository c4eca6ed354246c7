"""Horovod's stall check: the ranks that never submitted a collective.

Horovod's coordinator (rank 0) warns when some ranks have submitted a tensor for a
collective and others have not for longer than HOROVOD_STALL_CHECK_TIME_SECONDS (60 s):
"One or more tensors were submitted to be reduced, gathered or broadcasted by subset of
ranks and are waiting for remainder of ranks for more than 60 seconds. … Stalled ops:"
then one line per tensor, ``<tensor name> [missing ranks: 1, 3]`` (horovod/common/
operations.cc, CheckForStalledTensors; horovod issue 1012 shows it under mpirun's
``[1,0]<stderr>:`` prefix). The ranks named are the ones the others wait for.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.vocabulary import F_RANKS, EventKind

_MISSING = re.compile(r"(?P<op>[\w./:\-]{1,200}) \[missing ranks: ?(?P<ranks>\d+(?:, ?\d+)*)\]")


def match_horovod(text: str) -> Hit | None:
    """One stalled op of Horovod's stall warning, with the ranks that did not submit it."""
    if "missing ranks" not in text:
        return None
    m = _MISSING.search(text)
    if m is None:
        return None
    ranks = ",".join(r.strip() for r in m.group("ranks").split(","))
    fields = {F_RANKS: ranks, "op": m.group("op")[-120:], "library": "horovod"}
    # One event per set of missing ranks: a stall lists every stalled tensor.
    return Hit(EventKind.MISSING_RANKS, fields, key=("missing_ranks", ranks))
