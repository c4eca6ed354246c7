"""Python-level waits inside one rank: threads blocked on locks, and a GIL that is never
released. Pure functions over the model, shared by HD101 and HD102.

A blocked ``lock.acquire()`` (``with lock:``) is a C call, so py-spy's default output
shows only the line of the ``with``. Three signs, strongest first, say a thread waits on
a lock rather than computing there:

* ``native``: py-spy --native shows ``PyThread_acquire_lock_timed`` (or the RLock,
  mutex or semaphore equivalent) under the frame; or the innermost native frames of a
  gdb/pstack/py-spy --native stack are a C mutex being taken: glibc's
  ``pthread_mutex_lock`` → ``__lll_lock_wait`` (nptl/pthread_mutex_lock.c,
  nptl/lowlevellock.c), libstdc++'s ``std::mutex::lock`` / ``__gthread_mutex_lock``
  over it (bits/std_mutex.h), glibc's internal ``__lll_lock_wait_private`` (malloc and
  stdio locks, the classic lock inherited locked through ``fork``). A mutex is held for
  a short critical section; a thread found inside ``__lll_lock_wait`` of a hung process
  waits for a holder that does not let go (pytorch issue 58239, train case
  pytorch-58239-future-mutex-gil-inversion: the main thread in ``std::mutex::lock`` of a
  Future while the thread that completes it wants the GIL). One such sample is weaker
  than a Python lock (``LockWait.c_mutex``): contention is caught in passing too;
* ``futex``: py-spy says the thread is idle, its innermost Python frame is user code
  that the catalog does not know, it never moved between samples, and the kernel shows
  it sleeping on a futex at every sample (Python locks are futexes);
* ``threading``: the innermost frame is threading/queue code (``Condition.wait``,
  ``Thread.join``, ``Queue.get``): a wait on another thread, though not always a lock.

A thread that waits for the GIL looks like the futex case, so lock waits are only
claimed when no thread holds the GIL throughout (that case is :func:`gil_holder`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from hangdoc.analyzer.model import Frame, ProcessEvidence, ProcState, ThreadStack, WaitKind
from hangdoc.analyzer.views.activity import classify_thread, frame_tag, is_user_frame
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.kernel import ThreadTrack, thread_tracks
from hangdoc.analyzer.views.signal_frames import SignalHandler, signal_handler
from hangdoc.analyzer.views.wait_frames import frames_wait

_LOCK_REPR = re.compile(r"(?i)\b(_thread\.)?(r?lock|condition|semaphore|boundedsemaphore)\b")
# Native frames of a thread taking a C mutex (see the module doc), matched on the
# function names gdb, pstack and py-spy --native print; only the innermost few count.
_C_MUTEX = re.compile(
    r"__lll_lock_wait|\bpthread_mutex_(?:timed)?lock\b|_pthread_mutex_(?:timed)?lock\b|"
    r"__pthread_mutex_lock_full|__gthread_mutex_lock|std::(?:__\w+::)?(?:recursive_|timed_)?mutex::lock|"
    r"std::unique_lock<[^>]*mutex>::lock|std::lock_guard<[^>]*mutex>::lock_guard"
)
_C_MUTEX_DEPTH = 6
_GPU_LIB = re.compile(r"(?i)libcuda|libcudart|libnccl|\bcu[A-Z]\w+|\bcuda[A-Z]\w+|\bnccl[A-Z]\w+")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


class LockWaitKind(enum.StrEnum):
    """How a thread is seen waiting for a lock."""

    NATIVE = "native"  # PyThread_acquire_lock (or a C mutex) in its native frames
    FUTEX = "futex"  # idle at the same line at every sample, sleeping on a futex
    THREADING = "threading"  # in threading/queue code


@dataclass(frozen=True, slots=True)
class LockWait:
    track: ThreadTrack
    kind: LockWaitKind
    frame: Frame | None  # where it waits: innermost user frame, else innermost Python frame
    lock_locals: tuple[tuple[str, str], ...]  # (name, repr) of lock-like locals in scope
    # The lock is a C mutex (pthread/std::mutex), not a Python lock: seen once, it may be
    # contention caught in passing.
    c_mutex: bool = False
    # The wait is inside a Python signal handler that runs on top of the frames it
    # interrupted (views/signal_frames.py): what they hold, the handler cannot take.
    handler: SignalHandler | None = None

    def where(self) -> str:
        return self.frame.label() if self.frame is not None else "an unknown frame"

    def lock_addresses(self) -> set[str]:
        return {m.group(0) for _, r in self.lock_locals for m in _ADDRESS.finditer(r)}


@dataclass(frozen=True, slots=True)
class GilHolder:
    holder: ThreadTrack
    starved: tuple[ThreadTrack, ...]  # idle threads that did not move (the main one first)
    spinning: bool  # the holder used CPU between samples (or ran at the last one)
    samples: int


def _lock_locals(track: ThreadTrack) -> tuple[tuple[str, str], ...]:
    latest = track.latest
    if latest is None:
        return ()
    found: list[tuple[str, str]] = []
    for frame in latest.frames:
        found.extend((name, rep) for name, rep in frame.locals if _LOCK_REPR.search(rep))
    return tuple(dict.fromkeys(found))


def _native_lock(track: ThreadTrack) -> bool:
    latest = track.latest
    if latest is None:
        return False
    activity = classify_thread(latest)
    return any(t is Activity.LOCK_WAIT and f.native for t, f in activity.tag_frames)


def c_mutex_frame(thread: ThreadStack) -> Frame | None:
    """The frame of a C mutex being taken among the thread's innermost native frames.

    Not when the mutex is taken inside the CUDA driver, runtime or NCCL (the callers just
    above it): their locks are held by a thread that waits for the GPU, so the wait
    says the GPU or a collective is stuck, not that two threads deadlocked."""
    for frame in thread.frames[:_C_MUTEX_DEPTH]:
        if not frame.native:
            return None  # a Python frame: the mutex, if any, is not where it waits
        if _C_MUTEX.search(frame.function):
            callers = thread.frames[: _C_MUTEX_DEPTH + 4]
            if any(_GPU_LIB.search(f"{f.file} {f.function}") for f in callers):
                return None
            return frame
    return None


def _at_exit(track: ThreadTrack) -> bool:
    """The thread is the interpreter's exit waiting for the non-daemon threads to end:
    CPython's ``threading._shutdown`` (called by ``Py_FinalizeEx``, and by
    ``multiprocessing``'s ``_bootstrap`` when a child's target returns) takes each live
    thread's ``_tstate_lock``, which that thread's own end releases. It is a join, not a
    lock another thread holds and waits beside: what hangs is a thread that never ends,
    and the stack alone does not say which, nor why."""
    inner = track.innermost_python()
    return (
        inner is not None
        and inner.short_file == "threading.py"
        and inner.function_leaf == "_shutdown"
    )


def lock_wait(track: ThreadTrack, *, samples: int) -> LockWait | None:
    """How ``track`` waits on a lock, if it does at every sample; see the module doc."""
    latest = track.latest
    if latest is None or len(track.stacks) < samples:
        return None
    if samples >= 2 and not track.unmoved():
        return None
    activity = classify_thread(latest)
    frame = track.user_frame() or track.innermost_python()
    if activity.collective is not None or _at_exit(track):
        return None
    if _native_lock(track):
        return LockWait(
            track, LockWaitKind.NATIVE, frame, _lock_locals(track), handler=_handler(latest)
        )
    if (mutex := c_mutex_frame(latest)) is not None:
        return LockWait(
            track, LockWaitKind.NATIVE, frame or mutex, _lock_locals(track), c_mutex=True
        )
    innermost = track.innermost_python()
    inner_tag = activity.tags[0] if activity.tags else None
    if inner_tag is Activity.LOCK_WAIT and innermost is not None and not innermost.native:
        return LockWait(track, LockWaitKind.THREADING, frame, _lock_locals(track))
    untagged_user = (
        innermost is not None and innermost is track.user_frame() and frame_tag(innermost) is None
    )
    futex = bool(track.states) and track.wait_kinds() == {"futex"}
    if untagged_user and futex and track.asleep() and samples >= 2:
        return LockWait(
            track, LockWaitKind.FUTEX, frame, _lock_locals(track), handler=_handler(latest)
        )
    return None


def _handler(thread: ThreadStack) -> SignalHandler | None:
    """The signal handler the main thread waits inside, if it does (CPython runs Python
    signal handlers on the main thread only)."""
    return signal_handler(thread.frames) if thread.is_main else None


def gil_holder(process: ProcessEvidence) -> GilHolder | None:
    """A thread (not the main one) that holds the GIL at every sample at the same Python
    stack, while the main thread sits idle and unmoved: the others starve."""
    samples = len(process.stack_series())
    if samples < 2:
        return None
    tracks = thread_tracks(process)
    holders = [
        t
        for t in tracks
        if len(t.stacks) == samples and t.always_owns_gil() and t.unmoved() and not t.is_main
    ]
    if not holders:
        return None
    holder = holders[0]
    starved = [
        t
        for t in tracks
        if t is not holder and len(t.stacks) == samples and t.asleep() and t.unmoved()
    ]
    if not any(t.is_main for t in starved):
        return None
    delta = holder.cpu_delta()
    spinning = (delta is not None and delta > 0) or (
        bool(holder.states) and holder.states[-1].state == ProcState.RUNNING
    )
    return GilHolder(holder, tuple(starved), spinning, samples)


def lock_waits(process: ProcessEvidence) -> list[LockWait]:
    """Threads of ``process`` waiting on locks at every sample (none if a GIL holder
    explains the waits)."""
    if gil_holder(process) is not None:
        return []
    samples = len(process.stack_series())
    waits = [lock_wait(t, samples=samples) for t in thread_tracks(process)]
    return [w for w in waits if w is not None]


# Appended for issue 21 (text agrees with live): what the frames of a pasted stack show of a
# lock between the rank's own threads, where no kernel and no second sample says more.
@dataclass(frozen=True, slots=True)
class SharedObjectWait:
    """The main thread and another thread of the rank, each stopped at its innermost frame
    in a method of one of the job's own classes."""

    main: Frame
    other: ThreadStack
    other_frame: Frame


def _owner(frame: Frame) -> str | None:
    """The class a method's qualified name says it belongs to (``MetricsLogger.log`` →
    ``MetricsLogger``); None for a module-level function or a closure."""
    owner, dot, _ = frame.function.rpartition(".")
    return owner if dot and owner and "<locals>" not in owner else None


def shared_object_wait(
    main: ThreadStack, threads: tuple[ThreadStack, ...]
) -> SharedObjectWait | None:
    """The main thread stopped at a line of its own code with no frame below it (a C call:
    py-spy's default output does not show ``lock.acquire``, a sleep or a read), and another
    thread of the same process stopped the same way in another method of the same object's
    class (same file). Two threads inside one object, neither in a library call, is the
    shape of contention on that object: both may wait on its lock. The frames cannot say
    whether they do (the kernel's futex, the lock's owner in --native frames would), but
    they do say that the main thread's own names (``MetricsLogger.log``) describe where it
    is, not what it is doing: a name-based reading must not be taken for it."""
    if not main.frames or not is_user_frame(main.frames[0]):
        return None
    owner = _owner(main.frames[0])
    if owner is None:
        return None
    for thread in threads:
        if thread is main or thread.is_main or not thread.frames:
            continue
        inner = thread.frames[0]
        if (
            is_user_frame(inner)
            and _owner(inner) == owner
            and inner.file == main.frames[0].file
            and inner.function != main.frames[0].function
        ):
            return SharedObjectWait(main.frames[0], thread, inner)
    return None


@dataclass(frozen=True, slots=True)
class HelperWait:
    """The main thread waiting on a threading or queue primitive, and the one other thread
    of the rank that py-spy shows idle at a line of the job's own code."""

    waits_in: Frame | None  # the primitive's frame (Condition.wait under Future.result)
    other: ThreadStack
    other_frame: Frame


def idle_helper_wait(main: ThreadStack, threads: tuple[ThreadStack, ...]) -> HelperWait | None:
    """The main thread waits on a threading or queue primitive (wait_frames: a futex; a
    Future's result, a join, an Event, a Queue's get) for another thread of the rank, and
    exactly one other thread is idle (py-spy's mark) at a line of the job's own code with
    no frame below it: a C call that py-spy's default output does not show (a socket's
    recv, a lock's acquire, a pipe's read). The main thread waits for that thread, and
    what that thread waits on is the kernel's to show (/proc), not its frames; the main
    thread's own names (``MetricsPublisher.log``) say where it waits, not what it does."""
    waits = frames_wait(main)
    if waits is None or waits[0] is not WaitKind.FUTEX:
        return None
    helpers = [
        t
        for t in threads
        if t is not main
        and not t.is_main
        and t.frames
        and t.active is False
        and is_user_frame(t.frames[0])
    ]
    if len(helpers) != 1:
        return None
    return HelperWait(waits[1], helpers[0], helpers[0].frames[0])
