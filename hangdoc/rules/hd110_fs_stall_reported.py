"""A process is stuck in the file system (as the kernel or a shell shows it)

## What it means
Text attached to the ticket shows a process waiting on storage: a `ps`/`top` row in state
`D` (uninterruptible sleep) together with a kernel stack in a file-system wait (`cat
/proc/PID/stack`: `nfs4_wait_clnt_recover+0x67/0x80 [nfsv4]`, `request_wait_answer
[fuse]`, `ptlrpc_…`, `io_schedule`), the kernel's hung-task report of a task blocked in
file-system code (`INFO: task python:1234 blocked for more than 120 seconds.` with such
frames), or the NFS/Lustre client saying its server went away (`nfs: server nfs01 not
responding, still trying`), or curl giving up on a transfer to remote storage (an object
store: `Operation too slow. Less than 1024 bytes/sec transferred the last 60 seconds`).
HD103 says the same from a hangdoc dump's /proc samples.

A rank that failed with a storage error (`OSError: [Errno 5] Input/output error:
'/ckpt/…'`, `Stale file handle`, `No space left on device`, torch.save's
`PytorchStreamWriter failed writing file`) is reported here too, as its cause.

The errno says which failed (analyzer/vocabulary.py ERRNO_KINDS, from errno(3) and the
calls' pages, rename(2), mkdir(2), rmdir(2)): the storage (EIO, ENOSPC, EROFS, ESTALE,
EREMOTEIO, EDQUOT), a name's state (EEXIST, ENOENT, ENOTEMPTY, EBUSY, EXDEV: on a path every
rank saves to, another rank created, renamed or removed it first, a race in the save's own
logic), or a permission (EACCES, EPERM). The category follows the casebook's convention (a
file-system call raising inside a save is io_or_filesystem_stall, checkpoint_save_hang the
other reading); the explanation and the fix follow the errno: the storage for its faults,
one rank doing the renames for a name's state, the directory's mode for a permission.

A failure line that names no rank (a paste of the error lines apart from the log) is the
rank's whose traceback, cut before its exception line, ends in the file-system call it is
the error of: one rank's, and a two-name call (os.rename, os.renames, os.replace, links,
shutil's moves) for a two-name message (`'a' -> 'b'`), another call for one name.

## Why it hangs
A process in `D` state waits in the kernel for the storage to answer and cannot even be
killed until it does. A rank stuck so never reaches its next collective (the others time
out in it); a job's start-up script stuck so never starts the job.

## Evidence used
Process listing rows in `D`, `/proc/PID/status` `State: D (disk sleep)`, kernel stack
frames of file systems and storage waits (NFS/SUNRPC, FUSE, Lustre, Ceph, CIFS, GPFS,
BeeGFS, ext4/xfs/jbd2, page-cache and block waits), hung-task reports whose trace is in
file-system code and not in the NVIDIA driver (HD303's), and NFS `not responding` /
Lustre `Connection … was lost` lines not followed by the server's `OK`
(analyzer/parsers/logs/iostate.py, analyzer/parsers/logs/kernel.py); the first death of
the deaths view whose message is a storage error, or such an error logged on its own
(`Local process 0 encountered an error: [Errno 5] Input/output error`); a save's failure
on the file system (torch.save's `Parent directory … does not exist.`, an errno raised in
a traceback through a save or naming a checkpoint file: `FileExistsError: [Errno 17] File
exists: 'ckpt_0.pt' -> 'last.pt'`), and a traceback cut before its exception line whose
innermost frame is a file-system call (`os.makedirs`) inside a save
(analyzer/views/save_errors.py).

## How to confirm
On the node: `cat /proc/PID/stack` and `ps -o pid,stat,wchan:32,cmd -p PID` (state `D`,
a file-system wait channel); `dmesg -T | grep -i -e 'not responding' -e 'blocked for
more'`; `stat` or `ls` the mount point (it hangs too); `mount | grep MOUNT` (hard NFS
mounts wait forever).

## How to fix
Restore the storage (NFS/Lustre server, FUSE daemon, network to it). Keep checkpoints,
datasets and start-up scripts off a mount that can stall, or use mount options and clients
with timeouts; raise the process-group timeout only if the storage is merely slow.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.payloads.host import HungTask, IoSource, IoStall, ServerState
from hangdoc.analyzer.views.deaths import death_lines, first_deaths, one_exit, one_failure
from hangdoc.analyzer.views.save_errors import FailedSaveCall, failed_save_calls
from hangdoc.analyzer.views.timeline import Placed, Timeline, precedes_wave, victims, wave
from hangdoc.analyzer.vocabulary import ErrnoKind, EventKind, errno_kind, storage_error
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted

# Frames of a hung-task report that wait on a file system (the module, or the function).
_FS_MODULES = frozenset(
    {
        "nfs", "nfsv3", "nfsv4", "sunrpc", "fuse", "lustre", "lnet", "ptlrpc", "osc", "mdc",
        "lov", "llite", "lmv", "ceph", "libceph", "cifs", "smb", "smb3", "xfs", "ext4", "jbd2",
        "btrfs", "mmfs26", "mmfslinux", "beegfs", "9p", "zfs", "spl", "gpfs",
    }
)  # fmt: skip
_FS_PREFIXES = (
    "nfs", "rpc_", "__rpc_", "fuse_", "request_wait_answer", "ptlrpc_", "ldlm_", "ceph_",
    "cifs_", "xfs_", "ext4_", "jbd2_", "btrfs_", "io_schedule", "wait_on_page_bit",
    "folio_wait_bit", "__lock_page", "__folio_lock", "wait_on_buffer", "__wait_on_buffer",
    "filemap_fdatawait", "filemap_write_and_wait", "do_fsync", "vfs_fsync", "path_openat",
    "vfs_read", "vfs_write", "do_last",
)  # fmt: skip


def _fs_hung_task(p: Placed) -> list[str]:
    """The file-system frames of a hung-task report outside the NVIDIA driver."""
    hung = p.event.payload_as(HungTask)
    if hung is None or hung.driver:
        return []
    found = []
    for frame in hung.frames:
        if frame.module in _FS_MODULES or frame.function.startswith(_FS_PREFIXES):
            found.append(str(frame))
    return found


class FsStallReported(Rule):
    __doc__ = __doc__
    id = "HD110"
    name = "fs-stall-reported"
    summary = "a process shown stuck in the file system (D state, NFS/FUSE/Lustre wait)"
    categories = (Category.IO_STALL,)
    severity = Severity.ERROR
    # Logs, /proc or kernel text, or only a traceback (a save's file-system call that
    # raised): each branch reads what it needs, and an input without it finds nothing.
    requires = frozenset[Need]()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        calls = failed_save_calls(ctx.evidence)
        failed = _storage_failure(tl, calls)
        if failed is not None:
            yield failed
            return
        if calls:
            yield _failed_save_call(calls)
            return
        events = [(p, p.event.payload_as(IoStall) or IoStall()) for p in tl.of(EventKind.IO_STALL)]
        d_state = [(p, s) for p, s in events if s.source == IoSource.PROCESS_STATE]
        frames = [(p, s) for p, s in events if s.source == IoSource.KERNEL_STACK]
        servers = _servers_down(events)
        hung = [(p, fs) for p in tl.of(EventKind.KERNEL_HUNG_TASK) if (fs := _fs_hung_task(p))]
        stalled = [(p, s) for p, s in events if s.source == IoSource.TRANSFER_STALL]
        if not (frames or servers or hung or stalled):
            return  # a D state alone is as often a moment of ordinary disk I/O
        parts: list[str] = []
        evidence: list[Placed] = []
        if hung:
            p, fs = hung[0]
            task = p.event.payload_as(HungTask) or HungTask()
            name, pid = task.name or "a task", p.event.pid
            parts.append(
                f"the kernel reports {name}"
                + (f" (pid {pid})" if pid else "")
                + (f" blocked for more than {task.blocked_s} s" if task.blocked_s else "")
                + f" in {', '.join(fs[:3])}"
            )
            evidence.extend(q for q, _ in hung)
        if d_state:
            rows = ", ".join(
                f"pid {p.event.pid} ({(s.command or '')[:60]})"
                if p.event.pid is not None
                else "a process"
                for p, s in d_state[:3]
            )
            parts.append(f"{rows} in uninterruptible sleep (D)")
            evidence.extend(p for p, _ in d_state)
        if frames:
            names = [f"{s.function}" + (f" [{s.module}]" if s.module else "") for _, s in frames]
            parts.append(f"a kernel stack waiting in {', '.join(names[:3])}")
            evidence.extend(p for p, _ in frames)
        if servers:
            parts.append(
                "the storage client lost its server "
                + ", ".join(sorted({s.server or "?" for _, s in servers}))
            )
            evidence.extend(p for p, _ in servers)
        if stalled:
            parts.append(f"a transfer to remote storage stalled ({stalled[0][1].error})")
            evidence.extend(p for p, _ in stalled)
        if hung or (d_state and frames):
            strength = Strength.STATED  # a process in D state and where it waits, both shown
        elif servers and (frames or d_state):
            strength = shifted(Strength.SIGNAL, Shift.AGREES)  # the server lost, and a waiter
        elif frames or servers:
            strength = Strength.SIGNAL  # a file-system frame or a server message
        else:
            # curl gave up on a transfer: an object store's, or a package mirror's while
            # the job was set up
            strength = shifted(Strength.SIGNAL, Shift.OTHER_READINGS)
        what = "; ".join(parts)
        why = (
            " A process in D state waits in the kernel for the storage to answer and cannot "
            "be killed until it does; whatever it was doing (a rank's save or load, the "
            "job's start-up script) never finishes."
        )
        fix = (
            "Restore the storage (NFS/Lustre server, FUSE daemon, the network to it); "
            "`dmesg -T` on the node shows when it went away. Keep checkpoints, data and "
            "start-up scripts off mounts that can stall, or mount with timeouts."
        )
        if stalled and not (frames or servers or hung):
            why = (
                " curl gives up on a transfer that moved less than its low-speed limit for "
                "the whole window (CURLE_OPERATION_TIMEDOUT); the rank that waits on it (a "
                "checkpoint upload, a data read from an object store) stops meanwhile, and "
                "the others wait for it in their next collective."
            )
            fix = (
                "Check the network path to the object store and its throttling; set the "
                "client's low-speed limit and retries (curl's CURLOPT_LOW_SPEED_*, "
                "tensorstore's curl settings) so that a stalled transfer is retried on a "
                "fresh connection instead of waiting."
            )
        yield Finding(
            rule=self.id,
            category=Category.IO_STALL,
            severity=Severity.ERROR,
            title=f"stuck in the file system: {what}"[:240],
            explanation=f"{what[0].upper()}{what[1:]}.{why}",
            fix=fix,
            evidence=tuple(limited_refs(sorted(evidence, key=lambda p: p.index), limit=6)),
            strength=strength,
        )


def _failed_save_call(calls: list[FailedSaveCall]) -> Finding:
    """A traceback cut before its exception line whose innermost frame is a file-system
    call inside a checkpoint save (views/save_errors.py)."""
    first = calls[0]
    culprits = sorted({c.rank for c in calls if c.rank is not None})
    who = ranks_text(culprits) if culprits else "a process (rank unknown)"
    call = f"{first.call.function} ({first.call.file}:{first.call.line})"
    saving = next(
        (f.function for f in first.thread.frames[1:] if "save" in f.function.lower()), None
    )
    inside = f" inside {saving}" if saving else " inside a checkpoint save"
    what = f"a file-system call, {call}, raised{inside}"
    return Finding(
        rule=FsStallReported.id,
        category=Category.IO_STALL,
        severity=Severity.ERROR,
        title=f"{who} failed on the file system while saving: {what}"[:240],
        explanation=(
            f"{who[0].upper()}{who[1:]}'s traceback ends in {call}{inside}: the innermost "
            "frame of a traceback is where its exception was raised, and below a file-system "
            "call of the standard library there is only the system call, so the save failed "
            "on the file system (its exception line, with the errno, is not in the inputs)."
        ),
        fix=(
            "Find the errno in the rank's full output; check the storage the checkpoint "
            "goes to (`df -h`, quotas, `dmesg -T`); on shared storage, create directories "
            "and rename files from one rank, or tolerate the entries other ranks create "
            "(exist_ok, retries)."
        ),
        culprit_ranks=tuple(culprits),
        evidence=tuple(
            EvidenceRef(
                source=c.stack.source,
                detail=f"traceback ends in {c.call.function} inside a save",
                rank=c.rank,
                line=c.stack.line,
            )
            for c in calls[:6]
        ),
        # One traceback whose exception line is cut: the errno itself is not shown.
        strength=shifted(Strength.SIGNAL, Shift.MAY_BE_CUT),
    )


def _storage_failure(tl: Timeline, calls: list[FailedSaveCall]) -> Finding | None:
    """A rank (or the job's writer) that failed with a storage error: the first death whose
    message is one (HD030 leaves those to this rule), else such a line on its own. ``calls``:
    the tracebacks cut in a save's file-system call, which may be the failure's own."""
    wave_events = wave(tl)
    deaths = [
        d
        for d in first_deaths(tl)
        if d.storage and precedes_wave(d.placed, wave_events) is not False
    ]
    deaths_read = death_lines(tl)
    lines = [
        p
        for p in tl.of(EventKind.IO_STALL)
        if (stall := p.event.payload_as(IoStall)) is not None
        and stall.source == IoSource.IO_ERROR
        and (p.event.source, p.event.line) not in deaths_read
    ]
    if not deaths and not lines:
        return None
    if deaths:
        first = deaths[0]
        culprits = sorted({d.rank for d in deaths if d.rank is not None})
        if not culprits and one_failure(deaths) and (exited := one_exit(first_deaths(tl))):
            # The failure's own lines name no rank; the launcher names the one worker that
            # exited with an error of its own (HD030 reads it so too): the failure is its.
            culprits = [exited.rank] if exited.rank is not None else []
        if not culprits and one_failure(deaths):
            culprits = _traceback_of(first.summary, calls)
        ordered = precedes_wave(first.placed, wave_events)
        who = ranks_text(culprits) if culprits else "a process (rank unknown)"
        what = first.summary
        # the storage's own words (EIO, ENOSPC…), or a save's failed file-system call
        storage_said = storage_error(first.payload.storage or "") is not None
        kind = errno_kind(first.payload.storage or first.summary)
        evidence = [d.placed for d in deaths]
        # The line names the failure (the kernel's errno); like a CUDA OOM (HD031), its
        # time before the timeouts states it as the cause.
        severity = Severity.CRITICAL
        strength = shifted(Strength.SIGNAL, Shift.ORDER_SHOWN) if ordered else Strength.SIGNAL
        if first.bare:
            severity, strength = Severity.ERROR, shifted(strength, Shift.MAY_BE_CUT)
    else:
        culprits = sorted({p.rank for p in lines if p.rank is not None})
        who = ranks_text(culprits) if culprits else "the job"
        what = lines[0].event.payload.message or lines[0].event.text
        storage_said = True
        kind = ErrnoKind.STORAGE
        evidence = lines
        severity, strength = Severity.ERROR, Strength.SIGNAL  # a logged error, not a death
    waiting = sorted(victims(tl) - set(culprits))
    named = not storage_said and kind in (ErrnoKind.NAMESPACE, ErrnoKind.PERMISSION)
    return Finding(
        rule=FsStallReported.id,
        category=Category.IO_STALL,
        severity=severity,
        title=f"{who} failed on the file system: {what}"[:240]
        + (f"; {ranks_text(waiting)} then waited" if waiting else ""),
        explanation=(
            f"{who[0].upper()}{who[1:]} got a {'file-system' if named else 'storage'} error: "
            f"{what.rstrip('.')}. "
            + (
                "Input/output errors, stale handles, a transport endpoint gone and a full or "
                "read-only file system come from the storage (a network file system, a FUSE "
                "daemon, the disk), not from the training code"
                if storage_said
                else _NAMESPACE_WHY
                if kind == ErrnoKind.NAMESPACE
                else _PERMISSION_WHY
                if kind == ErrnoKind.PERMISSION
                else "A file-system call failed inside a checkpoint save (a directory that "
                "is not there yet, a file another process created or moved first on shared "
                "storage, a write the storage refused): the save's target on the file system "
                "is what to fix"
            )
            + "; the rank stops, and the others wait for it in their next collective."
        ),
        fix=_NAMESPACE_FIX
        if kind == ErrnoKind.NAMESPACE and not storage_said
        else _PERMISSION_FIX
        if kind == ErrnoKind.PERMISSION and not storage_said
        else (
            "Check the storage the path lives on (`dmesg -T` on the node for I/O errors or "
            "'server not responding', `df -h`/quota for space); write checkpoints and "
            "outputs to a healthy file system, and retry or tolerate transient errors when "
            "creating directories on shared storage."
        ),
        culprit_ranks=tuple(culprits),
        waiting_ranks=tuple(waiting),
        evidence=tuple(limited_refs(evidence, limit=6)),
        strength=strength,
    )


# A name's state (EEXIST, ENOENT, ENOTEMPTY, EBUSY, EXDEV: vocabulary.ERRNO_KINDS) is what
# rename(2), mkdir(2) and rmdir(2) report faithfully: the storage worked.
_NAMESPACE_WHY = (
    "That errno is a name's state, not the storage failing (errno(3), rename(2): the target "
    "exists or is a non-empty directory, the source or a parent is missing, the name is in "
    "use): on a path that several processes save to, another rank created, moved or removed "
    "it first, so the ranks raced on one path in the save's own logic"
)
_NAMESPACE_FIX = (
    "Let one process (global rank 0, not each node's local rank 0 on shared storage) "
    "create, rename and remove the checkpoint's directories, with a barrier after it before "
    "the others write or read them; or make the others tolerate the entry (exist_ok=True, "
    "catching FileExistsError/FileNotFoundError). A framework that renames a staging "
    "directory on every rank needs its fix or another version."
)
_PERMISSION_WHY = (
    "That errno says the process may not write there (EACCES/EPERM: the directory's owner "
    "or mode, a mount's options), not that the storage failed"
)
_PERMISSION_FIX = (
    "Check the owner and mode of the checkpoint's directory and its parents "
    "(`ls -ld`, `namei -l PATH`) for the user the job runs as, and the mount's options "
    "(`mount | grep PATH`); write checkpoints where the job may write."
)
# The standard library's calls that take two names, whose OSError prints "'a' -> 'b'"
# (CPython's OSError_str with filename2: os.rename, os.replace, os.link, os.symlink, and
# shutil's moves and copies, os.renames).
_TWO_NAME_CALLS = frozenset(
    {"rename", "renames", "replace", "link", "symlink", "move", "copy", "copy2", "copyfile",
     "copytree", "copymode", "copystat"}
)  # fmt: skip


def _traceback_of(said: str, calls: list[FailedSaveCall]) -> list[int]:
    """The rank whose traceback, cut before its exception line, ends in the call that
    ``said`` is the error of, when the failure's own line names none: one rank's save cut
    in a file-system call, whose names agree with the message's (two names for a rename's
    or a link's). Several ranks, or a call of the other shape: none."""
    two_names = " -> '" in said
    ranks = {
        c.rank
        for c in calls
        if c.rank is not None and (c.call.function in _TWO_NAME_CALLS) == two_names
    }
    return sorted(ranks) if len(ranks) == 1 else []


def _servers_down(events: list[tuple[Placed, IoStall]]) -> list[tuple[Placed, IoStall]]:
    """NFS/Lustre servers reported lost and not reported back (``nfs: server X OK``)."""
    down: dict[str, tuple[Placed, IoStall]] = {}
    for p, stall in events:
        if stall.source not in (IoSource.NFS_SERVER, IoSource.LUSTRE_SERVER):
            continue
        server = stall.server or "?"
        if stall.server_state == ServerState.OK:
            down.pop(server, None)
        else:
            down.setdefault(server, (p, stall))
    return sorted(down.values(), key=lambda item: item[0].index)


RULE = FsStallReported
