"""A rank is blocked on a file lock, and the kernel names who holds it

## What it means
A rank's main thread sleeps in ``flock`` or ``fcntl(F_SETLKW)`` (``lockf``) at every
sample, and the kernel's lock table names the process that holds the lock. Either that
process is no part of the job — a leftover of an earlier run, a data-preparation
process that never exited — and the rank waits for a lock that will never be released;
or it is another rank of the job, which then is the culprit: it holds the lock and
waits somewhere else (typically in a collective the blocked ranks never reach).

## Why it hangs
A rank blocked on the lock never reaches its next collective, and the other ranks wait
there for it until the process-group timeout (or forever). Whoever holds the lock
decides when it ends: a stale process never lets go, and a rank that holds it while it
waits for the blocked ranks closes a cycle across the two kinds of wait.

## Evidence used
From /proc at every sample (collectors/waits.py): the system call the main thread sleeps
in and its file descriptor's file (``/proc/PID/task/TID/syscall``, ``/proc/PID/fd``);
``/proc/locks``, which lists the blocked waiter under the lock that blocks it, with the
holder's pid; the holder's command line, parents and start time, which say whether it
belongs to the job (a rank, or a process a rank started) and whether it started before
the job. The frames only add where the job's code called it: the job's functions may be
called anything.

## How to confirm
`cat /proc/locks` (or `lslocks`) on the node: the waiter appears with ``->`` under the
holder's line; `ps -o pid,lstart,args -p HOLDER` for what the holder is and when it
started; `py-spy dump --pid HOLDER` for where it is stuck, if it is a Python process.

## How to fix
A stale holder: end it and restart the job; put the job's id in lock file paths, clean
up a previous run's processes before a restart, and acquire locks with a timeout that
names the holder. A rank holding the lock: release the lock before any collective
(prepare under the lock, leave it, then synchronise), and never wait for other ranks
while holding a lock they need.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.waits import ThreadWait
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.causes import lock_cause
from hangdoc.rules.culprit import nobody_moved, proc_source, victims, victims_text
from hangdoc.rules.strength import Shift, shifted


class FileLockHolder(Rule):
    __doc__ = __doc__
    id = "HD111"
    name = "file-lock-holder"
    summary = "a rank is blocked on a file lock; the kernel names its holder"
    categories = (Category.PYTHON_DEADLOCK,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.PROC})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        blocked = ctx.waits.on_held_locks()
        outside = {r: w for r, w in blocked.items() if w.outside()}
        held_by_ranks = {r: w for r, w in blocked.items() if r not in outside and w.other_ranks()}
        by_holder: dict[int, list[int]] = {}
        for rank, wait in sorted(outside.items()):
            by_holder.setdefault(wait.outside()[0].pid, []).append(rank)
        for ranks in by_holder.values():
            yield self._stale(ctx, ranks, [outside[r] for r in ranks])
        holders = sorted({h.rank for w in held_by_ranks.values() for h in w.other_ranks()
                          if h.rank is not None})  # fmt: skip
        if holders:
            yield self._held_by_ranks(ctx, tuple(holders), held_by_ranks)

    def _strength(self, ctx: RuleContext, ranks: Iterable[int]) -> tuple[Strength, str]:
        # The kernel's lock table names the holder, and the thread sleeps in the lock call:
        # the wait is on record, as the rank's own /proc shows it.
        strength, said = Strength.STATED, ""
        moved = nobody_moved(ctx, ranks)
        if moved is True:
            strength = shifted(strength, Shift.NOTHING_MOVED)
            said = " It was blocked there at every sample, and no rank moved between them."
        elif moved is False:
            strength = shifted(strength, Shift.SOME_MOVED)
            said = " Some ranks moved between samples: the lock may yet be released."
        return strength, said

    def _stale(self, ctx: RuleContext, ranks: list[int], waits: list[ThreadWait]) -> Finding:
        wait = waits[0]
        holder = wait.outside()[0]
        cause = lock_cause(wait)
        assert cause is not None
        waiting = victims(ctx, ranks)
        title = f"{plural_ranks(ranks)} {cause.doing}" + victims_text(ctx, waiting)
        started = (
            f" It started {holder.before_job_s:.0f} s before the job's first rank: a leftover "
            "of an earlier run, most likely."
            if holder.before_job_s is not None and holder.before_job_s > 1
            else ""
        )
        explanation = (
            f"The kernel shows {plural_ranks(ranks)} asleep {wait.where()}, and its lock "
            f"table names the holder: {holder.label()}"
            + (f", holding a {holder.lock} lock" if holder.lock else "")
            + ". That process is no rank of the job and no process a rank started."
            + started
            + " The lock is released only when it lets go or exits"
            + (
                f"; meanwhile {plural_ranks(waiting)} wait for the blocked ranks."
                if waiting
                else "."
            )
        )
        strength, said = self._strength(ctx, ranks)
        return Finding(
            rule=self.id,
            category=cause.category,
            severity=self.severity,
            title=title,
            explanation=explanation + said,
            fix=cause.fix,
            culprit_ranks=tuple(ranks),
            waiting_ranks=waiting,
            evidence=tuple(self._refs(ctx, waits)),
            strength=strength,
        )

    def _held_by_ranks(
        self, ctx: RuleContext, holders: tuple[int, ...], blocked: dict[int, ThreadWait]
    ) -> Finding:
        first = blocked[min(blocked)]
        cause = lock_cause(first)
        assert cause is not None
        blocked_ranks = tuple(sorted(blocked))
        holder_where = [
            f"rank {r}: {ctx.activities[r].description()}" for r in holders if r in ctx.activities
        ]
        title = (
            f"{plural_ranks(holders)} {'holds' if len(holders) == 1 else 'hold'} a file lock "
            f"that {plural_ranks(blocked_ranks)} {'is' if len(blocked_ranks) == 1 else 'are'} "
            f"blocked on ({first.target or 'a file'})"
        )
        if holder_where:
            title += f"; {holder_where[0]}"
        explanation = (
            f"The kernel shows {plural_ranks(blocked_ranks)} asleep {first.where()}; its lock "
            f"table names the holder, {plural_ranks(holders)} of this job. While the holder "
            "keeps the lock and waits elsewhere ("
            + "; ".join(holder_where or ["unknown"])
            + "), the blocked ranks never reach it: neither side can go on."
        )
        strength, said = self._strength(ctx, (*holders, *blocked_ranks))
        return Finding(
            rule=self.id,
            category=cause.category,
            severity=self.severity,
            title=title,
            explanation=explanation + said,
            fix=cause.fix,
            culprit_ranks=holders,
            waiting_ranks=blocked_ranks,
            evidence=tuple(self._refs(ctx, list(blocked.values()))),
            strength=strength,
        )

    def _refs(self, ctx: RuleContext, waits: list[ThreadWait]) -> list[EvidenceRef]:
        procs = ctx.evidence.ranked()
        refs = []
        for wait in waits[:8]:
            if wait.rank is None or wait.rank not in procs:
                continue
            held = ", ".join(f"{h.label()} ({h.lock or 'lock'})" for h in wait.holders)
            refs.append(
                EvidenceRef(
                    source=proc_source(procs[wait.rank]),
                    detail=f"rank {wait.rank} main thread {wait.where()}; held by {held}",
                    rank=wait.rank,
                )
            )
        return refs


RULE = FileLockHolder
