"""Ranks are stuck in point-to-point (send/recv) transfers of a pipeline

## What it means
The evidence shows ranks blocked or timed out in point-to-point transfers rather than in
collectives: the NCCL watchdog timed out a ``SEND``/``RECV`` work, a pipeline stage's
last line says it is receiving from the previous stage, or the only stacks at hand stop
inside a pipeline schedule's send/recv (``torch.distributed.pipelining``,
``batch_isend_irecv``, a coalesced batch of sends and receives). Without every rank's
stack hangdoc cannot tell which stage broke the chain, only that the pipeline's
transfers do not pair up.

## Why it hangs
A send completes only when the peer posts the matching receive of the same size, and a
receive only when the peer sends. When two neighbouring stages disagree on the schedule
(an extra or missing microbatch, a different warm-up count, both sides sending first),
when one stage never reaches its send (stuck or crashed elsewhere), or when the works a
batched ``batch_isend_irecv`` returns are not all waited on, every stage after it waits
in its receive until the watchdog's timeout.

## Evidence used
* watchdog timeouts (``WorkNCCL(SeqNum=…, OpType=SEND|RECV, …)``, FORMATS.md §2) whose
  operation is a point-to-point one; a ``COALESCED`` timeout with a NumelIn of -1 (a
  batch of sends/receives or of collectives) counts only beside a SEND/RECV;
* ``torch.distributed.pipelining`` shape-inference lines, "Shape inference: stage N
  receiving from stage M" (analyzer/parsers/logs/pipelining.py) that are a stage's last;
* stacks (any format, also a lone unranked one or a traceback) whose innermost
  distributed frame is a send/recv, a pipeline frame (``torch/distributed/pipelining/``,
  Megatron's ``p2p_communication``, DeepSpeed's ``runtime/pipe/p2p.py``, helpers named
  ``send_forward``/``recv_backward``/``_exec_recv_grads``…), or a coalesced batch being
  launched (``_coalescing_manager``, ``ProcessGroupNCCL::endCoalescing`` →
  ``ncclGroupEnd``) — the last is also how a coalesced collective looks, so it counts as
  weak evidence. A host wait for the device (``torch.cuda.synchronize``, a stream's or
  event's synchronize) is read by its caller: Megatron's ``_communicate_shapes`` and its
  copies (xDiT's pipeline coordinator) synchronize after their ``batch_isend_irecv``, so
  the host waits there for the receive. A ``broadcast`` counts when its caller is a
  pipeline frame or named for a send or receive: pipelines whose backend lacks send/recv
  move a stage's tensors by a broadcast on a two-rank group (PipeDream's
  ``recv_helper_thread`` → ``_recv``, DeepSpeed's ``runtime/pipe/p2p.py``); a traceback
  there that ended in gloo's "Timed out waiting <ms>ms for recv operation to complete"
  (``UnboundBuffer::waitRecv``) is that transfer timing out. Only when fewer than two
  ranks' stacks are at hand: with more, HD105
  pairs the sends and receives itself. Not a traceback that ended in gloo's "Connection
  closed by peer" (recv read the end of the stream: the peer closed its end, as its
  process does when it ends): that transfer failed because the peer was gone.

Each kind of signal alone is a hint; two or three kinds that agree are one signal
(docs/confidence.md). Full stacks of every rank, where the peers are known, are HD105's;
flight recorder dumps are HD014's.

## How to confirm
Collect the stacks of every stage (``py-spy dump --locals``: the ``dst``/``src`` of
each send/recv) or the flight recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE``): the
unmatched send or receive, and the stage that is elsewhere, are then named. Log each
stage's schedule (microbatch, op, peer) for one step.

## How to fix
Make neighbouring stages run the same schedule; wait on every work that
``batch_isend_irecv`` returns; pass input/output shapes to ``PipelineStage`` to skip
runtime shape inference when a stage may be slow to start; use the framework's
schedules rather than hand-written send/recv sequences.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hangdoc.analyzer.model import (
    Category,
    EvidenceRef,
    Finding,
    Frame,
    ProcessEvidence,
    Severity,
    Strength,
    TextStack,
)
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import (
    CollectiveTimeout,
    ConnectionLost,
    Direction,
    PeerLoss,
    TimeoutSource,
    Work,
)
from hangdoc.analyzer.views.activity_table import Activity, phases_beginning
from hangdoc.analyzer.views.catalog import (
    DEVICE_SYNC_FRAMES,
    P2P_DIRECTION_HINTS,
    PIPELINE_P2P_HELPERS,
    TRANSFER_NAMED,
)
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import agreeing

# torch's c10d OpType names (ProcessGroup.hpp opTypeToString) of point-to-point works; the
# watchdog watches p2p works since gh:pytorch/pytorch/pull/109611 ("watchdog is picking up
# on a timeout for a RECV op" on a pipeline hang there; xdit-284 in the casebook).
_P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE"})
_COALESCED = frozenset({"COALESCED", "_COALESCED"})
# Python functions of torch.distributed that post or wait on transfers (distributed_c10d.py)
# and the pipeline schedules' p2p helpers (pipelining/schedules.py, stage.py).
_P2P_FUNCS = frozenset(
    {
        "send",
        "recv",
        "isend",
        "irecv",
        "batch_isend_irecv",
        "send_object_list",
        "recv_object_list",
        "_batch_p2p",
        "_sorted_batch_p2p",
        "_wait_batch_p2p",
        "_shape_inference",
    }
)
# Native frames (py-spy --native, gdb) of a transfer. ProcessGroupGloo's send and recv
# return its SendWork and RecvWork (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp), whose
# wait() blocks in gloo's UnboundBuffer::waitSend/waitRecv: a thread waiting on a gloo
# transfer shows the work's wait, not send or recv. UnboundBuffer's own waits are not
# listed: gloo's collectives (allreduce, allgather…) wait on unbound buffers too.
_NATIVE_P2P = (
    "ProcessGroupNCCL::send",
    "ProcessGroupNCCL::recv",
    "pointToPoint",
    "ncclSend",
    "ncclRecv",
    "ProcessGroupGloo::send",
    "ProcessGroupGloo::recv",
    "ProcessGroupGloo::SendWork::",
    "ProcessGroupGloo::RecvWork::",
)
_NATIVE_COALESCE = ("ProcessGroupNCCL::endCoalescing",)
# Communicator creation under a send/recv: ProcessGroupNCCL creates a communicator lazily on
# its first use (pointToPoint/collective -> getNCCLComm -> initNCCLComm), and
# broadcastUniqueNCCLID waits in the store for the ncclUniqueId (ProcessGroupNCCL.cpp). A
# thread there has not begun a transfer: it waits for the communicator to exist.
_NATIVE_CREATING = (
    "ProcessGroupNCCL::initNCCLComm",
    "ProcessGroupNCCL::broadcastUniqueNCCLID",
    "ProcessGroupNCCL::getNCCLComm",
)
# Collectives: the innermost one decides that the rank is not in a transfer.
_COLLECTIVES = frozenset(
    {
        "all_reduce",
        "allreduce",
        "all_gather",
        "allgather",
        "_allgather_base",
        "_all_gather_base",
        "all_gather_into_tensor",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "_reduce_scatter_base",
        "broadcast",
        "barrier",
        "monitored_barrier",
        "alltoall",
        "alltoall_base",
        "all_to_all",
        "all_to_all_single",
        "reduce",
        "gather",
        "scatter",
        "all_gather_object",
        "broadcast_object_list",
    }
)
_MAX_DEPTH = 40  # frames looked at from the innermost one
# Communication libraries that wrap torch.distributed's collectives under the same names:
# DeepSpeed's deepspeed.comm (comm/comm.py broadcast under its timed_op log_wrapper,
# comm/torch.py TorchBackend.broadcast), which DeepSpeed's runtime/pipe/p2p.py calls as
# ``dist``. A broadcast's caller is looked for outside them.
_COMM_WRAPPERS = ("deepspeed/comm/",)
# Pipeline p2p code of torch.distributed.pipelining (schedules.py, stage.py), Megatron
# (core/pipeline_parallel/p2p_communication.py) and DeepSpeed (runtime/pipe/p2p.py).
_PIPELINE_DIRS = (
    "/distributed/pipelining/",
    "/pipeline_parallel/p2p_communication",
    "/runtime/pipe/p2p.py",
)


@dataclass(frozen=True, slots=True)
class _StackHit:
    process: ProcessEvidence
    frame: Frame
    strong: bool  # a send/recv or pipeline frame; False: a coalesced batch only


def _leaf(function: str) -> str:
    return function.rsplit("::", 1)[-1].rsplit(".", 1)[-1]


def _is_distributed(frame: Frame) -> bool:
    path = frame.file.replace("\\", "/")
    return "torch/distributed/" in path or "c10d::" in frame.function


def _classify(frame: Frame) -> bool | None:
    """True: a send/recv or pipeline frame; False: a coalesced batch (weak); None: a
    collective or communicator creation (the rank is not in a transfer). Raises
    LookupError for other frames."""
    path = frame.file.replace("\\", "/")
    if frame.native:
        if any(n in frame.function for n in _NATIVE_CREATING):
            return None  # creating the communicator, not transferring (HD207's)
        if any(n in frame.function for n in _NATIVE_P2P):
            return True
        if any(n in frame.function for n in _NATIVE_COALESCE):
            return False
        if "c10d::" in frame.function and _leaf(frame.function).lower() in _COLLECTIVES:
            return None
        raise LookupError
    if any(d in path for d in _PIPELINE_DIRS):
        return True
    if any(pattern.match(_leaf(frame.function)) for pattern, _, _ in P2P_DIRECTION_HINTS):
        return True  # send_forward, recv_backward, _exec_send_activations …
    if any(pattern.match(_leaf(frame.function)) for pattern in PIPELINE_P2P_HELPERS):
        return True  # _communicate_shapes, pipeline_recv, recv_next … (catalog)
    if not _is_distributed(frame):
        raise LookupError
    leaf = _leaf(frame.function)
    if leaf in _P2P_FUNCS:
        return True
    if leaf == "_coalescing_manager":
        return False
    if leaf in _COLLECTIVES:
        return None
    raise LookupError


def _peer_closed(tl: Timeline, stacks: TextStack) -> bool:
    """The traceback ended in gloo's "Connection closed by peer": recv(2) read the end
    of the stream, the peer's orderly close of its end of the pair (gloo/transport/tcp/
    pair.cc Pair::read), which its process does when it ends. The transfer did not wait
    on the peer: it failed because the peer had gone, which is no unmatched schedule.
    The exception is the first one of the same text at or after the traceback's start."""
    line = _raised_at(tl, stacks)
    if line is None:
        return False
    return any(
        (lost := p.event.payload_as(ConnectionLost)) is not None
        and lost.failure is PeerLoss.CONNECTION_CLOSED
        and p.event.source == stacks.source
        and p.event.line == line
        for p in tl.of(EventKind.CONNECTION_LOST)
    )


def _raised_at(tl: Timeline, stacks: TextStack) -> int | None:
    """The line of the traceback's exception: the first exception of the same text at or
    after the traceback's start (None when none is read)."""
    raised = [
        p.event.line
        for p in tl.of(EventKind.EXCEPTION)
        if p.event.source == stacks.source
        and p.event.line is not None
        and stacks.line is not None
        and p.event.line >= stacks.line
    ]
    return min(raised) if raised else None


def _gloo_timed_out(process: ProcessEvidence, tl: Timeline) -> Placed | None:
    """gloo's timeout of the transfer the stack waits in: the traceback ended in "Timed out
    waiting <ms>ms for recv|send operation to complete" (gloo/transport/{tcp,ibverbs,uv}/
    unbound_buffer.cc UnboundBuffer::waitRecv/waitSend). gloo's collectives wait on
    unbound buffers too, so the message alone is no p2p wait; under a stack that stops in
    a transfer it says the transfer itself ran out of time (the peer never sent or
    received), not that the rank was computing when the paste was taken."""
    latest = process.latest_stacks()
    if not isinstance(latest, TextStack):
        return None
    line = _raised_at(tl, latest)
    if line is None:
        return None
    return next(
        (
            p
            for p in tl.of(EventKind.COLLECTIVE_TIMEOUT)
            if (t := p.event.payload_as(CollectiveTimeout)) is not None
            and t.detector is TimeoutSource.GLOO
            and p.event.source == latest.source
            and p.event.line == line
        ),
        None,
    )


def _met_peer_close(process: ProcessEvidence, tl: Timeline) -> bool:
    """The process's stack is a traceback that ended in the peer's close (_peer_closed)."""
    latest = process.latest_stacks()
    return isinstance(latest, TextStack) and _peer_closed(tl, latest)


def _device_sync(frame: Frame) -> bool:
    """A host wait for the device's queued work (torch.cuda.synchronize, a stream's or
    event's synchronize): what it waits for is its caller's, so the caller decides."""
    if frame.native:
        return False
    path = frame.file.replace("\\", "/")
    leaf = _leaf(frame.function)
    return any(path.endswith(f) and leaf in names for f, names in DEVICE_SYNC_FRAMES)


def _pair_broadcast_caller(outer: Iterable[Frame]) -> Frame | None:
    """The caller of a broadcast, when it is a transfer between two stages: the first
    frame out of torch.distributed is a pipeline p2p frame or named for a send or receive
    (catalog TRANSFER_NAMED: PipeDream's _recv, DeepSpeed's p2p recv, which broadcast on a
    two-rank group where the backend has no send/recv of its own). None otherwise: a
    broadcast called by anything else is a collective."""
    for frame in outer:
        path = frame.file.replace("\\", "/")
        if frame.native or _is_distributed(frame) or any(w in path for w in _COMM_WRAPPERS):
            continue
        try:
            if _classify(frame):
                return frame
        except LookupError:
            pass
        return frame if TRANSFER_NAMED.search(_leaf(frame.function)) else None
    return None


def _stack_hit(process: ProcessEvidence) -> _StackHit | None:
    latest = process.latest_stacks()
    if latest is None:
        return None
    threads = latest.threads
    main = next((t for t in threads if t.is_main), threads[0] if threads else None)
    if main is None:
        return None
    frames = main.frames[:_MAX_DEPTH]
    for i, frame in enumerate(frames):
        if _device_sync(frame):
            continue  # a wait for the device: the caller says what the device runs
        try:
            kind = _classify(frame)
        except LookupError:
            if frame.native or _is_distributed(frame):
                continue  # libc, NCCL internals, c10d wrappers: look further out
            return None  # Python code of the job or torch.nn runs inside it: computing
        if kind is None:
            if not frame.native and _leaf(frame.function) == "broadcast":
                caller = _pair_broadcast_caller(frames[i + 1 :])
                return _StackHit(process, caller, True) if caller is not None else None
            return None
        return _StackHit(process, frame, kind)
    return None


# Training or evaluation went on: bars and markers of the loop.
_PROGRESS = phases_beginning(Activity.TRAIN_LOOP, Activity.EVAL)


def _stage_waits(ctx: RuleContext) -> list[Placed]:
    """Each rank's last pipelining shape-inference line, when it is a receive and no
    training or evaluation progress of that rank follows it."""
    last: dict[int | None, Placed] = {}
    progressed: set[int | None] = set()
    for p in ctx.timeline.of(EventKind.PHASE):
        marker = _marker(p)
        if marker.p2p is not None:
            last[p.rank] = p
            progressed.discard(p.rank)
        elif p.rank in last and marker.phase in _PROGRESS:
            progressed.add(p.rank)
    return [p for r, p in last.items() if _marker(p).p2p == Direction.RECV and r not in progressed]


def _marker(p: Placed) -> PhaseMarker:
    found = p.event.payload_as(PhaseMarker)
    return found if found is not None else PhaseMarker()


def _op(p: Placed) -> str:
    """The OpType a timeout names, upper-case ("" when none)."""
    work = p.event.payload_as(Work)
    return (work.op or "").upper() if work is not None else ""


class P2PWaitEvidence(Rule):
    __doc__ = __doc__
    id = "HD048"
    name = "p2p-wait-evidence"
    summary = "timeouts, pipeline lines or stacks show ranks stuck in send/recv transfers"
    categories = (Category.P2P_DEADLOCK,)
    severity = Severity.ERROR
    requires = frozenset()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        timeouts = ctx.timeline.of(EventKind.COLLECTIVE_TIMEOUT)
        p2p = [p for p in timeouts if _op(p) in _P2P_OPS]
        coalesced = [p for p in timeouts if _op(p) in _COALESCED]
        stages = _stage_waits(ctx)
        stacked = [p for p in ctx.evidence.processes if p.has_stacks()]
        stacks: list[_StackHit] = []
        if sum(1 for p in stacked if p.rank is not None) < 2:
            # Stacks of several ranks are HD105's, which pairs their sends and receives.
            stacks = [
                h
                for p in stacked
                if (h := _stack_hit(p)) is not None and not _met_peer_close(p, ctx.timeline)
            ]
        if p2p:
            p2p = p2p + coalesced
        kinds = sum(1 for found in (p2p, stages, stacks) if found)
        if not kinds:
            return
        # Each kind alone is a hint; each further kind that agrees steps up, to a signal.
        strength = agreeing(Strength.HINT, kinds, Strength.SIGNAL)
        waiting = sorted(
            {p.rank for p in [*p2p, *stages] if p.rank is not None}
            | {h.process.rank for h in stacks if h.process.rank is not None}
        )
        parts: list[str] = []
        refs: list[EvidenceRef] = []
        if p2p:
            ops = sorted({_op(p) or "?" for p in p2p})
            who = sorted({p.rank for p in p2p if p.rank is not None})
            parts.append(
                f"the watchdog timed out {'/'.join(ops)} work"
                + (f" on {ranks_text(who)}" if who else "")
                + " (SEND/RECV are point-to-point transfers; COALESCED is a batch of them)"
            )
            refs.extend(limited_refs(p2p, limit=4))
        if stages:
            peers = sorted(
                {str(s) if (s := _marker(p).peer_stage) is not None else "?" for p in stages}
            )
            parts.append(
                "pipeline stages' last lines say they are receiving from stage "
                + ", ".join(peers)
                + " (runtime shape inference) and nothing follows"
            )
            refs.extend(limited_refs(stages, limit=4))
        if stacks:
            where = "; ".join(
                f"{h.process.label if h.process.rank is not None else 'a process'}: "
                f"{h.frame.label()}"
                for h in stacks[:3]
            )
            weak = not any(h.strong for h in stacks)
            timed = [
                t
                for h in stacks
                if h.strong and (t := _gloo_timed_out(h.process, ctx.timeline)) is not None
            ]
            parts.append(
                "the stacks stop in "
                + ("a coalesced batch being launched" if weak else "a pipeline send/recv")
                + f" ({where})"
                + (" — a batch of sends/receives, or of coalesced collectives" if weak else "")
                + "".join(
                    f", where gloo timed out the {g.direction or 'transfer'} after "
                    f"{g.timeout_ms} ms (its peer never matched it)"
                    for w in timed[:1]
                    if (g := w.event.payload_as(CollectiveTimeout)) is not None
                )
            )
            refs.extend(
                EvidenceRef(
                    source=h.process.primary_source(),
                    detail=f"{h.process.label}: {h.frame.label()}",
                    rank=h.process.rank,
                )
                for h in stacks[:4]
            )
            refs.extend(limited_refs(timed, limit=2))
        title = (
            f"{ranks_text(waiting)} {'is' if len(waiting) == 1 else 'are'} stuck in "
            "point-to-point transfers"
            if waiting
            else "the pipeline is stuck in point-to-point transfers"
        )
        yield Finding(
            rule=self.id,
            category=Category.P2P_DEADLOCK,
            severity=self.severity,
            title=title,
            explanation=(
                "; ".join(parts).capitalize()
                + ". A send completes only when its peer posts the matching receive (and "
                "the reverse), so the pipeline's transfers do not pair up: a stage that "
                "runs a different schedule, one that never reaches its send, or batched "
                "works that are not all waited on. Which stage broke the chain is not in "
                "this evidence."
            ),
            fix=(
                "Collect every stage's stack with py-spy --locals (dst/src of each "
                "send/recv) or the flight recorder to find the unmatched transfer; make "
                "neighbouring stages run the same schedule and wait on every work "
                "batch_isend_irecv returns."
            ),
            culprit_ranks=(),
            waiting_ranks=tuple(waiting),
            evidence=tuple(refs),
            strength=strength,
        )


RULE = P2PWaitEvidence
