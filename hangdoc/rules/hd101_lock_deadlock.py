"""Threads of one rank wait on locks held by each other

## What it means
Inside one rank, the main thread and another Python thread (a logging, metrics,
checkpoint or data thread) are both blocked acquiring a lock, and neither moves: each
holds a lock the other wants (a lock-order, or "ABBA", deadlock). A variant: the main
thread waits on a lock that no running thread will release (a non-reentrant lock
acquired twice, a lock inherited through ``fork`` in a locked state); among them a Python
signal handler (a requeue handler saving a checkpoint on SIGUSR1) that takes a lock the
code it interrupted holds: CPython runs the handler on the main thread on top of that
code, which cannot let go until the handler returns.

## Why it hangs
A Python lock has no timeout unless one is given: the two threads wait for each other
forever. The rank never reaches its next collective, so every other rank waits there
until the process-group timeout.

## Evidence used
py-spy stacks of every thread at each sample (idle flag, innermost frames), the kernel's
state and wait channel of the same threads (/proc: a ``futex`` wait is a blocked lock),
py-spy ``--native`` frames (``PyThread_acquire_lock_timed``) and ``--locals`` (lock
objects in scope) when the dump has them; in gdb, pstack or py-spy ``--native`` stacks, a
C mutex being taken (``pthread_mutex_lock`` → ``__lll_lock_wait``, ``std::mutex::lock``)
at the innermost native frames (one such sample gives a low confidence: contention can
be caught in passing). The main thread alone asleep on a futex is named only inside a
signal handler's frame (known by its name's signal and handler words, or its ``signum,
frame`` arguments), which interrupted its own code below it: elsewhere the same wait may
be a C++ one (``work.wait()``). It stays silent when a thread holds the GIL throughout
(HD102 explains that case).

## How to confirm
`py-spy dump --native --locals --pid PID` on the culprit: both threads sit in
``PyThread_acquire_lock_timed`` under the ``with`` lines the finding names. Read the two
code paths: each takes the same two locks in the opposite order.

## How to fix
Take locks in one global order everywhere, or hold one lock at a time (copy the data
under the lock, then call out); never call logging, metrics or user callbacks while
holding a lock they may need; use ``lock.acquire(timeout=...)`` in background threads so
a deadlock raises instead of hanging; do not ``fork`` (DataLoader workers) while another
thread holds a lock.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.locks import LockWait, LockWaitKind, lock_waits
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import proc_source, span_text, victims, victims_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted

_HOW = {
    LockWaitKind.NATIVE: "blocked acquiring a lock (PyThread_acquire_lock in its native frames)",
    LockWaitKind.FUTEX: (
        "idle at the same line at every sample, sleeping on a futex (a Python lock)"
    ),
    LockWaitKind.THREADING: "waiting in threading/queue code",
}
_C_MUTEX_HOW = "blocked taking a C mutex (pthread_mutex_lock in its native frames)"


def _how(wait: LockWait) -> str:
    return _C_MUTEX_HOW if wait.c_mutex else _HOW[wait.kind]


class LockDeadlock(Rule):
    __doc__ = __doc__
    id = "HD101"
    name = "lock-deadlock"
    summary = "threads of one rank wait on locks held by each other"
    categories = (Category.PYTHON_DEADLOCK,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        for rank, activity in sorted(ctx.activities.items()):
            if activity.process.exited or activity.in_collective:
                continue
            waits = lock_waits(activity.process)
            strong = [w for w in waits if w.kind in (LockWaitKind.NATIVE, LockWaitKind.FUTEX)]
            main = next((w for w in waits if w.track.is_main), None)
            if main is None:
                continue
            others = [w for w in strong if not w.track.is_main]
            # Alone, only a native lock frame proves a lock: an idle futex wait in user
            # code can also be a C++ wait (work.wait() of an async collective). Inside a
            # signal handler that interrupted the main thread's own code, the futex is the
            # classic self-deadlock: the handler wants what the frames under it hold.
            if others or main.kind == LockWaitKind.NATIVE or main.handler is not None:
                yield self._finding(ctx, rank, activity, main, others)

    def _finding(
        self,
        ctx: RuleContext,
        rank: int,
        activity: RankActivity,
        main: LockWait,
        others: list[LockWait],
    ) -> Finding:
        waiting = victims(ctx, [rank])
        proc = activity.process
        span = span_text(ctx, [rank])
        if others:
            other = others[0]
            title = (
                f"rank {rank} is deadlocked: its main thread and thread {other.track.label} "
                f"wait on locks held by each other{victims_text(ctx, waiting)}"
            )
            explanation = (
                f"On rank {rank} the main thread waits at {main.where()} "
                f"({_how(main)}) and thread {other.track.label} waits at "
                f"{other.where()} ({_how(other)}); neither moved{span}. Each holds a "
                "lock the other needs, so neither can go on"
            )
        elif main.handler is not None:
            handler = main.handler
            title = (
                f"rank {rank} is deadlocked in a signal handler: "
                f"{handler.handler.function_leaf} waits on a lock held by the code it "
                f"interrupted{victims_text(ctx, waiting)}"
            )
            explanation = (
                f"On rank {rank} the main thread runs the signal handler "
                f"{handler.handler.label()} on top of {handler.interrupted.label()}, the "
                "line it interrupted (CPython runs a Python signal handler on the main "
                "thread, between two bytecodes of whatever frame is running), and waits at "
                f"{main.where()} ({_how(main)}); it did not move{span}, and no other thread "
                "is running. A lock held by the interrupted frames stays held until the "
                "handler returns, and the handler waits for it: the thread waits on itself"
            )
        else:
            title = (
                f"rank {rank}'s main thread waits on a lock no thread releases"
                f"{victims_text(ctx, waiting)}"
            )
            explanation = (
                f"On rank {rank} the main thread waits at {main.where()} ({_how(main)}) "
                f"and did not move{span}, and no other thread is running. The lock is held "
                "by this same thread (a non-reentrant Lock taken twice), by a thread that "
                "ended, or was inherited locked through fork"
            )
        shared = main.lock_addresses() & set().union(*(o.lock_addresses() for o in others))
        if shared:
            explanation += (
                f"; both threads have the lock object(s) {', '.join(sorted(shared))} in scope"
            )
        explanation += f". Rank {rank} never reaches its next collective" + (
            f", so {plural_ranks(waiting)} wait for it." if waiting else "."
        )
        fix = (
            "Take the locks in one order everywhere (or hold one at a time: copy under "
            "the lock, then call out); never call logging, metrics or callbacks while "
            "holding a lock they may take; give background threads "
            "lock.acquire(timeout=...) so a deadlock raises."
        )
        if main.handler is not None and not others:
            fix = (
                "Do no work that takes locks in a signal handler: set a flag (or "
                "threading.Event) in the handler and act on it in the training loop at a "
                "safe point (save the requeue checkpoint there), or make the lock an RLock "
                "if only the same thread re-enters it."
            )
        kinds = {main.kind, *(o.kind for o in others)}
        strength = Strength.CONCLUSIVE  # the threads' waits on the locks are on record
        python_lock = any(w.kind == LockWaitKind.NATIVE and not w.c_mutex for w in [main, *others])
        if LockWaitKind.NATIVE in kinds and not python_lock:
            # Only C mutexes (pthread_mutex_lock): a lock whose holder is not shown; one
            # sample may be contention caught in passing.
            strength = Strength.STATED
            if len(proc.stack_series()) < 2:
                strength = shifted(strength, Shift.ONE_SAMPLE)
        refs = [
            EvidenceRef(
                source=proc.primary_source(),
                detail=f"rank {rank} thread {w.track.label}: waits at {w.where()} ({_how(w)})",
                rank=rank,
            )
            for w in [main, *others]
        ]
        wchans = sorted({c for w in [main, *others] for c in w.track.wchans()})
        if wchans:
            refs.append(
                EvidenceRef(
                    source=proc_source(proc),
                    detail=f"rank {rank}: kernel wait channels {', '.join(wchans)}",
                    rank=rank,
                )
            )
        refs.extend(stack_refs([ctx.activities[r] for r in waiting], limit=2))
        return Finding(
            rule=self.id,
            category=Category.PYTHON_DEADLOCK,
            severity=self.severity,
            title=title,
            explanation=explanation,
            fix=f"{fix} Confirm with `py-spy dump --native --locals --pid {proc.pid or 'PID'}`.",
            culprit_ranks=(rank,),
            waiting_ranks=waiting,
            evidence=tuple(refs),
            strength=strength,
        )


RULE = LockDeadlock
