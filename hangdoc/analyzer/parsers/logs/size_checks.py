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


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(("op.preamble.length",))


def match_size_check(text: str) -> Hit | None:
    """A gloo "op.preamble.length <= op.nbytes. N vs M" enforce failure, else None."""
    if not NEED.admits(text):
        return None
    m = _GLOO_LENGTH.search(text)
    if m is None:
        return None
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
