"""The cheap signals of one rank process, read from /proc between stack samples.

Each poll reads three small files per rank (``stat``, ``status``, ``io``) and the offset
of each regular file the rank writes (``fdinfo``, found by a scan of its open files every
``rescan``): microseconds, no ptrace stop, no file-system access (the offset is the
kernel's, so a dead NFS server cannot block the watcher).

What counts as movement, and why:

* **output**: a file the rank writes grew (its stdout/stderr redirected to a file, its
  own log, NCCL_DEBUG_FILE, a checkpoint being written): the clearest sign of work.
* **I/O**: bytes through read/write calls (``rchar``, ``wchar``: pipes to a launcher,
  files) or to storage (``read_bytes``, ``write_bytes``).
* CPU time and the main thread's voluntary context switches are recorded but do **not**
  count: a hung rank can burn a core (NCCL and CUDA spin-wait, a thread that holds the
  GIL) and a thread waiting for the GIL wakes every 5 ms, so either would hide a hang.
  A healthy rank whose only sign of life is CPU is told apart by its stacks: the
  watcher confirms every stall with stack samples before it reports anything.

Nothing here raises; a process that vanished reads as ``alive=False``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.collectors import procfs

PROC = Path("/proc")
IO_MOVES: tuple[str, ...] = ("rchar", "wchar", "read_bytes", "write_bytes")
_WRITE_MODES = (os.O_WRONLY, os.O_RDWR)
_O_ACCMODE = 0o3
# Per rank, at most this many written files are followed (a rank with thousands of open
# shards must not turn a poll into thousands of reads); stdout and stderr first.
MAX_FOLLOWED = 32


@dataclass(frozen=True, slots=True)
class Reading:
    """One rank at one poll."""

    alive: bool
    state: str | None = None
    cpu_ticks: int = 0
    main_switches: int = 0  # voluntary context switches of the main thread
    io: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)  # path -> offset
    exit_code: int | None = None  # the wait status of a zombie (its parent has not reaped it)


@dataclass(frozen=True, slots=True)
class Movement:
    """What changed between two readings of a rank; ``reasons`` empty means nothing did."""

    reasons: tuple[str, ...]
    cpu_ticks: int  # recorded, not counted (see the module doc)
    main_switches: int

    @property
    def moved(self) -> bool:
        return bool(self.reasons)


def written_files(pid: int) -> dict[int, str]:
    """The regular files ``pid`` holds open for writing, by fd (stdout and stderr first).

    A scan of /proc/PID/fd (a readlink and an fdinfo read per fd), made once per rescan,
    not at every poll.
    """
    fd_dir = PROC / str(pid) / "fd"
    try:
        fds = sorted(int(name) for name in os.listdir(fd_dir) if name.isdigit())
    except OSError:
        return {}
    files: dict[int, str] = {}
    for fd in fds:
        if len(files) >= MAX_FOLLOWED:
            break
        flags = _fdinfo(pid, fd).get("flags")
        if flags is None or (flags & _O_ACCMODE) not in _WRITE_MODES:
            continue
        try:
            target = os.readlink(fd_dir / str(fd))
            mode = os.stat(fd_dir / str(fd)).st_mode if target.startswith("/") else 0
        except OSError:
            continue
        # os.stat of /proc/PID/fd/N reads the inode the kernel holds: no server round
        # trip for files of a network file system that are already open.
        if stat.S_ISREG(mode) and not target.startswith(("/dev/", "/proc/", "/sys/")):
            files[fd] = target
    return files


def read(pid: int, start_ticks: int | None, follow: dict[int, str]) -> Reading:
    """The rank now; ``follow`` is :func:`written_files` from the last scan."""
    st = procfs.read_stat(pid)
    if st is None or (start_ticks is not None and st.start_ticks != start_ticks):
        return Reading(alive=False)
    if st.state in ("Z", "X"):
        return Reading(alive=False, state=st.state, exit_code=_exit_code(pid))
    written: dict[str, int] = {}
    for fd, path in follow.items():
        pos = _fdinfo(pid, fd).get("pos")
        if pos is not None:
            written[path] = max(pos, written.get(path, 0))
    return Reading(
        alive=True,
        state=st.state,
        cpu_ticks=st.cpu_ticks,
        main_switches=_main_switches(pid),
        io=_io(pid),
        written=written,
    )


def compare(before: Reading, after: Reading) -> Movement:
    """What moved from ``before`` to ``after`` (both of a live rank)."""
    reasons: list[str] = []
    for path, pos in after.written.items():
        old = before.written.get(path)
        if old is not None and pos > old:
            reasons.append(f"{Path(path).name} grew {_size(pos - old)}")
    for key in IO_MOVES:
        old_value, new_value = before.io.get(key), after.io.get(key)
        if old_value is not None and new_value is not None and new_value > old_value:
            reasons.append(f"{key} +{_size(new_value - old_value)}")
    return Movement(
        tuple(reasons),
        max(0, after.cpu_ticks - before.cpu_ticks),
        max(0, after.main_switches - before.main_switches),
    )


def describe_exit(status: int | None) -> str:
    """A wait status in words: "exited with 1", "killed by signal 9 (SIGKILL)"."""
    if status is None:
        return "exited (status unknown: its parent reaped it)"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by signal {number} ({_signal_name(number)})"
        return f"killed by signal {number}"
    if os.WIFEXITED(status):
        return f"exited with {os.WEXITSTATUS(status)}"
    return f"ended (wait status {status})"


def _signal_name(number: int) -> str:
    import signal

    return signal.Signals(number).name


def _exit_code(pid: int) -> int | None:
    """Field 52 of /proc/PID/stat: the exit status of a zombie, as waitpid would give it."""
    raw = _read_text(PROC / str(pid) / "stat")
    if raw is None:
        return None
    fields = raw.rsplit(") ", 1)[-1].split()
    with contextlib.suppress(IndexError, ValueError):
        return int(fields[49])
    return None


def _main_switches(pid: int) -> int:
    """Voluntary context switches of the main thread (``/proc/PID/status`` is the main
    thread's own; the whole process would need one read per thread)."""
    text = _read_text(PROC / str(pid) / "status") or ""
    for line in text.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            with contextlib.suppress(ValueError):
                return int(line.split(":", 1)[1])
    return 0


def _io(pid: int) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in (_read_text(PROC / str(pid) / "io") or "").splitlines():
        name, _, value = line.partition(":")
        if name in IO_MOVES:
            with contextlib.suppress(ValueError):
                values[name] = int(value)
    return values


def _fdinfo(pid: int, fd: int) -> dict[str, int]:
    values: dict[str, int] = {}
    text = _read_text(PROC / str(pid) / "fdinfo" / str(fd))
    for line in (text or "").splitlines():
        name, _, value = line.partition(":")
        with contextlib.suppress(ValueError):
            if name == "pos":
                values["pos"] = int(value)
            elif name == "flags":
                values["flags"] = int(value.strip(), 8)
    return values


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count} {unit}"
        count //= 1024
    return f"{count} GiB"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
