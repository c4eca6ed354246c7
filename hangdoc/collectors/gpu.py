"""GPU state of the node: utilisation and memory per GPU, memory per process, Xid lines.

Why: a rank stuck in Python or I/O leaves its GPU idle (0 %) with its memory still
held, a rank spinning in an NCCL kernel shows ~100 %, and one rank's memory at the
limit points at an out-of-memory path; Xid lines in the kernel log name hardware and
driver faults. All of it is per node, so the extra collector ``gpu`` runs once per
dump (for the first rank; the others find ``gpu/`` already there).

Output, in the formats of FORMATS.md §6 so that the log parser reads them like a file a
user attached: ``gpu/nvidia-smi.csv`` (a ``--query-gpu`` block, a blank line, a
``--query-compute-apps`` block) and ``gpu/kernel-nvrm.log`` (NVRM lines of ``dmesg``).
NVML (nvidia-ml-py) is used when importable, else ``nvidia-smi``; both give the same
CSV. Without a driver the step is recorded as skipped with the reason, and nothing
else changes. Never raises; every subprocess is bounded by the step timeout.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hangdoc.collectors.dumpformat import StepRecord, StepStatus
from hangdoc.collectors.extras import ExtraContext, register
from hangdoc.common.atomic import write_bytes_atomic
from hangdoc.common.redact import redact_text

GPU_DIR = "gpu"
CSV_NAME = "nvidia-smi.csv"
XID_NAME = "kernel-nvrm.log"
DRIVER_VERSION_FILE = Path("/proc/driver/nvidia/version")
GPU_FIELDS = "index,uuid,name,pci.bus_id,utilization.gpu,memory.used,memory.total"
APP_FIELDS = "pid,process_name,used_memory,gpu_uuid"
GPU_HEADER = (
    "index, uuid, name, pci.bus_id, utilization.gpu [%], memory.used [MiB], memory.total [MiB]"
)
APP_HEADER = "pid, process_name, used_gpu_memory [MiB], gpu_uuid"
MAX_XID_LINES = 400

Runner = Callable[[Sequence[str], float], tuple[int, str, str]]
# Dump directories whose GPU step already ran in this process: the GPUs are per node.
_COLLECTED: set[str] = set()


def run_command(cmd: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
    """Run ``cmd``; (returncode, stdout, stderr), 124 on timeout, 127 when missing."""
    try:
        done = subprocess.run(
            list(cmd),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"{cmd[0]} did not answer within {timeout_s:g}s"
    except OSError as exc:
        return 127, "", f"cannot run {cmd[0]}: {exc.strerror or exc}"
    return (
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def _step(
    step: str, status: StepStatus, reason: str | None, began: float, file: str | None = None
) -> StepRecord:
    record: StepRecord = {
        "step": step,
        "status": status,
        "rank": None,
        "pid": None,
        "sample": None,
        "reason": reason,
        "duration_s": round(time.monotonic() - began, 4),
    }
    if file is not None:
        record["file"] = file
    return record


def nvml_csv() -> str | None:
    """The two CSV blocks from NVML (nvidia-ml-py), or None when NVML is unavailable."""
    try:
        nvml: Any = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception:  # not installed, or no driver behind it: nvidia-smi is next
        return None
    try:
        gpu_rows: list[str] = []
        app_rows: list[str] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            bus = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
            gpu_rows.append(
                f"{index}, {uuid}, {_text(nvml.nvmlDeviceGetName(handle))}, {bus}, "
                f"{util.gpu} %, {mem.used // 2**20} MiB, {mem.total // 2**20} MiB"
            )
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = proc.usedGpuMemory
                used_text = "[N/A]" if used is None else f"{used // 2**20} MiB"
                app_rows.append(f"{proc.pid}, [N/A], {used_text}, {uuid}")
        return "\n".join([GPU_HEADER, *gpu_rows, "", APP_HEADER, *app_rows]) + "\n"
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def smi_csv(exe: str, timeout_s: float, run: Runner) -> tuple[str | None, str | None]:
    """The two CSV blocks from ``nvidia-smi``; (text, None) or (None, why it failed)."""
    code, gpus, err = run([exe, f"--query-gpu={GPU_FIELDS}", "--format=csv"], timeout_s)
    if code != 0 or not gpus.strip():
        return None, f"nvidia-smi --query-gpu failed ({code}): {' '.join(err.split())[:300]}"
    code, apps, err = run([exe, f"--query-compute-apps={APP_FIELDS}", "--format=csv"], timeout_s)
    if code != 0:
        apps = APP_HEADER + "\n"  # per-process memory is a bonus; keep the GPU rows
    return gpus.rstrip("\n") + "\n\n" + apps.rstrip("\n") + "\n", None


def nvrm_lines(timeout_s: float, run: Runner) -> tuple[str | None, str | None]:
    """NVRM lines (Xid, fallen off the bus) of the kernel log; (text, None) or (None, why)."""
    code, out, err = run(["dmesg", "-T"], timeout_s)
    if code != 0:
        return None, f"dmesg failed ({code}): {' '.join(err.split())[:200]}"
    lines = [line for line in out.splitlines() if "NVRM" in line]
    return "\n".join(lines[-MAX_XID_LINES:]) + "\n" if lines else "", None


def collect_gpu(
    ctx: ExtraContext,
    *,
    run: Runner = run_command,
    which: Callable[[str], str | None] = shutil.which,
    nvml: Callable[[], str | None] = nvml_csv,
    driver_file: Path = DRIVER_VERSION_FILE,
) -> list[StepRecord]:
    """The extra collector: see the module docstring. Once per dump directory."""
    began = time.monotonic()
    out_dir = ctx.dump_dir / GPU_DIR
    key = str(ctx.dump_dir.resolve())
    if key in _COLLECTED or out_dir.exists():
        return []  # an earlier rank of this node collected it (or said why not)
    _COLLECTED.add(key)
    exe = which("nvidia-smi")
    driver = driver_file.exists()
    if exe is None and not driver:
        why = (
            "no NVIDIA driver on this node (no /proc/driver/nvidia, no nvidia-smi on PATH); "
            "GPU state not collected"
        )
        return [_step("gpu", "skipped", why, began)]
    out_dir.mkdir(exist_ok=True)
    steps: list[StepRecord] = []
    text = nvml()
    reason: str | None = None
    if text is None and exe is not None:
        text, reason = smi_csv(exe, ctx.timeout_s, run)
    elif text is None:
        reason = "the driver is loaded but neither NVML nor nvidia-smi is usable"
    if text is not None:
        write_bytes_atomic(out_dir / CSV_NAME, text.encode("utf-8"))
        steps.append(_step("gpu", "ok", None, began, f"{GPU_DIR}/{CSV_NAME}"))
    else:
        steps.append(_step("gpu", "failed", reason, began))
    xid_began = time.monotonic()
    xid, xid_error = nvrm_lines(ctx.timeout_s, run)
    if xid is None:
        steps.append(_step("gpu-xid", "failed", xid_error, xid_began))
    elif xid:
        cleaned = redact_text(xid) if ctx.redact else xid
        write_bytes_atomic(out_dir / XID_NAME, cleaned.encode("utf-8"))
        steps.append(_step("gpu-xid", "ok", None, xid_began, f"{GPU_DIR}/{XID_NAME}"))
    else:
        steps.append(_step("gpu-xid", "ok", "no NVRM lines in the kernel log", xid_began))
    return steps


register("gpu")(collect_gpu)
