"""Who is at the other end of a wait: a file lock's holder, a pipe's other end, a socket's
local peer, the child a ``wait4`` waits for; and what that process is.

All from /proc, never from the files themselves (a stat of a path on a dead NFS server
blocks): ``/proc/locks`` names a lock's holder by pid, keyed by the file's device and
inode, and lists each blocked waiter (``->``) under the lock that blocks it; a pipe's
or a socket's other end is the process that holds a descriptor on the same inode
(``/proc/PID/fd`` links, read without touching any file system); a unix socket's peer is
named by the kernel's socket diagnostics (netlink ``sock_diag``, what ``ss -x`` reads:
a read-only query, not /proc, because /proc/net/unix does not list peers). A process is described
by its stat (name, state, parent, start time), its parents up to init, and its command
line, read under a short timeout of its own: reading the ``cmdline`` of a process stuck
in D state can block on its memory lock.

One :class:`Scope` serves one rank at one sample: it caches what it read (the lock
table, descriptor lists) and stops looking for peers at its deadline.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.collectors import procfs
from hangdoc.collectors.bounded import StepTimeout, call_with_timeout
from hangdoc.collectors.dumpformat import WaitPeerRecord

PROC = Path("/proc")
CMDLINE_TIMEOUT_S = 0.5
MAX_ANCESTORS = 8
MAX_FDS = 4096  # per process scanned for a pipe's or socket's other end
MAX_PROCESSES = 4096  # scanned node-wide when the rank's own family holds no other end
MAX_LOCK_LINES = 20000
SOCK_DIAG_TIMEOUT_S = 0.5
MAX_SOCK_DIAG_BYTES = 16 << 20
_O_ACCMODE = 0o3


@dataclass(frozen=True, slots=True)
class LockLine:
    """One line of /proc/locks: ``2: -> FLOCK  ADVISORY  WRITE 31090 fe:00:2146573 0 EOF``."""

    ordinal: int
    blocked: bool  # a waiter ("->"), listed under the lock that blocks it
    kind: str  # FLOCK, POSIX, OFDLCK, LEASE...
    access: str  # READ, WRITE
    pid: int  # -1 for open file description locks
    device: tuple[int, int]
    inode: int

    @property
    def label(self) -> str:
        return f"{self.kind} {self.access}"


def parse_locks(text: str) -> list[LockLine]:
    """/proc/locks (proc(5), fs/locks.c ``lock_get_status``); bad lines are skipped.
    The device is MAJOR:MINOR in hex, the inode decimal."""
    out: list[LockLine] = []
    for line in text.splitlines()[:MAX_LOCK_LINES]:
        head, _, rest = line.partition(":")
        words = rest.split()
        blocked = bool(words) and words[0] == "->"
        if blocked:
            words = words[1:]
        if len(words) < 5 or not head.strip().isdigit():
            continue
        kind, _mode, access, pid_text, where = words[:5]
        parts = where.split(":")
        with contextlib.suppress(ValueError):
            device = (int(parts[0], 16), int(parts[1], 16))
            out.append(LockLine(int(head), blocked, kind, access, int(pid_text), device,
                                int(parts[2])))  # fmt: skip
    return out


@dataclass
class Scope:
    """What reading one rank's waits may look at, and until when."""

    pid: int  # the rank
    family: tuple[int, ...]  # its descendants and its parent: where other ends usually are
    deadline: float  # time.monotonic() after which no more peers are looked for
    redact: Callable[[str], str] | None = None
    redact_argv: Callable[[list[str]], list[str]] | None = None
    _locks: list[LockLine] | None = None
    _fds: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    _devices: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    _unix_peers: dict[int, int] | None = None
    _net: dict[tuple[int, str], list[list[str]]] = field(default_factory=dict)

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    def locks(self) -> list[LockLine]:
        if self._locks is None:
            self._locks = parse_locks(_read_text(PROC / "locks") or "")
        return self._locks

    def net_rows(self, pid: int, table: str) -> list[list[str]]:
        """The rows of /proc/PID/net/TABLE (tcp, tcp6, unix), split; read once."""
        key = (pid, table)
        if key not in self._net:
            text = _read_text(PROC / str(pid) / "net" / table) or ""
            self._net[key] = split_rows(table, text)
        return self._net[key]

    def unix_peer(self, inode: int) -> int | None:
        """The inode of the unix socket at the other end of socket ``inode``."""
        if self._unix_peers is None:
            self._unix_peers = {} if self.expired() else unix_peers(self.deadline)
        return self._unix_peers.get(inode)

    def fds_of(self, pid: int) -> dict[str, list[int]]:
        """{link target: [fd, …]} of ``pid``'s descriptors (at most MAX_FDS)."""
        if pid not in self._fds:
            self._fds[pid] = _fd_targets(pid)
        return self._fds[pid]

    def device_of(self, pid: int, mnt_id: int) -> tuple[int, int] | None:
        """The device (major, minor) of the mount ``mnt_id`` in ``pid``'s mount table."""
        if pid not in self._devices:
            self._devices[pid] = parse_mount_devices(
                _read_text(PROC / str(pid) / "mountinfo") or ""
            )
        return self._devices[pid].get(mnt_id)

    def holders(self, target: str, *, exclude: tuple[int, int] | None = None) -> Iterator[
        tuple[int, int]
    ]:  # fmt: skip
        """(pid, fd) of each descriptor on ``target`` ("pipe:[81]", "socket:[93]"): the
        rank and its family first, then, if none of them holds one, every process on the
        node until the deadline. ``exclude``: the (pid, fd) that asked."""
        found = False
        for pid in (self.pid, *self.family):
            for fd in self.fds_of(pid).get(target, ()):
                if (pid, fd) != exclude:
                    found = True
                    yield pid, fd
        if found or self.expired():
            return
        near = {self.pid, *self.family}
        for pid in _all_pids():
            if self.expired():
                return
            if pid in near:
                continue
            for fd in self.fds_of(pid).get(target, ()):
                yield pid, fd


# linux/netlink.h, linux/sock_diag.h, linux/unix_diag.h
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY = 4, 20
_NLM_F_REQUEST, _NLM_F_DUMP, _NLMSG_ERROR, _NLMSG_DONE = 0x1, 0x300, 2, 3
_UDIAG_SHOW_PEER, _UNIX_DIAG_PEER = 0x4, 2
_NLMSG_HEADER = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_UNIX_DIAG_REQ = struct.Struct("=BBHIIIII")  # family, protocol, pad, states, ino, show, cookie
_UNIX_DIAG_MSG = struct.Struct("=BBBBIII")  # family, type, state, pad, ino, cookie
_RTATTR = struct.Struct("=HH")  # len, type


def unix_peers(deadline: float) -> dict[int, int]:
    """{inode: peer inode} of the unix sockets of this network namespace: one sock_diag
    dump, bounded by ``deadline`` and MAX_SOCK_DIAG_BYTES; {} when netlink is refused."""
    request = _UNIX_DIAG_REQ.pack(socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, _UDIAG_SHOW_PEER,
                                  0xFFFFFFFF, 0xFFFFFFFF)  # fmt: skip
    header = _NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY,
                                _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)  # fmt: skip
    peers: dict[int, int] = {}
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(SOCK_DIAG_TIMEOUT_S)
            diag.send(header + request)
            received = 0
            while received < MAX_SOCK_DIAG_BYTES and time.monotonic() < deadline:
                data = diag.recv(1 << 16)
                received += len(data)
                if not data or not _read_diag(data, peers):
                    break
    except (OSError, AttributeError, struct.error):
        pass  # no netlink here (a sandbox, another OS): no unix peers
    return peers


def _read_diag(data: bytes, peers: dict[int, int]) -> bool:
    """Add one datagram's sockets to ``peers``; False at the dump's end (or an error)."""
    at = 0
    while at + _NLMSG_HEADER.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG_HEADER.unpack_from(data, at)
        if kind in (_NLMSG_DONE, _NLMSG_ERROR) or length < _NLMSG_HEADER.size:
            return False
        body = at + _NLMSG_HEADER.size
        if body + _UNIX_DIAG_MSG.size <= at + length:
            inode = _UNIX_DIAG_MSG.unpack_from(data, body)[4]
            attr = body + _UNIX_DIAG_MSG.size
            while attr + _RTATTR.size <= at + length:
                size, kind = _RTATTR.unpack_from(data, attr)
                if size < _RTATTR.size:
                    break
                if kind == _UNIX_DIAG_PEER and size >= _RTATTR.size + 4:
                    peers[inode] = struct.unpack_from("=I", data, attr + _RTATTR.size)[0]
                attr += (size + 3) & ~3
        at += (length + 3) & ~3
    return True


def split_rows(table: str, text: str) -> list[list[str]]:
    """The rows of a /proc/net table under its header line, split into fields; a unix
    socket's path (the 8th field) may hold spaces."""
    limit = 7 if table == "unix" else -1
    return [line.split(maxsplit=limit) for line in text.splitlines()[1:]]


def parse_mount_devices(text: str) -> dict[int, tuple[int, int]]:
    """/proc/PID/mountinfo → {mnt_id: (major, minor)} (its third field, decimal)."""
    out: dict[int, tuple[int, int]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        major, _, minor = fields[2].partition(":")
        with contextlib.suppress(ValueError):
            out[int(fields[0])] = (int(major), int(minor))
    return out


def fdinfo(pid: int, fd: int) -> dict[str, int]:
    """``flags`` (octal in the file), ``mnt_id``, ``ino`` (Linux 5.14+) and ``pos`` of one
    descriptor: the kernel's file table, no file system touched."""
    values: dict[str, int] = {}
    for line in (_read_text(PROC / str(pid) / "fdinfo" / str(fd)) or "").splitlines():
        name, _, value = line.partition(":")
        name, value = name.strip(), value.strip()
        with contextlib.suppress(ValueError):
            if name == "flags":
                values[name] = int(value, 8)
            elif name in ("pos", "mnt_id", "ino"):
                values[name] = int(value)
    return values


def access_mode(pid: int, fd: int) -> str | None:
    """How ``fd`` was opened: "r", "w" or "rw" (a pipe's read end is "r")."""
    flags = fdinfo(pid, fd).get("flags")
    return None if flags is None else {0: "r", 1: "w", 2: "rw"}.get(flags & _O_ACCMODE)


def lock_holders(pid: int, fd: int, scope: Scope) -> list[LockLine]:
    """The locks that block ``pid``'s wait for a lock on ``fd``: /proc/locks lists the
    waiter (``->``, with its pid) under the lock that blocks it; failing that (an open
    file description lock shows pid -1), the granted locks on the same device and inode,
    the inode from fdinfo."""
    locks = scope.locks()
    waiting = [line for line in locks if line.blocked and line.pid == pid]
    keys = {(line.device, line.inode) for line in waiting}
    if not keys:
        info = fdinfo(pid, fd)
        device = scope.device_of(pid, info.get("mnt_id", -1))
        if "ino" in info and device is not None:
            keys = {(device, info["ino"])}
    return [line for line in locks if not line.blocked and (line.device, line.inode) in keys]


def child_pids(pid: int) -> list[int]:
    """The direct children of every thread of ``pid`` (/proc/PID/task/TID/children)."""
    kids: set[int] = set()
    with contextlib.suppress(OSError):
        for tid in os.listdir(PROC / str(pid) / "task"):
            text = _read_text(PROC / str(pid) / "task" / tid / "children") or ""
            kids.update(int(p) for p in text.split() if p.isdigit())
    return sorted(kids)


def describe_process(pid: int, role: str, scope: Scope) -> WaitPeerRecord | None:
    """What ``pid`` is: name, state, parents, start time and command line; None if gone."""
    st = procfs.read_stat(pid)
    if st is None:
        return None
    ancestors: list[int] = []
    parent = st.ppid
    while parent > 0 and parent not in ancestors and len(ancestors) < MAX_ANCESTORS:
        ancestors.append(parent)
        up = procfs.read_stat(parent)
        parent = up.ppid if up is not None else 0
    cmdline: list[str] | None = None
    if st.state not in ("Z", "X"):
        with contextlib.suppress(StepTimeout):
            cmdline = call_with_timeout(lambda: procfs.read_cmdline(pid), CMDLINE_TIMEOUT_S)
    if cmdline is not None and scope.redact_argv is not None:
        cmdline = scope.redact_argv(cmdline)
    return {
        "pid": pid,
        "role": role,
        "name": st.comm,
        "cmdline": cmdline,
        "state": st.state,
        "ppid": st.ppid,
        "ancestors": ancestors,
        "start_time": procfs.start_time_of(st.start_ticks),
    }


def _fd_targets(pid: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    fd_dir = PROC / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)[:MAX_FDS]
    except OSError:
        return out
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            out.setdefault(os.readlink(fd_dir / name), []).append(int(name))
    return out


def _all_pids() -> Iterator[int]:
    with contextlib.suppress(OSError):
        for count, entry in enumerate(os.scandir(PROC)):
            if count > MAX_PROCESSES * 2:
                return
            if entry.name.isdigit():
                yield int(entry.name)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
