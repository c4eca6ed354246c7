"""What each kind of log event carries: one small typed record per kind (or per family of
kinds that share their fields), written by the log parsers, read by views and rules.

A recogniser that knows a line reads its signals into these fields once, with their
types (sequence numbers and exit codes are ints, signals, phases and states are enums,
who reported is an enum); only free text (a message, a label) stays a string, for people.
Nothing downstream reads the line's words again. ``LogEvent.payload`` holds one of these
records; :data:`PAYLOAD_OF` says which class each kind's payload is, so a serialised
event is read back by its kind.

The families: ``base`` (the error a line reports, every payload's base), ``torch_pg``
(watchdog, NCCL errors in torch, stores, gloo, monitored barriers, the flight recorder
analyser), ``nccl`` (NCCL's own lines and RAS), ``launch`` (launchers, exceptions,
signals, OOM killers), ``host`` (kernel, storage, NIC, GPU driver and nvidia-smi) and
``progress`` (phases, progress bars, data counts).

The serialised form (summaries, the notebook API's ``fields`` column) is each record's
fields by name, defaults left out, enums as their values (:func:`payload_fields`).
Imports nothing of hangdoc but the vocabulary.
"""

from __future__ import annotations

import dataclasses
import enum

from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.host import (
    GpuStatus,
    GpuTopology,
    GpuXid,
    HungTask,
    IoStall,
    ListedFile,
    NicCounter,
    NicLink,
    ServiceStatus,
)
from hangdoc.analyzer.payloads.launch import (
    ErrorFile,
    ExceptionRaised,
    FatalSignal,
    HostMemory,
    HostOomKill,
    LauncherReport,
    LoaderWorkerDied,
)
from hangdoc.analyzer.payloads.nccl import (
    CollectiveMismatch,
    CudaFailure,
    NcclColl,
    NcclConfigError,
    NcclError,
    NcclInit,
    NcclNetwork,
    NcclResourceError,
    NcclTransport,
    NcclTransportError,
    NcclVersion,
    NcclWarn,
    RasComm,
    RasReport,
)
from hangdoc.analyzer.payloads.progress import DataCount, PhaseMarker
from hangdoc.analyzer.payloads.serving import HealthCheckFailed, HttpRequest
from hangdoc.analyzer.payloads.torch_pg import (
    CollectiveIssued,
    CollectiveTimeout,
    ConnectionLost,
    DumpSignal,
    FailedCollectiveStack,
    FrReport,
    HeartbeatTimeout,
    MissingRanks,
    MonitoredBarrier,
    StoreTimeout,
    WatchdogStatus,
    WatchdogTeardown,
)
from hangdoc.analyzer.vocabulary import EventKind

# The payload class of each kind; a kind not listed (FAULTHANDLER_TIMEOUT, ACTOR_DIED,
# UNKNOWN) carries an EventPayload.
PAYLOAD_OF: dict[EventKind, type[EventPayload]] = {
    EventKind.COLLECTIVE_TIMEOUT: CollectiveTimeout,
    EventKind.WATCHDOG_STATUS: WatchdogStatus,
    EventKind.WATCHDOG_TEARDOWN: WatchdogTeardown,
    EventKind.HEARTBEAT_TIMEOUT: HeartbeatTimeout,
    EventKind.DUMP_SIGNAL: DumpSignal,
    EventKind.FAILED_COLLECTIVE_STACK: FailedCollectiveStack,
    EventKind.NCCL_ERROR: NcclError,
    EventKind.COLLECTIVE_MISMATCH: CollectiveMismatch,
    EventKind.COLLECTIVE_ISSUED: CollectiveIssued,
    EventKind.MONITORED_BARRIER: MonitoredBarrier,
    EventKind.MISSING_RANKS: MissingRanks,
    EventKind.STORE_TIMEOUT: StoreTimeout,
    EventKind.CONNECTION_LOST: ConnectionLost,
    EventKind.NCCL_VERSION: NcclVersion,
    EventKind.NCCL_INIT: NcclInit,
    EventKind.NCCL_NETWORK: NcclNetwork,
    EventKind.NCCL_TRANSPORT: NcclTransport,
    EventKind.NCCL_TRANSPORT_ERROR: NcclTransportError,
    EventKind.NCCL_CONFIG_ERROR: NcclConfigError,
    EventKind.NCCL_RESOURCE_ERROR: NcclResourceError,
    EventKind.NCCL_WARN: NcclWarn,
    EventKind.NCCL_RETURN: NcclWarn,
    EventKind.NCCL_COLL: NcclColl,
    EventKind.RAS_REPORT: RasReport,
    EventKind.RAS_MISMATCH: RasComm,
    EventKind.RAS_DEAD: RasComm,
    EventKind.RAS_INCOMPLETE: RasComm,
    EventKind.RAS_ERROR: RasComm,
    EventKind.WORKER_FAILED: LauncherReport,
    EventKind.CHILD_FAILURE: LauncherReport,
    EventKind.AGENT_TERMINATING: LauncherReport,
    EventKind.AGENT_SIGNAL: LauncherReport,
    EventKind.ERROR_FILE: ErrorFile,
    EventKind.DATALOADER_WORKER_DIED: LoaderWorkerDied,
    EventKind.EXCEPTION: ExceptionRaised,
    EventKind.CUDA_OOM: CudaFailure,
    EventKind.CUDA_ERROR: CudaFailure,
    EventKind.FATAL_SIGNAL: FatalSignal,
    EventKind.HOST_OOM_KILL: HostOomKill,
    EventKind.HOST_MEMORY: HostMemory,
    EventKind.KERNEL_HUNG_TASK: HungTask,
    EventKind.IO_STALL: IoStall,
    EventKind.FILE_LISTED: ListedFile,
    EventKind.NIC_COUNTER: NicCounter,
    EventKind.NIC_LINK: NicLink,
    EventKind.SERVICE_STATUS: ServiceStatus,
    EventKind.GPU_XID: GpuXid,
    EventKind.GPU_STATUS: GpuStatus,
    EventKind.GPU_TOPOLOGY: GpuTopology,
    EventKind.FR_MISSING_RANKS: FrReport,
    EventKind.FR_MISMATCH: FrReport,
    EventKind.PHASE: PhaseMarker,
    EventKind.DATA_COUNT: DataCount,
    EventKind.HEALTH_CHECK_FAILED: HealthCheckFailed,
    EventKind.HTTP_REQUEST: HttpRequest,
}


def payload_class(kind: EventKind) -> type[EventPayload]:
    """The class of ``kind``'s payload."""
    return PAYLOAD_OF.get(kind, EventPayload)


def payload_fields(payload: object) -> dict[str, object]:
    """A payload (or a record nested in one) as plain values, by field name: enums as
    their values, nested records as dicts, tuples as lists, fields at their default left
    out. The serialised form the notebook API shows."""
    out: dict[str, object] = {}
    if not dataclasses.is_dataclass(payload) or isinstance(payload, type):
        return out
    for f in dataclasses.fields(payload):
        value = getattr(payload, f.name)
        if value != f.default:
            out[f.name] = _plain(value)
    return out


def _plain(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return payload_fields(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
