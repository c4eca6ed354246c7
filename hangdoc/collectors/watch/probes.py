"""Signals that are not read from /proc: the GPUs of the node, the flight recorder of a rank.

Both are slower than a /proc read, so the watcher asks them on their own, longer cadence.

* **GPU** (``GpuProbe``): utilisation and memory per GPU, from NVML when nvidia-ml-py is
  importable (microseconds), else ``nvidia-smi`` (a subprocess: tens of milliseconds,
  so at most every ``every_s``). A GPU only counts as movement when it *changes*: a
  hung NCCL kernel pins its GPU at 100 % and a rank stuck in Python leaves it at 0 %,
  both flat; training makes the utilisation or the memory move. Only GPUs that run one
  of the watched ranks count (all of them when the driver hides the pids, as in a
  container).
* **Flight recorder** (``FlightRecorderProbe``): where the job exposes it live (torch's
  worker server socket, TORCH_WORKER_SERVER_SOCKET, or hangdoc's hook), the number of
  entries and the newest one's id and state. A new collective, or one that completed,
  is progress by definition.

Nothing here raises; a probe that cannot run says why once and stays off.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass

from hangdoc.collectors.extras import RankTarget
from hangdoc.collectors.gpu import nvml_csv, run_command, smi_csv
from hangdoc.collectors.hook_client import (
    ask_hook,
    hook_socket_candidates,
    http_over_unix,
    resolve,
)

UTIL_STEP = 10  # percentage points of utilisation that count as a change
MEMORY_STEP_MIB = 256


@dataclass(frozen=True, slots=True)
class GpuRow:
    uuid: str
    index: str
    util: int | None
    memory_mib: int | None


def parse_gpu_csv(text: str) -> tuple[dict[str, GpuRow], dict[int, str]]:
    """The two CSV blocks collectors/gpu.py writes: GPUs by uuid, and pid → GPU uuid."""
    gpu_block, _, app_block = text.partition("\n\n")
    gpus: dict[str, GpuRow] = {}
    for line in gpu_block.splitlines()[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 6:
            gpus[cells[1]] = GpuRow(cells[1], cells[0], _number(cells[4]), _number(cells[5]))
    apps: dict[int, str] = {}
    for line in app_block.splitlines()[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 4 and cells[0].isdigit():
            apps[int(cells[0])] = cells[3]
    return gpus, apps


def _number(cell: str) -> int | None:
    head = cell.split()[0] if cell.split() else ""
    return int(head) if head.isdigit() else None


class GpuProbe:
    """See the module doc; ``poll`` returns the changes since the last reading."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.smi = shutil.which("nvidia-smi")
        self.last: dict[str, GpuRow] = {}
        self.asked = -float("inf")
        self.off: str | None = None
        self.nvml = True

    def poll(self, now: float, pids: set[int]) -> list[str]:
        if self.off is not None or now - self.asked < (0.0 if self.nvml else self.every_s):
            return []
        self.asked = now
        text = nvml_csv() if self.nvml else None
        if text is None:
            self.nvml = False
            if self.smi is None:
                self.off = "no NVML and no nvidia-smi on this node"
                return []
            text, why = smi_csv(self.smi, 10.0, run_command)
            if text is None:
                self.off = why
                return []
        gpus, apps = parse_gpu_csv(text)
        found = gpu_changes(self.last, gpus, {uuid for pid, uuid in apps.items() if pid in pids})
        self.last = gpus
        return found


def gpu_changes(before: dict[str, GpuRow], after: dict[str, GpuRow], ours: set[str]) -> list[str]:
    """The GPUs (of ``ours``, or all when the driver showed none of the ranks' pids) whose
    utilisation or memory changed enough to be work: a flat 100 % or 0 % is not."""
    changes: list[str] = []
    for uuid, row in after.items():
        old = before.get(uuid)
        if old is None or (ours and uuid not in ours):
            continue
        if row.util is not None and old.util is not None and abs(row.util - old.util) >= UTIL_STEP:
            changes.append(f"GPU {row.index} utilisation {old.util} → {row.util} %")
        elif (
            row.memory_mib is not None
            and old.memory_mib is not None
            and abs(row.memory_mib - old.memory_mib) >= MEMORY_STEP_MIB
        ):
            changes.append(f"GPU {row.index} memory {old.memory_mib} → {row.memory_mib} MiB")
    return changes


def fr_fingerprint(data: bytes) -> tuple[int, object, object] | None:
    """(entries, newest record id, its state) of a flight recorder JSON dump."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        return None
    newest = entries[-1] if isinstance(entries[-1], dict) else {}
    return len(entries), newest.get("record_id"), newest.get("state")


class FlightRecorderProbe:
    """The flight recorder of each rank that exposes it live; see the module doc."""

    def __init__(self, every_s: float, timeout_s: float = 5.0) -> None:
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.last: dict[int, tuple[int, object, object]] = {}
        self.asked: dict[int, float] = {}

    def poll(self, now: float, target: RankTarget) -> str | None:
        """A change of this rank's flight recorder since the last ask, or None."""
        pid = target.pid
        if now - self.asked.get(pid, -float("inf")) < self.every_s:
            return None
        self.asked[pid] = now
        data = self._fetch(target)
        if data is None:  # no server, no hook (yet: a rank may start its hook late)
            self.asked[pid] = now + 3 * self.every_s
            return None
        print_ = fr_fingerprint(data)
        if print_ is None:
            return None
        old = self.last.get(pid)
        self.last[pid] = print_
        if old is not None and old != print_:
            return f"flight recorder: {old[0]} → {print_[0]} entries, newest {print_[2]}"
        return None

    def _fetch(self, target: RankTarget) -> bytes | None:
        began = time.monotonic()
        configured = target.env.get("TORCH_WORKER_SERVER_SOCKET")
        path = resolve(configured, target.pid) if configured else None
        if path is not None:
            try:
                status, body = http_over_unix(path, "/handler/fr_trace_json", self.timeout_s)
            except OSError:
                status, body = 0, b""
            if status == 200:
                return body
        for candidate in hook_socket_candidates(target.pid, target.env):
            left = max(0.5, self.timeout_s - (time.monotonic() - began))
            try:
                artifacts = ask_hook(candidate, ["fr"], left)
            except (OSError, ValueError):
                continue
            for artifact in artifacts:  # fr_trace.json (and fr_trace_nccl.json)
                if artifact.name.startswith("fr_trace") and artifact.error is None:
                    return artifact.data
        return None
