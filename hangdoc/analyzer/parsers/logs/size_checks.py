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

DDP checks at construction that every rank holds the same parameters before it
broadcasts rank 0's values (torch/csrc/distributed/c10d/reducer.cpp,
``verify_params_across_processes``, called from torch/distributed/utils.py
``_verify_param_shape_across_processes`` in ``DistributedDataParallel.__init__``). It
all-gathers each rank's number of parameters and raises, on every rank that finds one
that differs from its own (the first such rank ``i`` in rank order)::

    "DDP expects same model across all ranks, but Rank ", getRank(), " has ", params.size(),
    " params, while rank ", i, " has inconsistent ", param_size_for_rank, " params."

then broadcasts rank 0's sizes and strides and raises on a rank whose parameter differs::

    "[", getRank(), "]: params[", p, "] in this process with sizes ", t.sizes(),
    " appears not to match sizes of the same param in process 0."

(``params[p]`` … ``strides of the same param`` for strides; before torch 1.11
``replicas[0][p] in this process with sizes …``, no rank). Both are read into a
COLLECTIVE_MISMATCH event with ``source=ddp_params``: the reporting rank is ``side_a``,
the rank it compares itself with ``side_b``.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.nccl import CollectiveMismatch, MismatchError, MismatchSource
from hangdoc.analyzer.payloads.torch_pg import Backend, Fingerprint
from hangdoc.analyzer.vocabulary import EventKind

_GLOO_LENGTH = re.compile(
    r"(?:enforce fail at (?P<where>\S*gloo/transport/\w+/pair\.cc:\d+)\]\s*)?"
    r"op\.preamble\.length <= op\.nbytes\.\s*(?P<got>\d+) vs (?P<want>\d+)"
)


_DDP_COUNT = re.compile(
    r"DDP expects same model across all ranks, but Rank (?P<rank>\d+) has (?P<mine>\d+) "
    r"params, while rank (?P<other>\d+) has inconsistent (?P<theirs>-?\d+) params"
)
_DDP_SHAPE = re.compile(
    r"(?:\[(?P<rank>\d+)\]: )?(?:params|replicas\[0\])\[(?P<param>\d+)\] in this process "
    r"with (?:sizes|strides) (?P<sizes>\[[^\]]*\]) appears not to match "
    r"(?P<what>sizes|strides) of the same param in process 0"
)
_DDP_WORDS = ("DDP expects same model across all ranks", "of the same param in process 0")

# Every line the recognisers below make an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(("op.preamble.length", *_DDP_WORDS))


def match_size_check(text: str) -> Hit | None:
    """A gloo "op.preamble.length <= op.nbytes. N vs M" enforce failure, else None."""
    if not NEED.admits(text):
        return None
    m = _GLOO_LENGTH.search(text)
    if m is None:
        return match_ddp_check(text)
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


def match_ddp_check(text: str) -> Hit | None:
    """DDP's check of the parameters across ranks at construction (the module's
    docstring), else None."""
    m = _DDP_COUNT.search(text)
    if m is not None:
        mine, theirs = m.group("mine"), m.group("theirs")
        payload = CollectiveMismatch(
            source=MismatchSource.DDP_PARAMS,
            error=MismatchError.PARAM_COUNT,
            side_a=Fingerprint(rank=int(m.group("rank")), shape=f"{mine} params"),
            side_b=Fingerprint(rank=int(m.group("other")), shape=f"{theirs} params"),
            message=text[m.start() :].strip()[:300],
        )
        return Hit(
            EventKind.COLLECTIVE_MISMATCH,
            payload=payload,
            key=("ddpcount", m.group("rank"), m.group("other"), mine, theirs),
        )
    m = _DDP_SHAPE.search(text)
    if m is None:
        return None
    reporter = int(m.group("rank")) if m.group("rank") else None
    payload = CollectiveMismatch(
        source=MismatchSource.DDP_PARAMS,
        error=MismatchError.PARAM_SHAPE,
        side_a=Fingerprint(rank=reporter, shape=m.group("sizes")),
        side_b=Fingerprint(rank=0),
        differ=f"params[{m.group('param')}] {m.group('what')}",
        message=text[m.start() :].strip()[:300],
    )
    return Hit(
        EventKind.COLLECTIVE_MISMATCH,
        payload=payload,
        key=("ddpshape", m.group("rank"), m.group("param"), m.group("sizes")),
    )
