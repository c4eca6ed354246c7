"""The dump directory format, shared by the collectors (writers) and the loader (reader).

This is the one module of ``collectors`` that the analyzer may import. A dump is::

    DIR/
      manifest.json            # Manifest below; rewritten atomically as collection goes on
      rank<R>/                 # one folder per rank (pid<PID>/ when the rank is unknown)
        process.json           # ProcessFile below: /proc facts for every sample
        pyspy.<i>.json         # raw ``py-spy dump --json`` output of sample i (0-based)

Every file is written to a temporary name and renamed into place, so a collector
killed half-way leaves a dump that is readable up to its last complete step; the
manifest's ``complete`` is false until the end.

Bump FORMAT's version when a key changes meaning; adding keys is allowed.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

FORMAT = "hangdoc.dump/1"
MANIFEST_NAME = "manifest.json"
PROCESS_NAME = "process.json"
PROCESS_FORMAT = "hangdoc.process/1"

StepStatus = Literal["ok", "failed", "timeout", "skipped"]


def rank_dir_name(rank: int | None, pid: int) -> str:
    """Folder of one rank inside a dump."""
    return f"rank{rank}" if rank is not None else f"pid{pid}"


def pyspy_file_name(sample: int) -> str:
    return f"pyspy.{sample}.json"


class StepRecord(TypedDict):
    """Outcome of one collector step; failures carry a reason a person can act on."""

    step: str  # discover | proc | pyspy | archive | ...
    status: StepStatus
    rank: int | None
    pid: int | None
    sample: int | None
    reason: str | None
    duration_s: float | None
    file: NotRequired[str | None]
    # True when the step did not run, or stopped, because the process (``pid``, else the
    # rank's) had exited. ``hangdoc collect`` writes it on every step it records; older
    # dumps and other writers' steps lack it, and readers then fall back to the reason's
    # wording (analyzer/loading/dump_reader.py: ``_EXITED_REASON``).
    exited: NotRequired[bool]


class RankRecord(TypedDict):
    rank: int | None
    pid: int
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    group_rank: int | None
    dir: str
    how_found: str  # pid | torchrun-agent-child | env-scan


class SampleRecord(TypedDict):
    index: int
    time: float  # POSIX seconds when the sample started


class OptionsRecord(TypedDict):
    samples: int
    interval_s: float
    native: bool
    subprocesses: bool
    nonblocking: bool
    pids_requested: list[int]
    all: bool
    step_timeout_s: float


class Manifest(TypedDict):
    format: str
    hangdoc_version: str
    host: str
    started_at: float
    finished_at: float | None
    complete: bool
    options: OptionsRecord
    samples: list[SampleRecord]
    ranks: list[RankRecord]
    steps: list[StepRecord]
    py_spy: dict[str, str | None]
    warnings: list[str]


class ThreadRecord(TypedDict):
    tid: int
    name: str | None
    state: str | None
    wchan: str | None
    cpu_ticks: int | None
    voluntary_ctxt_switches: int | None
    nonvoluntary_ctxt_switches: int | None
    # A sleeping thread in a system call on a file descriptor (collectors/waits.py):
    # the call ("sendto") and what the descriptor is ("socket tcp A -> B established").
    syscall: NotRequired[str]
    waits_on: NotRequired[str]
    # What the sleeping thread waits on, with who is at the other end (issue 21,
    # collectors/waits.py): any system call, not only those on a file descriptor.
    wait: NotRequired[WaitRecord]


class WaitPeerRecord(TypedDict):
    """A process at the other end of a wait: a file lock's holder, a pipe's other end,
    a local socket's peer, the child a ``wait4`` waits for. Read from /proc at the same
    sample; ``cmdline`` is None where it could not be read in time."""

    pid: int
    role: str  # holder | other_end | peer | child
    name: str | None  # comm
    cmdline: list[str] | None
    state: str | None  # R, S, D, Z, T...
    ppid: int | None
    ancestors: list[int]  # ppid, its parent, ... up to init (at most 8)
    start_time: float | None  # POSIX seconds
    fd: NotRequired[int]  # its descriptor on the same pipe or socket
    lock: NotRequired[str]  # the lock it holds: "FLOCK WRITE", "POSIX READ"
    wait: NotRequired[WaitRecord]  # what its main thread waits on (one level deep)


class WaitRecord(TypedDict):
    """What one sleeping thread waits on (collectors/waits.py)."""

    kind: (
        str  # lock_file | pipe | socket | futex | child | sleep | file | poll | terminal | unknown
    )
    syscall: str  # "flock", "read", "wait4", "futex"...; "syscall N" if not known
    fd: NotRequired[int]  # the descriptor it waits on
    target: NotRequired[str]  # "/srv/cache.lock", "pipe:[81]", "socket tcp A -> B established"
    fds: NotRequired[list[int]]  # poll, select, epoll: the descriptors watched (at most 8)
    targets: NotRequired[list[str]]  # ... and what each one is
    address: NotRequired[str]  # futex: the word's address ("0x7f3a…")
    sharers: NotRequired[list[int]]  # futex: the other threads waiting on the same word
    peers: NotRequired[list[WaitPeerRecord]]


class OutputRecord(TypedDict):
    path: str
    size: int


class OpenFileRecord(TypedDict):
    """A regular file a process holds open (issue 7; collectors/node_facts.py)."""

    fd: int
    path: str
    mode: str | None  # "r" | "w" | "rw"
    pos: int | None  # file offset from /proc/PID/fdinfo: never touches the file system
    size: int | None  # None on network/FUSE file systems, where a stat can hang
    mount: str | None
    fstype: str | None


class ChildRecord(TypedDict):
    """A subprocess of a rank (a DataLoader worker...) at one sample (issue 7)."""

    pid: int
    ppid: int | None
    name: str | None
    state: str | None
    wchan: str | None
    cpu_ticks: int | None
    threads_in_d: int
    files: list[OpenFileRecord]


class ProcSampleRecord(TypedDict):
    index: int
    time: float
    alive: bool
    state: str | None
    wchan: str | None
    cpu_ticks: int | None
    threads: list[ThreadRecord]
    io: dict[str, int]  # rchar, wchar, syscr, syscw, read_bytes, write_bytes
    output: dict[str, OutputRecord]  # "stdout"/"stderr" when fd 1/2 is a regular file
    error: NotRequired[str | None]
    # Optional (issue 7): open regular files and subprocesses; readers may ignore them.
    files: NotRequired[list[OpenFileRecord]]
    children: NotRequired[list[ChildRecord]]


class ProcessFile(TypedDict):
    format: str
    pid: int
    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    group_rank: int | None
    host: str
    cmdline: list[str]
    start_time: float | None
    parent_pid: int | None
    env: dict[str, str]  # allow-listed and redacted
    samples: list[ProcSampleRecord]
