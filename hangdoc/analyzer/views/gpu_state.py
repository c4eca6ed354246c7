"""Each rank's GPU: utilisation, memory of the device, memory of the rank's own process.

Two ways in, both read from the model only:

* ``ProcessEvidence.gpu`` — GpuState records a parser already attributed to the rank;
* nvidia-smi CSV rows (``gpu_status`` log events, FORMATS.md §6): the collector's
  ``gpu/nvidia-smi.csv`` or a file the user attached. A ``--query-compute-apps`` row
  names a pid and a GPU uuid; the rank whose process has that pid (on the same dump,
  when pids repeat across nodes) owns it, and the ``--query-gpu`` row with that uuid
  (else index) gives the device's utilisation and memory.

A rank with processes on several GPUs (a stray context on GPU 0) is shown on the GPU
where it holds the most memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence, LogEvent, ProcessEvidence
from hangdoc.analyzer.payloads.host import GpuRow, GpuStatus
from hangdoc.analyzer.vocabulary import EventKind


@dataclass(frozen=True, slots=True)
class GpuView:
    rank: int
    index: int | None
    util_pct: float | None
    used_mib: float | None  # the whole device
    total_mib: float | None
    process_mib: float | None  # this rank's process
    source: str

    @property
    def used_fraction(self) -> float | None:
        used = self.used_mib if self.used_mib is not None else self.process_mib
        if used is None or not self.total_mib:
            return None
        return used / self.total_mib

    def text(self) -> str:
        util = f"{self.util_pct:.0f} %" if self.util_pct is not None else "? %"
        mem = _mib(self.process_mib if self.process_mib is not None else self.used_mib)
        total = f" of {_mib(self.total_mib)}" if self.total_mib else ""
        where = f"GPU {self.index}" if self.index is not None else "its GPU"
        return f"{where}: {util} busy, {mem}{total} in use"


def _mib(value: float | None) -> str:
    return "? MiB" if value is None else f"{value:.0f} MiB"


def _dump_prefix(source: str) -> str:
    for marker in ("/gpu/", "/rank", "/pid"):
        if marker in source:
            return source.split(marker, 1)[0]
    return source.rsplit("/", 1)[0]


def _owner(pid: int, event: LogEvent, by_pid: dict[int, list[ProcessEvidence]]) -> int | None:
    candidates = [p for p in by_pid.get(pid, []) if p.rank is not None]
    if len(candidates) > 1:
        prefix = _dump_prefix(event.source)
        candidates = [p for p in candidates if any(s.startswith(prefix) for s in p.sources)]
    return candidates[0].rank if len(candidates) == 1 else None


def _from_events(evidence: Evidence) -> dict[int, list[GpuView]]:
    events = [e for e in evidence.job_log_events if e.kind == EventKind.GPU_STATUS]
    for proc in evidence.processes:
        events.extend(e for e in proc.log_events if e.kind == EventKind.GPU_STATUS)
    rows = [(event, row) for event in events if (row := event.payload_as(GpuStatus))]
    gpus: dict[tuple[str, str | int], GpuStatus] = {}
    for event, row in rows:
        if row.row == GpuRow.GPU:
            if row.uuid:
                gpus[(event.source, row.uuid)] = row
            if row.index is not None:
                gpus[(event.source, row.index)] = row
    by_pid: dict[int, list[ProcessEvidence]] = {}
    for proc in evidence.processes:
        if proc.pid is not None:
            by_pid.setdefault(proc.pid, []).append(proc)
    out: dict[int, list[GpuView]] = {}
    for event, row in rows:
        if row.row != GpuRow.PROCESS or event.pid is None:
            continue
        rank = _owner(event.pid, event, by_pid)
        if rank is None:
            continue
        by_uuid = gpus.get((event.source, row.uuid)) if row.uuid else None
        by_index = gpus.get((event.source, row.index)) if row.index is not None else None
        device = by_uuid or by_index or GpuStatus()
        out.setdefault(rank, []).append(
            GpuView(
                rank=rank,
                index=device.index if device.index is not None else row.index,
                util_pct=device.utilization_pct,
                used_mib=device.memory_used_mib,
                total_mib=device.memory_total_mib,
                process_mib=row.memory_used_mib,
                source=event.source,
            )
        )
    return out


def gpu_views(evidence: Evidence) -> dict[int, GpuView]:
    """One view per rank that has GPU facts: its main GPU."""
    views = _from_events(evidence)
    ranked = evidence.ranked()  # (once: it walks every process)
    for rank, proc in ranked.items():
        for state in proc.gpu:
            views.setdefault(rank, []).append(
                GpuView(
                    rank=rank,
                    index=state.index,
                    util_pct=state.utilization_pct,
                    used_mib=state.memory_used_mib,
                    total_mib=state.memory_total_mib,
                    process_mib=state.process_memory_mib,
                    source=state.source,
                )
            )
    return {
        rank: max(items, key=lambda v: (v.process_mib or 0.0, v.used_mib or 0.0))
        for rank, items in views.items()
        if rank in ranked and not ranked[rank].exited
    }
