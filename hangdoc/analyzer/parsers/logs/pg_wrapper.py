"""ProcessGroupWrapper's per-collective log line (TORCH_DISTRIBUTED_DEBUG=DETAIL).

With DETAIL debugging every process group is wrapped (torch/csrc/distributed/c10d/
ProcessGroupWrapper.cpp). Before each collective, ``runCollectiveChecks`` logs the
collective's fingerprint and then waits in a gloo monitored barrier for every rank of the
group::

    LOG(INFO) << "[Rank " << getRank() << "] " << "Running collective: " << finger_print;

    [I ProcessGroupWrapper.cpp:562] [Rank 2] Running collective: CollectiveFingerPrint(
        SequenceNumber=1276, OpType=ALLREDUCE, TensorShape=[], TensorDtypes=Float, …)

The rank is the group rank. Only the last line of each rank matters (where it stopped),
so the scanner keeps one event per rank (``_aggregate_key``): a rank whose last
fingerprint has a lower SequenceNumber than the others' has not issued the collective
they wait in (rules/hd035_detail_mismatch.py).
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit, as_int
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.torch_pg import CollectiveIssued, Fingerprint
from hangdoc.analyzer.vocabulary import EventKind

_RUNNING = re.compile(
    r"\[Rank (?P<rank>\d+)\] Running collective: CollectiveFingerPrint\((?P<fp>.*)"
)
_SEQ = re.compile(r"SequenceNumber=(\d+)")
_OP = re.compile(r"OpType=([A-Z_]+)")
_SHAPE = re.compile(r"TensorShape=(\[[^\]]*\])")
_DTYPE = re.compile(r"TensorDtypes=(\w+)")


def _group(pattern: re.Pattern[str], text: str) -> str | None:
    m = pattern.search(text)
    return m.group(1) if m is not None else None


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(("Running collective: CollectiveFingerPrint(",))


def match_wrapper(text: str) -> Hit | None:
    """A "[Rank N] Running collective: CollectiveFingerPrint(…)" line, else None."""
    if not NEED.admits(text):
        return None
    m = _RUNNING.search(text)
    if m is None:
        return None
    fp = m.group("fp")
    rank = int(m.group("rank"))
    fingerprint = Fingerprint(
        rank=rank,
        seq=as_int(_group(_SEQ, fp)),
        op=_group(_OP, fp),
        shape=_group(_SHAPE, fp),
        dtype=_group(_DTYPE, fp),
    )
    return Hit(
        EventKind.COLLECTIVE_ISSUED,
        payload=CollectiveIssued(group_rank=rank, fingerprint=fingerprint),
    )
