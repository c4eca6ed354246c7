"""What a rank's activity says about the cause: which activity explains the culprit.

The kernel and the rank's other threads speak first (a stalled file system, a lock cycle,
the GIL), then the frame catalog's activities innermost first, then the job's own names.
The words, category and fix of each activity are the activity table's
(analyzer/views/activity_table.py). Shared by the rules that name a culprit by what it is
doing (HD001, HD108, the flight recorder's texts), so the same activity always gets the
same category and the same fix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hangdoc.analyzer.model import (
    Category,
    Frame,
    PeerRole,
    ProcessEvidence,
    ProcState,
    ThreadStack,
    WaitKind,
)
from hangdoc.analyzer.views.activity import (
    GENERIC_TAGS,
    RankActivity,
    frame_tag,
    is_user_frame,
)
from hangdoc.analyzer.views.activity_table import TABLE, Activity
from hangdoc.analyzer.views.iofacts import fs_stall
from hangdoc.analyzer.views.locks import (
    LockWaitKind,
    gil_holder,
    idle_helper_wait,
    lock_waits,
    shared_object_wait,
)
from hangdoc.analyzer.views.meaning import Signal, job_meaning
from hangdoc.analyzer.views.netwait import helper_network_wait, network_wait
from hangdoc.analyzer.views.waits import BEFORE_JOB_S, Holder, JobWaits, ThreadWait, WaitSource


@dataclass(frozen=True, slots=True)
class Cause:
    category: Category
    doing: str  # "is saving a checkpoint"
    fix: str
    # When the cause comes from the job's own names (not the catalog): the independent
    # signals that agree on it (its frames, the files it writes, its last log line).
    signals: tuple[Signal, ...] = ()


def _cause(activity: Activity, signals: tuple[Signal, ...] = ()) -> Cause:
    row = TABLE[activity]
    return Cause(row.category, f"is {row.phrase}", row.fix, signals)


# Appended for issue 22: a main thread blocked in a network client call waits for a server
# outside the job (views/netwait.py), whatever the job's own names say it was doing.
def _network_cause(activity: RankActivity) -> Cause | None:
    wait = network_wait(activity.process)
    row = TABLE[Activity.NETWORK_IO]
    if wait is None:
        return None
    where = f"in {wait.where()} (a server outside the job does not answer)"
    return Cause(row.category, f"is {row.phrase} {where}", row.fix)


def _helper_network_cause(activity: RankActivity) -> Cause | None:
    """The main thread waits for a thread of its own that is blocked on the network."""
    found = helper_network_wait(activity.process)
    if found is None:
        return None
    frame, wait = found
    row = TABLE[Activity.NETWORK_IO]
    waits_in = f" (its main thread waits for it in {frame.label()})" if frame is not None else ""
    where = f"in its thread {wait.track.label}: {wait.where()}{waits_in}"
    return Cause(row.category, f"is {row.phrase} {where}; the server does not answer", row.fix)


# Appended for issue 21: what the kernel says a blocked main thread waits on, and who holds
# it (views/waits.py), whatever the job's functions are called.
def _detailed(activity: Activity, detail: str) -> Cause:
    row = TABLE[activity]
    return Cause(row.category, f"is {row.phrase} ({detail})", row.fix)


def holder_text(holder: Holder) -> str:
    """ "pid 812 (python prep.py), started 41 s before the job" """
    text = holder.label()
    if holder.before_job_s is not None and holder.before_job_s > BEFORE_JOB_S:
        text += f", started {holder.before_job_s:.0f} s before the job"
    return text


def lock_cause(wait: ThreadWait) -> Cause | None:
    """A file lock the kernel shows the thread blocked on, by who holds it."""
    if wait.source is not WaitSource.KERNEL or wait.kind is not WaitKind.LOCK_FILE:
        return None
    target = wait.target or "a file"
    if outside := wait.outside():
        held = "; ".join(holder_text(h) for h in outside)
        return _detailed(Activity.STALE_LOCK, f"{target}, held by {held}")
    if others := wait.other_ranks():
        held = "; ".join(f"rank {h.rank}: {h.label()}" for h in others)
        return _detailed(Activity.RANK_LOCK, f"{target}, held by {held}")
    held = "; ".join(h.label() for h in wait.holders)
    if not held and wait.syscall is not None and frame_kind_is_polled(wait):
        # A lock file polled for its existence (FileBaton): asleep between tries at every
        # sample, no kernel lock to name a holder, and the file outlives a killed one.
        named = wait.target or "not open in the rank, so not named here"
        detail = f"asleep in {wait.syscall} between tries; lock file: {named}"
        return _detailed(Activity.LOCK_FILE_POLL, detail + _at(wait))
    return _detailed(Activity.FILE_LOCK, target + (f", held by {held}" if held else ""))


def frame_kind_is_polled(wait: ThreadWait) -> bool:
    """The wait's frame is a lock file whose existence is the lock (the catalog's
    LOCK_FILE_POLL signatures: torch's FileBaton), not a kernel lock."""
    if wait.frame is None:
        return False
    tag = frame_tag(wait.frame)
    return tag is not None and tag[0] is Activity.LOCK_FILE_POLL


def _child_cause(wait: ThreadWait | None) -> Cause | None:
    """A pipe or a child of the rank's own that does not answer (the kernel's word: the
    frames alone do not say whether the child is stuck, or what on)."""
    if wait is None or wait.source is not WaitSource.KERNEL:
        return None
    if wait.kind not in (WaitKind.PIPE, WaitKind.CHILD, WaitKind.POLL):
        return None
    if cycle := wait.cycle():
        holder = cycle[0]
        back = holder.wait
        said = f", which waits in {back.syscall}" if back is not None else ""
        said += f" on {back.target}" if back is not None and back.target else ""
        detail = f"{_on_peer(wait, holder)}{said} from the rank{_at(wait)}"
        return _detailed(Activity.CHILD_CYCLE, detail)
    own = [h for h in wait.holders if h.in_job and h.rank == wait.rank and h.pid != wait.track.tid]
    if own:
        holder = own[0]
        said = f", state {holder.state}" if holder.state else ""
        back = holder.wait
        said += f", in {back.syscall}" if back is not None else ""
        said += f" on {back.target}" if back is not None and back.target else ""
        return _detailed(Activity.CHILD_STUCK, f"{_on_peer(wait, holder)}{said}{_at(wait)}")
    return None


# Appended for issue 21 (live hangs at first sight): what the kernel says about a wait no
# other process can end.
_DEAD = (ProcState.ZOMBIE, ProcState.DEAD, ProcState.DEAD_OLD)


def _dead_child_cause(process: ProcessEvidence, wait: ThreadWait | None) -> Cause | None:
    """A pipe whose every open end the rank's own process holds, while a child of the rank
    is dead: the child that wrote to it (a data producer fed through a multiprocessing
    Queue or Pipe, whose reader holds both ends) died, and nothing can ever write again."""
    if wait is None or wait.source is not WaitSource.KERNEL or wait.kind is not WaitKind.PIPE:
        return None
    if not wait.holders or any(h.pid != process.pid for h in wait.holders):
        return None
    last = next((p for p in reversed(process.proc_samples) if p.alive), None)
    dead = [c for c in last.children if c.state in _DEAD] if last is not None else []
    if not dead:
        return None
    children = ", ".join(f"pid {c.pid}" + (f" ({c.name})" if c.name else "") for c in dead)
    target = f" on {wait.target}" if wait.target else ""
    detail = f"in {wait.syscall}{target}, open only in the rank; dead child: {children}"
    return _detailed(Activity.CHILD_DIED, f"{detail}{_at(wait)}")


# The stdlib's files a wait for a worker's result blocks in, below the call (CPython's
# multiprocessing and concurrent.futures, and the threading, selectors and queue modules
# they wait with).
_STDLIB_WAIT_FILES = frozenset({
    "pool.py", "queues.py", "connection.py", "synchronize.py", "managers.py", "threading.py",
    "selectors.py", "queue.py", "_base.py", "process.py",
})  # fmt: skip


def _stdlib_wait(frame: Frame) -> bool:
    return frame.native or frame.file.replace("\\", "/").rsplit("/", 1)[-1] in _STDLIB_WAIT_FILES


def _worker_result_cause(activity: RankActivity) -> Cause | None:
    """The main thread waits in multiprocessing for what the rank's own workers return (a
    Pool's result, a Queue, a Pipe: the catalog's WORKER_RESULT frames), with the worker
    processes the last sample shows (hangdoc collect lists the rank's children)."""
    main = activity.main
    if main is None or main.thread.exception is not None:
        return None  # a traceback: the call raised, it does not wait
    thread = main.thread.frames
    at = [
        i
        for i, f in enumerate(thread)
        if (found := frame_tag(f)) is not None and found[0] is Activity.WORKER_RESULT
    ]
    if not at or not all(_stdlib_wait(f) for f in thread[: at[0]]):
        # inside the call, code of its own runs (torch's unpickling of a received
        # tensor, a signal handler that raised): it is not waiting for the result
        return None
    # the outermost: the call the job made (Pool.map), not where the stdlib waits in it
    frame = thread[at[-1]]
    detail = f"in {frame.label()}"
    last = next((p for p in reversed(activity.process.proc_samples) if p.alive), None)
    if last is not None and last.children:
        shown = ", ".join(
            f"pid {c.pid}" + (f" ({c.state})" if c.state else "") for c in last.children[:4]
        )
        more = f" and {len(last.children) - 4} more" if len(last.children) > 4 else ""
        detail += f"; its worker processes: {shown}{more}"
    return _detailed(Activity.WORKER_RESULT, detail)


def _terminal_cause(wait: ThreadWait | None) -> Cause | None:
    """A read of a terminal (collectors/waits.py: the descriptor is a tty or pty)."""
    if wait is None or wait.source is not WaitSource.KERNEL or wait.kind is not WaitKind.TERMINAL:
        return None
    target = f" on {wait.target}" if wait.target else ""
    return _detailed(Activity.TERMINAL_INPUT, f"in {wait.syscall}{target}{_at(wait)}")


def _on_peer(wait: ThreadWait, holder: Holder) -> str:
    """ "in read on pipe:[81] from pid 812 (…)", "in wait4 for pid 812 (…)" """
    text = f"in {wait.syscall}" + (f" on {wait.target}" if wait.target else "")
    joint = "for" if holder.role is PeerRole.CHILD else "from"
    return f"{text} {joint} {holder.label()}"


def _at(wait: ThreadWait) -> str:
    frames = [f.label() for f in (wait.caller, wait.frame) if f is not None]
    return "; at " + " → ".join(dict.fromkeys(frames)) if frames else ""


def _node_cause(activity: RankActivity, job: JobWaits | None) -> Cause | None:
    process = activity.process
    if fs_stall(process) is not None:
        return _cause(Activity.FS_STALL)
    if gil_holder(process) is not None:
        return _cause(Activity.GIL_STARVED)
    waits = lock_waits(process)
    main = next((w for w in waits if w.track.is_main), None)
    others = [
        w
        for w in waits
        if not w.track.is_main and w.kind in (LockWaitKind.NATIVE, LockWaitKind.FUTEX)
    ]
    if main is not None and (others or main.kind == LockWaitKind.NATIVE):
        return _cause(Activity.LOCK_CYCLE)
    wait = (job or JobWaits.alone(process)).of(process)
    if wait is not None and (locked := lock_cause(wait)) is not None:
        return locked
    return _network_cause(activity)


def cause_of(activity: RankActivity, waits: JobWaits | None = None) -> Cause:
    """The most specific cause the culprit's main thread shows, innermost frame first;
    then what the kernel says it waits on; then what the job's own names say; else the
    generic divergence. ``waits``: the job's (``RuleContext.waits``), so that a holder is
    placed against every rank; without, against this process alone."""
    node = _node_cause(activity, waits)
    if node is not None:
        return node
    if activity.main is not None:
        for tag in activity.main.tags:
            if TABLE[tag].names_cause:
                return _cause(tag)
    helper = _helper_network_cause(activity)
    if helper is not None:
        return helper
    wait = (waits or JobWaits.alone(activity.process)).of(activity.process)
    child = _child_cause(wait) or _dead_child_cause(activity.process, wait)
    if child is not None:
        return child
    workers = _worker_result_cause(activity)
    if workers is not None:
        return workers
    terminal = _terminal_cause(wait)
    if terminal is not None:
        return terminal
    own = _own_words_cause(activity)
    if own is not None:
        return own
    polling = _polling_cause(wait)
    if polling is not None:
        return polling
    return _cause(Activity.OUTSIDE_COLLECTIVES)


def polls(wait: ThreadWait | None) -> bool:
    """The kernel shows the main thread asleep in a sleep call (time.sleep's
    clock_nanosleep: a C call with no frame of its own) in the job's own code: a loop that
    checks for a condition (a file, a flag, a value) between sleeps, and waits on no lock,
    pipe or socket that another process could hold."""
    return (
        wait is not None
        and wait.source is WaitSource.KERNEL
        and wait.kind is WaitKind.SLEEP
        and wait.frame is not None
        and is_user_frame(wait.frame)
    )


def _polling_cause(wait: ThreadWait | None) -> Cause | None:
    """A polling loop of the job's own code (``polls``): it waits for a condition that no
    collective brings, with no timeout of the collectives' own."""
    if wait is None or not polls(wait):
        return None
    detail = f"asleep in {wait.syscall} between checks: a loop of its own that polls{_at(wait)}"
    return _detailed(Activity.SLEEP, detail)


def _own_words_cause(activity: RankActivity) -> Cause | None:
    """What the job's own frames, files and last log line say the culprit is doing."""
    frames: list[Frame] = []
    if activity.main is not None:
        frames = [f for f in activity.main.thread.frames if is_user_frame(f)]
        inner = activity.main.tag_frames[0] if activity.main.tag_frames else None
        if inner is not None and inner[0] is Activity.NETWORK_IO:
            # Innermost, a network client's call, not known to sleep (no idle mark, no
            # /proc: _network_cause did not take it): blocked on a server or transferring,
            # the frames cannot say, and the names of the code that called it do not either.
            return _detailed(
                Activity.OUTSIDE_COLLECTIVES,
                f"in a network call, {inner[1].label()}; whether it is blocked on the server "
                "or still transferring, frames without py-spy's idle mark cannot say",
            )
        shared = shared_object_wait(activity.main.thread, _threads(activity))
        if shared is not None:
            # The frames show where it is, two threads inside one object: what it waits
            # on (that object's lock?) they cannot say, and its names do not either.
            other = shared.other.name or "another thread"
            return _detailed(
                Activity.OUTSIDE_COLLECTIVES,
                f"stopped in {shared.main.label()} while its thread {other} is stopped in "
                f"{shared.other_frame.label()}, of the same object: the two may wait on "
                "one lock, which the kernel's view (hangdoc collect) would show",
            )
        helper = idle_helper_wait(activity.main.thread, _threads(activity))
        if helper is not None:
            # It waits for a thread of its own, idle in a C call of the job's code: what
            # that thread waits on (a socket, a lock, a pipe) the frames cannot say, and
            # the main thread's names say where it waits, not what it does.
            other = helper.other.name or "another thread"
            waits_in = f" in {helper.waits_in.label()}" if helper.waits_in is not None else ""
            return _detailed(
                Activity.OUTSIDE_COLLECTIVES,
                f"waiting{waits_in} for its thread {other}, idle in "
                f"{helper.other_frame.label()} with no frame below it: a C call (a socket, "
                "a lock, a pipe) that the kernel's view (hangdoc collect) would name",
            )
    found = job_meaning(frames, activity.process)
    if found is None:
        return None
    meaning, signals = found
    said = "; ".join(f"{s.kind}: {s.text}" for s in signals)
    if TABLE[meaning].category is Category.DATALOADER and spins_in_own_code(activity):
        # Issue 21 (live-2026-11-29g, token-stream): its names say data, but it waits on
        # no worker, no queue, no file: its own loop runs on and never hands a batch over.
        row = TABLE[Activity.OWN_CODE]
        at = frames[0].label() if frames else "its own code"
        doing = (
            f"is {row.phrase} on CPU at {at}, in its data code by its own names "
            f"({said}), with no DataLoader worker process: a loop of its own that does not "
            "return (it waits on nothing: no worker, no queue, no file)"
        )
        return Cause(row.category, doing, _SPIN_FIX, signals)
    cause = _cause(meaning, signals)
    return replace(cause, doing=f"{cause.doing}, by its own names ({said})")


_SPIN_FIX = (
    "The rank's own data code loops without handing over a batch (a generator that does "
    "not reset its position at the end of its data, a filter that drops every item, a "
    "retry that never ends): make it reset or stop at the end of its data (raise "
    "StopIteration and let every rank agree on the number of steps), and compare its "
    "loop's state with the other ranks'."
)


def spins_in_own_code(activity: RankActivity) -> bool:
    """The main thread runs the job's own Python code on CPU and waits on nothing: its
    innermost frame is the job's code (no library call below it), py-spy saw it active
    and the kernel counted CPU time for it between the last two samples, and the process
    has no child process (no DataLoader worker it could be waiting for)."""
    main = activity.main
    if main is None or not main.thread.frames or main.thread.active is not True:
        return False
    if not is_user_frame(main.thread.frames[0]):
        return False
    samples = [p for p in activity.process.proc_samples if p.alive][-2:]
    if len(samples) < 2 or any(p.children for p in samples):
        return False
    tid = main.thread.os_thread_id
    ticks = [t.cpu_ticks for p in samples for t in p.threads if t.tid == tid]
    first, last = (ticks[0], ticks[1]) if len(ticks) == 2 else (None, None)
    return first is not None and last is not None and last - first > 2


def _threads(activity: RankActivity) -> tuple[ThreadStack, ...]:
    latest = activity.process.latest_stacks()
    return tuple(latest.threads) if latest is not None else ()


def key_frame_text(activity: RankActivity) -> str:
    """The frame that gave the culprit's activity, plus its innermost user frame."""
    main = activity.main
    if main is None:
        return "no Python stack"
    parts: list[str] = []
    telling = [f for t, f in main.tag_frames if t not in GENERIC_TAGS] or [
        f for _, f in main.tag_frames
    ]
    if telling:
        parts.append(telling[0].label())
    if main.user_frame is not None and main.user_frame.label() not in parts:
        parts.append("user code " + main.user_frame.label())
    if not parts and main.thread.frames:
        parts.append(main.thread.frames[0].label())
    return "; ".join(parts)
