"""Point-to-point waits read off the stacks: who waits in send/recv for whom.

A blocking ``send`` completes only when the peer posts the matching ``recv`` (and vice
versa), so each rank blocked in one is waiting *for its peer*. The peer comes, best
first, from:

* the call's arguments (``dst``/``src``/``peer``), when py-spy ran with ``--locals``;
* the direction a pipeline helper names (``send_forward``, ``recv_backward``,
  ``_exec_send_grads``...) plus the rank order: forward sends go to the next stage,
  backward sends to the previous one. This assumes consecutive ranks are consecutive
  pipeline stages (a pure pipeline, or pipeline groups of consecutive ranks), and every
  finding built on it says so.

The waits form a graph with at most one edge out of each rank; a cycle of waits that do
not match each other (send/send, recv/recv) is a deadlock, and a chain that ends at a
rank that is not in a point-to-point op ends at the culprit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hangdoc.analyzer.model import Frame
from hangdoc.analyzer.views.activity import RankActivity, is_user_frame
from hangdoc.analyzer.views.catalog import (
    P2P_DIRECTION_HINTS,
    P2P_PEER_LOCALS,
    P2PKind,
    PipeDirection,
)

P2P_FAMILIES = frozenset({P2PKind.SEND.value, P2PKind.RECV.value})


@dataclass(frozen=True, slots=True)
class P2POp:
    rank: int
    kind: P2PKind
    peer: int | None
    assumed: bool  # peer inferred from a direction hint and the rank order
    frame: Frame  # the frame that named the peer or the direction (else the c10d frame)
    direction: PipeDirection | None = None  # when a helper said so

    def text(self) -> str:
        arrow = "to" if self.kind == P2PKind.SEND else "from"
        peer = f" {arrow} rank {self.peer}" if self.peer is not None else ""
        how = f" ({self.direction})" if self.direction else ""
        return f"{self.kind}{peer}{how} at {self.frame.label()}"

    def matches(self, other: P2POp) -> bool:
        """``other`` is the complementary op aimed back at this rank."""
        return other.kind != self.kind and other.peer == self.rank and self.peer == other.rank


def _int_local(frame: Frame) -> int | None:
    values = dict(frame.locals)
    for name in P2P_PEER_LOCALS:
        raw = values.get(name)
        if raw is not None and raw.strip().lstrip("-").isdigit():
            return int(raw)
    return None


def _direction(frames: tuple[Frame, ...], kind: P2PKind) -> PipeDirection | None:
    for frame in frames:
        for pattern, hint_kind, direction in P2P_DIRECTION_HINTS:
            if hint_kind == kind and pattern.match(frame.function_leaf):
                return direction
    return None


def p2p_op(activity: RankActivity, world: int | None) -> P2POp | None:
    """The send/recv the rank's main thread is blocked in, with its peer if known."""
    call = activity.waiting_call
    main = activity.main
    if call is None or main is None or call.family not in P2P_FAMILIES:
        return None
    frames = main.thread.frames[call.frame_index :]
    shown = next((f for f in frames if is_user_frame(f)), frames[0])
    kind = P2PKind(call.family)
    direction = _direction(frames, kind)
    for frame in frames:
        peer = _int_local(frame)
        if peer is not None:
            return P2POp(activity.rank, kind, peer, False, shown, direction)
    if direction is None:
        return P2POp(activity.rank, kind, None, False, shown)
    step = 1 if (kind == P2PKind.SEND) == (direction == PipeDirection.FORWARD) else -1
    peer = activity.rank + step
    if peer < 0 or (world is not None and peer >= world):
        return P2POp(activity.rank, kind, None, True, shown, direction)
    return P2POp(activity.rank, kind, peer, True, shown, direction)


@dataclass(frozen=True, slots=True)
class P2PDeadlock:
    ops: Mapping[int, P2POp]
    cycle: tuple[int, ...]  # ranks in a cycle of unmatched waits (empty if none)
    chain_end: int | None  # the rank an unmatched chain ends at, not in a p2p op
    chain: tuple[int, ...]  # ranks waiting along that chain

    @property
    def culprits(self) -> tuple[int, ...]:
        if self.cycle:
            return tuple(sorted(self.cycle))
        return (self.chain_end,) if self.chain_end is not None else ()

    @property
    def assumed(self) -> bool:
        return any(op.assumed for op in self.ops.values())


def _unmatched(op: P2POp, ops: Mapping[int, P2POp]) -> bool:
    other = ops.get(op.peer) if op.peer is not None else None
    return other is None or not op.matches(other)


def find_deadlock(ops: Mapping[int, P2POp], ranks: set[int]) -> P2PDeadlock | None:
    """A cycle of unmatched waits, else the longest chain of waits ending at a rank that
    is collected but elsewhere. ``ranks`` are the live collected ranks."""
    edges = {r: op.peer for r, op in ops.items() if op.peer is not None and _unmatched(op, ops)}
    for start in sorted(edges):
        path: list[int] = []
        node: int | None = start
        while node is not None and node in edges and node not in path:
            path.append(node)
            node = edges[node]
        if node is not None and node in path:
            cycle = tuple(path[path.index(node) :])
            if len(cycle) >= 2:
                return P2PDeadlock(ops, cycle, None, ())
    best: tuple[int, ...] = ()
    end: int | None = None
    for start in sorted(edges):
        path = [start]
        node = edges[start]
        while node in edges and node not in path:
            path.append(node)
            node = edges[node]
        if node not in ops and node in ranks and len(path) > len(best):
            best, end = tuple(path), node
    if end is not None:
        return P2PDeadlock(ops, (), end, best)
    return None
