"""NCCL failures that happened while a communicator was being set up, not while it ran.

Creating a communicator (``ncclCommInitRank`` and friends, and the connections NCCL sets
up on a communicator's first collectives) is where configuration problems surface: no
usable network interface, a topology NCCL cannot map, a CUDA call that fails while the
peer-to-peer buffers are set up, a rank that is twice on one GPU. Three kinds of lines
say that setup failed, and this view gathers them for HD206 (and for the deaths view,
which must not call the same failure a crash):

* **NCCL WARN lines from setup code.** Every WARN names its source file
  (``graph/topo.h:230 NCCL WARN Could not find NET with id 0``): ``init.cc``,
  ``bootstrap.cc``, ``transport.cc``, ``channel.cc`` and the topology code in ``graph/``
  run only while a communicator is created or connected (NVIDIA/nccl ``src/``), and
  ``transport/nvls.cc`` creates the NVLS multicast group then (its buffer registration,
  with collectives, falls after the running guard below). Some
  setup messages are known by their words wherever they come from (``Bootstrap : no
  socket interface found``, ``NET/Socket : no interface found``, ``… verify
  NCCL_SOCKET_IFNAME``).
* **NCCL's return-code chain** through those files (``init.cc:1523 -> 2``), which NCCL
  prints as the failure unwinds.
* **A synchronous NCCL error in torch**: ``NCCL error in: <file>:<line>, unhandled cuda
  error …`` is the message of torch's ``C10D_NCCL_CHECK`` macros (c10d/NCCLUtils.hpp),
  which wrap NCCL calls made on the caller's thread: communicator creation
  (``NCCLComm::create`` in NCCLUtils.hpp, ``getNCCLComm`` in ProcessGroupNCCL.cpp) and
  the launch of a collective. Errors of a collective that already runs reach torch
  asynchronously instead, through the watchdog (``NCCL error: …`` without ``in:``,
  "Process group watchdog thread terminated with exception"). A synchronous system,
  internal, CUDA or usage error is a set-up failure where something shows the stage
  (``_setup_shown``): its check site in a set-up function of every held release
  (parsers/catalog/torch_stages.py), the creation call its caller named
  (``ncclCommInitRank failed: …``), a last error only set-up prints (``Attribute arch of
  node cpu not found``, graph/xml.h), a traceback through set-up, or NCCL's own set-up
  output of the process. The class alone shows nothing: ``unhandled cuda error`` at a
  torch 2.x place is a failed CUDA call under either kind of check, and a paste of that
  error alone shows no collective ran only because it shows nothing at all (nccl#1410,
  pytorch#47832's kind of paste, batch 2026-11-28j). A remote error, or one whose detail
  names a lost connection, is a transport failure (HD200), and an out-of-memory is HD031's.
* **An NCCL error raised from set-up code**, by a framework's own NCCL binding (vLLM's
  and SGLang's pynccl wrappers raise ``RuntimeError(f"NCCL error: {error_str}")`` with
  ncclGetErrorString's words), whose traceback shows it raised while a communicator was
  created (``ncclCommInitRank``, ``init_model_parallel_group``, ``init_process_group``:
  parsers/logs/tb_stage.py), with nothing running before it; also as its caller logs it
  after the call's name ("ncclCommInitRank failed with error: NCCL error: internal error",
  parsers/logs/torch_pg.py), which places it at the call.
* **A host resource NCCL could not have** (NCCL_RESOURCE_ERROR: "Error while creating
  shared memory segment /dev/shm/nccl-… (size N)"), with or without its WARN header: NCCL
  opens its shared-memory segments only while it connects a communicator.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from hangdoc.analyzer.payloads.nccl import (
    NcclError,
    NcclTransportError,
    NcclWarn,
    SourceStage,
)
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import NcclResult
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind, Phase

# The parser marks the WARNs and return codes of setup code (parsers/logs/nccl.py: the
# source files that run only while a communicator is created or connected, and the words
# of setup failures, not those of harmless setup chatter).

# ncclResult_t names (nccl.h) that a failed setup returns; ncclRemoteError is a peer's
# failure or a broken connection (HD200), ncclInvalidArgument a caller's bad buffer.
# ncclInProgress is torch's "NCCL timeout in: …" (a non-blocking init that never finished).
_SETUP_CLASSES = frozenset(
    {
        NcclResult.SYSTEM_ERROR,
        NcclResult.INTERNAL_ERROR,
        NcclResult.UNHANDLED_CUDA_ERROR,
        NcclResult.INVALID_USAGE,
        NcclResult.IN_PROGRESS,
    }
)
# An NCCL WARN, and a CUDA failure NCCL WARNed about ("transport.cc:154 NCCL WARN Cuda
# failure 'invalid argument'", a driver library or NVML call failing under NCCL), which the
# parser types as a CUDA error.
# An out-of-memory of a host allocation NCCL pins its buffers with (Sign.PINNED_HOST_MEMORY,
# parsers/logs/nccl_stage.py) is typed CUDA_OOM by its words and counts as such a failure.
_WARN_KINDS = frozenset({EventKind.NCCL_WARN, EventKind.CUDA_ERROR, EventKind.CUDA_OOM})
# Events that show collectives had already been running before the error.
_RUNNING = frozenset(
    {
        EventKind.NCCL_COLL,
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.WATCHDOG_STATUS,
        EventKind.WATCHDOG_TEARDOWN,
        EventKind.HEARTBEAT_TIMEOUT,
        EventKind.DUMP_SIGNAL,
        EventKind.COLLECTIVE_MISMATCH,
    }
)
_TRAINING_PHASES = frozenset(
    {Phase.TRAIN, Phase.EVAL, Phase.CHECKPOINT_SAVE, Phase.CHECKPOINT_SAVED}
)


@dataclass(frozen=True, slots=True)
class SetupFailure:
    """The lines that say NCCL failed while setting a communicator up."""

    warns: tuple[Placed, ...]  # NCCL WARN lines from setup code or with setup words
    returns: tuple[Placed, ...]  # "init.cc:N -> rc" chains
    errors: tuple[Placed, ...]  # torch's synchronous "NCCL error in: …" of a setup class
    # an NCCL error of a setup class raised from set-up code (its traceback shows it)
    raised: tuple[Placed, ...] = ()
    # Ranks whose errors only a set-up report of no known rank shows to be set-up's, where
    # it shows so for several ranks' errors: a line whose rank a paste's cut took was
    # printed by one process, which may be any of them (``_unranked_only``).
    unplaced: frozenset[int] = frozenset()

    @property
    def placed(self) -> tuple[Placed, ...]:
        return tuple(
            sorted((*self.warns, *self.returns, *self.errors, *self.raised), key=lambda p: p.index)
        )

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks the lines place the failure on: those of its lines, but not a rank
        whose own error only a report of an unknown rank ties to set-up, among several."""
        return tuple(sorted({p.rank for p in self.placed if p.rank is not None} - self.unplaced))


def is_setup_warn(p: Placed) -> bool:
    """An NCCL WARN written by communicator-setup code, or a setup message, or one whose
    return-code chain unwinds through setup code (the parser marks them); a CUDA failure
    NCCL reported so too, unless it names the GPU hardware (HD301's)."""
    warn = p.event.payload_as(NcclWarn)
    if warn is None or not warn.setup:
        return False
    # (Only NCCL's readers mark a CUDA failure setup's: by the file that printed it or by
    # the chain under its WARN, which a paste that cut the WARN's header still shows.)
    if p.kind == EventKind.CUDA_OOM:
        return Sign.PINNED_HOST_MEMORY in warn.signs
    return p.kind == EventKind.NCCL_WARN or (
        p.kind == EventKind.CUDA_ERROR and warn.hardware is None
    )


def _after_connecting(tl: Timeline, running_from: int) -> tuple[Placed, ...]:
    """CUDA failures NCCL WARNed about from no setup file, printed by a thread while it
    connects a communicator's transports: NCCL prints "Ring/Channel
    NN : a -> b via P2P/IPC | shared memory | NET/…" as it sets each connection up
    (transport.cc ncclTransportP2pSetup, init.cc before 2.7), so a failure that thread
    reports next, before anything shows collectives running, fails that set-up (a header's
    helper such as NCCL 2.4's include/shm.h, whose shmOpen registers the segment with
    cudaHostRegister, names no setup file of its own). Not the GPU's hardware (HD301's)."""
    connecting: set[tuple[str | None, int | None, int | None]] = set()
    found: list[Placed] = []
    for p in tl.events:
        if p.index >= running_from:
            break
        thread = (p.event.host, p.event.pid, p.event.tid)
        if p.event.pid is None or p.event.tid is None:
            continue
        if p.kind == EventKind.NCCL_TRANSPORT:
            connecting.add(thread)
        elif p.kind == EventKind.CUDA_ERROR and thread in connecting and not is_setup_warn(p):
            warn = p.event.payload_as(NcclWarn)
            if warn is not None and warn.hardware is None:
                found.append(p)
    return tuple(found)


def _host_resources(tl: Timeline, running_from: int) -> tuple[Placed, ...]:
    """NCCL's WARN that a resource of the host could not be had (the parser's
    NCCL_RESOURCE_ERROR: "Error while creating shared memory segment /dev/shm/nccl-…
    (size N)", the catalog's nccl-shm family), before anything shows collectives running,
    whether or not its header survived the paste. NCCL opens those segments only while it
    connects a communicator (NVIDIA/nccl src/transport/shm.cc's send/recv proxy set-up and
    ncclShmAllocateShareableBuffer, proxy.cc's proxy pools, transport/nvls.cc), so the
    failure is that set-up's: a container's small /dev/shm fails the first collective."""
    return tuple(p for p in tl.of(EventKind.NCCL_RESOURCE_ERROR) if p.index < running_from)


# first_running and setup_failure of each timeline, kept as deaths.first_deaths is: the
# deaths view, HD200, HD201 and HD206 ask for them, and each reads the whole job's events
# (a timeline is never changed once built; the entry goes with it).
_FIRST_RUNNING: weakref.WeakKeyDictionary[Timeline, int] = weakref.WeakKeyDictionary()
_SETUP_FAILURE: weakref.WeakKeyDictionary[Timeline, tuple[SetupFailure | None]] = (
    weakref.WeakKeyDictionary()
)


def first_running(tl: Timeline) -> int:
    """Index of the first event that shows collectives or training running (else the end)."""
    found = _FIRST_RUNNING.get(tl)
    if found is None:
        found = _FIRST_RUNNING[tl] = _first_running(tl)
    return found


def _first_running(tl: Timeline) -> int:
    for p in tl.events:
        if p.kind in _RUNNING:
            return p.index
        marker = p.event.payload_as(PhaseMarker)
        if marker is not None and marker.phase in _TRAINING_PHASES:
            return p.index
    return len(tl.events)


# The wrappers whose construction runs the job's first collectives on a new communicator
# (torch creates an NCCL communicator lazily, on its first collective, and NCCL connects
# its peers then): (file suffix, functions, what the job called). An error raised from
# these frames with nothing running before it is raised while the communicator and its
# connections are set up.
FIRST_COLLECTIVES: tuple[tuple[str, frozenset[str], str], ...] = (
    (
        "torch/distributed/utils.py",
        frozenset({"_verify_param_shape_across_processes", "_sync_module_states"}),
        "DistributedDataParallel()",
    ),
    ("deepspeed/runtime/engine.py", frozenset({"_broadcast_model"}), "deepspeed.initialize()"),
    (
        "torch/distributed/fsdp/_init_utils.py",
        frozenset({"_sync_module_params_and_buffers", "_sync_module_states"}),
        "FullyShardedDataParallel()",
    ),
)


def first_collective_of(tl: Timeline, p: Placed, running_from: int) -> str | None:
    """The wrapper whose first collective raised the exception that ``p`` is part of
    (``DistributedDataParallel()``), when nothing shows collectives running before it;
    else None. The exception is the one raised on ``p``'s line of the same file (torch's
    ``DistBackendError: NCCL error in: …`` and the "Last error:" lines under it), its
    innermost frame one of :data:`FIRST_COLLECTIVES`."""
    if p.index >= running_from or p.event.line is None:
        return None
    for other in tl.of(EventKind.EXCEPTION):
        if other.event.source != p.event.source or other.event.line != p.event.line:
            continue
        raised = other.event.payload_as(ExceptionRaised)
        if raised is None or raised.where_file is None:
            continue
        for suffix, functions, wrapper in FIRST_COLLECTIVES:
            if raised.where_file.endswith(suffix) and raised.where_function in functions:
                return wrapper
    return None


def is_setup_error(tl: Timeline, p: Placed, running_from: int) -> bool:
    """torch's synchronous NCCL error of a setup class, before any collective traffic,
    (or one whose c10d check sits in communicator set-up) that is neither an
    out-of-memory (HD031) nor a lost connection (HD200), where something shows the stage
    (:func:`_setup_shown`)."""
    error = _setup_class_error(p)
    if error is None:
        return False
    # A check in torch's communicator set-up (getNCCLComm in every release with a check at
    # the printed line: parsers/catalog/torch_stages.py) is set-up wherever it falls: a
    # communicator created after others already ran (a new group's first collective).
    if error.stage is SourceStage.SETUP:
        return True
    return p.index < running_from and _setup_shown(tl, p, running_from)


def _unranked_only(tl: Timeline, p: Placed, running_from: int) -> bool:
    """``p``, a set-up error of a known rank, is shown set-up's only by a set-up report or
    NCCL output of no known rank (a WARN whose "52: host:pid:tid [4]" header a cut took)."""
    error = _setup_class_error(p)
    if p.rank is None or error is None or error.stage is SourceStage.SETUP:
        return False
    return not _setup_shown(tl, p, running_from, ranked_only=True)


# What NCCL prints (with NCCL_DEBUG=INFO) only while it creates and connects a
# communicator: its "Init START/COMPLETE" and timing lines, the bootstrap and network
# interfaces it chose, the rings' connections (parsers/logs/nccl.py).
_NCCL_SETUP_OUTPUT = frozenset(
    {EventKind.NCCL_INIT, EventKind.NCCL_NETWORK, EventKind.NCCL_TRANSPORT}
)
# NCCL's reports that only its set-up makes, on either side of the error in a paste (NCCL
# prints them from its own threads, torch raises from the caller's): a configuration it
# refused (a GPU used twice, a topology attribute missing), a shared-memory segment it
# could not create (only opened while it connects: _host_resources), a WARN or return
# chain whose place is set-up code (parsers/logs/nccl_stage.py), harmless or not.
_NCCL_SETUP_REPORTS = frozenset(
    {
        EventKind.NCCL_CONFIG_ERROR,
        EventKind.NCCL_RESOURCE_ERROR,
        EventKind.NCCL_WARN,
        EventKind.NCCL_RETURN,
        EventKind.CUDA_ERROR,
    }
)


def _setup_shown(tl: Timeline, p: Placed, running_from: int, *, ranked_only: bool = False) -> bool:
    """Whether anything but the error's class shows it raised while a communicator was set
    up. torch's C10D_NCCL_CHECK wraps every NCCL call made on the caller's thread, the
    launch of a collective (ncclAllReduce, ncclGroupEnd) as well as the creation
    (NCCLComm::create): ncclUnhandledCudaError is a failed CUDA call in either, so a bare
    "NCCL error in: <file>:<line>, unhandled cuda error" whose place no held release maps
    (parsers/catalog/torch_stages.py) says where torch checked, not what NCCL was doing,
    and a paste of that error alone, with no collective logged, shows nothing ran only
    because it shows nothing at all. The stage is shown by the message NCCL left as its
    last error, where only set-up prints it (NcclError.last_error_stage); by the traceback
    of the exception the error was raised as (init_process_group, new_group, a serving
    worker's distributed set-up: parsers/logs/tb_stage.py; or the first collective of a
    wrapper that creates the communicator, DDP's construction: :data:`FIRST_COLLECTIVES`);
    or by NCCL's own set-up output of the same process: its init and connection lines
    before the error, and its set-up reports (a refused configuration, a WARN or return
    chain from set-up code) around it."""
    error = p.event.payload_as(NcclError)
    if error is not None and error.last_error_stage is SourceStage.SETUP:
        return True
    if error is not None and error.error_class is NcclResult.IN_PROGRESS:
        return True  # "NCCL timeout in: …": a non-blocking creation never left ncclInProgress
    if first_collective_of(tl, p, running_from) is not None:
        return True
    if p.event.line is not None:
        for other in tl.of(EventKind.EXCEPTION):
            if other.event.source != p.event.source or other.event.line != p.event.line:
                continue
            raised = other.event.payload_as(ExceptionRaised)
            if raised is not None and raised.stage in _NCCL_SETUP_STAGES:
                return True
    for q in tl.of(*_NCCL_SETUP_OUTPUT, *_NCCL_SETUP_REPORTS):
        if q.index >= running_from or not (p.rank is None or q.rank is None or q.rank == p.rank):
            continue
        if ranked_only and q.rank is None:
            continue  # (``_unranked_only``: a line of no known rank)
        if q.kind in _NCCL_SETUP_OUTPUT:
            if q.index < p.index:
                return True
        elif q.kind in (EventKind.NCCL_CONFIG_ERROR, EventKind.NCCL_RESOURCE_ERROR) or (
            _set_up_code(q)
        ):
            return True
    return False


def _set_up_code(q: Placed) -> bool:
    """An NCCL WARN or return chain whose place (or chain) is set-up code."""
    warn = q.event.payload_as(NcclWarn)
    return warn is not None and (warn.setup or warn.stage is SourceStage.SETUP)


def _setup_class_error(p: Placed) -> NcclError | None:
    """torch's synchronous NCCL error of a class a failed set-up returns, that is neither
    an out-of-memory (HD031), a lost connection (HD200) nor a teardown's; else None."""
    error = p.event.payload_as(NcclError)
    if error is None or not (error.where or "").strip() or error.in_watchdog:
        return None
    if (
        error.error_class not in _SETUP_CLASSES
        and not _invalid_at_creation(error)
        and not unread_class(error)
    ):
        return None
    if error.out_of_memory or error.last_error_peer or error.last_error_link:
        return None
    if error.destroying:
        return None  # the abort of a communicator as its group was destroyed: teardown
    return error


def unread_class(error: NcclError) -> bool:
    """An NCCL error whose words name no class hangdoc knows (``NCCL error in:
    …/ProcessGroupNCCL.cpp:535, <words never seen>``): where it was checked, or the
    traceback it was raised with, is all that says what failed. Set-up where those show
    set-up (``is_setup_error``: a check in communicator creation, a traceback through a
    set-up entry point, NCCL's own set-up output before it), one step weaker (HD206): a
    release's new words for a failure are most often of the same kinds."""
    return error.error_class in (None, NcclResult.UNKNOWN) and not error.last_error


def _invalid_at_creation(error: NcclError) -> bool:
    """ncclInvalidArgument from a c10d check that sits in communicator creation in every
    release with a check at the printed line (NCCLComm::create's C10D_NCCL_CHECK around
    ncclCommInitRank, parsers/catalog/torch_stages.py): not a collective's bad buffer, which
    is what the class means at a collective's launch, but an argument of the
    communicator's creation refused (ncclCommInitRank returns it for a rank outside the
    number of ranks, "Invalid rank requested", and a null argument, PtrCheck: NVIDIA/nccl
    src/init.cc), so the creation failed."""
    return error.error_class is NcclResult.INVALID_ARGUMENT and error.stage is SourceStage.SETUP


def is_setup_exception(p: Placed, running_from: int) -> bool:
    """An exception whose message is an NCCL error of a setup class, raised where its
    traceback shows a communicator being created, before any collective traffic."""
    raised = p.event.payload_as(ExceptionRaised)
    if raised is None or raised.stage not in _NCCL_SETUP_STAGES or p.index >= running_from:
        return False
    return Sign.NCCL_SETUP_CLASS in raised.signs or Sign.NCCL_ERROR_UNREAD in raised.signs


# Where an NCCL error of a set-up class is a communicator's creation failing: set-up, and
# a serving worker's device set-up, whose only NCCL calls are its distributed
# environment's (vLLM's Worker.init_device → init_worker_distributed_environment), and an
# RL framework's worker building its model, where its process group's first collectives
# run and torch creates the communicator (verl's, SkyRL's init_model: tb_stage.py), and a
# check across the ranks that a wrapper runs before its first step (DDP's constructor:
# _verify_model_across_ranks 1.9-1.10, _verify_params_across_processes 1.11-, through
# _verify_param_shape_across_processes 1.13-; setup_entry_points.json): its all-gather is
# the group's first collective, which creates the communicator. What the check itself
# raises (the ranks differ) is no NCCL error; an NCCL error of a set-up class raised
# there is the creation failing (is_setup_exception, with nothing running before it).
_NCCL_SETUP_STAGES = frozenset(
    {CodeStage.SETUP, CodeStage.DEVICE_INIT, CodeStage.WORKER_INIT, CodeStage.RANK_CHECK}
)


def _lost_connections(tl: Timeline) -> bool:
    """NCCL transport errors other than the connect retries every start-up logs."""
    return any(
        not (error := p.event.payload_as(NcclTransportError)) or not error.retrying
        for p in tl.of(EventKind.NCCL_TRANSPORT_ERROR)
    )


def setup_failure(tl: Timeline) -> SetupFailure | None:
    """What says a communicator's setup failed, or None. Transport errors (HD200's) and
    a completed run of collectives before the lines make it something else."""
    found = _SETUP_FAILURE.get(tl)
    if found is None:
        found = _SETUP_FAILURE[tl] = (_setup_failure(tl),)  # (a box: None is an answer)
    return found[0]


def _setup_failure(tl: Timeline) -> SetupFailure | None:
    if _lost_connections(tl):
        return None
    running_from = first_running(tl)
    warns = tuple(
        p
        for p in tl.events
        if p.kind in _WARN_KINDS and p.index < running_from and is_setup_warn(p)
    )
    warns = tuple(
        sorted(
            (*warns, *_after_connecting(tl, running_from), *_host_resources(tl, running_from)),
            key=lambda p: p.index,
        )
    )
    returns = tuple(
        p
        for p in tl.of(EventKind.NCCL_RETURN)
        if p.index < running_from and (code := p.event.payload_as(NcclWarn)) and code.setup
    )
    errors = tuple(p for p in tl.of(EventKind.NCCL_ERROR) if is_setup_error(tl, p, running_from))
    raised = tuple(p for p in tl.of(EventKind.EXCEPTION) if is_setup_exception(p, running_from))
    if not (warns or returns or errors or raised):
        return None
    # A report of no known rank that ties several ranks' errors to set-up says one process
    # failed there, not which: those ranks are not placed (a paste cut through the WARN's
    # rank prefix names every rank that raised otherwise).
    only = {p.rank for p in errors if p.rank is not None and _unranked_only(tl, p, running_from)}
    unplaced = frozenset(only) if len(only) > 1 else frozenset()
    return SetupFailure(warns, returns, errors, raised, unplaced)


def setup_lines(tl: Timeline) -> frozenset[tuple[str, int | None]]:
    """(file, line) of every line of a setup failure: a CUDA failure NCCL WARNed about
    while a communicator was set up is that failure, not a crash of its own."""
    failure = setup_failure(tl)
    if failure is None:
        return frozenset()
    return frozenset((p.event.source, p.event.line) for p in failure.placed)


def setup_error_lines(tl: Timeline) -> frozenset[tuple[str, int | None]]:
    """(file, line) of each synchronous NCCL error of a set-up class before anything ran,
    whether or not anything shows its stage: the CUDA failure NCCL attached to it ("Last
    error: Cuda failure 'invalid argument'") sits on the same line, and is that error's
    detail, not a crash of its own."""
    errors = tl.of(EventKind.NCCL_ERROR)
    if not errors or _lost_connections(tl):
        return frozenset()
    running_from = first_running(tl)
    return frozenset(
        (p.event.source, p.event.line)
        for p in errors
        if is_setup_error(tl, p, running_from)
        or (p.index < running_from and _setup_class_error(p) is not None)
    )


def connect_failures(tl: Timeline) -> tuple[Placed, ...]:
    """NCCL's transport errors that say a connection could not be set up, before anything
    shows collectives running: a connect that failed for good (not the retries every
    start-up logs), a verbs call only the IB transport's connection set-up makes
    (``Call to ibv_modify_qp failed``: wrap_ibv_modify_qp is called only to bring a queue
    pair of ncclIbConnect/ncclIbAccept up, INIT→RTR→RTS, in every release before 2.30's
    port recovery; the parser marks it ``connect``), or a WARN whose own source lines
    show set-up (parsers/logs/nccl_stage.py). NCCL returns the failure to the call that
    created or first used the communicator, which raises it: what that process reports
    next is this failure, not one of its own (HD030 yields to it; HD200 names it)."""
    running_from = first_running(tl)
    found: list[Placed] = []
    for p in tl.of(EventKind.NCCL_TRANSPORT_ERROR):
        error = p.event.payload_as(NcclTransportError)
        if p.index >= running_from or error is None or error.retrying:
            continue
        if (error.error is not None and error.error.connect) or error.stage is SourceStage.SETUP:
            found.append(p)
    return tuple(found)
