"""torch.distributed.pipelining's own log lines: which stage waits on which.

``PipelineStage`` (torch/distributed/pipelining/stage.py) logs, at debug level, each
point-to-point exchange of its runtime shape inference just before it blocks in it::

    logger.debug("Shape inference: stage %s receiving from stage %s", ...)  # recv_object_list
    logger.debug("Shape inference: stage %s sending to stage %s", ...)      # send_object_list

(``TORCH_LOGS=+pp`` or ``TORCH_DISTRIBUTED_DEBUG`` style debug logging prints them with
torch's ``V0731 00:56:28.929000 3080918 …/pipelining/stage.py:1354]`` header.) A stage
whose last such line is "receiving from stage N" is waiting for stage N to send: the
evidence of a pipeline stuck in its send/recv chain. Read into PHASE events (phase
``init``: shape inference runs before the first step) with the direction in ``p2p`` and
the stages in ``stage`` / ``peer_stage``, for rules/hd048_p2p_wait_evidence.py.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import Direction
from hangdoc.analyzer.vocabulary import EventKind, Phase

_SHAPE_P2P = re.compile(
    r"Shape inference: stage (?P<stage>\d+) (?:(?P<recv>receiving from)|sending to) "
    r"stage (?P<peer>-?\d+)"
)


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(("Shape inference: stage",))


def match_pipelining(text: str) -> Hit | None:
    """A PipelineStage shape-inference send/recv line, else None."""
    if not NEED.admits(text):
        return None
    m = _SHAPE_P2P.search(text)
    if m is None:
        return None
    direction = Direction.RECV if m.group("recv") else Direction.SEND
    marker = PhaseMarker(
        phase=Phase.INIT,
        label=f"pipeline shape inference ({direction.value})",
        p2p=direction,
        stage=int(m.group("stage")),
        peer_stage=int(m.group("peer")),
    )
    return Hit(EventKind.PHASE, payload=marker, key=("pp_shape", m.group("stage"), direction.value))
