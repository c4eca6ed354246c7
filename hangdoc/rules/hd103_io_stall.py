"""A rank is stuck in the file system

## What it means
A thread of a rank sits in uninterruptible sleep (kernel state ``D``) or in a
file-system wait channel (``nfs_*``, ``rpc_wait_bit_killable``, ``fuse``
``request_wait_answer``, ``percpu_rwsem_wait`` of a frozen file system, ``folio_wait_bit``)
at every sample, and the files it holds open for writing do not grow. The finding
names the thread, its wait channel, and the file(s) with their mount point and file
system type.

## Why it hangs
The kernel is waiting for storage that does not answer: an NFS or Lustre server that
went away, a FUSE daemon (gcsfuse, s3fs, blobfuse) that stopped responding, a frozen or
failing disk. A thread in D state cannot even be killed until the I/O completes, so the
rank never reaches its next collective and every other rank waits there.

## Evidence used
From /proc at every sample: each thread's state and wait channel, the files the rank
holds open (``/proc/PID/fd``, with the offset from ``/proc/PID/fdinfo`` and the mount from
``mountinfo``), and whether any written file grew; the main thread's stack (checkpoint
frames say what was being written). A written file that grows means a slow save, not a
stall (HD104 says so instead).

## How to confirm
`cat /proc/PID/task/*/wchan` and `ls -l /proc/PID/fd` on the node; `dmesg -T | tail`
for "server not responding", "hung task" or I/O errors; `stat` or `ls` the mount point
(it hangs too when the server is gone); `mount | grep MOUNT` for its options (``hard``
NFS mounts block forever).

## How to fix
Restore the storage (server, FUSE daemon, network). Write checkpoints to local disk and
copy them asynchronously, or with a timeout; prefer ``soft``/``timeo`` mount options or
a client with timeouts for scratch data; raise the process-group timeout only if the
storage is merely slow.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.activity_table import Activity, phrase
from hangdoc.analyzer.views.iofacts import Stall, fs_stall, has_file_facts
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import proc_source, span_text, victims, victims_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted


class IoStall(Rule):
    __doc__ = __doc__
    id = "HD103"
    name = "io-stall"
    summary = "a rank's thread is stuck in the file system (D state); its file does not grow"
    categories = (Category.IO_STALL,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.PROC})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        for rank, proc in sorted(ctx.evidence.ranked().items()):
            activity = ctx.activities.get(rank)
            if proc.exited or (activity is not None and activity.in_collective):
                continue
            stall = fs_stall(proc)
            if stall is not None:
                yield self._finding(ctx, rank, stall)

    def _finding(self, ctx: RuleContext, rank: int, stall: Stall) -> Finding:
        proc = ctx.evidence.ranked()[rank]
        activity = ctx.activities.get(rank)
        thread = next((t for t in stall.threads if t.is_main), stall.threads[0])
        wchans = stall.wchans()
        state = "uninterruptible sleep (D)" if stall.uninterruptible else "a file-system wait"
        saving = (
            activity is not None
            and activity.main is not None
            and activity.main.has(Activity.CHECKPOINT_SAVE)
        )
        files = [f for f in stall.files if f.growth() is not None] or list(stall.files)
        target = files[0].where() if files else None
        waiting = victims(ctx, [rank])
        doing = phrase(Activity.CHECKPOINT_SAVE) if saving else "writing"
        title = (
            f"rank {rank} is stuck in the file system"
            + (f" {doing} {files[0].path.rsplit('/', 1)[-1]}" if files else "")
            + f" ({'D state' if stall.uninterruptible else 'file-system wait'}"
            + (f", {wchans[0]}" if wchans else "")
            + ")"
            + victims_text(ctx, waiting)
        )
        where = thread.user_frame() or thread.innermost_python()
        explanation = (
            f"On rank {rank}, thread {thread.label} is in {state}"
            + (f" in {', '.join(wchans)}" if wchans else "")
            + f" at all {stall.samples} samples"
            + (f", at {where.label()}" if where is not None else "")
            + (f" while {doing}" if saving else "")
            + "."
        )
        if files:
            explanation += " " + "; ".join(f.progress_text() for f in files[:3]) + "."
            latest = files[0].latest
            if latest.mount and latest.fstype:
                explanation += (
                    f" It lives on {latest.mount} ({latest.fstype}), whose storage does not answer."
                )
        elif not has_file_facts(proc):
            explanation += (
                " The dump has no open-file facts (an older collector), so the file is unknown."
            )
        explanation += (
            " A thread in D state waits for the storage and cannot even be killed until the "
            f"I/O completes; rank {rank} never reaches its next collective"
            + (f" and {plural_ranks(waiting)} wait for it." if waiting else ".")
        )
        # The thread in the file system (D state or a file-system wait channel) at every
        # sample, beside files that do not grow: the stall itself is on record.
        strength = Strength.CONCLUSIVE
        if stall.samples < 2:
            # One glimpse of D state is ordinary disk I/O as often as not.
            strength = shifted(strength, Shift.ONE_SAMPLE)
            explanation += " Only one sample was taken, so this may be a slow write."
        refs = [
            EvidenceRef(
                source=proc_source(proc),
                detail=f"rank {rank} thread {t.label}: state "
                f"{'/'.join(sorted(t.kernel_states()))}"
                + (f" in {', '.join(sorted(set(t.wchans())))}" if t.wchans() else "")
                + f"{span_text(ctx, [rank])}",
                rank=rank,
            )
            for t in stall.threads[:4]
        ]
        refs.extend(
            EvidenceRef(
                source=proc_source(proc), detail=f"rank {rank}: {f.progress_text()}", rank=rank
            )
            for f in files[:3]
        )
        if activity is not None:
            refs.extend(stack_refs([activity], limit=1))
        refs.extend(stack_refs([ctx.activities[r] for r in waiting], limit=2))
        return Finding(
            rule=self.id,
            category=Category.IO_STALL,
            severity=self.severity if stall.samples >= 2 else Severity.ERROR,
            title=title,
            explanation=explanation,
            fix=(
                "Restore the storage"
                + (f" behind {target}" if target else "")
                + " (server, FUSE daemon, network; `dmesg -T` shows 'server not responding' "
                "or hung-task reports). Write checkpoints to local disk and copy them "
                "asynchronously, use mount options or clients with timeouts, and raise the "
                "process-group timeout only if the storage is merely slow."
            ),
            culprit_ranks=(rank,),
            waiting_ranks=waiting,
            evidence=tuple(refs),
            strength=strength,
        )


RULE = IoStall
