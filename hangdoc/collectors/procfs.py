"""What the kernel knows about a rank's process, read from /proc without touching it.

Reading /proc never stops or signals the target, so this is safe to repeat at every
sample. A process can vanish between any two reads: every reader here treats
"gone" as data (``alive=False``, ``None``) rather than an error, and never raises.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.collectors.dumpformat import OutputRecord, ProcSampleRecord, ThreadRecord
from hangdoc.collectors.waits import blocked_call

PROC = Path("/proc")
IO_KEYS: tuple[str, ...] = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")
_OUTPUT_FDS: tuple[tuple[str, int], ...] = (("stdout", 1), ("stderr", 2))


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of /proc/PID/stat that hangdoc uses."""

    pid: int
    comm: str
    state: str
    ppid: int
    cpu_ticks: int  # utime + stime, in clock ticks
    start_ticks: int  # since boot, in clock ticks; with pid, identifies a process


@dataclass(frozen=True, slots=True)
class StaticFacts:
    """What does not change while a process lives; read once per rank."""

    pid: int
    cmdline: list[str]
    start_time: float | None  # POSIX seconds
    start_ticks: int | None
    parent_pid: int | None
    environ: dict[str, str] = field(default_factory=dict)
    environ_error: str | None = None  # why environ could not be read (permission...)


def parse_stat(text: str) -> Stat | None:
    """Parse one /proc/PID/stat line; ``None`` when it is not one.

    ``comm`` may contain spaces and parentheses, so split at the *last* ``)``.
    """
    try:
        pid_part, rest = text.split(" (", 1)
        comm, fields_text = rest.rsplit(") ", 1)
        fields = fields_text.split()
        # fields[0] is field 3 of proc(5): field N is fields[N - 3].
        return Stat(
            pid=int(pid_part),
            comm=comm,
            state=fields[0],
            ppid=int(fields[1]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            start_ticks=int(fields[19]),
        )
    except (ValueError, IndexError):
        return None


def read_stat(pid: int, tid: int | None = None) -> Stat | None:
    """The stat of a process (or one of its threads); ``None`` when it is gone."""
    base = PROC / str(pid) if tid is None else PROC / str(pid) / "task" / str(tid)
    text = _read_text(base / "stat")
    return parse_stat(text) if text is not None else None


def process_table() -> dict[int, Stat]:
    """Every process on the node, by pid: one pass over /proc for parent/child questions."""
    table: dict[int, Stat] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if entry.name.isdigit():
                st = read_stat(int(entry.name))
                if st is not None:
                    table[st.pid] = st
    return table


def children(table: Mapping[int, Stat], pid: int) -> list[int]:
    return sorted(p for p, st in table.items() if st.ppid == pid)


def descendants(table: Mapping[int, Stat], pid: int) -> list[int]:
    """All descendants of ``pid`` in ``table``, breadth first (children before grandchildren)."""
    by_parent: dict[int, list[int]] = {}
    for p, st in table.items():
        by_parent.setdefault(st.ppid, []).append(p)
    found: list[int] = []
    queue = [pid]
    while queue:
        for child in sorted(by_parent.get(queue.pop(0), [])):
            if child not in found and child != pid:
                found.append(child)
                queue.append(child)
    return found


def python_descendants(
    table: Mapping[int, Stat], pid: int, *, exclude: Collection[int] = ()
) -> list[int]:
    """Live descendants of ``pid`` worth a py-spy run: Python interpreters, or the same
    binary as ``pid`` (a forked worker). Compilers, shells and ``nvidia-smi`` are left out.
    """
    parent_exe = read_exe(pid)
    found: list[int] = []
    for child in descendants(table, pid):
        if child in exclude or table[child].state in ("Z", "X"):
            continue
        exe = read_exe(child)
        if exe is not None and (exe == parent_exe or "python" in Path(exe).name):
            found.append(child)
    return found


def ancestors(table: Mapping[int, Stat], pid: int) -> list[int]:
    """Parent, grandparent, ... of ``pid`` up to the root (loops cut)."""
    chain: list[int] = []
    current = table.get(pid)
    while current is not None and current.ppid > 0 and current.ppid not in chain:
        chain.append(current.ppid)
        current = table.get(current.ppid)
    return chain


def read_environ(pid: int) -> dict[str, str]:
    """The environment the process was started with. Raises OSError (permission, gone)."""
    raw = (PROC / str(pid) / "environ").read_bytes()
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def read_cmdline(pid: int) -> list[str] | None:
    raw = _read_bytes(PROC / str(pid) / "cmdline")
    if raw is None:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0")[:-1]] if raw else []


def read_exe(pid: int) -> str | None:
    """The executable's path (the link /proc/PID/exe), or ``None`` when unreadable."""
    try:
        return os.readlink(PROC / str(pid) / "exe")
    except OSError:
        return None


def boot_time() -> float | None:
    """POSIX time of boot (``btime`` of /proc/stat), to turn start ticks into a time."""
    text = _read_text(PROC / "stat")
    for line in (text or "").splitlines():
        if line.startswith("btime "):
            with contextlib.suppress(ValueError):
                return float(line.split()[1])
    return None


def start_time_of(start_ticks: int) -> float | None:
    btime = boot_time()
    return None if btime is None else btime + start_ticks / os.sysconf("SC_CLK_TCK")


def read_static(pid: int) -> StaticFacts | None:
    """Command line, start time, parent and environment; ``None`` when the pid is gone."""
    st = read_stat(pid)
    cmdline = read_cmdline(pid)
    if st is None or cmdline is None:
        return None
    environ: dict[str, str] = {}
    environ_error: str | None = None
    try:
        environ = read_environ(pid)
    except OSError as exc:
        environ_error = f"cannot read /proc/{pid}/environ: {exc.strerror or exc}"
    return StaticFacts(
        pid=pid,
        cmdline=cmdline,
        start_time=start_time_of(st.start_ticks),
        start_ticks=st.start_ticks,
        parent_pid=st.ppid,
        environ=environ,
        environ_error=environ_error,
    )


def read_sample(pid: int, index: int, *, start_ticks: int | None = None) -> ProcSampleRecord:
    """The kernel's view of ``pid`` now: state, wchan, threads, I/O counters, output files.

    ``start_ticks`` (from :func:`read_static`) guards against pid reuse: a different
    process under the same pid counts as the old one having exited. A zombie counts as
    exited too: its threads and stacks are gone, only its parent has not reaped it.
    Never raises.
    """
    sample: ProcSampleRecord = {
        "index": index,
        "time": time.time(),
        "alive": False,
        "state": None,
        "wchan": None,
        "cpu_ticks": None,
        "threads": [],
        "io": {},
        "output": {},
    }
    st = read_stat(pid)
    if st is None:
        sample["error"] = "process exited"
        return sample
    sample["state"] = st.state
    sample["cpu_ticks"] = st.cpu_ticks
    if start_ticks is not None and st.start_ticks != start_ticks:
        sample["state"] = None
        sample["error"] = "process exited (its pid now belongs to another process)"
        return sample
    if st.state in ("Z", "X"):
        sample["error"] = "process exited (zombie, not yet reaped by its parent)"
        return sample
    sample["alive"] = True
    sample["wchan"] = _read_wchan(PROC / str(pid) / "wchan")
    sample["threads"] = _read_threads(pid)
    sample["io"] = _read_io(pid)
    sample["output"] = _read_outputs(pid)
    return sample


def is_alive(pid: int, start_ticks: int | None = None) -> bool:
    st = read_stat(pid)
    if st is None or st.state in ("Z", "X"):
        return False
    return start_ticks is None or st.start_ticks == start_ticks


def _read_threads(pid: int) -> list[ThreadRecord]:
    task_dir = PROC / str(pid) / "task"
    try:
        tids = sorted(int(name) for name in os.listdir(task_dir) if name.isdigit())
    except OSError:
        return []
    threads: list[ThreadRecord] = []
    for tid in tids:
        st = read_stat(pid, tid)
        if st is None:  # the thread ended while we listed them
            continue
        tdir = task_dir / str(tid)
        status = _read_status(tdir / "status")
        comm = _read_text(tdir / "comm")
        record: ThreadRecord = {
            "tid": tid,
            "name": comm.rstrip("\n") if comm is not None else st.comm,
            "state": st.state,
            "wchan": _read_wchan(tdir / "wchan"),
            "cpu_ticks": st.cpu_ticks,
            "voluntary_ctxt_switches": status.get("voluntary_ctxt_switches"),
            "nonvoluntary_ctxt_switches": status.get("nonvoluntary_ctxt_switches"),
        }
        if st.state in ("S", "D") and (call := blocked_call(pid, tid)) is not None:
            record["syscall"], record["waits_on"] = call
        threads.append(record)
    return threads


def _read_status(path: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in (_read_text(path) or "").splitlines():
        name, _, value = line.partition(":")
        if name.endswith("ctxt_switches"):
            with contextlib.suppress(ValueError):
                values[name] = int(value.strip())
    return values


def _read_io(pid: int) -> dict[str, int]:
    """/proc/PID/io needs ptrace-read access; without it the counters are simply absent."""
    values: dict[str, int] = {}
    for line in (_read_text(PROC / str(pid) / "io") or "").splitlines():
        name, _, value = line.partition(":")
        if name in IO_KEYS:
            with contextlib.suppress(ValueError):
                values[name] = int(value.strip())
    return values


def _read_outputs(pid: int) -> dict[str, OutputRecord]:
    """Where stdout/stderr go when they are regular files: a growing file means progress."""
    outputs: dict[str, OutputRecord] = {}
    for name, fd in _OUTPUT_FDS:
        link = PROC / str(pid) / "fd" / str(fd)
        try:
            target = os.readlink(link)
            info = os.stat(link)  # follows the link to the open file itself
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            outputs[name] = {"path": target, "size": info.st_size}
    return outputs


def _read_wchan(path: Path) -> str | None:
    """The kernel function a task sleeps in; "0" (running, or hidden) becomes ``None``."""
    text = _read_text(path)
    if text is None:
        return None
    text = text.strip()
    return None if text in ("", "0") else text


def _read_text(path: Path) -> str | None:
    raw = _read_bytes(path)
    return raw.decode("utf-8", "replace") if raw is not None else None


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
