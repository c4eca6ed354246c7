"""GPU faults in the logs: which ranks a GPU event concerns.

HD300 (Xid) and HD301 (ECC / lost GPU) map driver events to the ranks that used the GPU;
HD030 leaves hardware failures to HD301 (what reads as hardware, the parser tells:
EventPayload.hardware, parsers/logs/errors.py).
"""

from __future__ import annotations

from hangdoc.analyzer.payloads.host import GpuXid
from hangdoc.analyzer.payloads.nccl import NcclInit
from hangdoc.analyzer.views.timeline import Placed, Timeline


def pci_key(value: str | None) -> tuple[int, int] | None:
    """(bus, device) from ``0000:3b:00`` / ``00000000:3B:00.0`` (nvidia-smi, Xid) or
    NCCL's hex ``busId`` ``3b000``."""
    if not value:
        return None
    text = value.lower()
    try:
        if ":" in text:
            parts = text.split(":")
            return int(parts[-2], 16), int(parts[-1].split(".")[0], 16)
        number = int(text, 16)
    except ValueError:
        return None
    return (number >> 12) & 0xFF, (number >> 4) & 0xFF


def _pci(p: Placed) -> str | None:
    xid = p.event.payload_as(GpuXid)
    return xid.pci if xid is not None else None


def ranks_for(tl: Timeline, placed: list[Placed]) -> list[int]:
    """Ranks that used the GPUs / processes / hosts the events name."""
    pids = {p.event.pid for p in placed if p.event.pid}
    pcis = {k for p in placed if (k := pci_key(_pci(p))) is not None}
    hosts = {p.event.host.split(".")[0] for p in placed if p.event.host}
    by_pid: set[int] = set()
    by_pci: set[int] = set()
    by_host: set[int] = set()
    for p in tl.events:
        if p.rank is None:
            continue
        host = (p.event.host or "").split(".")[0]
        if pids and p.event.pid in pids and p.kind.startswith("nccl"):
            by_pid.add(p.rank)
        init = p.event.payload_as(NcclInit)
        if init is not None and pci_key(init.bus_id) in pcis and (not hosts or host in hosts):
            by_pci.add(p.rank)
        if hosts and host in hosts:
            by_host.add(p.rank)
    return sorted(by_pid or by_pci or by_host)
