"""Did a rank make progress between the first and the last sample?

Two stacks a few seconds apart can look the same in a job that is merely slow, and a
hung rank can still show a chattering background thread, so several signals are
weighed (pure functions over the model):

* **stack moved** (strong): the main thread's Python call path differs between the first
  and the last live sample: the same thread (matched on its OS thread id), never a live
  sample against a stack read from text. A text has no time and a traceback in a log
  is where a thread raised, maybe long before the hang, so text never shows movement
  (model.py's docstring: live samples and text).
* **output grew** (strong): the file behind stdout/stderr grew.
* **I/O moved** (moderate): read/write syscall counters of the process advanced *and*
  the main thread itself ran (CPU time or voluntary context switches): a metrics or
  logging thread alone can move the counters of a rank that is stuck. It does not count
  when the main thread sat in the same known wait (a collective, a rendezvous, a lock)
  at every sample: waits poll (TCPStore, blocking-wait loops), a stuck one too.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import (
    ProcessEvidence,
    ProcSample,
    StackSample,
    ThreadStack,
    ThreadState,
    WaitKind,
)
from hangdoc.analyzer.views.activity import classify_thread
from hangdoc.analyzer.views.activity_table import Activity

_WAITS = frozenset({
    Activity.COLLECTIVE, Activity.RENDEZVOUS, Activity.LOCK_WAIT, Activity.WORKER_RESULT,
})  # fmt: skip
# Kernel waits that block until another process acts (issue 21): a thread found in the
# same one at every sample waits in place (a terminal: until someone types). Not a file
# (storage may be moving), a sleep (a polling loop) or a call this version does not know.
_BLOCKING_WAITS = frozenset({
    WaitKind.LOCK_FILE, WaitKind.PIPE, WaitKind.SOCKET, WaitKind.CHILD, WaitKind.FUTEX,
    WaitKind.POLL, WaitKind.TERMINAL,
})  # fmt: skip


def _same_thread(sample: StackSample, like: ThreadStack) -> ThreadStack | None:
    """``like``'s thread in ``sample``: by OS thread id (or pthread id), or, for threads
    that carry neither, the thread py-spy marked main in both."""
    if like.os_thread_id is not None or like.thread_id is not None:
        return sample.thread(like)
    if not like.is_main:
        return None
    return next((t for t in sample.threads if t.is_main), None)


def _main_thread_path(stacks: list[StackSample]) -> list[ThreadStack] | None:
    """The main thread at each live sample, the same thread throughout; None when a
    sample has no main thread or lost it."""
    first = stacks[0].main_thread() if stacks else None
    if first is None:
        return None
    path = [first]
    for sample in stacks[1:]:
        same = _same_thread(sample, first)
        if same is None:
            return None
        path.append(same)
    return path


# The standard library's cheap checks a polling loop calls between its sleeps
# (CPython Lib/genericpath.py, Lib/posixpath.py, Lib/pathlib): ``while os.path.exists(lock):
# time.sleep(s)`` is sampled either asleep on the loop's line (time.sleep has no Python
# frame) or inside one of these, a line above.
_POLL_CHECKS = frozenset({
    ("genericpath.py", "exists"), ("genericpath.py", "isfile"), ("genericpath.py", "isdir"),
    ("genericpath.py", "getmtime"), ("genericpath.py", "getsize"), ("posixpath.py", "lexists"),
    ("posixpath.py", "exists"), ("ntpath.py", "exists"), ("ntpath.py", "isfile"),
    ("__init__.py", "exists"), ("__init__.py", "is_file"), ("__init__.py", "stat"),
    ("_local.py", "exists"), ("_local.py", "is_file"), ("_local.py", "stat"),
    ("pathlib.py", "exists"), ("pathlib.py", "is_file"), ("pathlib.py", "stat"),
})  # fmt: skip


def _polling_at(thread: ThreadStack) -> tuple[bool, tuple[str, str], tuple[object, ...]] | None:
    """Where a thread polls: whether it is inside the check, its function (file and name,
    not the line) and its callers' path, when it is asleep in that function or inside a
    stdlib existence check it calls; else None (a thread running its own code)."""
    frames = thread.python_frames()
    inner = 0
    while (
        inner < len(frames)
        and (frames[inner].short_file, frames[inner].function_leaf) in _POLL_CHECKS
    ):
        inner += 1
    if inner == len(frames) or (inner == 0 and thread.active is not False):
        return None
    loop = frames[inner]
    callers = tuple((f.function, f.file, f.line) for f in frames[inner + 1 :])
    return inner > 0, (loop.file, loop.function), callers


def _same_path(a: ThreadStack, b: ThreadStack) -> bool:
    """Equal call paths (``signature``); one frames tuple is one path, without building
    the two (a node summary's threads of one shape share theirs: every rank's samples).
    A polling loop sampled once asleep and once in its check is one place too: the
    samples catch the loop's two lines, and the thread has not moved (CI: a file lock's
    waiter read as moving)."""
    if a.frames is b.frames or a.signature() == b.signature():
        return True
    first, last = _polling_at(a), _polling_at(b)
    if first is None or last is None or not (first[0] or last[0]):
        return False  # asleep on two lines of one function: two waits, it moved
    return first[1:] == last[1:]


def _same_known_wait(stacks: list[StackSample]) -> bool:
    mains = _main_thread_path(stacks)
    if mains is None or len(mains) < 2:
        return False
    if not all(_same_path(mains[0], m) for m in mains[1:]):
        return False
    return any(tag in _WAITS for tag in classify_thread(mains[0]).tags)


def _same_kernel_wait(procs: list[ProcSample], pid: int | None) -> bool:
    """The main thread asleep in the same system call on the same target at every /proc
    sample (collectors/waits.py). A blocked read that py-spy's pause interrupts restarts:
    the I/O counters count one more call, and nothing moved."""
    waits = [t.wait for p in procs if (t := _main_thread_state(p, pid)) is not None]
    if len(waits) < 2 or len(waits) < len(procs):
        return False
    keys = {(w.kind, w.syscall, w.target, w.watched) if w is not None else None for w in waits}
    first = waits[0]
    return len(keys) == 1 and first is not None and first.kind in _BLOCKING_WAITS


@dataclass(frozen=True, slots=True)
class RankProgress:
    rank: int | None
    samples: int
    span_s: float | None  # seconds between first and last sample
    stack_moved: bool
    output_grew: bool
    io_moved: bool
    main_thread_ran: bool
    reasons: tuple[str, ...]

    @property
    def comparable(self) -> bool:
        return self.samples >= 2

    waiting_in_place: bool = False

    @property
    def progressed(self) -> bool:
        io_counts = self.io_moved and self.main_thread_ran and not self.waiting_in_place
        return self.stack_moved or self.output_grew or io_counts

    @property
    def strong(self) -> bool:
        return self.stack_moved or self.output_grew


def _main_thread_state(sample: ProcSample, pid: int | None) -> ThreadState | None:
    for thread in sample.threads:
        if thread.tid == pid:
            return thread
    return sample.threads[0] if sample.threads else None


def _delta(a: int | None, b: int | None) -> int:
    if a is None or b is None:
        return 0
    return b - a


def rank_progress(process: ProcessEvidence) -> RankProgress:
    reasons: list[str] = []
    # Live samples only: ``process.text_stacks`` (tracebacks, pasted dumps) have no time.
    stacks = process.stack_samples
    procs = [p for p in process.proc_samples if p.alive]
    samples = max(len(stacks), len(procs))
    stack_moved = False
    first = stacks[0].main_thread() if len(stacks) >= 2 else None
    last = _same_thread(stacks[-1], first) if first is not None else None
    if first is not None and last is not None and not _same_path(first, last):
        stack_moved = True
        reasons.append("main-thread stack changed between samples")
    output_grew = io_moved = main_ran = False
    span: float | None = None
    if len(procs) >= 2:
        first_p, last_p = procs[0], procs[-1]
        if first_p.time is not None and last_p.time is not None:
            span = last_p.time - first_p.time
        out_a, out_b = first_p.output_sizes, last_p.output_sizes
        for stream, before, size in (
            ("stderr", out_a.stderr, out_b.stderr),
            ("stdout", out_a.stdout, out_b.stdout),
        ):
            if before is not None and size is not None and size > before:
                output_grew = True
                reasons.append(f"{stream} grew by {size - before} bytes")
        io_a, io_b = first_p.io, last_p.io
        moved = {
            "rchar": _delta(io_a.rchar, io_b.rchar),
            "wchar": _delta(io_a.wchar, io_b.wchar),
            "syscr": _delta(io_a.syscr, io_b.syscr),
            "syscw": _delta(io_a.syscw, io_b.syscw),
        }
        if any(v > 0 for v in moved.values()):
            io_moved = True
        ta = _main_thread_state(first_p, process.pid)
        tb = _main_thread_state(last_p, process.pid)
        if ta is not None and tb is not None:
            cpu = _delta(ta.cpu_ticks, tb.cpu_ticks)
            switches = _delta(ta.voluntary_ctxt_switches, tb.voluntary_ctxt_switches)
            main_ran = cpu > 0 or switches > 0
        in_place = _same_known_wait(stacks) or _same_kernel_wait(procs, process.pid)
        if io_moved and main_ran and not in_place:
            shown = ", ".join(f"{k}+{v}" for k, v in moved.items() if v > 0)
            reasons.append(f"read/write syscalls advanced ({shown}) with the main thread running")
    if len(stacks) >= 2 and stacks[0].time is not None and stacks[-1].time is not None:
        span = span if span is not None else stacks[-1].time - stacks[0].time
    return RankProgress(
        rank=process.rank,
        samples=samples,
        span_s=span,
        stack_moved=stack_moved,
        output_grew=output_grew,
        io_moved=io_moved,
        main_thread_ran=main_ran,
        reasons=tuple(reasons),
        waiting_in_place=_same_known_wait(stacks) or _same_kernel_wait(procs, process.pid),
    )
