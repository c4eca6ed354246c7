"""Builders for the stacks-and-node rule tests (HD1xx, HD35x): threads with py-spy flags,
/proc thread states, open files, subprocesses, GPU rows. Frame shapes are those py-spy 0.4
prints for torch 2.13 on Python 3.11, as in the recorded dumps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hangdoc.analyzer.model import (
    ChildProcess,
    ChildStacks,
    Evidence,
    Frame,
    IoCounters,
    LogEvent,
    OpenFile,
    OutputSizes,
    ProcessEvidence,
    ProcSample,
    ProcState,
    StackSample,
    ThreadStack,
    ThreadState,
)

from . import stacks as S

SITE = S.SITE
THREADING = "/usr/lib/python3.11/threading.py"
DATALOADER = f"{SITE}/torch/utils/data/dataloader.py"
WORKER = f"{SITE}/torch/utils/data/_utils/worker.py"
FETCH = f"{SITE}/torch/utils/data/_utils/fetch.py"
QUEUES = "/usr/lib/python3.11/multiprocessing/queues.py"
AUTOGRAD = f"{SITE}/torch/autograd/graph.py"


def f(name: str, file: str = S.TRAIN, line: int = 10, **locals_: str) -> Frame:
    return Frame(name, file, line, locals=tuple(locals_.items()))


@dataclass
class T:
    """One thread at one sample: frames innermost first, py-spy flags, kernel state."""

    frames: Sequence[Frame]
    tid: int
    name: str = "MainThread"
    active: bool | None = False
    gil: bool | None = False
    state: str | None = "S"
    wchan: str | None = "futex_do_wait"
    cpu: int = 0


@dataclass
class Sample:
    threads: list[T]
    files: list[OpenFile] = field(default_factory=list)
    children: list[ChildProcess] = field(default_factory=list)
    child_stacks: list[tuple[int, list[T]]] = field(default_factory=list)


def rank(r: int, *samples: Sample, world: int = 4, pid: int | None = None) -> ProcessEvidence:
    """A rank whose main thread has os_thread_id == pid; one StackSample and one ProcSample
    per Sample, 3 s apart."""
    pid = pid if pid is not None else 1000 + r
    stack_samples: list[StackSample] = []
    proc_samples: list[ProcSample] = []
    for i, sample in enumerate(samples):
        source = f"rank{r}/pyspy.{i}.json"
        stack_samples.append(
            StackSample(
                index=i,
                time=100.0 + 3 * i,
                threads=tuple(_thread(t, pid, source) for t in sample.threads),
                children=tuple(
                    ChildStacks(pid=cpid, threads=tuple(_thread(t, cpid, source) for t in ts))
                    for cpid, ts in sample.child_stacks
                ),
                source=source,
            )
        )
        proc_samples.append(
            ProcSample(
                index=i,
                time=100.0 + 3 * i,
                state=ProcState(sample.threads[0].state if sample.threads else "S"),
                threads=tuple(
                    ThreadState(
                        tid=t.tid,
                        name=t.name,
                        state=ProcState(t.state) if t.state else None,
                        wchan=t.wchan,
                        cpu_ticks=t.cpu,
                    )
                    for t in sample.threads
                ),
                io=IoCounters(rchar=0, wchar=0, syscr=0, syscw=0),
                output_sizes=OutputSizes(stdout=0),
                open_files=tuple(sample.files),
                children=tuple(sample.children),
            )
        )
    return ProcessEvidence(
        rank=r,
        host="node1",
        pid=pid,
        local_rank=r,
        world_size=world,
        local_world_size=world,
        stack_samples=stack_samples,
        proc_samples=proc_samples,
        sources=[f"rank{r}/process.json"],
    )


def _thread(t: T, pid: int, source: str) -> ThreadStack:
    return ThreadStack(
        frames=tuple(t.frames),
        os_thread_id=t.tid,
        name=t.name,
        active=t.active,
        owns_gil=t.gil,
        is_main=t.tid == pid,
        source=source,
    )


def waiting(r: int, frames: Sequence[Frame], samples: int = 2, world: int = 4) -> ProcessEvidence:
    """A rank blocked in a collective at every sample (its main thread only)."""
    pid = 1000 + r
    return rank(r, *(Sample([T(frames, pid)]) for _ in range(samples)), world=world)


def evidence(*procs: ProcessEvidence, events: Sequence[LogEvent] = ()) -> Evidence:
    return Evidence(processes=list(procs), job_log_events=list(events))


def victims(n: int = 3, frames: Sequence[Frame] = tuple(S.IN_ALL_REDUCE)) -> list[ProcessEvidence]:
    return [waiting(r, frames) for r in range(n)]
