"""Typed builders for test inputs: py-spy JSON traces, hangdoc dump directories, Evidence.

Dumps are written through the TypedDicts of ``collectors/dumpformat.py``, so a change
of the format breaks these builders at type-check time rather than silently testing an
old shape. Frames are always given innermost first, as py-spy prints them and as
``ThreadStack.frames`` stores them.

Typical use::

    spec = RankSpec(rank=0, pid=100, samples=[[main_trace(100, [("wait", C10D, 10)])]])
    dump = write_dump(tmp_path / "node1", host="node1", ranks=[spec])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.model import (
    Evidence,
    Frame,
    ProcessEvidence,
    StackSample,
    ThreadStack,
)
from hangdoc.collectors.dumpformat import (
    FORMAT,
    MANIFEST_NAME,
    PROCESS_FORMAT,
    PROCESS_NAME,
    Manifest,
    OptionsRecord,
    ProcessFile,
    ProcSampleRecord,
    RankRecord,
    SampleRecord,
    StepRecord,
    StepStatus,
    ThreadRecord,
    pyspy_file_name,
    rank_dir_name,
)

FrameSpec = tuple[str, str, int]  # (function, absolute file, line); line 0 = unknown
T0 = 1_795_289_000.0
C10D = "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
TRAIN = "/srv/job/train.py"
THREADING = "/usr/local/lib/python3.11/threading.py"

# A rank waiting in all_reduce, innermost first.
ALLREDUCE_WAIT: list[FrameSpec] = [
    ("all_reduce", C10D, 2501),
    ("train_step", TRAIN, 42),
    ("<module>", TRAIN, 80),
]


# --- py-spy JSON --------------------------------------------------------------------------
def pyspy_frame(
    function: str, file: str, line: int, locals_: Sequence[tuple[str, str]] | None = None
) -> dict[str, object]:
    """One frame as ``py-spy dump --json`` writes it (0.4.x keys)."""
    return {
        "name": function,
        "filename": file,
        "module": None,
        "short_filename": file.rsplit("/", 1)[-1],
        "line": line,
        "locals": (
            None
            if locals_ is None
            else [{"name": n, "addr": 0, "arg": False, "repr": r} for n, r in locals_]
        ),
        "is_entry": False,
        "is_shim_entry": False,
    }


def pyspy_trace(
    pid: int,
    os_thread_id: int,
    name: str | None,
    frames: Sequence[FrameSpec],
    *,
    active: bool = False,
    owns_gil: bool = False,
    thread_id: int | None = None,
    command_line: str | None = None,
) -> dict[str, object]:
    """One thread's trace; ``frames`` innermost first."""
    return {
        "pid": pid,
        "thread_id": thread_id if thread_id is not None else 0x7F0000000000 + os_thread_id,
        "thread_name": name,
        "os_thread_id": os_thread_id,
        "active": active,
        "owns_gil": owns_gil,
        "frames": [pyspy_frame(f, file, line) for f, file, line in frames],
        "process_info": None
        if command_line is None
        else {"pid": pid, "command_line": command_line},
    }


def main_trace(pid: int, frames: Sequence[FrameSpec] = ALLREDUCE_WAIT) -> dict[str, object]:
    """The MainThread of ``pid`` (its os_thread_id is the pid)."""
    return pyspy_trace(pid, pid, "MainThread", frames)


def pyspy_json(traces: Sequence[dict[str, object]]) -> str:
    """A dump file's text. py-spy lists threads newest first: main thread last."""
    return json.dumps(list(traces), indent=2) + "\n"


# --- dump directories ---------------------------------------------------------------------
@dataclass(slots=True)
class RankSpec:
    """One rank of a dump: its identity, and per sample its traces and liveness."""

    rank: int | None
    pid: int
    samples: list[list[dict[str, object]]] = field(default_factory=list)  # traces per sample
    alive: list[bool] | None = None  # per sample; default all alive
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    cmdline: list[str] = field(default_factory=lambda: ["/opt/venv/bin/python", "train.py"])
    env: dict[str, str] = field(default_factory=dict)
    write_process: bool = True  # False: the process.json is missing
    extra_files: dict[str, str | bytes] = field(default_factory=dict)  # name -> content


def thread_record(tid: int, name: str = "python", state: str = "S") -> ThreadRecord:
    return {
        "tid": tid,
        "name": name,
        "state": state,
        "wchan": "futex_wait_queue",
        "cpu_ticks": 100,
        "voluntary_ctxt_switches": 10,
        "nonvoluntary_ctxt_switches": 1,
    }


def proc_sample_record(index: int, time: float, pid: int, alive: bool = True) -> ProcSampleRecord:
    record: ProcSampleRecord = {
        "index": index,
        "time": time,
        "alive": alive,
        "state": "S" if alive else None,
        "wchan": "futex_wait_queue" if alive else None,
        "cpu_ticks": 1000 + index if alive else None,
        "threads": [thread_record(pid, "python")] if alive else [],
        "io": {"rchar": 10, "wchar": 20} if alive else {},
        "output": {"stderr": {"path": "/logs/err.log", "size": 4096}} if alive else {},
    }
    if not alive:
        record["error"] = "process exited"
    return record


def process_file(spec: RankSpec, host: str, times: Sequence[float]) -> ProcessFile:
    alive = spec.alive or [True] * len(times)
    return {
        "format": PROCESS_FORMAT,
        "pid": spec.pid,
        "rank": spec.rank,
        "local_rank": spec.local_rank,
        "world_size": spec.world_size,
        "local_world_size": spec.local_world_size,
        "group_rank": 0,
        "host": host,
        "cmdline": spec.cmdline,
        "start_time": T0 - 3600,
        "parent_pid": 1,
        "env": spec.env,
        "samples": [
            proc_sample_record(i, t, spec.pid, alive[i] if i < len(alive) else True)
            for i, t in enumerate(times)
        ],
    }


def step_record(
    step: str,
    status: StepStatus,
    rank: int | None = None,
    pid: int | None = None,
    sample: int | None = None,
    reason: str | None = None,
    file: str | None = None,
) -> StepRecord:
    record: StepRecord = {
        "step": step,
        "status": status,
        "rank": rank,
        "pid": pid,
        "sample": sample,
        "reason": reason,
        "duration_s": 0.1,
    }
    if file is not None:
        record["file"] = file
    return record


def rank_record(spec: RankSpec) -> RankRecord:
    return {
        "rank": spec.rank,
        "pid": spec.pid,
        "local_rank": spec.local_rank,
        "world_size": spec.world_size,
        "local_world_size": spec.local_world_size,
        "group_rank": 0,
        "dir": rank_dir_name(spec.rank, spec.pid),
        "how_found": "pid",
    }


def build_manifest(
    host: str,
    ranks: Sequence[RankSpec],
    times: Sequence[float],
    steps: Sequence[StepRecord],
    *,
    complete: bool = True,
    interval_s: float = 5.0,
) -> Manifest:
    options: OptionsRecord = {
        "samples": len(times),
        "interval_s": interval_s,
        "native": False,
        "subprocesses": False,
        "nonblocking": False,
        "pids_requested": [r.pid for r in ranks],
        "all": False,
        "step_timeout_s": 10.0,
    }
    samples: list[SampleRecord] = [{"index": i, "time": t} for i, t in enumerate(times)]
    return {
        "format": FORMAT,
        "hangdoc_version": "0.1.0",
        "host": host,
        "started_at": times[0] if times else T0,
        "finished_at": (times[-1] + 1.0) if complete and times else None,
        "complete": complete,
        "options": options,
        "samples": samples,
        "ranks": [rank_record(r) for r in ranks],
        "steps": list(steps),
        "py_spy": {"version": "0.4.1", "path": "/usr/bin/py-spy"},
        "warnings": [],
    }


def write_dump(
    root: Path,
    host: str,
    ranks: Sequence[RankSpec],
    *,
    n_samples: int | None = None,
    t0: float = T0,
    interval_s: float = 5.0,
    complete: bool = True,
    extra_steps: Sequence[StepRecord] = (),
) -> Path:
    """Write a dump directory as ``hangdoc collect`` would; returns ``root``.

    A sample whose traces list is absent for a rank gets a failed pyspy step and no
    file; a sample where the rank is not alive gets "skipped: process exited" steps.
    """
    count = n_samples if n_samples is not None else max((len(r.samples) for r in ranks), default=1)
    times = [t0 + i * interval_s for i in range(count)]
    steps: list[StepRecord] = [step_record("discover", "ok")]
    root.mkdir(parents=True, exist_ok=True)
    for spec in ranks:
        folder = root / rank_dir_name(spec.rank, spec.pid)
        folder.mkdir(exist_ok=True)
        alive = spec.alive or [True] * count
        for i in range(count):
            live = alive[i] if i < len(alive) else True
            if not live:
                steps.append(
                    step_record("pyspy", "skipped", spec.rank, spec.pid, i, "process exited")
                )
            elif i < len(spec.samples):
                name = pyspy_file_name(i)
                (folder / name).write_text(pyspy_json(spec.samples[i]))
                steps.append(
                    step_record("pyspy", "ok", spec.rank, spec.pid, i, file=f"{folder.name}/{name}")
                )
            else:
                steps.append(
                    step_record("pyspy", "failed", spec.rank, spec.pid, i, "py-spy timed out")
                )
        if spec.write_process:
            (folder / PROCESS_NAME).write_text(json.dumps(process_file(spec, host, times)))
        for name, content in spec.extra_files.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
    steps.extend(extra_steps)
    manifest = build_manifest(host, ranks, times, steps, complete=complete, interval_s=interval_s)
    (root / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1))
    return root


# --- Evidence -----------------------------------------------------------------------------
def thread(
    frames: Sequence[FrameSpec],
    *,
    name: str = "MainThread",
    tid: int | None = None,
    is_main: bool = True,
) -> ThreadStack:
    return ThreadStack(
        frames=tuple(Frame(f, file, line or None) for f, file, line in frames),
        os_thread_id=tid,
        name=name,
        is_main=is_main,
    )


def process(
    rank: int | None,
    frames: Sequence[FrameSpec] = ALLREDUCE_WAIT,
    *,
    pid: int | None = None,
    host: str = "node1",
    world_size: int | None = None,
    n_samples: int = 1,
) -> ProcessEvidence:
    """A rank whose main thread stayed in ``frames`` for ``n_samples`` samples."""
    pid = pid if pid is not None else 1000 + (rank or 0)
    samples = [
        StackSample(index=i, time=T0 + 5 * i, threads=(thread(frames, tid=pid),), source="test")
        for i in range(n_samples)
    ]
    return ProcessEvidence(
        rank=rank,
        host=host,
        pid=pid,
        world_size=world_size,
        stack_samples=samples,
        sources=["test"],
    )


def evidence(*processes: ProcessEvidence) -> Evidence:
    return Evidence(processes=list(processes))
