"""What each rank's blocked main thread waits on, by mechanism, whatever its code is called.

Where /proc was read (``hangdoc collect``; collectors/waits.py), the kernel says it: the
system call the thread sleeps in, the file, pipe, socket, futex or child it waits on, and
who is at the other end — a file lock's holder, a pipe's other end, a local socket's
peer, the child waited for. Here each such process is placed against the job: one of its
ranks, a process of a rank (a descendant: a DataLoader worker, a helper it started), or
outside the job, and then whether it started before the job did (a leftover of an
earlier run). A holder that waits on the waiting rank in turn closes a cycle.

"Blocked" means the same wait at every /proc sample (the same kind, target and peers)
and, with two or more stack samples, the same Python call path: a wait caught in passing
changes between samples. The wait is joined with the innermost frame of the thread and
the innermost frame of the job's own code (where the job called it).

Where no /proc sample exists (a paste, a log's stacks), the innermost frames say the
kind (views/wait_frames.py): a file lock's acquire, a socket call, a subprocess wait, a
select, a lock, "Waiting for the GIL"; no holder is known then.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from hangdoc.analyzer.model import (
    Evidence,
    Frame,
    KernelWait,
    PeerRole,
    PeerWait,
    ProcessEvidence,
    ProcState,
    TextStack,
    WaitKind,
    WaitPeer,
)
from hangdoc.analyzer.views.kernel import ThreadTrack, thread_tracks
from hangdoc.analyzer.views.wait_frames import frames_wait, polls_a_lock_file

# A holder that started this long before the job's first rank predates the job.
BEFORE_JOB_S = 1.0


class WaitSource(enum.StrEnum):
    KERNEL = "kernel"  # /proc at every sample
    FRAMES = "frames"  # the innermost frames only


@dataclass(frozen=True, slots=True)
class Holder:
    """A process at the other end of a rank's wait, placed against the job."""

    pid: int
    role: PeerRole
    name: str | None
    command: str | None
    state: ProcState | None
    rank: int | None  # the rank it is, or whose process (a descendant) it is
    in_job: bool
    before_job_s: float | None  # how long before the job's first rank it started
    waits_back: bool  # it waits in turn on the waiting rank: a cycle
    lock: str | None
    wait: PeerWait | None

    def label(self) -> str:
        """ "pid 812 (python prep_cache.py --shard 3)"."""
        what = self.command or self.name
        return f"pid {self.pid}" + (f" ({what})" if what else "")


@dataclass(frozen=True, slots=True)
class ThreadWait:
    rank: int | None
    track: ThreadTrack
    kind: WaitKind
    source: WaitSource
    syscall: str | None
    target: str | None
    holders: tuple[Holder, ...]
    frame: Frame | None  # the innermost frame it waits in
    caller: Frame | None  # the innermost frame of the job's own code

    def outside(self) -> tuple[Holder, ...]:
        """Holders that are no process of the job."""
        return tuple(h for h in self.holders if not h.in_job)

    def other_ranks(self) -> tuple[Holder, ...]:
        """Holders that are (processes of) other ranks of the job."""
        return tuple(h for h in self.holders if h.rank is not None and h.rank != self.rank)

    def cycle(self) -> tuple[Holder, ...]:
        """Holders of the rank's own family that wait on it in turn."""
        return tuple(h for h in self.holders if h.waits_back and h.rank == self.rank)

    def on_held_lock(self) -> bool:
        """The kernel shows it blocked on a file lock that another process holds: one
        outside the job, or another rank (HD111's; a lock its own process holds is not)."""
        if self.source is not WaitSource.KERNEL or self.kind is not WaitKind.LOCK_FILE:
            return False
        return bool(self.outside() or self.other_ranks())

    def where(self) -> str:
        """ "in flock on /srv/cache.lock, at prepare_cache (train.py:88)"."""
        text = f"in {self.syscall}" if self.syscall else "waiting"
        if self.target:
            text += f" on {self.target}"
        frames = [f.label() for f in (self.caller, self.frame) if f is not None]
        if frames:
            text += ", at " + " → ".join(dict.fromkeys(frames))
        return text


@dataclass(frozen=True, slots=True)
class _Job:
    ranks: Mapping[tuple[str | None, int], int]  # (host, pid) → rank, with descendants
    first_start: Mapping[str | None, float]  # the earliest start of a rank, per host

    def rank_of(self, host: str | None, peer: WaitPeer) -> int | None:
        for pid in (peer.pid, *peer.ancestors):
            if (rank := self.ranks.get((host, pid))) is not None:
                return rank
        return None


def _job(evidence: Evidence) -> _Job:
    ranks: dict[tuple[str | None, int], int] = {}
    first: dict[str | None, float] = {}
    for proc in evidence.processes:
        if proc.rank is None or proc.pid is None:
            continue
        ranks[(proc.host, proc.pid)] = proc.rank
        for sample in proc.proc_samples:
            for child in sample.children:
                ranks.setdefault((proc.host, child.pid), proc.rank)
        if proc.start_time is not None:
            first[proc.host] = min(first.get(proc.host, proc.start_time), proc.start_time)
    return _Job(ranks, first)


class JobWaits:
    """The waits of the job's processes, each placed against the whole job; computed per
    process on first use (``RuleContext.waits``)."""

    def __init__(self, evidence: Evidence) -> None:
        self._evidence = evidence
        self._job = _job(evidence)
        self._cache: dict[int, tuple[ProcessEvidence, ThreadWait | None]] = {}

    @classmethod
    def alone(cls, process: ProcessEvidence) -> JobWaits:
        """The waits of one process, with no job around it (a holder is then placed
        against that process only)."""
        return cls(Evidence(processes=[process]))

    def of(self, process: ProcessEvidence) -> ThreadWait | None:
        """What the main thread of ``process`` is blocked in, if it is."""
        hit = self._cache.get(id(process))
        if hit is not None and hit[0] is process:
            return hit[1]
        wait = main_wait(process, self._job)
        self._cache[id(process)] = (process, wait)
        return wait

    def on_held_lock(self, process: ProcessEvidence) -> bool:
        """Whether ``process`` is blocked on a file lock another process holds."""
        return (
            _has_lock_wait(process)
            and (wait := self.of(process)) is not None
            and (wait.on_held_lock())
        )

    def on_held_locks(self) -> dict[int, ThreadWait]:
        """Ranks blocked on a file lock another process holds (HD111's). Only processes
        with a lock wait on record are followed (a 16k-rank job has few or none)."""
        out: dict[int, ThreadWait] = {}
        for proc in self._evidence.processes:
            if proc.rank is None or proc.rank in out or not _has_lock_wait(proc):
                continue
            wait = self.of(proc)
            if wait is not None and wait.on_held_lock():
                out[proc.rank] = wait
        return out

    def by_rank(self) -> dict[int, ThreadWait]:
        """The blocked main thread of each rank (the first process of a rank)."""
        out: dict[int, ThreadWait] = {}
        for proc in self._evidence.processes:
            if proc.rank is not None and proc.rank not in out:
                wait = self.of(proc)
                if wait is not None:
                    out[proc.rank] = wait
        return out


def _has_lock_wait(process: ProcessEvidence) -> bool:
    return any(
        t.wait is not None and t.wait.kind is WaitKind.LOCK_FILE
        for sample in process.proc_samples
        for t in sample.threads
    )


def main_wait(process: ProcessEvidence, job: _Job | None = None) -> ThreadWait | None:
    """What the main thread of ``process`` is blocked in, if it is; see the module doc."""
    main = next((t for t in thread_tracks(process) if t.is_main), None)
    if main is None:
        return None
    if main.states:
        return _kernel_wait(process, main, job or _Job({}, {}))
    latest = process.latest_stacks()
    if main.latest is None or latest is None:
        return None
    kinds = latest.kinds if isinstance(latest, TextStack) else ()
    said = frames_wait(main.latest, kinds)
    if said is None:
        return None
    kind, frame, target = said
    return ThreadWait(
        process.rank, main, kind, WaitSource.FRAMES, None, target, (), frame, main.user_frame()
    )


def _kernel_wait(process: ProcessEvidence, main: ThreadTrack, job: _Job) -> ThreadWait | None:
    waits = [s.wait for s in main.states]
    if not waits or any(w is None for w in waits):
        return None
    keys = {_key(w) for w in waits if w is not None}
    if len(keys) != 1:
        return None  # it moved on between samples
    samples = len(process.stack_samples)
    if samples >= 2 and not main.unmoved():
        return None
    latest = waits[-1]
    assert latest is not None
    holders = tuple(_holder(process, peer, job) for peer in latest.peers)
    target = latest.target
    if target is None and latest.watched:
        target = ", ".join(t for _, t in latest.watched)
    frame = main.innermost_python()
    kind = latest.kind
    if kind is WaitKind.SLEEP and polls_a_lock_file(frame):
        # A lock-file wait that sleeps between tries: the kernel sees only the sleep (and
        # /proc/locks no waiter); the frame says what for. The file is named where the
        # rank holds it open (filelock opens it to try flock; FileBaton does not).
        kind, target = WaitKind.LOCK_FILE, open_lock_file(process)
    return ThreadWait(
        process.rank, main, kind, WaitSource.KERNEL, latest.syscall, target, holders,
        frame, main.user_frame(),
    )  # fmt: skip


# How lock files are named: "lock" (torch's extension builds), "*.lock" (filelock's,
# huggingface_hub's), "*.lck", "*.lk".
_LOCK_NAMES = ("lock",)
_LOCK_SUFFIXES = (".lock", ".lck", ".lk")


def open_lock_file(process: ProcessEvidence) -> str | None:
    """A lock file the process holds open at its last sample, by its name."""
    for sample in reversed(process.proc_samples):
        for file in sample.open_files:
            name = file.path.rsplit("/", 1)[-1].lower()
            if name in _LOCK_NAMES or name.endswith(_LOCK_SUFFIXES):
                return file.path
        if sample.open_files:
            return None
    return None


def _key(wait: KernelWait) -> tuple[object, ...]:
    return (wait.kind, wait.syscall, wait.target, wait.watched, tuple(p.pid for p in wait.peers))


def _holder(process: ProcessEvidence, peer: WaitPeer, job: _Job) -> Holder:
    host = process.host
    rank = job.rank_of(host, peer)
    if rank is None and peer.pid == process.pid:
        rank = process.rank
    in_job = rank is not None or peer.pid == process.pid
    first = job.first_start.get(host)
    before = None
    if first is not None and peer.start_time is not None:
        before = first - peer.start_time
    own = {process.pid} | {
        p for (h, p), r in job.ranks.items() if h == host and r == process.rank is not None
    }
    back = peer.wait is not None and any(p in own for p in peer.wait.peer_pids)
    return Holder(
        peer.pid, peer.role, peer.name, peer.command, peer.state, rank, in_job,
        before, back, peer.lock, peer.wait,
    )  # fmt: skip


_JOINTS = {
    PeerRole.HOLDER: "held by",
    PeerRole.OTHER_END: "other end",
    PeerRole.PEER: "peer",
    PeerRole.CHILD: "for",
}


def kernel_wait_text(wait: KernelWait) -> str:
    """One thread's wait in words, for the report's thread table: "flock on /srv/x.lock,
    held by pid 812 (python prep.py)"."""
    text = wait.syscall + (f" on {wait.target}" if wait.target else "")
    if wait.watched and not wait.target:
        text += " on " + ", ".join(t for _, t in wait.watched[:4])
    for peer in wait.peers[:2]:
        what = peer.command or peer.name
        text += f", {_JOINTS[peer.role]} pid {peer.pid}" + (f" ({what})" if what else "")
    return text
