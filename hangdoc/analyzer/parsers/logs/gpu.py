"""GPU evidence in text (FORMATS.md §6): dmesg/journal NVRM Xid lines, nvidia-smi
query CSV (``--query-gpu``/``--query-compute-apps``), the plain table, ``topo -m`` and
``topo -p2p`` matrices.

nvidia-smi column widths changed across drivers (≈R530, R570), so tables are split on
``|`` and CSV on ``", "``, and fields are found by header name, never by position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.host import (
    GpuRow,
    GpuStatus,
    GpuTable,
    GpuTopology,
    GpuXid,
    TopoMatrix,
)
from hangdoc.analyzer.vocabulary import EventKind

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)\): (?P<xid>\d+),\s*(?:pid=(?P<pid>'?<?\w+>?'?),"
    r"\s*)?"
    r"(?:name=(?P<name>[^,]*),\s*)?(?P<msg>.*)"
)
_NVRM_GPU = re.compile(
    r"NVRM: (?:The NVIDIA GPU|GPU at PCI:|GPU) "
    r"?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)"
)
_FALLEN = re.compile(r"fallen off the bus")
# nvidia-smi (NVML) for a GPU it cannot reach: "Unable to determine the device handle for
# GPU 0000:17:00.0: GPU is lost.  Reboot the system to recover this GPU", "…for
# GPU0000:3B:00.0: Unknown Error" (older drivers write no space).
_HANDLE = re.compile(
    r"Unable to determine the device handle for (?:GPU ?)?(?P<pci>[0-9A-Fa-f:.]+): (?P<why>.*)"
)
# A derived Xid (45, 43: the driver tore the process's channels down) names the Xid that
# caused it: " caused by previous Xid %d" (open-gpu-kernel-modules,
# src/nvidia/src/kernel/gpu/rc/kernel_rc.c). The cause is what the Xid means.
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")
_CSV_COL = re.compile(r"^[a-z][a-z_.]*(?: \[[^\]]+\])?$")
GPU_COLUMNS = {
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "pid",
    "process_name",
    "used_gpu_memory",
    "gpu_uuid",
    "gpu_name",
    "gpu_bus_id",
    "ecc.errors.uncorrected.volatile.total",
    "temperature.gpu",
    "power.draw",
}
_NUM = re.compile(r"(-?\d+(?:\.\d+)?)")
_TABLE_GPU = re.compile(r"^\s*(?P<idx>\d+)\s+(?P<name>.+?)\s+(?:On|Off)\s*$")
_TABLE_BUS = re.compile(r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)")
_TABLE_MEM = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_TABLE_UTIL = re.compile(r"(\d+)%")
_TABLE_PROC = re.compile(
    r"^\s*(?P<gpu>\d+)\s+(?:\S+\s+\S+\s+)?(?P<pid>\d+)\s+(?:C|G|C\+G|M)\s+(?P<name>.+?)"
    r"\s+(?P<mem>\d+)\s*MiB\s*$"
)
TOPO_HEAD = re.compile(r"^\s+GPU0(?:\s+GPU\d+)*")
_TOPO_ROW = re.compile(r"^GPU(\d+)\s+(.*)$")
_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|OK|NS|CNS|GNS|TNS|DR|U)$")

FALLEN_OFF_THE_BUS = 79  # the Xid the driver logs for "GPU has fallen off the bus"


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
XID_NEED = Need.words(("NVRM", "device handle"))


def match_xid(text: str, last_pci: list[str]) -> Hit | None:
    """Xid / fallen-off-the-bus / lost-GPU lines; ``last_pci`` carries the PCI id of the
    previous NVRM line for the multi-line "fallen off the bus" message of new drivers."""
    if not XID_NEED.admits(text):
        return None
    if (m := _XID.search(text)) is not None:
        pid = (m.group("pid") or "").strip("'")
        cause = _CAUSED_BY.search(m.group("msg"))
        xid = GpuXid(
            xid=int(m.group("xid")),
            pci=m.group("pci").lower(),
            message=m.group("msg").strip()[:200],
            name=(m.group("name") or "").strip() or None,
            caused_by_xid=int(cause.group(1)) if cause is not None else None,
        )
        return Hit(
            EventKind.GPU_XID,
            payload=xid,
            key=("xid", xid.pci, xid.xid, m.group("msg")[:40]),
            named_pid=int(pid) if pid.isdigit() else None,
        )
    if (g := _NVRM_GPU.search(text)) is not None:
        last_pci[:] = [g.group("pci").lower()]
    if _FALLEN.search(text):
        pci = last_pci[0] if last_pci else "unknown"
        fallen = GpuXid(xid=FALLEN_OFF_THE_BUS, pci=pci, message="GPU has fallen off the bus")
        return Hit(EventKind.GPU_XID, payload=fallen, key=("xid", pci, FALLEN_OFF_THE_BUS))
    if "NV_ERR_GPU_IS_LOST" in text:  # the driver's status name: "… [NV_ERR_GPU_IS_LOST]"
        pci = last_pci[0] if last_pci else "unknown"
        lost = GpuXid(pci=pci, message=text.strip()[:200])
        return Hit(EventKind.GPU_XID, payload=lost, key=("xid", pci, "lost"))
    if (h := _HANDLE.search(text)) is not None:
        gone = GpuXid(pci=h.group("pci").lower(), message=h.group("why").strip()[:200])
        return Hit(EventKind.GPU_XID, payload=gone, key=("xid", gone.pci, "lost"))
    return None


def _num(value: str) -> str | None:
    m = _NUM.search(value)
    return m.group(1) if m and "N/A" not in value and "Not Supported" not in value else None


def _float(value: str | None) -> float | None:
    """A number nvidia-smi printed ("45", "1024 MiB"); None for "N/A", "[Not Supported]"."""
    number = _num(value) if value is not None else None
    return float(number) if number is not None else None


def _int(value: str | None) -> int | None:
    number = _float(value)
    return int(number) if number is not None else None


@dataclass(slots=True)
class CsvBlock:
    """nvidia-smi ``--format=csv`` output: a header of query names, then rows."""

    columns: list[str]
    hits: list[Hit] = field(default_factory=list)

    @staticmethod
    def header(text: str) -> CsvBlock | None:
        if ", " not in text:
            return None
        cols = [c.strip() for c in text.split(", ")]
        if len(cols) < 2 or not all(_CSV_COL.match(c) for c in cols):
            return None
        names = [c.split(" [", 1)[0] for c in cols]
        if not any(n in GPU_COLUMNS for n in names):
            return None
        return CsvBlock(names)

    def feed(self, text: str) -> bool:
        cells = [c.strip() for c in text.split(", ")]
        if len(cells) != len(self.columns):
            return False
        row = dict(zip(self.columns, cells, strict=True))
        if "pid" in row:
            process = GpuStatus(
                row=GpuRow.PROCESS,
                table=GpuTable.CSV,
                process_name=row.get("process_name") or None,
                memory_used_mib=_float(row.get("used_gpu_memory")),
                uuid=row.get("gpu_uuid") or None,
                bus_id=row.get("gpu_bus_id") or None,
            )
            pid = _int(row["pid"])
            self.hits.append(Hit(EventKind.GPU_STATUS, payload=process, named_pid=pid))
            return True
        device = GpuStatus(
            row=GpuRow.GPU,
            table=GpuTable.CSV,
            index=_int(row.get("index")),
            name=row.get("name") or row.get("gpu_name") or None,
            uuid=row.get("uuid") or None,
            bus_id=(row.get("pci.bus_id") or "").lower() or None,
            utilization_pct=_float(row.get("utilization.gpu")),
            memory_used_mib=_float(row.get("memory.used")),
            memory_total_mib=_float(row.get("memory.total")),
            ecc_uncorrected=_int(row.get("ecc.errors.uncorrected.volatile.total")),
        )
        self.hits.append(Hit(EventKind.GPU_STATUS, payload=device))
        return True


@dataclass(slots=True)
class TableBlock:
    """The plain nvidia-smi table (from its ``NVIDIA-SMI x Driver Version`` banner)."""

    driver: str | None = None
    pending: GpuStatus | None = None
    hits: list[Hit] = field(default_factory=list)
    in_processes: bool = False
    blanks: int = 0

    def feed(self, text: str) -> bool:
        stripped = text.strip()
        if not stripped:
            self.blanks += 1
            return self.blanks <= 2  # the processes table follows after a blank line
        self.blanks = 0
        if not stripped.startswith(("|", "+")):
            return False
        cells = [c for c in stripped.strip("|").split("|")]
        if "Processes:" in stripped:
            self.in_processes = True
            return True
        if self.in_processes:
            if (p := _TABLE_PROC.match(cells[0])) is not None:
                process = GpuStatus(
                    row=GpuRow.PROCESS,
                    table=GpuTable.TABLE,
                    index=int(p.group("gpu")),
                    process_name=p.group("name"),
                    memory_used_mib=float(p.group("mem")),
                )
                pid = int(p.group("pid"))
                self.hits.append(Hit(EventKind.GPU_STATUS, payload=process, named_pid=pid))
            return True
        if (
            len(cells) >= 3
            and (g := _TABLE_GPU.match(cells[0]))
            and (b := _TABLE_BUS.search(cells[1]))
        ):
            self.pending = GpuStatus(
                row=GpuRow.GPU,
                table=GpuTable.TABLE,
                index=int(g.group("idx")),
                name=g.group("name").strip(),
                bus_id=b.group("bus").lower(),
                ecc_uncorrected=_int(cells[2]),
            )
            return True
        if self.pending is not None and len(cells) >= 3:
            device = self.pending
            mem = _TABLE_MEM.search(cells[1])
            if mem is not None:
                used, total = float(mem.group(1)), float(mem.group(2))
                device = replace(device, memory_used_mib=used, memory_total_mib=total)
            util = _TABLE_UTIL.search(cells[2])
            if util is not None:
                device = replace(device, utilization_pct=float(util.group(1)))
            self.hits.append(Hit(EventKind.GPU_STATUS, payload=device))
            self.pending = None
        return True


@dataclass(slots=True)
class TopoBlock:
    """``nvidia-smi topo -m`` (links) or ``topo -p2p`` (peer access) matrix."""

    gpus: dict[int, list[str]] = field(default_factory=dict)

    @staticmethod
    def header(text: str) -> TopoBlock | None:
        return TopoBlock() if TOPO_HEAD.match(text) else None

    def feed(self, text: str) -> bool:
        m = _TOPO_ROW.match(text.strip())
        if m is None:
            return not text.strip() and not self.gpus
        self.gpus[int(m.group(1))] = m.group(2).split()
        return True

    def finish(self) -> Hit | None:
        n = len(self.gpus)
        if n < 2:
            return None
        codes: dict[str, int] = {}
        for i, row in self.gpus.items():
            for j in range(n):
                if j == i or j >= len(row) or not _LINK.match(row[j]):
                    continue
                codes[row[j]] = codes.get(row[j], 0) + 1
        p2p = {"OK", "NS", "CNS", "GNS", "TNS", "DR", "U"}
        nvlink = sum(v for k, v in codes.items() if k.startswith("NV")) // 2
        pcie = (
            sum(v for k, v in codes.items() if k in {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
            // 2
        )
        blocked = sum(v for k, v in codes.items() if k in {"NS", "CNS", "GNS", "TNS", "DR"}) // 2
        topology = GpuTopology(
            gpus=n,
            links=",".join(f"{k}:{v // 2}" for k, v in sorted(codes.items())),
            matrix=TopoMatrix.P2P if codes and set(codes) <= p2p else TopoMatrix.LINKS,
            nvlink_pairs=nvlink,
            pcie_pairs=pcie,
            p2p_unsupported_pairs=blocked,
        )
        return Hit(EventKind.GPU_TOPOLOGY, payload=topology, key=("topo", topology.matrix))
