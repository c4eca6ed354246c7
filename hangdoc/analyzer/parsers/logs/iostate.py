"""Processes stuck in the file system, as pasted from a shell (FORMATS.md §6, §8).

Single lines of these kinds, each documented by the tool that prints it:

* a process listing row in state ``D`` (uninterruptible sleep): ``ps aux`` / ``ps u``
  (procps: ``USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND``, STAT's first
  letter is the state), ``top``/``htop`` batch rows (``PID USER PR NI VIRT RES SHR S %CPU
  %MEM TIME+ COMMAND``), and ``/proc/PID/status``'s ``State:	D (disk sleep)``;
* one frame of a kernel stack, as ``cat /proc/PID/stack`` prints it (``[<0>]
  nfs4_wait_clnt_recover+0x67/0x80 [nfsv4]``; ``[<ffffffffc0a1b2c3>]`` on kernels before
  4.x, which showed addresses) — only frames of file-system and storage waits are kept
  (NFS/SUNRPC, FUSE, Lustre, Ceph, CIFS, GPFS, BeeGFS, local journaling file systems, the
  page-cache and block-layer waits). Frames inside the kernel's own hung-task reports are
  read with their report (parsers/logs/kernel.py);
* a storage error written by a program (``[Errno 5] Input/output error``, ``Stale file
  handle``, ``Transport endpoint is not connected``; not in a warning, and exception lines
  are read as exceptions, where a full or read-only disk counts too);
* a transfer to remote storage that curl gave up on for moving too slowly (``Operation too
  slow. Less than 1024 bytes/sec transferred the last 60 seconds``, lib/speedcheck.c);
* the NFS client's ``nfs: server X not responding, still trying`` / ``timed out``
  (fs/nfs/client.c, printed by the SUNRPC layer's major-timeout handler) and its ``nfs:
  server X OK`` when the server answers again; Lustre's ``Connection to X (at 10.0.0.1@o2ib)
  was lost; in progress operations using this service will wait for recovery to complete``.

Public reports of exactly this: microsoft/DLWorkspace#484 (``ps aux`` row in ``D``, then
``cat /proc/1054/stack`` in ``nfs4_wait_clnt_recover``), and the NFS server messages in
countless kernel logs (``nfs: server … not responding, still trying``).
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.host import IoSource, IoStall, ServerState
from hangdoc.analyzer.vocabulary import EventKind, storage_error

# ps aux / ps u: USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND
_PS_AUX = re.compile(
    r"^(?P<user>[\w.+\-]{1,32})\s+(?P<pid>\d+)\s+\d+(?:[.,]\d+)?\s+\d+(?:[.,]\d+)?\s+\d+\s+\d+\s+"
    r"\S+\s+(?P<stat>D[A-Za-z<+]*)\s+\S+\s+\S+\s+(?P<cmd>\S.*)$"
)
# top -b / htop: PID USER PR NI VIRT RES SHR S %CPU %MEM TIME+ COMMAND
_TOP = re.compile(
    r"^\s*(?P<pid>\d+)\s+[\w.+\-]{1,32}\s+(?:-?\d+|rt)\s+-?\d+\s+[\d.]+[kmgtKMGT]?\s+"
    r"[\d.]+[kmgtKMGT]?\s+[\d.]+[kmgtKMGT]?\s+(?P<stat>D)\s+[\d.]+\s+[\d.]+\s+\S+\s+(?P<cmd>\S.*)$"
)
_PROC_STATE = re.compile(r"^State:\s+D \(disk sleep\)")
_KFRAME = re.compile(
    r"^\s*\[<[0-9a-fA-F]+>\]\s+(?:\? )?(?P<fn>[\w.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+"
    r"(?: \[(?P<mod>\w+)\])?\s*$"
)
# Kernel modules and functions of file systems and storage waits.
_FS_MODULES = frozenset(
    {
        "nfs", "nfsv3", "nfsv4", "sunrpc", "fuse", "lustre", "lnet", "ptlrpc", "osc", "mdc",
        "lov", "llite", "lmv", "ceph", "libceph", "cifs", "smb", "smb3", "xfs", "ext4", "jbd2",
        "btrfs", "mmfs26", "mmfslinux", "beegfs", "9p", "zfs", "spl", "overlay", "gpfs",
    }
)  # fmt: skip
_FS_FUNCTION = re.compile(
    r"^(?:nfs\w*|rpc_\w+|__rpc_\w+|fuse_\w+|request_wait_answer|ll_\w+|ptlrpc_\w+|ldlm_\w+"
    r"|osc_\w+|cl_\w+|ceph_\w+|cifs_\w+|xfs_\w+|ext4_\w+|jbd2_\w+|btrfs_\w+|io_schedule\w*"
    r"|wait_on_page_bit\w*|folio_wait_bit\w*|__lock_page\w*|__folio_lock\w*|__wait_on_buffer"
    r"|wait_on_buffer|filemap_fdatawait\w*|filemap_write_and_wait\w*|wait_for_completion_io\w*"
    r"|do_fsync|vfs_fsync\w*|blk_mq_get_tag|bit_wait_io|rwsem_down_\w+_slowpath)$"
)
_NFS_SERVER = re.compile(
    r"\bnfs: server (?P<server>\S+?) (?P<state>not responding, (?:still trying|timed out)|OK)\b"
)
_LUSTRE_LOST = re.compile(
    r"Connection to (?P<server>\S+) \(at (?P<nid>[^)]+)\) was lost; in progress operations "
    r"using this service will wait for recovery to complete"
)


# libcurl's low-speed check (lib/speedcheck.c, Curl_speedcheck: CURLE_OPERATION_TIMEDOUT
# when fewer than CURLOPT_LOW_SPEED_LIMIT bytes/s moved for CURLOPT_LOW_SPEED_TIME
# seconds), relayed by the clients of object stores that use curl: tensorstore's GCS/S3
# kvstores ("curl_transport.cc:444] Error [28]=Timeout was reached in curl operation"),
# TileDB's S3 VFS ("curlCode: 28, Timeout was reached; Details: Operation too slow. …"),
# git, yum and pacman the same way. older curl releases spelled it "transfered".
_CURL_LOW_SPEED = re.compile(
    r"Operation too slow\. Less than (?P<rate>\d+) bytes/sec transferr?ed the last "
    r"(?P<secs>\d+) seconds"
)
_DEVICE_FAILURE = re.compile(
    r"\[Errno (?:5|116|121)\]|Input/output error|Stale|Remote I/O|Transport endpoint"
    r"|PytorchStreamWriter"
)
_WARNING = re.compile(r"\bwarn(?:ing)?\b|Warning:", re.IGNORECASE)


def is_fs_frame(fn: str, module: str | None) -> bool:
    """A kernel frame that waits on a file system or storage."""
    return (module is not None and module in _FS_MODULES) or bool(_FS_FUNCTION.match(fn))


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(("+0x", " D", "nfs: server", "was lost", "too slow", "rror", "file")) | (
    Need.patterns(_PROC_STATE)
)


def match_io_state(text: str) -> Hit | None:
    """One line of a process listing, a kernel stack or the NFS/Lustre client's log."""
    if not NEED.admits(text):
        return None
    first = text[:1]
    if first in "[ \t" and "+0x" in text and (f := _KFRAME.match(text)) is not None:
        fn, module = f.group("fn"), f.group("mod")
        if not is_fs_frame(fn, module):
            return None
        frame = IoStall(source=IoSource.KERNEL_STACK, function=fn, module=module)
        return Hit(EventKind.IO_STALL, payload=frame, key=("kframe", fn))
    if " D" in text and (p := _PS_AUX.match(text) or _TOP.match(text)) is not None:
        row = IoStall(source=IoSource.PROCESS_STATE, command=p.group("cmd").strip()[:200])
        pid = int(p.group("pid"))
        return Hit(EventKind.IO_STALL, payload=row, key=("dstate", pid), named_pid=pid)
    if first == "S" and _PROC_STATE.match(text):
        status = IoStall(source=IoSource.PROCESS_STATE)
        return Hit(EventKind.IO_STALL, payload=status, key=("dstate", None))
    if "nfs: server" in text and (n := _NFS_SERVER.search(text)) is not None:
        state = ServerState.OK if n.group("state") == "OK" else ServerState.NOT_RESPONDING
        nfs = IoStall(source=IoSource.NFS_SERVER, server=n.group("server"), server_state=state)
        return Hit(EventKind.IO_STALL, payload=nfs, key=("nfs", n.group("server"), state))
    if "was lost" in text and (lu := _LUSTRE_LOST.search(text)) is not None:
        lustre = IoStall(
            source=IoSource.LUSTRE_SERVER, server=lu.group("server"), server_state=ServerState.LOST
        )
        return Hit(EventKind.IO_STALL, payload=lustre, key=("lustre", lu.group("server")))
    if "too slow" in text and (c := _CURL_LOW_SPEED.search(text)) is not None:
        slow = IoStall(source=IoSource.TRANSFER_STALL, error=c.group(0), message=text.strip()[:300])
        return Hit(EventKind.IO_STALL, payload=slow, key=("curlslow", c.group("secs")))
    # Not an exception line (those are read as exceptions; the deaths view tells storage
    # errors apart with the same words): "Local process 0 encountered an error: [Errno 5]
    # Input/output error" (Megatron's async checkpoint writer).
    # Only the failures of the storage itself, and not in a warning: a full or read-only
    # cache directory is warned about by many libraries and is not what stopped the job.
    if (
        ("rror" in text or "file" in text)
        and (e := storage_error(text)) is not None
        and _DEVICE_FAILURE.search(e)
        and not _WARNING.search(text)
    ):
        failed = IoStall(source=IoSource.IO_ERROR, error=e, message=text.strip()[:300])
        return Hit(EventKind.IO_STALL, payload=failed, key=("ioerr", e))
    return None
