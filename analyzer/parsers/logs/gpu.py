"""GPU evidence in text (FORMATS.md §6): dmesg/journal NVRM Xid lines, nvidia-smi
query CSV (``--query-gpu``/``--query-compute-apps``), the plain table, ``topo -m`` and
``topo -p2p`` matrices.

nvidia-smi column widths changed across drivers (≈R530, R570), so tables are split on
``|`` and CSV on ``", "``, and fields are found by header name, never by position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit, put
from hangdoc.analyzer.vocabulary import F_ERROR, F_MESSAGE, F_PID, EventKind

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
_GPU_COLS = {
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
_TOPO_HEAD = re.compile(r"^\s+GPU0(?:\s+GPU\d+)*")
_TOPO_ROW = re.compile(r"^GPU(\d+)\s+(.*)$")
_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|OK|NS|CNS|GNS|TNS|DR|U)$")


def match_xid(text: str, last_pci: list[str]) -> Hit | None:
    """Xid / fallen-off-the-bus / lost-GPU lines; ``last_pci`` carries the PCI id of the
    previous NVRM line for the multi-line "fallen off the bus" message of new drivers."""
    if "NVRM" not in text and "device handle" not in text:
        return None
    if (m := _XID.search(text)) is not None:
        fields = {
            "xid": m.group("xid"),
            "pci": m.group("pci").lower(),
            F_MESSAGE: m.group("msg").strip()[:200],
        }
        pid = (m.group("pid") or "").strip("'")
        if pid.isdigit():
            fields[F_PID] = pid
        put(fields, "name", (m.group("name") or "").strip() or None)
        if (cause := _CAUSED_BY.search(m.group("msg"))) is not None:
            fields["caused_by_xid"] = cause.group(1)
        return Hit(
            EventKind.GPU_XID,
            fields,
            key=("xid", fields["pci"], m.group("xid"), m.group("msg")[:40]),
        )
    if (g := _NVRM_GPU.search(text)) is not None:
        last_pci[:] = [g.group("pci").lower()]
    if _FALLEN.search(text):
        pci = last_pci[0] if last_pci else "unknown"
        fields = {"xid": "79", "pci": pci, F_MESSAGE: "GPU has fallen off the bus"}
        return Hit(EventKind.GPU_XID, fields, key=("xid", pci, "79"))
    if "NV_ERR_GPU_IS_LOST" in text:  # the driver's status name: "… [NV_ERR_GPU_IS_LOST]"
        pci = last_pci[0] if last_pci else "unknown"
        fields = {"xid": "lost", "pci": pci, F_MESSAGE: text.strip()[:200]}
        return Hit(EventKind.GPU_XID, fields, key=("xid", pci, "lost"))
    if (h := _HANDLE.search(text)) is not None:
        fields = {
            "xid": "lost",
            "pci": h.group("pci").lower(),
            F_MESSAGE: h.group("why").strip()[:200],
        }
        return Hit(EventKind.GPU_XID, fields, key=("xid", fields["pci"], "lost"))
    return None


def _num(value: str) -> str | None:
    m = _NUM.search(value)
    return m.group(1) if m and "N/A" not in value and "Not Supported" not in value else None


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
        if not any(n in _GPU_COLS for n in names):
            return None
        return CsvBlock(names)

    def feed(self, text: str) -> bool:
        cells = [c.strip() for c in text.split(", ")]
        if len(cells) != len(self.columns):
            return False
        row = dict(zip(self.columns, cells, strict=True))
        fields: dict[str, str] = {"source": "nvidia-smi csv"}
        if "pid" in row:
            put(fields, F_PID, _num(row["pid"]))
            put(fields, "process_name", row.get("process_name"))
            put(fields, "memory_used_mib", _num(row.get("used_gpu_memory", "")))
            put(fields, "uuid", row.get("gpu_uuid"))
            put(fields, "bus_id", row.get("gpu_bus_id"))
            fields["row"] = "process"
        else:
            put(fields, "index", _num(row.get("index", "")))
            put(fields, "name", row.get("name") or row.get("gpu_name"))
            put(fields, "uuid", row.get("uuid"))
            put(fields, "bus_id", (row.get("pci.bus_id") or "").lower() or None)
            put(fields, "utilization_pct", _num(row.get("utilization.gpu", "")))
            put(fields, "memory_used_mib", _num(row.get("memory.used", "")))
            put(fields, "memory_total_mib", _num(row.get("memory.total", "")))
            put(
                fields,
                "ecc_uncorrected",
                _num(row.get("ecc.errors.uncorrected.volatile.total", "")),
            )
            fields["row"] = "gpu"
        self.hits.append(Hit(EventKind.GPU_STATUS, fields))
        return True


@dataclass(slots=True)
class TableBlock:
    """The plain nvidia-smi table (from its ``NVIDIA-SMI x Driver Version`` banner)."""

    driver: str | None = None
    pending: dict[str, str] | None = None
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
                self.hits.append(
                    Hit(
                        EventKind.GPU_STATUS,
                        {
                            "source": "nvidia-smi table",
                            "row": "process",
                            "index": p.group("gpu"),
                            F_PID: p.group("pid"),
                            "process_name": p.group("name"),
                            "memory_used_mib": p.group("mem"),
                        },
                    )
                )
            return True
        if (
            len(cells) >= 3
            and (g := _TABLE_GPU.match(cells[0]))
            and (b := _TABLE_BUS.search(cells[1]))
        ):
            self.pending = {
                "source": "nvidia-smi table",
                "row": "gpu",
                "index": g.group("idx"),
                "name": g.group("name").strip(),
                "bus_id": b.group("bus").lower(),
            }
            put(self.pending, "ecc_uncorrected", _num(cells[2]))
            return True
        if self.pending is not None and len(cells) >= 3:
            mem = _TABLE_MEM.search(cells[1])
            if mem is not None:
                self.pending["memory_used_mib"], self.pending["memory_total_mib"] = (
                    mem.group(1),
                    mem.group(2),
                )
            util = _TABLE_UTIL.search(cells[2])
            put(self.pending, "utilization_pct", util.group(1) if util else None)
            self.hits.append(Hit(EventKind.GPU_STATUS, self.pending))
            self.pending = None
        return True


@dataclass(slots=True)
class TopoBlock:
    """``nvidia-smi topo -m`` (links) or ``topo -p2p`` (peer access) matrix."""

    gpus: dict[int, list[str]] = field(default_factory=dict)

    @staticmethod
    def header(text: str) -> TopoBlock | None:
        return TopoBlock() if _TOPO_HEAD.match(text) else None

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
        fields = {
            "gpus": str(n),
            "links": ",".join(f"{k}:{v // 2}" for k, v in sorted(codes.items())),
        }
        p2p = {"OK", "NS", "CNS", "GNS", "TNS", "DR", "U"}
        fields["matrix"] = "p2p" if codes and set(codes) <= p2p else "links"
        nvlink = sum(v for k, v in codes.items() if k.startswith("NV")) // 2
        pcie = (
            sum(v for k, v in codes.items() if k in {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
            // 2
        )
        fields["nvlink_pairs"], fields["pcie_pairs"] = str(nvlink), str(pcie)
        blocked = sum(v for k, v in codes.items() if k in {"NS", "CNS", "GNS", "TNS", "DR"}) // 2
        fields["p2p_unsupported_pairs"] = str(blocked)
        put(fields, F_ERROR, None)
        return Hit(EventKind.GPU_TOPOLOGY, fields, key=("topo", fields["matrix"]))
