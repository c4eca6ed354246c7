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
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path

PROC = Path("/proc")

# System calls whose first argument is the file descriptor they wait on, by number, per
# architecture (arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h
# for aarch64).
_FD_CALLS: dict[str, dict[int, str]] = {
    "x86_64": {
        0: "read", 1: "write", 17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev",
        42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
        47: "recvmsg", 74: "fsync", 75: "fdatasync", 288: "accept4", 299: "recvmmsg",
        307: "sendmmsg",
    },
    "aarch64": {
        63: "read", 64: "write", 65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64",
        82: "fsync", 83: "fdatasync", 202: "accept", 203: "connect", 206: "sendto",
        207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 242: "accept4", 243: "recvmmsg",
        269: "sendmmsg",
    },
}  # fmt: skip
_TCP_STATES = {"01": "established", "02": "syn-sent", "08": "close-wait", "0A": "listen"}


def blocked_call(pid: int, tid: int) -> tuple[str, str] | None:
    """(system call, what its file is) for a thread asleep in a call on a file descriptor:
    ("sendto", "socket tcp 127.0.0.1:41234 -> 127.0.0.1:43121 established"),
    ("write", "file /ckpt/model.pt"), ("read", "pipe"). None otherwise."""
    calls = _FD_CALLS.get(platform.machine())
    text = _read(PROC / str(pid) / "task" / str(tid) / "syscall")
    if calls is None or not text:
        return None
    parts = text.split()
    try:
        number, fd = int(parts[0]), int(parts[1], 16)
    except (IndexError, ValueError):
        return None  # "running", or "-1 …" (not in a system call)
    call = calls.get(number)
    if call is None:
        return None
    try:
        target = os.readlink(PROC / str(pid) / "fd" / str(fd))
    except OSError:
        return None
    return call, describe(pid, target)


def describe(pid: int, target: str) -> str:
    """A file descriptor's target in words (its TCP ends for a TCP socket)."""
    if target.startswith("socket:["):
        inode = target[len("socket:[") : -1]
        return tcp_ends(pid, inode) or "socket"
    if target.startswith("pipe:["):
        return "pipe"
    return f"file {target}" if target.startswith("/") else target


def tcp_ends(pid: int, inode: str) -> str | None:
    """ "socket tcp LOCAL -> REMOTE STATE" for the TCP socket with this inode, else None."""
    for table, v6 in (("tcp", False), ("tcp6", True)):
        for line in (_read(PROC / str(pid) / "net" / table) or "").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[9] == inode:
                local, remote = _address(fields[1], v6), _address(fields[2], v6)
                state = _TCP_STATES.get(fields[3], fields[3])
                return f"socket tcp {local} -> {remote} {state}"
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
