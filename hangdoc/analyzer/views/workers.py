"""DataLoader worker subprocesses of a rank, joined from their stacks and /proc facts.

The collector dumps each rank's Python subprocesses with py-spy (``StackSample.children``)
and records their kernel state at every sample (``ProcSample.children``). A worker is
matched on its pid across both. What a worker is doing decides whether it blocks its
rank:

* ``idle`` — waiting in ``_worker_loop`` for the next index: healthy;
* ``blocked`` — inside the dataset's fetch (``__getitem__``/``__iter__``) at the same
  frame at every sample;
* ``uninterruptible`` — the kernel shows it in D state (stuck I/O);
* ``zombie``/``stopped``/``exited`` — dead but not reaped, stopped by a signal, or gone
  between samples;
* ``busy`` — inside fetch but moving, or seen once: not (yet) evidence of a hang.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from hangdoc.analyzer.model import (
    ChildProcess,
    Frame,
    OpenFile,
    ProcessEvidence,
    ProcState,
    ThreadStack,
)
from hangdoc.analyzer.views.activity import classify_thread, is_user_frame
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.kernel import wchan_kind


class WorkerStatus(enum.StrEnum):
    """What a worker process is doing, as its stacks and kernel state show it."""

    EXITED = "exited"  # gone before the last sample
    ZOMBIE = "zombie"
    STOPPED = "stopped"
    UNINTERRUPTIBLE = "uninterruptible"  # in D state at every sample
    BLOCKED = "blocked"  # in the dataset's code, not moving between samples
    BUSY = "busy"  # in the dataset's code, moving
    IDLE = "idle"  # waiting for an index
    UNKNOWN = "unknown"  # no stack


BLOCKING = (
    WorkerStatus.UNINTERRUPTIBLE,
    WorkerStatus.BLOCKED,
    WorkerStatus.ZOMBIE,
    WorkerStatus.STOPPED,
)
_WORKER_ID = re.compile(r"^\d+$")
_WAIT_WORDS = {
    "futex": "waiting on a lock",
    "filesystem": "waiting on file-system I/O",
    "pipe": "waiting on a pipe",
    "socket": "waiting on a socket",
}


@dataclass(frozen=True, slots=True)
class WorkerView:
    pid: int
    stacks: tuple[ThreadStack, ...]  # the worker's own main thread, per sample dumped
    facts: tuple[ChildProcess, ...]  # /proc view, per sample recorded
    last_seen_sample: int | None  # index of the last proc sample that listed it
    samples: int  # proc samples of the rank

    @property
    def latest_facts(self) -> ChildProcess | None:
        return self.facts[-1] if self.facts else None

    @property
    def is_dataloader(self) -> bool:
        return any(classify_thread(s).has(Activity.DATALOADER_WORKER) for s in self.stacks)

    def worker_id(self) -> str | None:
        for stack in self.stacks[-1:]:
            for frame in stack.frames:
                if frame.function_leaf == "_worker_loop":
                    value = dict(frame.locals).get("worker_id")
                    if value is not None and _WORKER_ID.match(value):
                        return value
        return None

    def in_fetch(self) -> bool:
        """Inside the dataset's code (fetch/__getitem__), not waiting for an index."""
        if not self.stacks:
            return False
        activity = classify_thread(self.stacks[-1])
        return activity.has(Activity.DATALOADER_FETCH) or activity.user_frame is not None

    def frame(self) -> Frame | None:
        """Where it is: the innermost user frame, else the innermost Python frame."""
        if not self.stacks:
            return None
        frames = self.stacks[-1].frames
        return next((f for f in frames if is_user_frame(f)), None) or next(
            (f for f in frames if not f.native), None
        )

    def status(self) -> WorkerStatus:
        facts = self.latest_facts
        seen = self.last_seen_sample
        if self.samples >= 2 and seen is not None and seen < self.samples - 1:
            return WorkerStatus.EXITED
        if facts is not None:
            if facts.state in (ProcState.ZOMBIE, ProcState.DEAD, ProcState.DEAD_OLD):
                return WorkerStatus.ZOMBIE
            if facts.state in (ProcState.STOPPED, ProcState.TRACED):
                return WorkerStatus.STOPPED
            if all(f.state == ProcState.DISK_SLEEP or f.threads_in_d for f in self.facts):
                return WorkerStatus.UNINTERRUPTIBLE
        if self.in_fetch():
            moved = len({s.signature() for s in self.stacks}) > 1
            blocked = len(self.stacks) >= 2 and not moved
            return WorkerStatus.BLOCKED if blocked else WorkerStatus.BUSY
        return WorkerStatus.IDLE if self.stacks else WorkerStatus.UNKNOWN

    def kernel_text(self) -> str:
        facts = self.latest_facts
        if facts is None:
            return ""
        text = f"state {facts.state or '?'}"
        if facts.wchan:
            text += f" in {facts.wchan}"
            kind = wchan_kind(facts.wchan)
            if kind in _WAIT_WORDS:
                text += f", {_WAIT_WORDS[kind]}"
        return text

    def files_read(self) -> list[OpenFile]:
        facts = self.latest_facts
        if facts is None:
            return []
        return [f for f in facts.files if f.fd > 2]

    def describe(self) -> str:
        """'worker 0 (pid 23556)'."""
        wid = self.worker_id()
        return f"worker {wid} (pid {self.pid})" if wid is not None else f"worker pid {self.pid}"


def _worker_thread(threads: tuple[ThreadStack, ...]) -> ThreadStack | None:
    for thread in threads:
        if classify_thread(thread).has(Activity.DATALOADER_WORKER):
            return thread
    return next((t for t in threads if t.is_main), threads[0] if threads else None)


def workers_of(process: ProcessEvidence) -> list[WorkerView]:
    """Every subprocess seen in the rank's stacks or /proc facts, by pid."""
    stacks: dict[int, list[ThreadStack]] = {}
    for sample in process.stack_series():
        for child in sample.children:
            thread = _worker_thread(child.threads)
            if thread is not None:
                stacks.setdefault(child.pid, []).append(thread)
    facts: dict[int, list[ChildProcess]] = {}
    last_seen: dict[int, int] = {}
    for position, proc_sample in enumerate(process.proc_samples):
        for fact in proc_sample.children:
            facts.setdefault(fact.pid, []).append(fact)
            last_seen[fact.pid] = position
    samples = len(process.proc_samples)
    pids = sorted(set(stacks) | set(facts))
    return [
        WorkerView(
            pid=pid,
            stacks=tuple(stacks.get(pid, ())),
            facts=tuple(facts.get(pid, ())),
            last_seen_sample=last_seen.get(pid),
            samples=samples,
        )
        for pid in pids
    ]


def dataloader_workers(process: ProcessEvidence) -> list[WorkerView]:
    """Subprocesses that are DataLoader workers (a ``_worker_loop`` frame), plus those
    without stacks when the rank has no other kind of child to confuse them with."""
    views = workers_of(process)
    known = [w for w in views if w.is_dataloader]
    unknown = [w for w in views if not w.stacks]
    others = [w for w in views if w.stacks and not w.is_dataloader]
    return known + (unknown if not others else [])


def blocking_workers(process: ProcessEvidence) -> list[WorkerView]:
    """The workers that keep the rank waiting, most telling first."""
    order = {status: i for i, status in enumerate(BLOCKING)}
    found = [w for w in dataloader_workers(process) if w.status() in order]
    return sorted(found, key=lambda w: (order[w.status()], w.pid))


# The DataLoader's pin-memory thread receiving a batch a worker shared through a file
# descriptor (parsers/stacks/pin_memory.py says why; a test holds the two the same):
# (file suffix, function leaf names).
PIN_MEMORY_LOOP = ("torch/utils/data/_utils/pin_memory.py", frozenset({"_pin_memory_loop"}))
SHARED_RECEIPT = (
    "torch/multiprocessing/reductions.py",
    frozenset({"rebuild_storage_fd", "rebuild_storage_filename"}),
)


# The main process's own receipt of a worker's batch (parsers/stacks/pin_memory.py says
# why; the same test holds these the same): the DataLoader iterator's ``_try_get_data``,
# and the resource sharer's request for a shared storage's descriptor inside it.
MAIN_RECEIPT = ("torch/utils/data/dataloader.py", frozenset({"_try_get_data"}))
SHARER_REQUEST = ("multiprocessing/resource_sharer.py", frozenset({"detach", "get_connection"}))


def receives_worker_batch(thread: ThreadStack) -> bool:
    """The thread (frames innermost first) is the DataLoader iterator in the main process
    receiving a batch a worker shared, its innermost frame the storage's rebuild or the
    descriptor's request: ``_try_get_data`` re-raises what fails there after checking for
    a dead worker and for the descriptors running out (torch/utils/data/dataloader.py), so
    a failure there is the DataLoader's worker-to-main transport."""
    if not thread.frames or not any(_frame_is(f, MAIN_RECEIPT) for f in thread.frames):
        return False
    leaf = thread.frames[0]
    return _frame_is(leaf, SHARED_RECEIPT) or _frame_is(leaf, SHARER_REQUEST)


def _frame_is(frame: Frame, where: tuple[str, frozenset[str]]) -> bool:
    if frame.native:
        return False
    path = frame.file.replace("\\", "/")
    suffix, functions = where
    return frame.function_leaf in functions and (path == suffix or path.endswith("/" + suffix))


@dataclass(frozen=True, slots=True)
class PinMemoryFailure:
    """A traceback of the pin-memory thread that failed to receive a shared batch."""

    process: ProcessEvidence
    thread: ThreadStack
    source: str
    line: int | None


def pin_memory_receipt_failures(processes: list[ProcessEvidence]) -> list[PinMemoryFailure]:
    """The tracebacks (read from text: a thread's uncaught exception, "Exception in thread
    …") of a rank's DataLoader pin-memory thread that raised receiving a batch a worker had
    shared: the worker that held its descriptor was gone (parsers/stacks/pin_memory.py)."""
    found: list[PinMemoryFailure] = []
    for process in processes:
        for text in process.text_stacks:
            for thread in text.threads:
                if thread.is_main:
                    continue
                if any(_frame_is(f, PIN_MEMORY_LOOP) for f in thread.frames) and any(
                    _frame_is(f, SHARED_RECEIPT) for f in thread.frames
                ):
                    found.append(PinMemoryFailure(process, thread, text.source, text.line))
    return found
