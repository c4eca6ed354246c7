"""A DataLoader worker blocks its rank

## What it means
A rank's main thread waits on its DataLoader — for the next batch (``__next__``,
``_get_data``) or for its workers to exit (``_shutdown_workers``) — and one of its worker
subprocesses is the reason: stuck inside the dataset's code at the same frame at every
sample, in uninterruptible I/O (kernel state D), stopped, or dead but not reaped
(zombie). The finding names the worker, its pid, where it is and what the kernel says.

## Why it hangs
The main thread only gets a batch from a worker, and only finishes tearing the loader
down when every worker has exited. A worker that never returns from ``__getitem__`` (a
read from a dead mount, a lock inherited locked through ``fork``, a network call without
a timeout) or ignores the shutdown request keeps the main thread waiting, and the rank
never reaches its next collective: the other ranks wait for it there.

## Evidence used
The main thread's stack (DataLoader frames from the catalog), the worker subprocesses'
stacks that the collector takes with py-spy at every sample, and their /proc state,
wait channel and open files (``ProcSample.children``), matched on the worker's pid.

## How to confirm
`py-spy dump --pid WORKER_PID` a few times: the same frame every time. `cat
/proc/WORKER_PID/wchan` and `ls -l /proc/WORKER_PID/fd` show what it waits for and which
file it reads.

## How to fix
Fix what the worker waits for (storage, a lock taken before the DataLoader forked, a
remote call); set ``DataLoader(timeout=...)`` so a stuck worker raises instead of
hanging; create DataLoaders before starting threads, or use the ``spawn``/
``forkserver`` start method (``multiprocessing_context``); try ``num_workers=0`` to
confirm the worker is the cause.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.activity_table import Activity, phrase
from hangdoc.analyzer.views.workers import WorkerStatus, WorkerView, blocking_workers
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.causes import key_frame_text
from hangdoc.rules.culprit import proc_source, victims, victims_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted

_STATUS = {
    WorkerStatus.BLOCKED: "is stuck in the dataset's code",
    WorkerStatus.UNINTERRUPTIBLE: "is stuck in uninterruptible I/O",
    WorkerStatus.ZOMBIE: "died (zombie, not reaped)",
    WorkerStatus.STOPPED: "is stopped",
}
_FIX = {
    WorkerStatus.BLOCKED: (
        "Worker {who} never returns from {where}. If the kernel shows a futex wait there, a "
        "lock was inherited locked through fork (a logging, cache or client lock held by "
        "another thread when the DataLoader forked): create DataLoaders before starting "
        "threads, or use multiprocessing_context='spawn'/'forkserver'. A read or a network "
        "call needs a timeout. Set DataLoader(timeout=...) so a stuck worker raises."
    ),
    WorkerStatus.UNINTERRUPTIBLE: (
        "Worker {who} waits on storage that does not answer ({where}): check the mount it "
        "reads from (dmesg for NFS/Lustre/FUSE errors, `stat` the file). Set "
        "DataLoader(timeout=...) so the rank raises instead of hanging."
    ),
    WorkerStatus.ZOMBIE: (
        "Worker {who} died and was not reaped, so the rank waits for data that never comes. "
        "Find why it died (its stderr, dmesg for the OOM killer); set DataLoader(timeout=...)."
    ),
    WorkerStatus.STOPPED: (
        "Worker {who} is stopped (SIGSTOP, a debugger, or a terminal job control signal): "
        "resume it with `kill -CONT {pid}` and find what stopped it."
    ),
}


def _waits_on_loader(activity: RankActivity) -> str | None:
    main = activity.main
    if main is None or activity.in_collective:
        return None
    for loader in (Activity.DATALOADER_TEARDOWN, Activity.DATALOADER_FETCH):
        if main.has(loader):
            return f"is {phrase(loader)}"
    return None


class DataloaderWorker(Rule):
    __doc__ = __doc__
    id = "HD100"
    name = "dataloader-worker-blocked"
    summary = "a DataLoader worker (stuck, in D state, stopped, zombie) blocks its rank"
    categories = (Category.DATALOADER,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        for rank, activity in sorted(ctx.activities.items()):
            if activity.process.exited:
                continue
            doing = _waits_on_loader(activity)
            if doing is None:
                continue
            stuck = blocking_workers(activity.process)
            if stuck:
                yield self._finding(ctx, rank, activity, doing, stuck)

    def _finding(
        self,
        ctx: RuleContext,
        rank: int,
        activity: RankActivity,
        doing: str,
        stuck: list[WorkerView],
    ) -> Finding:
        worker = stuck[0]
        status = worker.status()
        frame = worker.frame()
        where = frame.label() if frame is not None else "an unknown frame"
        waiting = victims(ctx, [rank])
        kernel = worker.kernel_text()
        files = worker.files_read()
        title = (
            f"rank {rank} {doing}, but its DataLoader {worker.describe()} "
            f"{_STATUS[status]}"
            + (f" at {where}" if frame is not None else "")
            + victims_text(ctx, waiting)
        )
        main_where = key_frame_text(activity)
        explanation = (
            f"Rank {rank}'s main thread {doing} (at {main_where}). Its DataLoader "
            f"{worker.describe()} {_STATUS[status]}"
            + (f" at {where}" if frame is not None else "")
            + (f" (kernel: {kernel})" if kernel else "")
            + (
                f", at the same frame in all {len(worker.stacks)} samples"
                if status == WorkerStatus.BLOCKED
                else ""
            )
            + "."
        )
        if files:
            explanation += (
                " It has open: "
                + ", ".join(
                    f"{f.path}" + (f" on {f.mount} ({f.fstype})" if f.fstype else "")
                    for f in files[:3]
                )
                + "."
            )
        if len(stuck) > 1:
            more = ", ".join(f"{w.describe()} ({w.status()})" for w in stuck[1:4])
            explanation += f" Also blocked: {more}."
        explanation += (
            f" Until the worker returns, rank {rank} never reaches its next collective"
            + (f"; {plural_ranks(waiting)} wait for it there." if waiting else ".")
        )
        source = worker.stacks[-1].source if worker.stacks else proc_source(activity.process)
        refs = [
            EvidenceRef(
                source=source or activity.process.primary_source(),
                detail=f"rank {rank} {worker.describe()}: {status} at {where}",
                rank=rank,
            ),
            EvidenceRef(
                source=activity.process.primary_source(),
                detail=f"rank {rank}: {main_where}",
                rank=rank,
            ),
        ]
        if kernel:
            refs.append(
                EvidenceRef(
                    source=proc_source(activity.process),
                    detail=f"rank {rank} {worker.describe()}: {kernel}",
                    rank=rank,
                )
            )
        refs.extend(stack_refs([ctx.activities[r] for r in waiting], limit=2))
        # The worker itself is on record: dead, stopped, in D state, or blocked at every
        # sample (HD001, which sees only its rank outside the collective, ranks below).
        strength = Strength.CONCLUSIVE
        if status == WorkerStatus.BLOCKED and len(worker.stacks) < 2:
            strength = shifted(strength, Shift.ONE_SAMPLE)
        return Finding(
            rule=self.id,
            category=Category.DATALOADER,
            severity=self.severity,
            title=title,
            explanation=explanation,
            fix=_FIX[status].format(who=worker.describe(), where=where, pid=worker.pid),
            culprit_ranks=(rank,),
            waiting_ranks=waiting,
            evidence=tuple(refs),
            strength=strength,
        )


RULE = DataloaderWorker
