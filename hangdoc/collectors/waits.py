"""What a blocked thread waits on, from /proc: the system call it sleeps in and its file.

A thread asleep in the kernel shows its system call in ``/proc/PID/task/TID/syscall``
(the number and its arguments; readable with ptrace rights over the process). For the
calls whose first argument is a file descriptor (``read``, ``write``, ``sendto``,
``recvmsg``, ``connect``, ``fsync``…), ``/proc/PID/fd/N`` names what it is: a socket, a
pipe, or a file; a TCP socket's two ends come from ``/proc/PID/net/tcp`` (and ``tcp6``),
matched on the socket's inode. So "rank 3's main thread is in ``sendto`` on a TCP socket
to 10.0.0.7:443" is read, not guessed from the names of the code that called it: a rank
stuck uploading to a server that stopped reading, whatever its frames are called.

Only threads in ``S`` or ``D`` state are read, everything here is best effort (a thread
that moves on, a kernel that hides the file) and nothing raises.

:func:`read_waits` (issue 21) goes further, for every system call a thread can sleep in
and with who is at the other end (collectors/wait_peers.py): a ``flock``/``fcntl`` lock
wait and the lock's holder (/proc/locks); a pipe and the process holding its other end;
a socket, its TCP ends, and the local process at its far end; ``poll``/``select``/
``epoll`` and the descriptors they watch (the ``pollfd`` array and ``fd_set`` read from
/proc/PID/mem, the epoll set from its fdinfo); ``wait4``/``waitid`` and the child waited
for; a futex word and the other threads waiting on it; a sleep. Each peer is described
(name, state, parents, start time, command line) and, one level deep, what it waits on
in turn: a child that waits on the pipe its parent holds closes a cycle.
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
from pathlib import Path

from hangdoc.collectors.bounded import StepTimeout, call_with_timeout
from hangdoc.collectors.dumpformat import ThreadRecord, WaitPeerRecord, WaitRecord
from hangdoc.collectors.syscalls import (
    EPOLL_CALLS,
    FCNTL_WAIT_CMDS,
    FD_CALLS,
    POLL_CALLS,
    SLEEP_CALLS,
    WAIT_CALLS,
    Syscall,
    read_syscall,
)
from hangdoc.collectors.wait_peers import (
    Scope,
    access_mode,
    child_pids,
    describe_process,
    lock_holders,
    split_rows,
)

PROC = Path("/proc")

_TCP_STATES = {"01": "established", "02": "syn-sent", "08": "close-wait", "0A": "listen"}


def blocked_call(pid: int, tid: int) -> tuple[str, str] | None:
    """(system call, what its file is) for a thread asleep in a call on a file descriptor:
    ("sendto", "socket tcp 127.0.0.1:41234 -> 127.0.0.1:43121 established"),
    ("write", "file /ckpt/model.pt"), ("read", "pipe"). None otherwise."""
    call = read_syscall(pid, tid)
    if call is None or call.name not in FD_CALLS:
        return None
    try:
        target = os.readlink(PROC / str(pid) / "fd" / str(call.arg(0)))
    except OSError:
        return None
    return call.name, describe(pid, target)


def describe(pid: int, target: str, scope: Scope | None = None) -> str:
    """A file descriptor's target in words (its TCP ends for a TCP socket, its path for a
    unix socket)."""
    if target.startswith("socket:["):
        inode = target[len("socket:[") : -1]
        return tcp_ends(pid, inode, scope) or unix_name(pid, inode, scope) or "socket"
    if target.startswith("pipe:["):
        return "pipe"
    return f"file {target}" if target.startswith("/") else target


def _rows(pid: int, table: str, scope: Scope | None) -> list[list[str]]:
    if scope is not None:
        return scope.net_rows(pid, table)
    return split_rows(table, _read(PROC / str(pid) / "net" / table) or "")


def tcp_ends(pid: int, inode: str, scope: Scope | None = None) -> str | None:
    """ "socket tcp LOCAL -> REMOTE STATE" for the TCP socket with this inode, else None."""
    for table, v6 in (("tcp", False), ("tcp6", True)):
        for fields in _rows(pid, table, scope):
            if len(fields) > 9 and fields[9] == inode:
                local, remote = _address(fields[1], v6), _address(fields[2], v6)
                state = _TCP_STATES.get(fields[3], fields[3])
                return f"socket tcp {local} -> {remote} {state}"
    return None


def unix_name(pid: int, inode: str, scope: Scope | None = None) -> str | None:
    """ "socket unix /run/helper.sock" (or "socket unix" unnamed) for a unix socket: its
    row in /proc/PID/net/unix (proc(5): Num RefCount Protocol Flags Type St Inode Path)."""
    for fields in _rows(pid, "unix", scope):
        if len(fields) > 6 and fields[6] == inode:
            return "socket unix" + (f" {fields[7]}" if len(fields) > 7 else "")
    return None


def _address(text: str, v6: bool) -> str:
    """/proc/net/tcp's ``0100007F:A8C1`` → ``127.0.0.1:43201`` (little-endian words)."""
    host, _, port = text.partition(":")
    with contextlib.suppress(ValueError):
        raw = bytes.fromhex(host)
        words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
        packed = b"".join(words)
        if not v6:
            ip = ".".join(str(b) for b in packed)
        elif packed[:12] == b"\0" * 10 + b"\xff\xff":
            ip = ".".join(str(b) for b in packed[12:])  # an IPv4 address in an IPv6 socket
        else:
            ip = "[" + ":".join(packed[i : i + 2].hex() for i in range(0, 16, 2)) + "]"
        return f"{ip}:{int(port, 16)}"
    return text


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


# --- every wait, with who is at the other end (issue 21) --------------------------------

MAX_WATCHED_FDS = 8  # of a poll/select/epoll wait, described
MAX_PEERS = 4
MEMORY_TIMEOUT_S = 0.5
_P_ALL, _P_PID = 0, 1  # waitid's idtype (include/uapi/linux/wait.h)


def read_waits(pid: int, threads: list[ThreadRecord], scope: Scope) -> None:
    """Add ``wait`` to the record of each thread of ``pid`` asleep in a system call."""
    for record in threads:
        if record["state"] not in ("S", "D"):
            continue
        call = read_syscall(pid, record["tid"])
        if call is not None:
            record["wait"] = wait_record(pid, call, scope, depth=1, wchan=record["wchan"])
    by_address: dict[str, list[int]] = {}
    for record in threads:
        wait = record.get("wait")
        if wait is not None and "address" in wait:
            by_address.setdefault(wait["address"], []).append(record["tid"])
    for record in threads:
        wait = record.get("wait")
        if wait is not None and "address" in wait:
            others = [t for t in by_address[wait["address"]] if t != record["tid"]]
            if others:
                wait["sharers"] = others[:16]


def wait_record(
    pid: int, call: Syscall, scope: Scope, *, depth: int, wchan: str | None = None
) -> WaitRecord:
    """What a thread of ``pid`` asleep in ``call`` waits on; peers while time remains,
    and their own waits ``depth`` levels down. ``wchan``: the thread's wait channel (a
    named FIFO is a path whose read or write sleeps in the kernel's pipe code)."""
    name = call.name
    if name == "flock" or (name == "fcntl" and call.arg(1) in FCNTL_WAIT_CMDS):
        return _lock_wait(pid, call, scope)
    if name in FD_CALLS and name != "fcntl":
        return _fd_wait(pid, call, scope, depth, fifo=_in_pipe_code(wchan))
    if name in POLL_CALLS or name in EPOLL_CALLS:
        return _poll_wait(pid, call, scope, depth)
    if name in WAIT_CALLS:
        return _child_wait(pid, call, scope, depth)
    if name in ("futex", "futex_waitv"):
        return {"kind": "futex", "syscall": name, "address": hex(call.arg(0))}
    if name in SLEEP_CALLS:
        return {"kind": "sleep", "syscall": name}
    return {"kind": "unknown", "syscall": name}


def _link(pid: int, fd: int) -> str | None:
    try:
        return os.readlink(PROC / str(pid) / "fd" / str(fd))
    except OSError:
        return None


def _lock_wait(pid: int, call: Syscall, scope: Scope) -> WaitRecord:
    fd = call.arg(0)
    record: WaitRecord = {"kind": "lock_file", "syscall": call.name, "fd": fd}
    if (link := _link(pid, fd)) is not None:
        record["target"] = scope.redact(link) if scope.redact else link
    peers: list[WaitPeerRecord] = []
    for line in lock_holders(pid, fd, scope)[:MAX_PEERS]:
        peer = describe_process(line.pid, "holder", scope) if line.pid > 0 else None
        if peer is not None:
            peer["lock"] = line.label
            peers.append(peer)
    if peers:
        record["peers"] = peers
    return record


def _in_pipe_code(wchan: str | None) -> bool:
    """fs/pipe.c's ``pipe_read``/``pipe_write`` (``anon_pipe_*`` for anonymous pipes on
    recent kernels), ``wait_for_partner`` of a FIFO's open."""
    prefixes = ("pipe_", "anon_pipe_", "wait_for_partner")
    return wchan is not None and wchan.lstrip("_").startswith(prefixes)


def _fd_wait(
    pid: int, call: Syscall, scope: Scope, depth: int, *, fifo: bool = False
) -> WaitRecord:  # fmt: skip
    fd = call.arg(0)
    link = _link(pid, fd)
    kind = _kind_of(link)
    fifo = fifo and kind == "file"  # a path whose reads sleep in the pipe code: a FIFO
    if kind == "file" and not fifo and _is_terminal(pid, fd):
        kind = "terminal"
    record: WaitRecord = {"kind": "pipe" if fifo else kind, "syscall": call.name, "fd": fd}
    if link is None:
        return record
    record["target"] = _target(pid, link, scope)
    peers = _peers_of(pid, fd, link, scope, depth, fifo=fifo)
    if peers:
        record["peers"] = peers
    return record


def _poll_wait(pid: int, call: Syscall, scope: Scope, depth: int) -> WaitRecord:
    fds = _watched_fds(pid, call)[:MAX_WATCHED_FDS]
    links = [(fd, link) for fd in fds if (link := _link(pid, fd)) is not None]
    kinds = {_kind_of(link) for _, link in links}
    kind = "pipe" if kinds == {"pipe"} else "socket" if "socket" in kinds else "poll"
    record: WaitRecord = {"kind": kind, "syscall": call.name}
    if links:
        # A socket's ends are not looked up here: the sockets a poll watches are mostly
        # the job's own connections (gloo's loop, the store), and each lookup reads the
        # node's TCP table (milliseconds per read).
        record["fds"] = [fd for fd, _ in links]
        record["targets"] = [_kind_of(link) if link.startswith("socket:[") else
                             _target(pid, link, scope) for _, link in links]  # fmt: skip
    peers: list[WaitPeerRecord] = []
    # Pipes only, and not the process's own wake-up pipe (both ends its own).
    for fd, link in ((f, k) for f, k in links if k.startswith("pipe:[")):
        for peer in _peers_of(pid, fd, link, scope, depth, others_only=True):
            if all(p["pid"] != peer["pid"] for p in peers):
                peers.append(peer)
    if peers:
        record["peers"] = peers[:MAX_PEERS]
    return record


def _child_wait(pid: int, call: Syscall, scope: Scope, depth: int) -> WaitRecord:
    if call.name == "wait4":
        wanted = call.arg(0, signed=True)
    else:
        idtype, ident = call.arg(0), call.arg(1)
        wanted = ident if idtype == _P_PID else -1 if idtype == _P_ALL else 0
    kids = [wanted] if wanted > 0 else child_pids(pid)
    record: WaitRecord = {"kind": "child", "syscall": call.name}
    if wanted > 0:
        record["target"] = f"pid {wanted}"
    peers: list[WaitPeerRecord] = []
    for kid in kids[:MAX_PEERS]:
        if scope.expired():
            break
        peer = describe_process(kid, "child", scope)
        if peer is not None:
            _add_own_wait(peer, scope, depth)
            peers.append(peer)
    if peers:
        record["peers"] = peers
    return record


def _peers_of(
    pid: int,
    fd: int,
    link: str,
    scope: Scope,
    depth: int,
    *,
    others_only: bool = False,
    fifo: bool = False,
) -> list[WaitPeerRecord]:
    """The processes at the other end of a pipe or a named FIFO (``fifo``: ``link`` is its
    path), or of a socket on this node (with ``others_only``, not ``pid`` itself)."""
    if scope.expired():
        return []
    if link.startswith("pipe:[") or fifo:
        own = access_mode(pid, fd)
        ends = [(p, f) for p, f in scope.holders(link, exclude=(pid, fd))]
        ends = [(p, f) for p, f in ends if not (others_only and p == pid)]
        found = [(p, f) for p, f in ends if own is None or access_mode(p, f) != own]
        role = "other_end"
    elif link.startswith("socket:[") and (far := _socket_peer(pid, link[8:-1], scope)):
        found, role = list(scope.holders(f"socket:[{far}]"))[:MAX_PEERS], "peer"
    else:
        return []
    peers: list[WaitPeerRecord] = []
    for peer_pid, peer_fd in found[:MAX_PEERS]:
        peer = describe_process(peer_pid, role, scope)
        if peer is not None:
            peer["fd"] = peer_fd
            if peer_pid != pid:
                _add_own_wait(peer, scope, depth)
            peers.append(peer)
    return peers


def _add_own_wait(peer: WaitPeerRecord, scope: Scope, depth: int) -> None:
    """What the peer's main thread waits on in turn, ``depth`` levels down."""
    if depth <= 0 or scope.expired() or peer["state"] not in ("S", "D"):
        return
    call = read_syscall(peer["pid"], peer["pid"])
    if call is not None:
        wchan = (_read(PROC / str(peer["pid"]) / "wchan") or "").strip() or None
        peer["wait"] = wait_record(peer["pid"], call, scope, depth=depth - 1, wchan=wchan)


def _kind_of(link: str | None) -> str:
    if link is None:
        return "unknown"
    if link.startswith("pipe:["):
        return "pipe"
    if link.startswith("socket:["):
        return "socket"
    return "file" if link.startswith("/") else "unknown"


# Character devices that are terminals, by major number (the kernel's
# Documentation/admin-guide/devices.txt): 4 the virtual consoles and serial ttys, 5
# /dev/tty, /dev/console and /dev/ptmx, 136-143 the Unix98 pseudo-terminal slaves
# (/dev/pts/N: a terminal emulator, ssh, tmux, a container's tty).
_TTY_MAJORS = frozenset({4, 5, *range(136, 144)})


def _is_terminal(pid: int, fd: int) -> bool:
    """The descriptor is a terminal: a read on it waits until someone types (a prompt that
    nobody sees), which no storage or peer process will ever end."""
    try:
        info = os.stat(PROC / str(pid) / "fd" / str(fd))
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and os.major(info.st_rdev) in _TTY_MAJORS


def _target(pid: int, link: str, scope: Scope) -> str:
    if link.startswith("socket:["):
        return describe(pid, link, scope)
    if link.startswith("/") and scope.redact is not None:
        return scope.redact(link)
    return link


def _watched_fds(pid: int, call: Syscall) -> list[int]:
    """The descriptors a poll, select or epoll wait watches."""
    if call.name in EPOLL_CALLS:
        text = _read(PROC / str(pid) / "fdinfo" / str(call.arg(0))) or ""
        fds = []
        for line in text.splitlines():
            if line.startswith("tfd:"):
                with contextlib.suppress(ValueError, IndexError):
                    fds.append(int(line.split()[1]))
        return fds
    if call.name in ("poll", "ppoll"):
        count = min(call.arg(1), MAX_WATCHED_FDS * 4)
        raw = _memory(pid, call.arg(0), 8 * count)  # struct pollfd {int fd; short; short}
        fds = [struct.unpack_from("<i", raw, 8 * i)[0] for i in range(len(raw) // 8)]
        return [fd for fd in fds if fd >= 0]
    nfds = min(call.arg(0), 1024)  # select, pselect6: the read and write fd_sets
    fds = []
    for pointer in (call.arg(1), call.arg(2)):
        raw = _memory(pid, pointer, (nfds + 7) // 8) if pointer else b""
        fds += [i for i in range(len(raw) * 8) if i < nfds and raw[i // 8] >> (i % 8) & 1]
    return sorted(set(fds))


def _memory(pid: int, address: int, size: int) -> bytes:
    """``size`` bytes of ``pid``'s memory at ``address`` (/proc/PID/mem: ptrace rights;
    the process is not stopped), b"" when unreadable or not read in time."""
    if size <= 0 or address <= 0:
        return b""

    def read() -> bytes:
        fd = os.open(PROC / str(pid) / "mem", os.O_RDONLY)
        try:
            return os.pread(fd, size, address)
        finally:
            os.close(fd)

    try:
        return call_with_timeout(read, MEMORY_TIMEOUT_S)
    except (OSError, OverflowError, StepTimeout):
        return b""


def _socket_peer(pid: int, inode: str, scope: Scope) -> str | None:
    """The inode of the socket at the other end: a TCP connection on this node, else a
    unix socket's peer."""
    far = _tcp_peer(pid, inode, scope)
    if far is None and inode.isdigit() and (peer := scope.unix_peer(int(inode))):
        far = str(peer)
    return far


def _tcp_peer(pid: int, inode: str, scope: Scope) -> str | None:
    """The inode of the socket at the far end of a TCP connection on this node (its row
    has the two addresses swapped); None when the far end is elsewhere or not accepted."""
    for table in ("tcp", "tcp6"):
        rows = scope.net_rows(pid, table)
        mine = next((r for r in rows if len(r) > 9 and r[9] == inode), None)
        if mine is None:
            continue
        for row in rows:
            if len(row) > 9 and row[1] == mine[2] and row[2] == mine[1] and row[9] != "0":
                return row[9]
        return None
    return None
