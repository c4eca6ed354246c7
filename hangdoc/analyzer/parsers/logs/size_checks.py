"""Transport-level size checks that fire when two ranks disagree on a transfer's size.

gloo's TCP transport checks every incoming message against the buffer the receiver
posted, in ``Pair::prepareRead`` (gloo/transport/tcp/pair.cc)::

    GLOO_ENFORCE_LE(op.preamble.length, op.nbytes, ...)

which surfaces as ``[enforce fail at …/gloo/transport/tcp/pair.cc:446] op.preamble.length
<= op.nbytes. 16 vs 4`` (newer gloo adds "Received data size doesn't match expected size.
Is there a distributed collective mismatch in your code?"), in a RuntimeError or in
``terminate called after throwing an instance of 'gloo::EnforceNotMet' what(): …``. The
sender's message is larger than the receiver's buffer: the ranks run the same collective
with different sizes, or different collectives of different widths. Read into a
COLLECTIVE_MISMATCH event with ``error=size_mismatch`` (as NCCL's "message truncated",
analyzer/parsers/logs/nccl.py), for rules/hd035_detail_mismatch.py.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.nccl import CollectiveMismatch, MismatchError, MismatchSource
from hangdoc.analyzer.payloads.torch_pg import Backend
from hangdoc.analyzer.vocabulary import EventKind

_GLOO_LENGTH = re.compile(
    r"(?:enforce fail at (?P<where>\S*gloo/transport/\w+/pair\.cc:\d+)\]\s*)?"
    r"op\.preamble\.length <= op\.nbytes\.\s*(?P<got>\d+) vs (?P<want>\d+)"
)


# DDP's check, when it is constructed, that every rank holds the same parameters
# (torch/csrc/distributed/c10d/reducer.cpp verify_params_across_processes, called from
# torch/distributed/utils.py _verify_param_shape_across_processes): it all-gathers each
# rank's number of parameters and, for i in range(world_size), fails on the first rank i
# whose number differs from its own:
#   "DDP expects same model across all ranks, but Rank <own> has <n> params, while rank
#   <i> has inconsistent <m> params."
# then broadcasts rank 0's shapes and strides and fails on the first that differs:
#   "[<own>]: params[<p>] in this process with sizes <sizes> appears not to match sizes of
#   the same param in process 0." (strides: the same with "strides", no "[<own>]: ").
# The ranks disagree on the model, i.e. on the sizes of the collectives DDP then runs.
_DDP_COUNT = re.compile(
    r"DDP expects same model across all ranks, but Rank (?P<own>\d+) has (?P<n>\d+) params, "
    r"while rank (?P<other>\d+) has inconsistent (?P<m>\d+) params"
)
_DDP_SHAPE = re.compile(
    r"(?:\[(?P<own>\d+)\]: )?(?:params|replicas\[0\])\[\d+\] in this process with "
    r"(?:sizes|strides) .{0,200}? appears not to match (?:sizes|strides) of the same param in "
    r"process 0"
)


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(("op.preamble.length", "DDP expects same model", "appears not to match"))


def match_size_check(text: str) -> Hit | None:
    """A gloo "op.preamble.length <= op.nbytes. N vs M" enforce failure, or DDP's check
    that every rank holds the same parameters, else None."""
    if not NEED.admits(text):
        return None
    m = _GLOO_LENGTH.search(text)
    if m is None:
        return _ddp_params(text)
    payload = CollectiveMismatch(
        source=MismatchSource.GLOO,
        error=MismatchError.SIZE_MISMATCH,
        backend=Backend.GLOO,
        bytes_received=int(m.group("got")),
        bytes_expected=int(m.group("want")),
        message=text[m.start() :].strip()[:300],
        # not "where": that starts an NCCL WARN's return-code chain
        gloo_where=m.group("where") or None,
    )
    return Hit(
        EventKind.COLLECTIVE_MISMATCH,
        payload=payload,
        key=("gloosize", m.group("got"), m.group("want")),
    )


def _ddp_params(text: str) -> Hit | None:
    """DDP's parameter check across the ranks failed (``_DDP_COUNT``, ``_DDP_SHAPE``)."""
    count = _DDP_COUNT.search(text)
    shape = _DDP_SHAPE.search(text) if count is None else None
    found = count or shape
    if found is None:
        return None
    own = found.group("own")
    payload = CollectiveMismatch(
        source=MismatchSource.DDP_PARAMS,
        reporter_rank=int(own) if own is not None else None,
        # the count check names the rank that differs from the reporter's; the shape
        # check compares with rank 0's, the reference, so the reporter is the one found
        # to differ
        peer_rank=int(count.group("other")) if count is not None else None,
        message=text[found.start() :].strip()[:300],
    )
    return Hit(
        EventKind.COLLECTIVE_MISMATCH,
        payload=payload,
        key=("ddpparams", own, payload.peer_rank),
    )
