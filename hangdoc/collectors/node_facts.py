"""Node facts a stack cannot show: the files a rank holds open, and its subprocesses.

Read at every sample next to the other /proc facts (:func:`read_sample` wraps
``procfs.read_sample``), because the questions they answer are about change:

* *Is the checkpoint being written, or stuck?* A writer's file offset (``pos`` in
  /proc/PID/fdinfo) or the file's size grows between samples when a save is merely
  slow, and stays put when the file system does not answer.
* *Which DataLoader worker blocks the rank?* Each subprocess's state (``D``
  uninterruptible, ``Z`` zombie, ``T`` stopped), its wait channel and the files it
  reads, keyed by pid so they line up with the workers' py-spy stacks.

Everything here reads /proc only and never raises. ``pos`` comes from the kernel's file
table and never touches the file system; ``size`` needs a stat that a dead NFS or FUSE
server can block forever, so it is taken only on local file systems (the mount's type
comes from /proc/PID/mountinfo). The caller still bounds the whole read with a timeout.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hangdoc.collectors import procfs, waits
from hangdoc.collectors.dumpformat import ChildRecord, OpenFileRecord, ProcSampleRecord
from hangdoc.collectors.wait_peers import Scope
from hangdoc.common.redact import redact_argv

PROC = Path("/proc")
# Per process, at most this many files (written ones first) and subprocesses: a rank
# with 10,000 open shards must not turn one sample into a megabyte of JSON.
MAX_FILES = 48
MAX_CHILD_FILES = 8
MAX_CHILDREN = 32
# Seconds one sample may spend finding who is at the other end of its threads' waits
# (collectors/waits.py); past it, the waits are recorded without their peers.
WAIT_PEERS_BUDGET_S = 3.0
# File systems where a stat may block for as long as the server is away.
NETWORK_FSTYPES: frozenset[str] = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "ceph", "9p", "beegfs",
    "glusterfs", "afs", "orangefs", "davfs", "wekafs", "pvfs2", "ocfs2", "gfs2", "virtiofs",
})  # fmt: skip
_SKIP_PREFIXES = ("/dev/", "/proc/", "/sys/")
_O_ACCMODE = 0o3
_O_DIRECTORY = 0o200000
_MODES = {0: "r", 1: "w", 2: "rw"}

Mounts = Mapping[int, tuple[str, str]]  # mnt_id -> (mount point, fstype)


def may_block(fstype: str | None) -> bool:
    """True for network and FUSE file systems, where a stat can hang the reader."""
    if fstype is None:
        return True
    return fstype in NETWORK_FSTYPES or (fstype.startswith("fuse") and fstype != "fuseblk")


def read_sample(
    pid: int,
    index: int,
    *,
    start_ticks: int | None = None,
    redact: Callable[[str], str] | None = None,
) -> ProcSampleRecord:
    """``procfs.read_sample`` plus the open files and subprocesses of a live process."""
    sample = procfs.read_sample(pid, index, start_ticks=start_ticks)
    if sample["alive"]:
        family = (*child_pids(pid), *([parent] if (parent := _parent(pid)) else []))
        scope = Scope(
            pid,
            family,
            time.monotonic() + WAIT_PEERS_BUDGET_S,
            redact=redact,
            redact_argv=redact_argv if redact is not None else None,
        )
        waits.read_waits(pid, sample["threads"], scope)
        mounts = read_mounts(pid)
        sample["files"] = read_open_files(pid, mounts, redact=redact)
        sample["children"] = read_children(pid, mounts, redact=redact)
    return sample


def has_uninterruptible_thread(pid: int) -> bool:
    """Whether a thread of ``pid`` is in D state: py-spy must not try to pause it then
    (ptrace waits for every thread to stop, and a thread in D does not)."""
    try:
        tids = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return False
    for tid in tids:
        st = procfs.read_stat(pid, int(tid)) if tid.isdigit() else None
        if st is not None and st.state == "D":
            return True
    return False


def uninterruptible_in(sample: ProcSampleRecord) -> bool:
    """Whether a thread of the sampled process was in D state."""
    return sample.get("state") == "D" or any(t["state"] == "D" for t in sample["threads"])


def unescape_mount_path(text: str) -> str:
    r"""mountinfo escapes space, tab, newline and backslash as ``\040`` etc."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        chunk = text[i + 1 : i + 4]
        if text[i] == "\\" and len(chunk) == 3 and all(c in "01234567" for c in chunk):
            out.append(chr(int(chunk, 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> dict[int, tuple[str, str]]:
    """``/proc/PID/mountinfo`` → {mnt_id: (mount point, fstype)}; bad lines are skipped."""
    mounts: dict[int, tuple[str, str]] = {}
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or not tail or not fields[0].isdigit():
            continue
        mounts[int(fields[0])] = (unescape_mount_path(fields[4]), tail[0])
    return mounts


def read_mounts(pid: int) -> dict[int, tuple[str, str]]:
    text = _read_text(PROC / str(pid) / "mountinfo")
    return parse_mountinfo(text) if text else {}


def parse_fdinfo(text: str) -> dict[str, int]:
    """``pos``, ``flags`` (octal in the file) and ``mnt_id`` of one fdinfo file."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name, value = name.strip(), value.strip()
        with contextlib.suppress(ValueError):
            if name == "flags":
                values[name] = int(value, 8)
            elif name in ("pos", "mnt_id"):
                values[name] = int(value)
    return values


def read_open_files(
    pid: int,
    mounts: Mounts,
    *,
    limit: int = MAX_FILES,
    redact: Callable[[str], str] | None = None,
) -> list[OpenFileRecord]:
    """Regular files ``pid`` holds open, files open for writing first."""
    fd_dir = PROC / str(pid) / "fd"
    try:
        names = sorted((n for n in os.listdir(fd_dir) if n.isdigit()), key=int)
    except OSError:
        return []
    written: list[OpenFileRecord] = []
    read_only: list[OpenFileRecord] = []
    for name in names:
        record = _open_file(pid, int(name), mounts, redact)
        if record is not None:
            (read_only if record["mode"] == "r" else written).append(record)
        if len(written) >= limit:
            break
    return (written + read_only)[:limit]


def _open_file(
    pid: int, fd: int, mounts: Mounts, redact: Callable[[str], str] | None
) -> OpenFileRecord | None:
    link = PROC / str(pid) / "fd" / str(fd)
    try:
        target = os.readlink(link)
    except OSError:
        return None
    if not target.startswith("/") or target.startswith(_SKIP_PREFIXES):
        return None  # sockets, pipes, anon inodes, devices
    info = parse_fdinfo(_read_text(PROC / str(pid) / "fdinfo" / str(fd)) or "")
    flags = info.get("flags", 0)
    if flags & _O_DIRECTORY:
        return None
    mount, fstype = mounts.get(info.get("mnt_id", -1), (None, None))
    size: int | None = None
    if not may_block(fstype):
        try:
            st = os.stat(link)  # follows the link to the open file itself
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        size = st.st_size
    return {
        "fd": fd,
        "path": redact(target) if redact else target,
        "mode": _MODES.get(flags & _O_ACCMODE),
        "pos": info.get("pos"),
        "size": size,
        "mount": mount,
        "fstype": fstype,
    }


def child_pids(pid: int, *, limit: int = MAX_CHILDREN) -> list[int]:
    """Descendants of ``pid``, children first. Uses /proc/PID/task/TID/children (cheap);
    falls back to a scan of every process when the kernel lacks it."""
    found: list[int] = []
    queue = [pid]
    while queue and len(found) < limit:
        parent = queue.pop(0)
        kids = _direct_children(parent)
        if kids is None:
            table = procfs.process_table()
            return procfs.descendants(table, pid)[:limit]
        for kid in kids:
            if kid not in found and kid != pid:
                found.append(kid)
                queue.append(kid)
    return found[:limit]


def _direct_children(pid: int) -> list[int] | None:
    task_dir = PROC / str(pid) / "task"
    try:
        tids = [t for t in os.listdir(task_dir) if t.isdigit()]
    except OSError:
        return []
    kids: set[int] = set()
    for tid in tids:
        text = _read_text(task_dir / tid / "children")
        if text is None:
            if (task_dir / tid).exists() and not (task_dir / tid / "children").exists():
                return None  # CONFIG_PROC_CHILDREN off: the caller scans instead
            continue
        kids.update(int(p) for p in text.split() if p.isdigit())
    return sorted(kids)


def read_children(
    pid: int, mounts: Mounts, *, redact: Callable[[str], str] | None = None
) -> list[ChildRecord]:
    """State, wait channel and open files of each subprocess of ``pid``."""
    records: list[ChildRecord] = []
    for child in child_pids(pid):
        st = procfs.read_stat(child)
        if st is None:
            continue  # exited and reaped between the listing and now
        zombie = st.state in ("Z", "X")
        wchan = None if zombie else _read_wchan(PROC / str(child) / "wchan")
        records.append(
            {
                "pid": child,
                "ppid": st.ppid,
                "name": st.comm,
                "state": st.state,
                "wchan": wchan,
                "cpu_ticks": st.cpu_ticks,
                "threads_in_d": 0 if zombie else _threads_in_d(child),
                "files": []
                if zombie
                else read_open_files(child, mounts, limit=MAX_CHILD_FILES, redact=redact),
            }
        )
    return records


def _threads_in_d(pid: int) -> int:
    count = 0
    with contextlib.suppress(OSError):
        for tid in os.listdir(PROC / str(pid) / "task"):
            st = procfs.read_stat(pid, int(tid)) if tid.isdigit() else None
            count += st is not None and st.state == "D"
    return count


def _parent(pid: int) -> int | None:
    st = procfs.read_stat(pid)
    return st.ppid if st is not None and st.ppid > 1 else None


def _read_wchan(path: Path) -> str | None:
    text = (_read_text(path) or "").strip()
    return None if text in ("", "0") else text


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
