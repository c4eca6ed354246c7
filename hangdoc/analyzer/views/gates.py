"""Ranks held at a "rank 0 first" gate: what they raised or logged while they waited there.

A context manager that holds every rank but the main one in a barrier until the main
process has done the work inside it (transformers' and accelerate's
``main_process_first``, ultralytics' and YOLOv5's ``torch_distributed_zero_first``:
parsers/logs/tb_stage.py, CodeStage.RANK_ZERO_FIRST) makes the other ranks wait for the
main process. Their wait shows in two typed places:

* an uncaught exception whose traceback's frames enter the gate (ExceptionRaised.stage);
* a store's warning right above a traceback that enters the gate, when the paste cut that
  traceback before its exception line (StoreTimeout.code_stage: the warning c10d's socket
  layer prints as the store's wait gives out, "While waitForInput, poolFD failed …" in
  torch 2.3-2.5, "waitForInput: socket … timed out after …ms" later).

HD043 names the gate; HD039, timing the main process's work against the timeout, names
the main process as the busy one when the gate says who it was.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hangdoc.analyzer.model import Frame
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from hangdoc.analyzer.payloads.torch_pg import StoreTimeout
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind

# The rank whose work a rank-0-first gate waits for (with local_main_process_first and
# torch_distributed_zero_first(local_rank), local rank 0 of each node; rank 0 among them).
MAIN_RANK = 0


def at_gate(p: Placed) -> bool:
    """An event of a rank other than the main one that shows it waiting at the gate."""
    if p.rank == MAIN_RANK:
        return False
    raised = p.event.payload_as(ExceptionRaised)
    if raised is not None:
        return raised.stage is CodeStage.RANK_ZERO_FIRST
    store = p.event.payload_as(StoreTimeout)
    return store is not None and store.code_stage is CodeStage.RANK_ZERO_FIRST


def gate_waits(tl: Timeline) -> list[Placed]:
    """Exceptions and store warnings, in timeline order, that show ranks waiting at a
    rank-0-first gate."""
    return [p for p in tl.of(EventKind.EXCEPTION, EventKind.STORE_TIMEOUT) if at_gate(p)]


# The gates' own functions, as a stack's frames name them (the same sources as
# parsers/logs/tb_stage.py's RANK_ZERO_FIRST, for stacks rather than an exception's stage).
_GATE_FUNCTIONS = frozenset(
    {"main_process_first", "local_main_process_first", "torch_distributed_zero_first"}
)


def stack_at_gate(frames: Sequence[Frame]) -> bool:
    """Whether a stack (innermost frame first) waits at a rank-0-first gate's entrance:
    the gate's frame entered from contextlib's ``__enter__``, where only the ranks the gate
    holds wait (before its ``yield``), so it waits for the main one. The main process's own
    barrier is on the way out (``__exit__``, after the gated work, waiting for the others):
    not this."""
    return any(
        inner.function_leaf in _GATE_FUNCTIONS and outer.function_leaf == "__enter__"
        for inner, outer in itertools.pairwise(frames)
    )
