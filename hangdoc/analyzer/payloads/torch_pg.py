"""Payloads of torch.distributed's messages (parsers/logs/torch_pg.py, pg_wrapper.py,
reports.py): the watchdog and its process groups, NCCL errors surfaced in torch, stores
and rendezvous, gloo, monitored barriers, and the flight recorder analyser's findings."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.launch import CodeStage
from hangdoc.analyzer.vocabulary import Phase


class Backend(enum.StrEnum):
    NCCL = "nccl"
    GLOO = "gloo"
    HOROVOD = "horovod"
    TENSORPIPE = "tensorpipe"  # torch.distributed.rpc's agent
    UNKNOWN = "unknown"


class TimeoutSource(enum.StrEnum):
    """What reported a collective's timeout."""

    WATCHDOG = "watchdog"  # ProcessGroupNCCL's watchdog thread
    BLOCKING_WAIT = "blocking_wait"  # TORCH_NCCL_BLOCKING_WAIT: the caller's own wait
    GLOO = "gloo"  # gloo's recv/send timeout
    UNKNOWN = "unknown"


class Direction(enum.StrEnum):
    SEND = "send"
    RECV = "recv"
    UNKNOWN = "unknown"


class Reporter(enum.StrEnum):
    """Who a report is from: the rank itself, another rank, or rank 0 for the group."""

    SELF = "self"
    PEER = "peer"
    RANK0 = "rank0"  # a monitored barrier's root, which names the ranks that did not come
    UNKNOWN = "unknown"


class NcclResult(enum.StrEnum):
    """ncclResult_t (nccl.h), by the names torch and NCCL print."""

    UNHANDLED_CUDA_ERROR = "ncclUnhandledCudaError"  # 1
    SYSTEM_ERROR = "ncclSystemError"  # 2
    INTERNAL_ERROR = "ncclInternalError"  # 3
    INVALID_ARGUMENT = "ncclInvalidArgument"  # 4
    INVALID_USAGE = "ncclInvalidUsage"  # 5
    REMOTE_ERROR = "ncclRemoteError"  # 6
    IN_PROGRESS = "ncclInProgress"  # 7
    TIMEOUT = "ncclTimeout"
    UNKNOWN = "unknown"

    @classmethod
    def of_code(cls, code: int) -> NcclResult:
        return _RESULT_CODES.get(code, cls.UNKNOWN)


_RESULT_CODES = {
    1: NcclResult.UNHANDLED_CUDA_ERROR,
    2: NcclResult.SYSTEM_ERROR,
    3: NcclResult.INTERNAL_ERROR,
    4: NcclResult.INVALID_ARGUMENT,
    5: NcclResult.INVALID_USAGE,
    6: NcclResult.REMOTE_ERROR,
    7: NcclResult.IN_PROGRESS,
}


class Foreign(enum.StrEnum):
    """The framework whose exception carried an NCCL error string."""

    HOROVOD = "horovod"
    XLA = "xla"
    CUPY = "cupy"
    # a framework's own ctypes binding of libnccl (vLLM's and SGLang's pynccl_wrapper:
    # "NCCL error: <ncclGetErrorString>"), after the call its caller names
    BINDING = "binding"
    UNKNOWN = "unknown"


class StoreError(enum.StrEnum):
    """What went wrong with a c10d store or rendezvous."""

    STORE_BARRIER = "store_barrier"  # torch < 2.1 store-based barrier timed out
    STORE_BARRIER_WAIT = "store_barrier_wait"  # … still waiting in it
    NCCL_UNIQUE_ID = "nccl_unique_id"  # the ncclUniqueId could not be read from the store
    CLIENTS_MISSING = "clients_missing"  # the store server waited for its clients
    STORE_WAIT = "store_wait"  # a key never came
    STORE_CONNECT = "store_connect"  # could not connect to the store
    STORE_LISTEN = "store_listen"  # the store server could not listen (port taken)
    STORE_RESOLVE = "store_resolve"  # the store's host name did not resolve
    STORE_UNREACHABLE = "store_unreachable"  # one of the store's addresses timed out / no route
    GLOO_CONNECT = "gloo_connect"  # gloo's full mesh could not connect a pair
    # torch.distributed.rpc's TensorPipe agent could not connect to a peer (it connects
    # on its first message to each, the first of them init_rpc's gather of worker names)
    RPC_CONNECT = "rpc_connect"
    STORE_READ_TIMEOUT = "store_read_timeout"  # a connected store socket stopped answering
    STORE_CONNECTION = "store_connection"  # the store's connection was lost
    STORE_FILE = "store_file"  # a FileStore could not open its file ("open(<path>): …")
    RENDEZVOUS_CLOSED = "rendezvous_closed"
    RENDEZVOUS_CONNECTION = "rendezvous_connection"  # the c10d rendezvous store unreachable
    RENDEZVOUS = "rendezvous"
    UNKNOWN = "unknown"


class PeerLoss(enum.StrEnum):
    """How a connection to a peer was lost (gloo)."""

    CONNECTION_CLOSED = "connection_closed"
    CONNECTION_RESET = "connection_reset"
    APP_TIMEOUT_PAIR_CLOSURE = "app_timeout_pair_closure"
    UNKNOWN = "unknown"


class FrError(enum.StrEnum):
    """The flight recorder analyser's MatchState names (torch flight_recorder types.py)."""

    FULLY_MATCHED = "FULLY_MATCHED"
    COLLECTIVE_TYPE_MISMATCH = "COLLECTIVE_TYPE_MISMATCH"
    SIZE_OR_SYNTAX_MISMATCH = "SIZE_OR_SYNTAX_MISMATCH"
    COLLECTIVE_STATE_MISMATCH = "COLLECTIVE_STATE_MISMATCH"
    COLLECTIVE_DTYPE_MISMATCH = "COLLECTIVE_DTYPE_MISMATCH"
    UNDECIDED = "UNDECIDED"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class InGroup(EventPayload):
    """A message of one process group: the ``[PG ID i PG GUID g(desc) Rank r]`` prefix."""

    pg: str | None = None  # identity comparable across ranks (GUID/name, else the id)
    pg_id: int | None = None
    pg_desc: str | None = None  # "default_pg", "TENSOR_MODEL_PARALLEL_GROUP"
    group_rank: int | None = None  # the rank in that group (global only in the default one)


@dataclass(frozen=True, slots=True)
class Work(InGroup):
    """A work item as the watchdog prints it (``WorkNCCL(SeqNum=…, OpType=…, …)``) and the
    group's status (``last enqueued work: N, last completed work: M``)."""

    seq: int | None = None
    op: str | None = None  # OpType as torch prints it: ALLREDUCE, _ALLGATHER_BASE, SEND…
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None


@dataclass(frozen=True, slots=True)
class CollectiveTimeout(Work):
    """COLLECTIVE_TIMEOUT: the watchdog, a blocking wait or gloo timed a collective out."""

    ran_ms: int | None = None
    backend: Backend | None = None
    detector: TimeoutSource | None = None
    direction: Direction | None = None  # gloo: the recv or send that timed out


@dataclass(frozen=True, slots=True)
class WatchdogStatus(Work):
    """WATCHDOG_STATUS: the failed sequence number and the group's last enqueued/completed."""


@dataclass(frozen=True, slots=True)
class DumpSignal(Work):
    """DUMP_SIGNAL: a flight recorder dump was requested, by this rank or another."""

    reporter: Reporter | None = None  # SELF: this rank's own timeout; PEER: another's
    peer_rank: int | None = None  # the rank whose timeout asked for the dump


@dataclass(frozen=True, slots=True)
class HeartbeatTimeout(InGroup):
    """HEARTBEAT_TIMEOUT: the monitor thread found the watchdog stuck."""

    stuck_s: int | None = None


@dataclass(frozen=True, slots=True)
class WatchdogTeardown(Work):
    """WATCHDOG_TEARDOWN: the watchdog takes the process down."""

    # The CUDA error of this rank's own GPU the watchdog rethrew ("watchdog thread
    # terminated with exception: CUDA error: an illegal memory access…"), unless the
    # error is itself a consequence: then this rank failed first.
    cuda_error: str | None = None


@dataclass(frozen=True, slots=True)
class StoreTimeout(InGroup):
    """STORE_TIMEOUT: a store, a store-based barrier or a rendezvous failed or waited."""

    error: StoreError | None = None
    joined: int | None = None  # workers or clients that came
    expected: int | None = None  # of how many
    keys: str | None = None  # the store keys (hidden by redaction: a key may be a secret)
    timeout_ms: int | None = None
    barrier_timeout_ms: int | None = None  # the store-based barrier's timedelta, in ms
    waited_s: int | None = None  # the store server's wait for its clients
    peer: str | None = None  # the store's (or gloo peer's) host or address
    port: int | None = None
    bind: str | None = None  # the address a server could not bind
    root: int | None = None  # the rank that should have published the ncclUniqueId
    backend: Backend | None = None
    # The stage the traceback raised right after it shows (its innermost frame or call
    # that names one): Phase.INIT (init_process_group, new_group, a rendezvous) or
    # Phase.TRAIN (the training loop); None where no traceback follows or none is named.
    stage: Phase | None = None
    # The stage that traceback's frames show as any exception's are read
    # (ExceptionRaised.stage, parsers/logs/tb_stage.py frame_stage), also when the paste
    # cut it before its exception line: a store wait at a "rank 0 first" gate
    # (CodeStage.RANK_ZERO_FIRST) was the wait for the main process's gated work.
    code_stage: CodeStage | None = None
    # Read by ProcessGroupNCCL's heartbeat monitor ("Failed to check the \"should dump\"
    # flag on TCPStore, (maybe TCPStore server has shut down too early)": heartbeatMonitor,
    # HeartbeatMonitor::runLoop in ProcessGroupNCCL.cpp), a thread only a constructed
    # process group runs, which polls the store once no work was queued for a while: the
    # group's set-up had completed, and the store's host went away afterwards.
    by_monitor: bool = False
    # The elastic agent's keep-alive heartbeat to the rendezvous failed ("The node '…' has
    # failed to send a keep-alive heartbeat to the rendezvous '…' due to an error of type
    # RendezvousConnectionError": DynamicRendezvousHandler._keep_alive in
    # torch/distributed/elastic/rendezvous/dynamic_rendezvous.py). Its timer is started by
    # next_rendezvous only after this node's join op completed (_start_heartbeats after
    # the exit and join ops): the rendezvous had completed, and the rendezvous store's
    # host became unreachable afterwards. Not set-up.
    keep_alive: bool = False
    # The store's established connection was lost at the server's end: a connected
    # SocketImpl's recv/send failed with "Connection reset by peer" (ECONNRESET) or
    # "Broken pipe" (EPIPE), or its recv got 0 bytes (the peer closed it). The client had
    # connected, so the store was up; its host (rank 0's process, the agent) went away.
    # That is no set-up that could not complete unless the traceback places it there.
    lost: bool = False
    # A store-based barrier's wait line glued after a tqdm meter's live state (tqdm ends no
    # state with a newline: the wait was logged as the bar stood): the meter as printed
    # ("15247it", "549000/900000") and its elapsed time, when it shows a rate (advancing).
    # Another process's work went on while this rank waited in the barrier.
    meter: str | None = None
    meter_elapsed_s: int | None = None


@dataclass(frozen=True, slots=True)
class ConnectionLost(EventPayload):
    """CONNECTION_LOST: a peer closed or reset the connection (gloo, NCCL's service
    thread, Horovod's shut-down)."""

    backend: Backend | None = None
    peer: str | None = None
    port: int | None = None
    failure: PeerLoss | None = None
    peer_local_rank: int | None = None  # NCCL: "Connection closed by localRank N"


@dataclass(frozen=True, slots=True)
class MonitoredBarrier(EventPayload):
    """MONITORED_BARRIER: ranks that did not reach a monitored barrier."""

    ranks: tuple[int, ...] = ()  # the ranks named: that failed to arrive, or did not answer
    timeout_ms: int | None = None
    reporter: Reporter | None = None  # RANK0: the root's list; SELF; PEER: "from rank 0"
    backend: Backend | None = None
    join: bool = False  # a trainer's per-step join check: a rank ran out of data
    # Appended (precision7): rank 0's singular report, "Rank N failed to pass
    # monitoredBarrier": without wait_all_ranks, ProcessGroupGloo::monitoredBarrier throws
    # at the first rank (in rank order) whose recv failed, and the ranks after it are never
    # checked; the plural "Ranks a, b failed …" is wait_all_ranks' full list.
    first_only: bool = False


@dataclass(frozen=True, slots=True)
class StalledOp:
    """One op (tensor) of a Horovod stall report with the ranks it names: those that had
    submitted it (``ready``: Horovod before mid-2018 printed "[ready ranks: …]") or those
    that had not (every later version: "[missing ranks: …]", "R: [op, …]")."""

    op: str = ""
    ranks: tuple[int, ...] = ()
    ready: bool = False
    # Appended (precision6): an op the caller left unnamed is named by Horovod after its
    # kind and the process's own running count of ops, "<kind>.noname.<handle>"
    # (horovod/torch/mpi_ops_v2.cc and horovod/mxnet/mpi_ops.cc, GetOpName): the kind
    # ("broadcast", "allreduce") and that count, None for a name the caller gave.
    kind: str | None = None
    handle: int | None = None


@dataclass(frozen=True, slots=True)
class MissingRanks(EventPayload):
    """MISSING_RANKS: a library named ranks that never submitted an op (Horovod)."""

    ranks: tuple[int, ...] = ()  # the ranks the report states missing (none: not stated)
    op: str | None = None  # the op (tensor) name
    library: Backend | None = None
    # Appended for issue 21: every op of one stall report with its ranks, so that ranks
    # waiting in different ops show (views/stall_report.py).
    stalled: tuple[StalledOp, ...] = ()


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """One side of a TORCH_DISTRIBUTED_DEBUG=DETAIL CollectiveFingerPrint."""

    rank: int | None = None
    seq: int | None = None
    op: str | None = None  # OpType
    shape: str | None = None  # TensorShape as printed: "[8, 1024]"
    dtype: str | None = None  # TensorDtypes: "Float"
    device: str | None = None  # "cuda", "cpu"


@dataclass(frozen=True, slots=True)
class CollectiveIssued(InGroup):
    """COLLECTIVE_ISSUED: ProcessGroupWrapper's "Running collective: CollectiveFingerPrint"."""

    fingerprint: Fingerprint = Fingerprint()


@dataclass(frozen=True, slots=True)
class FailedCollectiveStack(EventPayload):
    """FAILED_COLLECTIVE_STACK: "Stack trace of the failed collective" and its frames."""

    frames: tuple[str, ...] = ()  # "#0 all_reduce from file:line", innermost first


@dataclass(frozen=True, slots=True)
class FrReport(EventPayload):
    """FR_MISSING_RANKS / FR_MISMATCH: a finding of the flight recorder analyser's text."""

    seq: int | None = None
    group: str | None = None
    group_info: str | None = None  # "0:default_pg"
    collective: str | None = None  # "nccl:all_reduce"
    collective_state: str | None = None
    missing: tuple[int, ...] = ()  # the ranks that did not join
    expected: tuple[int, ...] = ()
    input_sizes: str | None = None  # as printed: "[[1024]]"
    output_sizes: str | None = None
    world_size: int | None = None
    record_id: int | None = None
    error: FrError | None = None
    culprit: int | None = None
    detail: str | None = None
