"""Payloads of NCCL_DEBUG output (parsers/logs/nccl.py, reports.py, size_checks.py):
init, interfaces and channels, COLL lines, WARN lines and their return-code chains,
collective mismatches, CUDA failures, and the RAS report."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.torch_pg import (
    Backend,
    Direction,
    Fingerprint,
    Foreign,
    NcclResult,
    Work,
)


class NcclInitState(enum.StrEnum):
    START = "start"  # "Init START", and the ≤2.11 init line
    COMPLETE = "complete"  # "Init COMPLETE", "Init timings"
    ABORT = "abort"
    DESTROY = "destroy"
    TOPOLOGY = "topology"  # ≥2.19 "nNodes … localRanks …": mid-init, ties process to rank
    UNKNOWN = "unknown"


class NetRole(enum.StrEnum):
    """What an interface line says NCCL uses it for."""

    BOOTSTRAP = "bootstrap"
    SOCKET = "socket"  # the socket transport
    OOB = "oob"  # IB's out-of-band interface
    NETWORK = "network"  # "Using network IB/Socket"
    IB = "ib"  # "NET/IB : No device found"
    UNKNOWN = "unknown"


class LinkFailure(enum.StrEnum):
    """How an NCCL connection failed (the WARN's words, net_ib.cc / socket.cc)."""

    IB_COMPLETION = "ib_completion_status"  # a work completion with an error status
    SOCKET_CLOSED = "socket_closed_by_peer"
    CONNECTION_RESET = "connection_reset"
    BROKEN_PIPE = "broken_pipe"
    CONNECTION_REFUSED = "connection_refused"
    RETRY_EXCEEDED = "retry_exceeded"
    TIMEOUT = "timeout"
    NO_ROUTE = "no_route"
    UNREACHABLE = "unreachable"
    FAILED = "failed"  # a failure in other words
    SOCKET_PROGRESS = "socket_progress"
    SOCKET_CREATION_FAILED = "socket_creation_failed"  # the process's own socket
    IB_VERBS = "ib_verbs"  # an ibv_* call or an IB async event
    PROXY = "proxy"  # NCCL's proxy thread
    UNKNOWN = "unknown"


class SourceStage(enum.StrEnum):
    """The stage NCCL's own source lines show for a failure: the functions its WARN and
    its "file:line -> rc" chain sit in, per release (parsers/catalog/stages.py)."""

    SETUP = "setup"  # a communicator or one of its connections being set up
    DATA = "data"  # the data path: proxy progress, send/recv/test, a collective's launch
    UNKNOWN = "unknown"


class ConfigProblem(enum.StrEnum):
    DUPLICATE_GPU = "duplicate_gpu"  # two ranks on one CUDA device
    DUPLICATE_RANK = "duplicate_rank"  # two processes with one rank checked in
    RANK_COUNT_MISMATCH = "rank_count_mismatch"
    UNKNOWN = "unknown"


class MismatchSource(enum.StrEnum):
    DETAIL = "detail"  # TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprints
    GLOO = "gloo"  # gloo's "op.preamble.length <= op.nbytes" check
    NCCL = "nccl"  # an NCCL WARN
    # FSDP's first-iteration check that every rank all-gathers the same parameters at each
    # pre-forward hook (torch/distributed/fsdp/_exec_order_utils.py): "Forward order
    # differs across ranks: rank 0 is all-gathering 1 parameters while rank 1 is …"
    FSDP_ORDER = "fsdp_order"
    # DDP's check at construction that every rank holds the same parameters (torch/csrc/
    # distributed/c10d/reducer.cpp verify_params_across_processes, called by
    # torch/distributed/utils.py _verify_param_shape_across_processes): "DDP expects same
    # model across all ranks, but Rank R has N params, while rank I has inconsistent M
    # params." / "[R]: params[p] in this process with sizes S appears not to match sizes of
    # the same param in process 0."
    DDP_PARAMS = "ddp_params"
    # Appended (precision6): DeepSpeed ZeRO's cross-rank check (deepspeed/runtime/zero/
    # utils.py assert_ints_same_as_other_ranks, assert_lst_len_same_as_other_ranks): rank 0
    # broadcasts its list (the ids or sizes of the parameters about to be all-gathered or
    # reduced, or the module trace) and a rank whose own differs raises "disagreement
    # between rank0 and rank<N>: rank0: […], rank<N>: […]" (0.6-0.17), "Detected a
    # disagreement on list contents|length between rank0 and rank<N>:" (0.18 on).
    ZERO_IDS = "zero_ids"
    UNKNOWN = "unknown"


class MismatchError(enum.StrEnum):
    SIZE_MISMATCH = "size_mismatch"  # a transfer larger than the posted buffer
    MISMATCHED_COLLECTIVE = "mismatched_collective"  # NCCL's own check, around rank N
    PARAM_COUNT = "param_count"  # DDP: another rank holds a different number of parameters
    PARAM_SHAPE = "param_shape"  # DDP: a parameter's sizes or strides differ from rank 0's
    UNKNOWN = "unknown"


class RasState(enum.StrEnum):
    """The state words of NCCL's RAS report."""

    OK = "OK"
    MISMATCH = "MISMATCH"
    INCOMPLETE = "INCOMPLETE"
    ERROR = "ERROR"
    TIMEOUT = "TIMEOUT"
    DEAD = "DEAD"
    UNKNOWN = "unknown"


# proxy.h enum ncclProxyMsgType: the operations that create connections.
PROXY_SETUP_OPS = frozenset({"Init", "SharedInit", "Setup", "Connect"})


@dataclass(frozen=True, slots=True)
class LinkError:
    """A transport failure as NCCL's WARN said it, typed."""

    failure: LinkFailure
    connect: bool = False  # while connecting (socketPollConnect, "Call to connect")
    ib_status: int | None = None  # IB_COMPLETION: the work completion's status (12, 5…)
    # PROXY: a request the rank sent a proxy thread failed (proxy.cc "Proxy Call to rank N
    # failed (Connect)", "Socket recv failed while polling for opId"): setup work.
    proxy_request: bool = False
    # The proxy operation a PROXY failure names, as proxy.cc prints it from
    # ncclProxyMsgTypeStr ("Init", "SharedInit", "Setup", "Connect", "Start", "Close" …).
    proxy_op: str | None = None

    @property
    def sets_up(self) -> bool:
        """A proxy operation that sets a connection up (ncclProxyMsgInit, SharedInit, Setup,
        Connect in proxy.h): it runs while a communicator or one of its connections is
        created, never while a collective moves data (that is Start's)."""
        return self.proxy_op in PROXY_SETUP_OPS

    @property
    def tag(self) -> str:
        """The failure in one word, as reports print it: ``ib_completion_status_12``,
        ``connect_connection_refused``."""
        word = f"{self.failure.value}_{self.ib_status}" if self.ib_status is not None else ""
        return ("connect_" if self.connect else "") + (word or self.failure.value)


@dataclass(frozen=True, slots=True)
class NcclError(Work):
    """NCCL_ERROR: an NCCL error surfaced in torch (or in another framework)."""

    error_class: NcclResult | None = None
    where: str | None = None  # "ProcessGroupNCCL.cpp:1970" (a synchronous error), a call
    nccl_version: str | None = None
    foreign: Foreign | None = None
    call: str | None = None  # the NCCL call another framework named (ncclCommInitRank)
    aborted: bool = False  # "NCCL communicator was aborted on rank R"
    # The check failed while ~ProcessGroupNCCL aborted the communicators: torch printed the
    # reason it passed to ncclCommAbort, "Process Group destroyed on rank N", on the line
    # after the error (C10D_NCCL_CHECK appends the failure reason): teardown, not set-up.
    destroying: bool = False
    in_watchdog: bool = False  # the watchdog thread reported it
    # NCCL's "Last error:" detail, and what the NCCL parser read from it.
    last_error: str | None = None
    last_error_peer: str | None = None
    last_error_link: LinkError | None = None
    # The stage of the NCCL code that prints the last error's message, by the functions
    # the catalog holds it from (parsers/logs/nccl_stage.py message_stage): "Attribute arch
    # of node cpu not found" only prints while NCCL reads the topology. None where unknown.
    last_error_stage: SourceStage | None = None
    out_of_memory: bool = False  # "out of memory" in the message or its last error
    # The return codes NCCL logged as the failure unwound (NcclWarn's).
    rc: int | None = None
    rc_name: NcclResult | None = None
    rc_where: str | None = None
    rc_chain: tuple[str, ...] = ()
    in_bootstrap: bool = False
    # The stage of the torch function that holds ``where``, per the releases that have a
    # check at that line (parsers/catalog/torch_stages.py), or set-up where ``where`` or
    # ``call`` is a call that creates a communicator (ncclCommInitRank); None where unknown.
    stage: SourceStage | None = None


@dataclass(frozen=True, slots=True)
class NcclVersion(EventPayload):
    version: str | None = None
    cuda: str | None = None


@dataclass(frozen=True, slots=True)
class NcclInit(EventPayload):
    """NCCL_INIT: a communicator's init line (or its timings, abort, destroy)."""

    comm: str | None = None  # the communicator's address: "0x550000010"
    rank: int | None = None  # the rank in the communicator
    nranks: int | None = None
    state: NcclInitState | None = None
    api: str | None = None  # ncclCommInitRank, ncclCommSplit…
    device: int | None = None  # cudaDev
    nvml_device: int | None = None  # nvmlDev
    bus_id: str | None = None  # busId, hex: "3b000"
    comm_id: str | None = None  # commId: the same on every rank of the communicator


@dataclass(frozen=True, slots=True)
class Iface:
    name: str
    address: str


@dataclass(frozen=True, slots=True)
class NcclNetwork(EventPayload):
    """NCCL_NETWORK: an interface (or network) NCCL chose."""

    role: NetRole | None = None
    iface: str | None = None  # "none" when NCCL found no IB device
    ip: str | None = None
    ifaces: tuple[Iface, ...] = ()  # every interface NCCL ≤ 2.11 listed, when several
    network: str | None = None  # "IB", "Socket"
    # What it advertises that other nodes cannot reach (loopback, a container or VM
    # bridge, an IPv6 link-local address): the bootstrap uses its first interface only,
    # the socket transport every one it lists. ``first_unreachable``: the first one is.
    unreachable: tuple[Iface, ...] = ()
    first_unreachable: bool = False


class Transport(enum.StrEnum):
    """NCCL's transports (src/transport/): how a channel reaches its peer."""

    P2P = "P2P"  # GPU to GPU within a node (NVLink or PCIe)
    SHM = "SHM"  # through host shared memory
    NET = "NET"  # the network: between nodes (IB, Socket)
    COLLNET = "CollNet"
    NVLS = "NVLS"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Via:
    """One transport a channel uses, as NCCL's "via" names it: NET/IB, P2P/IPC."""

    transport: Transport
    detail: str | None = None  # "IB", "Socket", "IPC", "CUMEM", "direct"

    def __str__(self) -> str:
        return str(self.transport) + (f"/{self.detail}" if self.detail else "")


@dataclass(frozen=True, slots=True)
class NcclTransport(EventPayload):
    """NCCL_TRANSPORT: the transports a process's channels use."""

    via: tuple[Via, ...] = ()


@dataclass(frozen=True, slots=True)
class NcclColl(EventPayload):
    """NCCL_COLL: the last COLL line of one communicator on one process."""

    op: str | None = None  # AllReduce, AllGather…
    opcount: int | None = None
    count: int | None = None
    datatype: int | None = None
    redop: int | None = None
    root: int | None = None
    comm: str | None = None
    nranks: int | None = None


@dataclass(frozen=True, slots=True)
class NcclWarn(EventPayload):
    """NCCL_WARN (and NCCL_RETURN): a WARN line, the return codes logged after it."""

    where: str | None = None  # the WARN's source location: "transport/net_ib.cc:1295"
    func: str | None = None
    from_last_error: bool = False  # read from an NCCL error's "Last error:" line
    # A WARN from code that runs only while a communicator is set up, or with the words
    # of a setup failure (and none of a harmless one): views/nccl_setup.py.
    setup: bool = False
    # The collective library that printed it where not NCCL: HCCL (Ascend NPUs), whose
    # set-up and transport failures the catalog's hccl rows read as NCCL's of the same
    # family (parsers/catalog/meanings.toml)
    library: str | None = None
    # The first return code after the WARN on the same thread (``file.cc:47 -> 3``): its
    # error class; and every caller up the chain that logged it.
    rc: int | None = None
    rc_name: NcclResult | None = None
    rc_where: str | None = None
    rc_chain: tuple[str, ...] = ()
    in_bootstrap: bool = False  # the WARN or its chain is in bootstrap.c(c|u)
    # The stage the WARN's place and its chain show, by the functions those lines sit in
    # in every NCCL release they can come from (None: the lines show none).
    stage: SourceStage | None = None


@dataclass(frozen=True, slots=True)
class NcclTransportError(NcclWarn):
    """NCCL_TRANSPORT_ERROR: a connection failed (IB completion, socket closed…)."""

    error: LinkError | None = None
    peer: str | None = None
    port: int | None = None
    peer_rank: int | None = None
    vendor_err: int | None = None
    direction: Direction | None = None
    retrying: bool = False  # "Call to connect returned …, retrying": normal at start-up
    local: bool = False  # the reporting process's own failure, no peer involved


@dataclass(frozen=True, slots=True)
class NcclConfigError(NcclWarn):
    """NCCL_CONFIG_ERROR: a rank twice on one GPU, a rank count mismatch."""

    problem: ConfigProblem | None = None
    rank_a: int | None = None
    rank_b: int | None = None
    device: str | None = None  # the CUDA device both ranks are on
    count_a: int | None = None
    count_b: int | None = None


class NcclResource(enum.StrEnum):
    """What a host lacked when NCCL needed it (catalog meanings: ``resource``)."""

    SHARED_MEMORY = "shared_memory"  # /dev/shm: a container's --shm-size, a full tmpfs
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class NcclResourceError(NcclWarn):
    """NCCL_RESOURCE_ERROR: NCCL could not get a resource of the host it runs on (the
    shared-memory segments of its intra-node transport): not the network, not a peer."""

    resource: NcclResource | None = None


@dataclass(frozen=True, slots=True)
class CollectiveMismatch(NcclWarn):
    """COLLECTIVE_MISMATCH: DETAIL's fingerprints, a size check (NCCL, gloo), NCCL's
    mismatched-collective check."""

    source: MismatchSource | None = None
    error: MismatchError | None = None
    side_a: Fingerprint | None = None  # DETAIL, DDP: the reporting rank's fingerprint
    side_b: Fingerprint | None = None  # DETAIL, DDP: the other rank's (DDP: the one it names)
    differ: str | None = None  # DETAIL: "Collectives differ in the following aspects: …"
    peer: str | None = None
    peer_rank: int | None = None  # NCCL: "around rank N"
    bytes_received: int | None = None
    bytes_expected: int | None = None
    backend: Backend | None = None
    gloo_where: str | None = None  # gloo's pair.cc location


@dataclass(frozen=True, slots=True)
class CudaFailure(NcclWarn):
    """CUDA_OOM / CUDA_ERROR: CUDA failed (a Python error, NCCL's "Cuda failure")."""

    error: str | None = None  # the CUDA error's words: "out of memory", "invalid argument"
    gpu: int | None = None  # the GPU an out-of-memory message names
    # NCCL's own report of a CUDA call it made ("Cuda failure 1 'invalid argument'", a WARN
    # or an error's "Last error:"): its CUDACHECK/CUCHECK (src/include/checks.h) print it and
    # return ncclUnhandledCudaError to the caller, which goes on (torch raises it as a
    # DistBackendError where the call was made); the process does not die there.
    by_nccl: bool = False
    # The error's documented meaning ends the process or names the GPU (the catalog's cuda
    # rows: a kernel fault, whose CUDA context is dead, "an illegal memory access was
    # encountered"; the GPU's or driver's failure; out of memory), not a call's bad argument
    # or state that its caller gets back ("invalid argument", the cuda-other family).
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class RasReport(EventPayload):
    """RAS_REPORT: one communicator group row of the RAS summary table."""

    group: int | None = None
    comms: int | None = None
    nodes: int | None = None
    ranks_per_comm: int | None = None
    status: str | None = None  # RUNNING…
    state: RasState | None = None  # OK, MISMATCH…


@dataclass(frozen=True, slots=True)
class OpCountGroup:
    """Ranks of a communicator at one operation count (RAS)."""

    opcount: int
    count: int  # how many ranks
    ranks: tuple[int, ...] = ()  # those the report names


@dataclass(frozen=True, slots=True)
class StatusCount:
    status: str  # a RAS rank status word: RUNNING, INIT…
    count: int


@dataclass(frozen=True, slots=True)
class RankStatus:
    rank: int
    status: str


@dataclass(frozen=True, slots=True)
class RankNode:
    rank: int
    node: str
    pid: int


@dataclass(frozen=True, slots=True)
class RasComm(EventPayload):
    """RAS_MISMATCH / RAS_INCOMPLETE / RAS_ERROR: one communicator of the RAS report;
    RAS_DEAD / RAS_INCOMPLETE of processes: ``processes``."""

    comm: str | None = None  # the communicator's hash
    group: str | None = None  # "g-c"
    state: RasState | None = None
    op: str | None = None  # the operation whose counts differ
    groups: tuple[OpCountGroup, ...] = ()
    status_counts: tuple[StatusCount, ...] = ()
    status_ranks: tuple[RankStatus, ...] = ()
    ranks: tuple[int, ...] = ()  # the ranks listed (INCOMPLETE: that did not answer)
    nodes: tuple[RankNode, ...] = ()
    missing: int | None = None  # processes or ranks whose data is missing
    init_errors: int | None = None
    async_errors: int | None = None
    # RAS_DEAD / RAS_INCOMPLETE of processes: "host:pid:gpus" as listed, or "count=N".
    processes: tuple[str, ...] = ()
    peer: str | None = None  # RAS_DEAD from "RAS declaring peer … as DEAD"
