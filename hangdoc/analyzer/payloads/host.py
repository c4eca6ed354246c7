"""Payloads of what the node's kernel and tools say (parsers/logs/kernel.py, iostate.py,
nic.py, gpu.py): hung tasks, storage stalls, NIC counters and links, the GPU driver's Xid
and nvidia-smi."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.xid import XidFault, XidMeaning, xid_meaning


class IoSource(enum.StrEnum):
    """Where an IO_STALL was read."""

    KERNEL_STACK = "kernel_stack"  # a file-system frame of a kernel stack
    PROCESS_STATE = "process_state"  # a ps/top row (or /proc status) in D state (the only
    # state read: a D state alone is as often a moment of ordinary disk I/O)
    NFS_SERVER = "nfs_server"  # "nfs: server X not responding" / "OK"
    LUSTRE_SERVER = "lustre_server"  # Lustre's lost connection
    IO_ERROR = "io_error"  # a storage error outside an exception
    TRANSFER_STALL = "transfer_stall"  # curl's low-speed abort of a remote-storage transfer
    UNKNOWN = "unknown"


class ServerState(enum.StrEnum):
    OK = "ok"
    NOT_RESPONDING = "not_responding"
    LOST = "lost"
    UNKNOWN = "unknown"


class CounterGroup(enum.StrEnum):
    TRANSPORT = "transport"  # retries and failed work completions
    LINK = "link"  # a bad physical link
    UNKNOWN = "unknown"


class LinkEvent(enum.StrEnum):
    LINK_DOWN = "link_down"
    LINK_UP = "link_up"
    MODULE_ERROR = "module_error"  # a cable module event
    TX_TIMEOUT = "tx_timeout"  # NETDEV WATCHDOG: a transmit queue timed out
    UNKNOWN = "unknown"


class GpuRow(enum.StrEnum):
    GPU = "gpu"  # a device row
    PROCESS = "process"  # a process using a device
    UNKNOWN = "unknown"


class GpuTable(enum.StrEnum):
    """The nvidia-smi output a GPU_STATUS row came from."""

    CSV = "nvidia-smi csv"  # --query-gpu / --query-compute-apps --format=csv
    TABLE = "nvidia-smi table"  # the plain table
    UNKNOWN = "unknown"


class TopoMatrix(enum.StrEnum):
    LINKS = "links"  # nvidia-smi topo -m
    P2P = "p2p"  # nvidia-smi topo -p2p
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class KernelFrame:
    """One frame of a kernel call trace: ``nfs_wait_bit_killable+0x1e/0x90 [nfs]``."""

    function: str
    module: str | None = None  # None: the kernel's own code

    def __str__(self) -> str:
        return self.function + (f" [{self.module}]" if self.module else "")


@dataclass(frozen=True, slots=True)
class HungTask(EventPayload):
    """KERNEL_HUNG_TASK: the kernel's report of a task blocked in D state, with its trace."""

    name: str | None = None  # the task's comm
    blocked_s: int | None = None
    frames: tuple[KernelFrame, ...] = ()  # innermost first, the unreliable ("? ") left out
    modules: tuple[str, ...] = ()  # kernel modules in the trace
    driver: tuple[str, ...] = ()  # NVIDIA driver modules in the trace


@dataclass(frozen=True, slots=True)
class IoStall(EventPayload):
    """IO_STALL: a process waiting on storage, or storage that failed."""

    source: IoSource | None = None
    function: str | None = None  # KERNEL_STACK: the frame's function
    module: str | None = None  # KERNEL_STACK: its module
    command: str | None = None  # PROCESS_STATE: the row's command
    server: str | None = None  # NFS/Lustre: the server
    server_state: ServerState | None = None
    error: str | None = None  # IO_ERROR: the storage failure's words


@dataclass(frozen=True, slots=True)
class ListedFile(EventPayload):
    """FILE_LISTED: a checkpoint file in a directory listing (``ls -l``)."""

    name: str | None = None  # as listed, without its directory
    size: int | None = None  # bytes; None where printed human-readable (``ls -lh``) and not 0
    # The name with its numbers made one placeholder ("mp_rank_#_model_states.pt"): the
    # files one save writes per rank or shard share it.
    family: str | None = None


@dataclass(frozen=True, slots=True)
class NicCounter(EventPayload):
    """NIC_COUNTER: a non-zero InfiniBand/RoCE port error counter."""

    counter: str | None = None  # the sysfs counter's name: "local_ack_timeout_err"
    value: int | None = None
    group: CounterGroup | None = None
    device: str | None = None  # "mlx5_0"
    port: int | None = None


@dataclass(frozen=True, slots=True)
class NicLink(EventPayload):
    """NIC_LINK: the kernel's NIC messages (link down/up, module events, tx timeouts)."""

    event: LinkEvent | None = None
    iface: str | None = None
    driver: str | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class ServiceStatus(EventPayload):
    """SERVICE_STATUS: one line of ``systemctl status``: the unit it names (the header's
    ``● name.service - …``, ``Loaded: … (/…/name.service; …)``, ``ExecStart=/…/program``), or
    the unit's ``Active:`` state, or both where a paste joined the lines."""

    unit: str | None = None  # "nvidia-fabricmanager" (no ".service"), or the program's name
    active: str | None = None  # systemd's ActiveState: "failed", "inactive", "active"…
    sub: str | None = None  # the words in parentheses: "Result: exit-code", "dead", "running"


@dataclass(frozen=True, slots=True)
class GpuXid(EventPayload):
    """GPU_XID: an NVRM Xid, a GPU off the bus or lost (the event's pid: the process)."""

    xid: int | None = None  # None: the GPU was lost (the driver or NVML said so)
    pci: str | None = None  # "0000:3b:00"
    name: str | None = None  # the process's name
    caused_by_xid: int | None = None  # a derived Xid's cause ("caused by previous Xid 149")

    @property
    def meaning(self) -> XidMeaning | None:
        """What the Xid's own code means (NVIDIA's Xid catalog, payloads/xid.py)."""
        return xid_meaning(self.xid)

    @property
    def program_fault(self) -> bool:
        """The program's own kernel faulted on the GPU (Xid 13, 31: XidFault.APPLICATION),
        reported by the Xid itself, not a derived Xid naming an earlier one: the driver
        killed the channel and with it the process's CUDA context."""
        meaning = self.meaning
        return (
            meaning is not None
            and meaning.fault is XidFault.APPLICATION
            and self.caused_by_xid is None
        )


@dataclass(frozen=True, slots=True)
class GpuStatus(EventPayload):
    """GPU_STATUS: one row of nvidia-smi (a device, or a process on one)."""

    row: GpuRow | None = None
    table: GpuTable | None = None
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    ecc_uncorrected: int | None = None
    process_name: str | None = None


@dataclass(frozen=True, slots=True)
class GpuTopology(EventPayload):
    """GPU_TOPOLOGY: an nvidia-smi topo matrix, summed."""

    gpus: int | None = None
    links: str | None = None  # link kinds and how many pairs: "PIX:1,PXB:1,SYS:4"
    matrix: TopoMatrix | None = None
    nvlink_pairs: int | None = None
    pcie_pairs: int | None = None
    p2p_unsupported_pairs: int | None = None
