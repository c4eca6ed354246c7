"""Point-to-point waits read off the stacks: who waits in send/recv for whom.

A blocking ``send`` completes only when the peer posts the matching ``recv`` (and vice
versa), so each rank blocked in one is waiting *for its peer*. The peer comes, best
first, from:

* the call's arguments (``dst``/``src``/``peer``), when py-spy ran with ``--locals``;
* the direction a pipeline helper names (``send_forward``, ``recv_backward``,
  ``_exec_send_grads``...) plus the rank order: forward sends go to the next stage,
  backward sends to the previous one. This assumes consecutive ranks are consecutive
  pipeline stages (a pure pipeline, or pipeline groups of consecutive ranks), and every
  finding built on it says so;
* for a bare ``dist.send``/``dist.recv`` called by code that names no direction, the
  same rank order read the other way round: where the stages that send and the stages
  that receive meet at neighbouring ranks in one way only (senders below a receiver:
  data flows forward; above it: backward), that is the pipeline's direction, and each
  bare op gets the neighbour it names (``assign_rank_order_peers``).

The waits form a graph with at most one edge out of each rank; a cycle of waits that do
not match each other (send/send, recv/recv) is a deadlock, and a chain that ends at a
rank that is not in a point-to-point op ends at the culprit. A send and the recv it
feeds that are both posted and both stay blocked while not a byte moves through either
process are a deadlock of their own: they do not describe the same transfer (gloo pairs
a send with a recv by its ``tag``, so a receiver that posts the second tensor's recv
first waits forever while its sender waits in the first tensor's send; NCCL pairs them
by order and size), and the pair is the culprit while the stages behind the sender queue
in their own sends. A pair whose I/O counters were not read twice (a paste) may be a
large transfer in flight and is not named (``bytes_still``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from hangdoc.analyzer.model import Frame, ProcessEvidence
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


def _rank_order_direction(kinds: Mapping[int, P2PKind]) -> PipeDirection | None:
    """The one way data can flow between neighbouring ranks that send and receive.

    A sender at rank ``r`` next to a receiver at ``r + 1`` is a forward boundary, a
    receiver at ``r`` next to a sender at ``r + 1`` a backward one; only a job that shows
    boundaries of one way alone says which way its pipeline runs."""
    ways: set[PipeDirection] = set()
    for rank, kind in kinds.items():
        after = kinds.get(rank + 1)
        if after is None or after == kind:
            continue
        ways.add(PipeDirection.FORWARD if kind == P2PKind.SEND else PipeDirection.BACKWARD)
    return next(iter(ways)) if len(ways) == 1 else None


def assign_rank_order_peers(ops: Mapping[int, P2POp], world: int | None) -> dict[int, P2POp]:
    """Peers for the ops that name neither a peer nor a direction, from the rank order.

    Bare ``send``/``recv`` calls (user code calling ``dist.send`` with a computed ``dst``)
    say nothing of their peer in a stack without locals. Taking consecutive ranks as
    consecutive stages (the assumption the direction hints already make), the boundary
    between the ranks that send and the ranks that receive says which way the pipeline
    runs, and every bare op then points at its neighbour that way. Ops with a peer or a
    direction of their own are kept; where the boundaries disagree nothing is assigned."""
    bare = {r: op for r, op in ops.items() if op.peer is None and op.direction is None}
    if not bare:
        return dict(ops)
    direction = _rank_order_direction({r: op.kind for r, op in bare.items()})
    if direction is None:
        return dict(ops)
    out = dict(ops)
    for rank, op in bare.items():
        step = 1 if (op.kind == P2PKind.SEND) == (direction == PipeDirection.FORWARD) else -1
        peer = rank + step
        if peer < 0 or (world is not None and peer >= world):
            continue
        out[rank] = P2POp(rank, op.kind, peer, True, op.frame, None)
    return out


@dataclass(frozen=True, slots=True)
class P2PDeadlock:
    ops: Mapping[int, P2POp]
    cycle: tuple[int, ...]  # ranks in a cycle of unmatched waits (empty if none)
    chain_end: int | None  # the rank an unmatched chain ends at, not in a p2p op
    chain: tuple[int, ...]  # ranks waiting along that chain
    # (sender, receiver) of a send and the recv it feeds, both blocked: they disagree on
    # which transfer comes first (tag, order or size)
    pairs: tuple[tuple[int, int], ...] = ()

    @property
    def culprits(self) -> tuple[int, ...]:
        if self.cycle:
            return tuple(sorted(self.cycle))
        if self.pairs:
            return tuple(sorted({r for pair in self.pairs for r in pair}))
        return (self.chain_end,) if self.chain_end is not None else ()

    @property
    def assumed(self) -> bool:
        return any(op.assumed for op in self.ops.values())


def _unmatched(op: P2POp, ops: Mapping[int, P2POp]) -> bool:
    other = ops.get(op.peer) if op.peer is not None else None
    return other is None or not op.matches(other)


def bytes_still(process: ProcessEvidence) -> bool:
    """No byte read or written by the process (/proc/PID/io, every thread's: gloo's and
    NCCL's socket threads included) between its first and last live /proc sample, read at
    least twice. A send and its recv moving a large tensor over a socket move these."""
    procs = [p for p in process.proc_samples if p.alive]
    if len(procs) < 2:
        return False
    first, last = procs[0].io, procs[-1].io
    counters = (
        (first.rchar, last.rchar),
        (first.wchar, last.wchar),
        (first.syscr, last.syscr),
        (first.syscw, last.syscw),
    )
    return all(a is not None and a == b for a, b in counters)


def _blocked_pairs(ops: Mapping[int, P2POp], still: Set[int]) -> tuple[tuple[int, int], ...]:
    """(sender, receiver) of each send whose peer is blocked in the recv aimed back at it,
    where no byte moved through either (``still``)."""
    pairs = []
    for rank, op in sorted(ops.items()):
        other = ops.get(op.peer) if op.peer is not None else None
        sent = op.kind == P2PKind.SEND and other is not None and op.matches(other)
        if sent and other is not None and rank in still and other.rank in still:
            pairs.append((rank, other.rank))
    return tuple(pairs)


def find_deadlock(
    ops: Mapping[int, P2POp], ranks: set[int], still: Set[int] = frozenset()
) -> P2PDeadlock | None:
    """A cycle of unmatched waits, else the longest chain of waits ending at a rank that
    is collected but elsewhere, else a send and its recv blocked on each other with no
    byte moving through either. ``ranks`` are the live collected ranks, ``still`` those
    whose I/O stood still (``bytes_still``)."""
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
    pairs = _blocked_pairs(ops, still)
    if pairs:
        paired = {r for pair in pairs for r in pair}
        behind = tuple(r for r in sorted(edges) if r not in paired)
        return P2PDeadlock(ops, (), None, behind, pairs)
    return None
