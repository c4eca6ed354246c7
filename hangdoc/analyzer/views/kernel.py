"""A rank's threads followed across samples, with the kernel's view of each.

py-spy says where a thread is in Python and whether it is idle or holds the GIL; /proc
says how the kernel sees the same thread (``D`` uninterruptible, a ``futex`` wait, CPU
time spent). They meet on the OS thread id (py-spy's ``os_thread_id`` is /proc's
``tid``). Rules about locks, the GIL and I/O read both through :class:`ThreadTrack`, so
"stuck" always means the same thing: the same Python stack at every sample and, where
/proc was read, the same kind of kernel wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Frame, ProcessEvidence, ProcState, ThreadStack, ThreadState
from hangdoc.analyzer.views.activity import is_user_frame
from hangdoc.analyzer.views.catalog import WCHAN_KINDS


def wchan_kind(wchan: str | None) -> str | None:
    """What a kernel wait channel waits for: filesystem, futex, pipe, socket, poll..."""
    if not wchan:
        return None
    lowered = wchan.lower()
    for kind, pattern in WCHAN_KINDS:
        if pattern.match(lowered):
            return kind
    return None


# CPU ticks (10 ms) a sleeping thread may still use between samples: waking up to check a
# timeout or to ask for the GIL costs a little.
MAX_SLEEPING_TICKS = 2


@dataclass(frozen=True, slots=True)
class ThreadTrack:
    """One thread of one process, at every sample it was seen in."""

    tid: int | None
    name: str | None
    is_main: bool
    stacks: tuple[ThreadStack, ...]  # py-spy view, one per stack sample it appears in
    states: tuple[ThreadState, ...]  # /proc view, one per proc sample it appears in

    @property
    def latest(self) -> ThreadStack | None:
        return self.stacks[-1] if self.stacks else None

    @property
    def label(self) -> str:
        name = self.name or "thread"
        return f'"{name}"' + (f" ({self.tid})" if self.tid is not None else "")

    def unmoved(self) -> bool:
        """Seen at two or more samples, always at the same Python call path."""
        return len(self.stacks) >= 2 and len({s.signature() for s in self.stacks}) == 1

    def always_idle(self) -> bool:
        return bool(self.stacks) and all(s.active is False for s in self.stacks)

    def asleep(self) -> bool:
        """Not running: py-spy called it idle at every sample, or it used next to no CPU
        time between the first and last sample. py-spy's idle flag is a heuristic, and the
        state letter is a snapshot: a thread waiting for the GIL wakes every 5 ms to ask
        for it, so it can read as active, or as running (R), and still never run."""
        if self.always_idle():
            return True
        delta = self.cpu_delta()
        return delta is not None and delta <= MAX_SLEEPING_TICKS

    def always_owns_gil(self) -> bool:
        return bool(self.stacks) and all(s.owns_gil is True for s in self.stacks)

    def kernel_states(self) -> set[ProcState]:
        return {s.state for s in self.states if s.state}

    def wchans(self) -> list[str]:
        return [s.wchan for s in self.states if s.wchan]

    def always_in(self, state: ProcState) -> bool:
        return bool(self.states) and all(s.state == state for s in self.states)

    def wait_kinds(self) -> set[str | None]:
        return {wchan_kind(s.wchan) for s in self.states}

    def cpu_delta(self) -> int | None:
        ticks = [s.cpu_ticks for s in self.states if s.cpu_ticks is not None]
        return ticks[-1] - ticks[0] if len(ticks) >= 2 else None

    def user_frame(self) -> Frame | None:
        latest = self.latest
        if latest is None:
            return None
        return next((f for f in latest.frames if is_user_frame(f)), None)

    def innermost_python(self) -> Frame | None:
        latest = self.latest
        if latest is None:
            return None
        return next((f for f in latest.frames if not f.native), None)


def thread_tracks(process: ProcessEvidence) -> list[ThreadTrack]:
    """Every thread of ``process``: its stacks and /proc states joined on the thread id.

    The stacks are the live samples, or where none was taken the text stacks
    (``ProcessEvidence.stack_series``): a thread is never followed from a live sample
    into text. Threads of text dumps without a thread id are keyed by name. /proc-only
    threads (C++ threads with no Python frame) are included with no stacks.
    """
    stacks: dict[object, list[ThreadStack]] = {}
    meta: dict[object, tuple[int | None, str | None, bool]] = {}
    for sample in process.stack_series():
        for thread in sample.threads:
            key: object = thread.os_thread_id if thread.os_thread_id is not None else thread.name
            stacks.setdefault(key, []).append(thread)
            old = meta.get(key)
            meta[key] = (thread.os_thread_id, thread.name, thread.is_main or bool(old and old[2]))
    states: dict[int, list[ThreadState]] = {}
    for proc_sample in process.proc_samples:
        for state in proc_sample.threads:
            states.setdefault(state.tid, []).append(state)
    tracks = [
        ThreadTrack(
            tid=tid,
            name=name,
            is_main=is_main or (tid is not None and tid == process.pid),
            stacks=tuple(stacks[key]),
            states=tuple(states.get(tid, ())) if tid is not None else (),
        )
        for key, (tid, name, is_main) in meta.items()
    ]
    seen = {t.tid for t in tracks}
    for tid, thread_states in states.items():
        if tid not in seen:
            name = thread_states[-1].name
            tracks.append(ThreadTrack(tid, name, tid == process.pid, (), tuple(thread_states)))
    return sorted(tracks, key=lambda t: (not t.is_main, t.tid or 0, t.name or ""))


def stuck_threads(process: ProcessEvidence, state: ProcState) -> list[ThreadTrack]:
    """Threads the kernel showed in ``state`` (e.g. ``D``) at every /proc sample."""
    return [t for t in thread_tracks(process) if t.always_in(state)]
