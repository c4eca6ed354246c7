"""The system call a sleeping thread is in, read from ``/proc/PID/task/TID/syscall``.

The file holds the call's number and its six arguments in hex, then the stack and
instruction pointers (``73 0x3 0x2 0x0 …``), or ``running``, or ``-1 …`` for a thread
that sleeps outside a call; reading it needs ptrace rights over the process, and never
stops it. Numbers are per architecture: arch/x86/entry/syscalls/syscall_64.tbl for
x86_64, include/uapi/asm-generic/unistd.h for aarch64 (which has no ``poll``,
``select`` or ``epoll_wait``: only their ``p`` variants).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")

# fmt: off
_X86_64: dict[int, str] = {
    0: "read", 1: "write", 7: "poll", 17: "pread64", 18: "pwrite64", 19: "readv",
    20: "writev", 23: "select", 34: "pause", 35: "nanosleep", 42: "connect", 43: "accept",
    44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 61: "wait4", 72: "fcntl",
    73: "flock", 74: "fsync", 75: "fdatasync", 128: "rt_sigtimedwait", 130: "rt_sigsuspend",
    202: "futex", 230: "clock_nanosleep", 232: "epoll_wait", 247: "waitid", 270: "pselect6",
    271: "ppoll", 281: "epoll_pwait", 288: "accept4", 299: "recvmmsg", 307: "sendmmsg",
    441: "epoll_pwait2", 449: "futex_waitv",
}
_AARCH64: dict[int, str] = {
    22: "epoll_pwait", 25: "fcntl", 32: "flock", 63: "read", 64: "write", 65: "readv",
    66: "writev", 67: "pread64", 68: "pwrite64", 72: "pselect6", 73: "ppoll", 82: "fsync",
    83: "fdatasync", 95: "waitid", 98: "futex", 101: "nanosleep", 115: "clock_nanosleep",
    133: "rt_sigsuspend", 137: "rt_sigtimedwait", 202: "accept", 203: "connect", 206: "sendto",
    207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 242: "accept4", 243: "recvmmsg",
    260: "wait4", 269: "sendmmsg", 441: "epoll_pwait2", 449: "futex_waitv",
}
# fmt: on
TABLES: dict[str, dict[int, str]] = {"x86_64": _X86_64, "aarch64": _AARCH64}

# Calls whose first argument is the file descriptor they wait on.
FD_CALLS: frozenset[str] = frozenset({
    "read", "write", "pread64", "pwrite64", "readv", "writev", "connect", "accept",
    "sendto", "recvfrom", "sendmsg", "recvmsg", "fsync", "fdatasync", "accept4", "recvmmsg",
    "sendmmsg", "flock", "fcntl",
})  # fmt: skip
SLEEP_CALLS: frozenset[str] = frozenset({"nanosleep", "clock_nanosleep", "pause"})
POLL_CALLS: frozenset[str] = frozenset({"poll", "ppoll", "select", "pselect6"})
EPOLL_CALLS: frozenset[str] = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2"})
WAIT_CALLS: frozenset[str] = frozenset({"wait4", "waitid"})
# fcntl commands that wait for a lock (include/uapi/asm-generic/fcntl.h): F_SETLKW,
# F_SETLKW64 (32-bit ABIs), F_OFD_SETLKW.
FCNTL_WAIT_CMDS: frozenset[int] = frozenset({7, 14, 38})


@dataclass(frozen=True, slots=True)
class Syscall:
    """The call a thread sleeps in: its name ("flock"; "syscall 999" when this table does
    not know the number) and its six arguments."""

    name: str
    args: tuple[int, ...]

    def arg(self, index: int, *, signed: bool = False) -> int:
        value = self.args[index] if index < len(self.args) else 0
        if signed and value >= 1 << 63:
            value -= 1 << 64
        return value


def parse_syscall(text: str, machine: str | None = None) -> Syscall | None:
    """One ``/proc/PID/task/TID/syscall`` line; None for ``running``, ``-1 …`` (asleep,
    but not in a call) and anything unreadable."""
    table = TABLES.get(machine or platform.machine())
    parts = text.split()
    if table is None or len(parts) < 2:
        return None
    try:
        number = int(parts[0])
        args = tuple(int(p, 16) for p in parts[1:7])
    except ValueError:
        return None
    if number < 0:
        return None
    return Syscall(table.get(number, f"syscall {number}"), args)


def read_syscall(pid: int, tid: int) -> Syscall | None:
    """The call thread ``tid`` of ``pid`` sleeps in now, if /proc shows one."""
    try:
        text = (PROC / str(pid) / "task" / str(tid) / "syscall").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return parse_syscall(text)
