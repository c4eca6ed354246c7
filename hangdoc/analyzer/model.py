"""The Evidence model: what hangdoc knows about a job, independent of where it came from.

Parsers turn files into these records; rules read only these records. Nothing here
does I/O, so a rule test can build an Evidence by hand and a parser test can check
its records without running a rule.

Conventions that every producer follows:

* ``ThreadStack.frames`` is innermost first (py-spy JSON order); text dumps are
  normalised to it when parsed.
* A stack is either a **live sample** or **text**, and the two are different types.
  A :class:`StackSample` was taken from a running process at a moment (py-spy JSON, a
  ``hangdoc collect`` dump, a node summary): it has a time (None only for a loose py-spy
  JSON file, which carries none) and its threads carry the OS thread ids py-spy read.
  A :class:`TextStack` was read from text (a traceback in a log, a pasted py-spy, gdb,
  pystack or faulthandler dump, a torch C++ stack): it has no time, only its source and
  line; a thread's identity (name, ids, main or not) is what the text says and nothing
  more; a traceback's exception is on the thread it ended (``ThreadStack.exception``).
  ``ProcessEvidence.stack_samples`` holds live samples only, ``text_stacks`` the rest.
  How the readers use them:

  - *what a rank is doing* (``ProcessEvidence.latest_stacks``) is its latest live sample;
    the last text stack stands in where no live sample was taken (a paste) or where the
    process exited (the text then shows what it died in);
  - *progress* (views/progress.py) compares live samples only, thread by thread (the same
    OS thread id), never a live main thread with text: a text has no time, and a
    traceback in a log is where a thread raised, maybe hours before the hang;
  - *the thread rules* (locks, GIL, kernel waits: ``ProcessEvidence.stack_series``)
    follow a thread over the live samples, or over the text stacks where no live sample
    exists. Two pasted dumps of one rank are therefore two text stacks in the order
    pasted: the last says what the rank is doing, the thread rules may find a thread at
    the same place in both (the same stack twice is what stuck looks like, whatever the
    gap between them), and progress never reads them (a difference between two texts of
    unknown time says nothing about now: the first may predate the hang);
  - a thread's traceback (``Exception in thread …``) is a stack of that thread, named as
    the text names it and not marked main. Beside a live sample it is evidence about
    that thread (``views.activity.RankActivity.raised``), never what the rank is doing;
    only a rank known from nothing but text falls back to the text's first thread, as
    the readers of pastes always did.
* Ranks are global ranks. A process whose rank could not be established keeps
  ``rank=None``: rules that compare ranks skip it, the report still shows it.
* Times are POSIX seconds (float) in the collecting host's clock.
"""

from __future__ import annotations

import enum
import re
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator, MutableSequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TypeVar, overload

from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.vocabulary import BenignWarning, Clock, EventKind, RankFrom, parse_enum

_P = TypeVar("_P", bound=EventPayload)


class Category(enum.StrEnum):
    """The fixed cause vocabulary of DESIGN.md; every finding carries one."""

    RANK_DIVERGENCE = "rank_divergence_collective_vs_noncollective"
    COLLECTIVE_TYPE_MISMATCH = "collective_type_mismatch"
    COLLECTIVE_SIZE_OR_DTYPE_MISMATCH = "collective_size_or_dtype_mismatch"
    RANK_DEAD = "rank_dead_or_crashed"
    CUDA_OOM = "cuda_oom"
    NCCL_NETWORK = "nccl_network_or_transport_error"
    NCCL_INIT = "nccl_init_or_bootstrap_hang"
    DATALOADER = "dataloader_deadlock_or_worker_hang"
    UNEVEN_DATA = "uneven_data_drop_last"
    CHECKPOINT_SAVE = "checkpoint_save_hang"
    EVAL_SOME_RANKS = "eval_loop_only_some_ranks"
    IO_STALL = "io_or_filesystem_stall"
    GPU_HARDWARE = "gpu_hardware_or_driver"
    PYTHON_DEADLOCK = "python_deadlock_gil_or_lock"
    P2P_DEADLOCK = "p2p_pipeline_deadlock"
    NOT_A_HANG = "not_a_hang_slow_or_benign"
    UNKNOWN = "unknown"


class Severity(enum.StrEnum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def order(self) -> int:
        """Sort key: most severe first."""
        return _SEVERITY_ORDER[self]


_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3}


class Strength(enum.IntEnum):
    """How strong a finding's evidence is, weakest first: what the rule saw, in words.

    A rule states the strength of its evidence, never a number; findings of equal
    severity are ordered by it, and the calibration (analyzer/calibration.py) turns
    (rule family, strength) into the probability a report shows. ``meaning`` says what
    each level is; docs/confidence.md lists them with the named reasons a rule steps
    between them (rules/strength.py).
    """

    NONE = 0
    ABSENCE = 1
    HINT = 2
    SIGNAL = 3
    STATED = 4
    CORROBORATED = 5
    CONCLUSIVE = 6

    @property
    def stated(self) -> float:
        """The probability this level claims before calibration (the rules' own number)."""
        return _STATED[self]

    @property
    def meaning(self) -> str:
        """What evidence of this strength is."""
        return _MEANING[self]

    @property
    def word(self) -> str:
        """The level as the reports and the findings JSON write it: ``corroborated``."""
        return self.name.lower()


_STATED = {
    Strength.NONE: 0.0,
    Strength.ABSENCE: 0.3,
    Strength.HINT: 0.45,
    Strength.SIGNAL: 0.6,
    Strength.STATED: 0.8,
    Strength.CORROBORATED: 0.9,
    Strength.CONCLUSIVE: 0.95,
}
_MEANING = {
    Strength.NONE: "no cause at all: an abstention (HD000)",
    Strength.ABSENCE: "the absence of a signal, or a fact that names no cause: a log that "
    "stops, ranks that were not collected, timeouts whose cause nothing shows, a wait that "
    "is the consequence of another finding",
    Strength.HINT: "one indirect signal: a circumstance that fits the cause and has other "
    "readings (the job's last lines before a timeout, ranks that stayed silent while the "
    "others timed out, one line that calls itself harmless)",
    Strength.SIGNAL: "one direct signal: a fact that points at the cause without stating it "
    "(a death whose place in the story is not shown, a frame the catalog knows, a lone stack)",
    Strength.STATED: "the artifact states the cause in so many words: an error message that "
    "names it (a fatal Xid, a monitored barrier naming ranks, NCCL's own error), a report "
    "naming the ranks, the stacks of every rank showing it",
    Strength.CORROBORATED: "two independent signals agree: the cause shown, and another "
    "source or fact agrees (nothing moved between samples, the logs and the stacks name the "
    "same ranks, the process is known to have exited)",
    Strength.CONCLUSIVE: "the mechanism itself is on record: a cycle of waits or of lock "
    "holders, two ranks' flight recorders contradicting each other at one collective, a "
    "thread that held the GIL or sat in the file system at every sample",
}


class Verdict(enum.StrEnum):
    HANG = "hang"
    NOT_HUNG = "not_hung"
    INCONCLUSIVE = "inconclusive"


class InputKind(enum.StrEnum):
    """What a file was recognised as, by its content."""

    MANIFEST = "hangdoc_manifest"
    PROCESS = "hangdoc_process"
    PYSPY_JSON = "pyspy_json"
    PYSPY_TEXT = "pyspy_text"
    FAULTHANDLER = "faulthandler"
    FLIGHT_RECORDER = "flight_recorder"
    LOG = "log"
    ARCHIVE = "archive"
    # Appended for whole-job collection (issue 8): a node summary, a job manifest.
    SUMMARY = "hangdoc_summary"
    JOB_MANIFEST = "hangdoc_job"
    UNKNOWN = "unknown"
    UNREADABLE = "unreadable"
    # Appended for pasted stacks: gdb, pstack, pystack, tracebacks, torch C++ stacks, mixes.
    STACK_TEXT = "stack_text"


class OpState(enum.StrEnum):
    """Where a collective was when a rank recorded it (the flight recorder's ``state``,
    normalised by the parser). Dumps and summaries carry the values."""

    SCHEDULED = "scheduled"
    STARTED = "started"
    COMPLETED = "completed"
    TIMED_OUT = "timed_out"  # retired by the watchdog after an error or a timeout
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: object) -> OpState:
        return parse_enum(cls, value)


class ProcState(enum.StrEnum):
    """A task's state letter as the kernel shows it in /proc/PID/stat (proc(5))."""

    RUNNING = "R"
    SLEEPING = "S"
    DISK_SLEEP = "D"  # uninterruptible: waiting in the kernel, usually for I/O
    ZOMBIE = "Z"
    STOPPED = "T"
    TRACED = "t"
    DEAD = "X"
    DEAD_OLD = "x"  # Linux 2.6.33 to 3.13
    WAKEKILL = "K"
    WAKING = "W"
    PARKED = "P"
    IDLE = "I"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: object) -> ProcState | None:
        """None for no value; an unknown letter is UNKNOWN."""
        return None if value is None else parse_enum(cls, value)


class FileMode(enum.StrEnum):
    """How a process opened a file (its /proc/PID/fdinfo flags)."""

    READ = "r"
    WRITE = "w"
    READ_WRITE = "rw"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: object) -> FileMode | None:
        return None if value is None else parse_enum(cls, value)


class StepStatus(enum.StrEnum):
    """How one collector step ended (collectors/dumpformat.py StepRecord)."""

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: object) -> StepStatus:
        return parse_enum(cls, value)


@dataclass(frozen=True, slots=True)
class Frame:
    """One Python (or native) frame. ``line`` is None when the dump had none (line 0)."""

    function: str
    file: str
    line: int | None = None
    native: bool = False
    locals: tuple[tuple[str, str], ...] = ()

    @property
    def short_file(self) -> str:
        return self.file.rsplit("/", 1)[-1]

    @property
    def function_leaf(self) -> str:
        """The last part of a qualified name: py-spy prints ``Class.method`` on 3.11+."""
        return self.function.rsplit(".", 1)[-1]

    def label(self) -> str:
        where = self.short_file if self.line is None else f"{self.short_file}:{self.line}"
        return f"{self.function} ({where})"


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """One thread's stack at one moment. ``frames`` is innermost first.

    In a live sample the ids are py-spy's; in a stack read from text each field is what
    the text says, else None (``is_main`` is the text's convention: the thread a bare
    traceback or a faulthandler dump's oldest entry belongs to)."""

    frames: tuple[Frame, ...]
    os_thread_id: int | None = None
    thread_id: int | None = None  # pthread id as py-spy JSON and faulthandler give it
    name: str | None = None
    active: bool | None = None
    owns_gil: bool | None = None
    is_main: bool = False
    source: str = ""
    # Appended for pasted stacks (issue: every stack format): the exception this thread
    # raised ("ValueError: bad shape") when the stack is a traceback, else None.
    exception: str | None = None

    def python_frames(self) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if not f.native)

    def signature(self) -> tuple[tuple[str, str, int | None], ...]:
        """Identity of the call path; equal signatures mean 'did not move'."""
        return tuple((f.function, f.file, f.line) for f in self.frames if not f.native)


@dataclass(frozen=True, slots=True)
class ChildStacks:
    """Stacks of a subprocess of a rank (a dataloader worker, a compile worker...)."""

    pid: int
    threads: tuple[ThreadStack, ...]
    cmdline: str | None = None


@dataclass(frozen=True, slots=True)
class StackSample:
    """All threads of one live process at one sampling moment (py-spy JSON, a collect
    dump, a node summary). ``time`` is None only where the file did not say (a loose
    py-spy JSON file); the samples of a process are in time order."""

    index: int
    time: float | None
    threads: tuple[ThreadStack, ...]
    children: tuple[ChildStacks, ...] = ()
    source: str = ""

    def main_thread(self) -> ThreadStack | None:
        for thread in self.threads:
            if thread.is_main:
                return thread
        return self.threads[0] if self.threads else None

    def thread(self, like: ThreadStack) -> ThreadStack | None:
        """The thread of this sample that is ``like`` (the same OS thread, else the same
        pthread id); None when it is not in this sample or ``like`` has no id."""
        for thread in self.threads:
            if like.os_thread_id is not None and thread.os_thread_id == like.os_thread_id:
                return thread
            if like.thread_id is not None and thread.thread_id == like.thread_id:
                return thread
        return None


class StackTextKind(enum.StrEnum):
    """The kind of text a stack was read from (analyzer/parsers/stacks, pyspy_text,
    faulthandler)."""

    TRACEBACK = "traceback"  # a Python traceback: where an exception was raised
    PY_BT = "py-bt"  # gdb's py-bt
    GDB = "gdb"  # gdb bt / thread apply all bt, pstack, eu-stack
    PYSTACK = "pystack"
    CPP = "cpp"  # a torch C++ stack ("Exception raised from …", "frame #N")
    PYSPY = "pyspy"  # py-spy dump's text output
    FAULTHANDLER = "faulthandler"
    STACK_PRINT = "stack-print"  # traceback.print_stack / logging's stack_info
    UNKNOWN = "unknown"  # read from a summary of a newer hangdoc


@dataclass(frozen=True, slots=True)
class TextStack:
    """Stacks of one process read from one stretch of text: a traceback in a log, a pasted
    dump of its threads, or a dump with the tracebacks printed next to it (gdb's ``bt``
    then ``py-bt`` of one process is one moment). Not a sample: it has no time, and the
    text may be from long before the hang. ``line`` is the first line of it in
    ``source``; ``index`` its place among the process's text stacks, in reading order.
    ``cut``: a traceback of it stops before its exception line (a paste that ends mid-way,
    another rank's output that took its end) at a frame that is not known to hold every
    frame cut: its frames say where the thread was, as far as they go (its innermost frame
    shown may be an outer call of where it was), and nothing of how it ended (no
    exception, no death). A traceback cut inside a call every deeper frame can only be in
    (a collective, a file-system call, group creation) is not marked: there it was."""

    index: int
    threads: tuple[ThreadStack, ...]
    kinds: tuple[StackTextKind, ...]
    source: str = ""
    line: int | None = None
    children: tuple[ChildStacks, ...] = ()
    cut: bool = False

    def main_thread(self) -> ThreadStack | None:
        """The thread the text marks as main, else the first one (as for a sample: what
        the rank is doing, when no live sample says)."""
        for thread in self.threads:
            if thread.is_main:
                return thread
        return self.threads[0] if self.threads else None

    def label(self, *, short: bool = False) -> str:
        """What it is, for people: "read from text: traceback, /logs/x.log:12" (``short``:
        the file's name only)."""
        source = self.source.rsplit("/", 1)[-1] if short else self.source
        where = source + (f":{self.line}" if source and self.line is not None else "")
        kinds = ", ".join(k.value for k in self.kinds)
        kinds += " (cut before its end)" if self.cut else ""
        parts = [kinds, where]
        return "read from text: " + ", ".join(p for p in parts if p)


# What a rank was seen doing: a live sample, or where none, a stack read from text.
Stacks = StackSample | TextStack


class WaitKind(enum.StrEnum):
    """What a blocked thread waits on, by mechanism (issue 21): the kernel's word where
    /proc was read (collectors/waits.py), else what the innermost frames say."""

    LOCK_FILE = "lock_file"  # flock / fcntl / lockf, filelock's acquire
    PIPE = "pipe"  # a pipe or FIFO, or poll/select on pipes only
    SOCKET = "socket"
    FUTEX = "futex"  # a lock, condition or the GIL of the process itself
    CHILD = "child"  # wait4/waitpid for a subprocess
    SLEEP = "sleep"
    FILE = "file"  # a read, write or fsync of a file: the storage
    POLL = "poll"  # poll/select/epoll on other descriptors
    UNKNOWN = "unknown"
    TERMINAL = "terminal"  # a read of a terminal (tty, pseudo-terminal): a prompt


class PeerRole(enum.StrEnum):
    """How a process at the other end of a wait is tied to it."""

    HOLDER = "holder"  # holds the file lock waited for
    OTHER_END = "other_end"  # holds the other end of the pipe
    PEER = "peer"  # holds the far end of a socket on the same node
    CHILD = "child"  # the subprocess waited for
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class PeerWait:
    """What a peer's main thread waits on in turn: one level, its own peers by pid."""

    kind: WaitKind
    syscall: str
    target: str | None = None
    peer_pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class WaitPeer:
    """A process at the other end of a thread's wait, as /proc showed it at the sample."""

    pid: int
    role: PeerRole
    name: str | None = None  # comm
    command: str | None = None  # its command line, joined by spaces
    state: ProcState | None = None
    ancestors: tuple[int, ...] = ()  # parent, grandparent... (so: which rank it belongs to)
    start_time: float | None = None
    fd: int | None = None
    lock: str | None = None  # "FLOCK WRITE"
    wait: PeerWait | None = None  # what it waits on in turn


@dataclass(frozen=True, slots=True)
class KernelWait:
    """What one sleeping thread waits on, from /proc: its system call, the target of the
    descriptor it waits on, and who is at the other end."""

    kind: WaitKind
    syscall: str
    fd: int | None = None
    target: str | None = None  # "/srv/cache.lock", "pipe:[81]", "socket tcp A -> B established"
    watched: tuple[tuple[int, str], ...] = ()  # poll/select/epoll: (fd, target)
    address: str | None = None  # futex word
    sharers: tuple[int, ...] = ()  # futex: the other threads of the process on the same word
    peers: tuple[WaitPeer, ...] = ()


@dataclass(frozen=True, slots=True)
class ThreadState:
    """Kernel's view of one thread (/proc/PID/task/TID)."""

    tid: int
    name: str | None = None
    state: ProcState | None = None
    wchan: str | None = None
    cpu_ticks: int | None = None  # utime + stime
    voluntary_ctxt_switches: int | None = None
    nonvoluntary_ctxt_switches: int | None = None
    # Asleep in a system call on a file descriptor (issue 22): the call, and what the
    # descriptor is ("socket tcp 10.0.0.5:40123 -> 10.0.0.7:443 established", "pipe").
    syscall: str | None = None
    waits_on: str | None = None
    # Any system call it sleeps in, with who is at the other end (issue 21).
    wait: KernelWait | None = None


# Appended for stacks-and-node causes (issue 7): files a process holds open and its
# subprocesses, as /proc showed them at one sample. All optional.
@dataclass(frozen=True, slots=True)
class OpenFile:
    """A regular file a process holds open. ``pos`` is the kernel's file offset (it
    advances as a sequential writer writes, and reading it never touches the file
    system); ``size`` is left out on network file systems, where a stat can hang."""

    fd: int
    path: str
    mode: FileMode | None = None
    pos: int | None = None
    size: int | None = None
    mount: str | None = None  # mount point of the file system holding it
    fstype: str | None = None  # ext4, nfs4, fuse.gcsfuse, lustre...


@dataclass(frozen=True, slots=True)
class ChildProcess:
    """A subprocess of a rank (a DataLoader worker...) as the kernel saw it."""

    pid: int
    ppid: int | None = None
    name: str | None = None  # comm
    state: ProcState | None = None  # of its main thread
    wchan: str | None = None
    cpu_ticks: int | None = None
    threads_in_d: int = 0  # threads in uninterruptible sleep
    files: tuple[OpenFile, ...] = ()


@dataclass(frozen=True, slots=True)
class IoCounters:
    """/proc/PID/io at one moment (collectors/procfs.py); None: not read (it needs
    ptrace-read access)."""

    rchar: int | None = None  # bytes read by read(2) and the like, page cache included
    wchar: int | None = None
    syscr: int | None = None  # read syscalls
    syscw: int | None = None
    read_bytes: int | None = None  # bytes fetched from storage
    write_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class OutputSizes:
    """The sizes of the regular files a process's stdout and stderr point to (None: not a
    regular file, or not read)."""

    stdout: int | None = None
    stderr: int | None = None


@dataclass(frozen=True, slots=True)
class ProcSample:
    """Kernel's view of one rank's process at one sampling moment."""

    index: int
    time: float | None
    alive: bool = True
    state: ProcState | None = None
    wchan: str | None = None
    cpu_ticks: int | None = None
    threads: tuple[ThreadState, ...] = ()
    io: IoCounters = IoCounters()
    output_sizes: OutputSizes = OutputSizes()
    # Appended for issue 7; empty when the dump did not record them.
    open_files: tuple[OpenFile, ...] = ()
    children: tuple[ChildProcess, ...] = ()


@dataclass(frozen=True, slots=True)
class CollectiveRecord:
    """One collective as a rank recorded it (flight recorder or logs)."""

    group: str
    seq_id: int
    op: str
    state: OpState
    input_sizes: tuple[tuple[int, ...], ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    is_p2p: bool = False
    peer: int | None = None
    record_id: int | None = None
    time_created_ns: int | None = None
    source: str = ""
    # Appended for the flight recorder (issue 3); all optional.
    group_desc: str | None = None  # the process group's description ("default_pg", "tp")
    p2p_seq_id: int | None = None
    output_dtypes: tuple[str, ...] = ()
    backend: str | None = None  # "nccl", "gloo"... from profiling_name
    frames: tuple[Frame, ...] = ()  # where the job issued it, innermost first (FR pickles)


class RecordRows(MutableSequence[CollectiveRecord]):
    """A rank's flight recorder records as row numbers into a table that many ranks share
    (flight_recorder/bulk.py): at 16,384 ranks × 2,000 entries a list per rank is 16 KB of
    pointers (262 MB in all), where the ranks of a tensor-parallel group record the same
    interned rows, their ring buffers cut at other points, but for their frontier records
    and the ops of the other groups each is in (data-parallel: a quarter of a bench rank's
    entries). So a rank keeps the row numbers of a rank before it, from ``start`` on, and
    where its own differ (``own``: the indices, ascending, and its rows there, also past
    the shared numbers' end), else its own array. Reading costs what a list's does where
    it counts: iterating (forward or back) is one C-level ``map`` over the numbers, after
    a pass that puts its own in; an index is a look-up or a bisection. Changing it makes
    it a list, once, as ``LogWindow`` does."""

    __slots__ = ("_built", "_count", "_ids", "_own", "_rows", "_start")

    def __init__(
        self,
        rows: list[CollectiveRecord],
        ids: array[int],
        own: tuple[array[int], array[int]] | None = None,
        start: int = 0,
        count: int | None = None,
    ) -> None:
        self._built: list[CollectiveRecord] | None = None
        self._rows = rows  # the shared table (it only grows: a row number stays valid)
        self._ids = ids  # row numbers, maybe shared with other ranks
        self._own = own  # where this rank's rows differ from ``ids[start:]``
        self._start = start
        self._count = len(ids) - start if count is None else count

    def row_numbers(self) -> array[int]:
        """This rank's row numbers (a copy where it differs from the shared ones)."""
        start, count = self._start, self._count
        if not self._own and start == 0 and count == len(self._ids):
            return self._ids
        ids = self._ids[start : start + count]
        if len(ids) < count:
            ids.extend(repeat(0, count - len(ids)))  # (each one of ``own``)
        if self._own is not None:
            deque(map(ids.__setitem__, *self._own), maxlen=0)  # its own rows put in, in C
        return ids

    @property
    def table(self) -> list[CollectiveRecord] | None:
        """The shared table ``row_numbers`` index, None once the sequence is a list
        (``records``: it may have been changed since). A row stands for a record's
        identity: each row of a table is a record of its own, in no other row nor table
        (flight_recorder/bulk.py makes one per row), so a reader can mark the records it
        has seen with a byte per row where a set of their ids takes about 90 bytes each
        (views/fr_mismatch.py)."""
        return self._rows if self._built is None else None

    def records(self) -> list[CollectiveRecord]:
        """Every record, as a list (kept: the sequence is that list from then on)."""
        if self._built is None:
            self._built = list(map(self._rows.__getitem__, self.row_numbers()))
        return self._built

    def __len__(self) -> int:
        return len(self._built) if self._built is not None else self._count

    @overload
    def __getitem__(self, index: int) -> CollectiveRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[CollectiveRecord]: ...
    def __getitem__(self, index: int | slice) -> CollectiveRecord | list[CollectiveRecord]:
        if self._built is not None:
            return self._built[index]
        if isinstance(index, slice):
            return list(map(self._rows.__getitem__, self.row_numbers()[index]))
        count = self._count
        if not -count <= index < count:
            raise IndexError("flight recorder record index out of range")
        index %= count
        own = self._own
        if own is not None:
            at = bisect_left(own[0], index)
            if at < len(own[0]) and own[0][at] == index:
                return self._rows[own[1][at]]
        return self._rows[self._ids[self._start + index]]

    def __iter__(self) -> Iterator[CollectiveRecord]:
        if self._built is not None:
            return iter(self._built)
        return map(self._rows.__getitem__, self.row_numbers())

    def __reversed__(self) -> Iterator[CollectiveRecord]:
        if self._built is not None:
            return reversed(self._built)
        return map(self._rows.__getitem__, reversed(self.row_numbers()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordRows):
            return list(self) == list(other)
        return list(self) == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (a list's)

    def __repr__(self) -> str:
        return repr(list(self))

    @overload
    def __setitem__(self, index: int, value: CollectiveRecord) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[CollectiveRecord]) -> None: ...
    def __setitem__(
        self, index: int | slice, value: CollectiveRecord | Iterable[CollectiveRecord]
    ) -> None:
        self.records()[index] = value  # type: ignore[index,assignment]

    def __delitem__(self, index: int | slice) -> None:
        del self.records()[index]

    def insert(self, index: int, value: CollectiveRecord) -> None:
        self.records().insert(index, value)

    def extend(self, values: Iterable[CollectiveRecord]) -> None:
        self.records().extend(values)


# A rank's flight recorder records: a list where they were read one file at a time, a
# RecordRows where the bulk reader shares a table of rows between ranks.
Records = list[CollectiveRecord] | RecordRows


@dataclass(frozen=True, slots=True)
class LogEvent:
    """A log line that matters (watchdog timeout, NCCL WARN, exit code...): its kind, the
    line itself, where it is, the process it is about, and what the recogniser read from
    it (``payload``: one typed record per kind, analyzer/payloads.py)."""

    kind: EventKind
    text: str
    source: str
    line: int | None = None
    time: float | None = None
    payload: EventPayload = NO_PAYLOAD
    # The process the line is about: the one it names (a launcher's report of a worker,
    # the OOM killer's victim), else the one that printed it (an NCCL line's header).
    host: str | None = None
    pid: int | None = None
    tid: int | None = None  # the printing thread (NCCL's header)
    cuda_dev: int | None = None  # the printing process's CUDA device (NCCL's header)
    partial_header: bool = False  # NCCL's host:pid:tid [dev] header was cut or mangled
    local_rank: int | None = None
    rank_from: RankFrom | None = None  # how the rank that owns the event was found
    clock: Clock | None = None  # the clock ``time`` is on (None when there is no time)
    repeats: int = 0  # how many more times the same line came (kept once)
    folded_lines: int = 0  # lines folded into this one event (COLL lines, progress bars)

    def payload_as(self, cls: type[_P]) -> _P | None:
        """The payload when it is a ``cls``, else None."""
        payload = self.payload
        return payload if isinstance(payload, cls) else None


# A number of a log line: hex, a time of day or a duration ("00:03", "1:02:03", one token,
# no count), a decimal, a whole number. The ranks' logs are compared by their lines with
# these masked (views/log_compare.py), and a node summary cuts each line into a template
# and its numbers at them (summaries/log_window.py): one pattern, so that the two agree.
# Written to start with its one digit (the "0" of "0x" checked behind): re then skips the
# positions without a digit in C (tests/unit/views/test_log_number_mask.py). A summary's
# digests are cut at it and their numbers read back as the lines' own (LogWindow.numbers):
# changing it is a new summary format (collectors/jobformat.py).
LINE_NUMBER = re.compile(r"\d(?:(?<=0)x[0-9a-fA-F]+|\d*(?::\d\d)+(?:\.\d+)?|\d*(?:\.\d+)?)")


@dataclass(frozen=True, slots=True)
class LogLine:
    """One raw line of a rank's own log, prefixes peeled: what the ranks' logs are
    compared on (templates, counters, the last thing each rank said). Only a window of
    each log is kept (its head and tail), never the whole file."""

    text: str
    source: str
    line: int  # 0 when unknown (the tail of a large file is not numbered)
    benign: BenignWarning | None = None  # a warning its library calls harmless


class LogWindow(MutableSequence[LogLine]):
    """A rank's log window whose lines are built when they are read (a node summary's
    digest: summaries/log_window.py). A job of 16,384 ranks has 25 million window lines,
    and the views read the text of a few per rank (the last ones, those a rule cites);
    what they read of every line they ask by column (``sources``, ``benign_marks``), which
    the digest answers without building one. Iterating, comparing, or changing it builds
    every line once, and it is a list from then on."""

    __slots__ = ("_built",)

    def __init__(self) -> None:
        self._built: list[LogLine] | None = None

    # What a digest gives: its length, one line, every line, and its columns.
    def _count(self) -> int:
        raise NotImplementedError

    def _line(self, index: int) -> LogLine:
        raise NotImplementedError

    def _all(self) -> list[LogLine]:
        raise NotImplementedError

    def sources(self) -> Iterator[str]:
        """The files its lines come from (a window is mostly one), without duplicates."""
        return iter(dict.fromkeys(line.source for line in self.lines()))

    def benign_marks(self) -> Iterator[LogLine]:
        """Its lines with a benign mark, in order."""
        return (line for line in self.lines() if line.benign is not None)

    def numbers(self, index: int) -> tuple[str, ...]:
        """The numbers of one line (``LINE_NUMBER.findall`` of its text), which a digest
        gives without building the line."""
        return tuple(LINE_NUMBER.findall(self[index].text))

    def damage(self) -> str | None:
        """Why it cannot be read, found when a line of it was first read (a node
        summary's damaged numbers: summaries/log_window.py), naming where; else None."""
        return None

    def lines(self) -> list[LogLine]:
        """Every line, built (once)."""
        if self._built is None:
            self._built = self._all()
        return self._built

    def __len__(self) -> int:
        return len(self._built) if self._built is not None else self._count()

    @overload
    def __getitem__(self, index: int) -> LogLine: ...
    @overload
    def __getitem__(self, index: slice) -> list[LogLine]: ...
    def __getitem__(self, index: int | slice) -> LogLine | list[LogLine]:
        if self._built is not None or isinstance(index, slice):
            return self.lines()[index]
        count = self._count()
        if not -count <= index < count:
            raise IndexError("log window index out of range")
        return self._line(index % count)

    def __iter__(self) -> Iterator[LogLine]:
        return iter(self.lines())

    def __reversed__(self) -> Iterator[LogLine]:
        return reversed(self.lines())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LogWindow):
            return self.lines() == other.lines()
        return self.lines() == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (a list's)

    def __repr__(self) -> str:
        return repr(self.lines())

    @overload
    def __setitem__(self, index: int, value: LogLine) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[LogLine]) -> None: ...
    def __setitem__(self, index: int | slice, value: LogLine | Iterable[LogLine]) -> None:
        self.lines()[index] = value  # type: ignore[index,assignment]

    def __delitem__(self, index: int | slice) -> None:
        del self.lines()[index]

    def insert(self, index: int, value: LogLine) -> None:
        self.lines().insert(index, value)

    def extend(self, values: Iterable[LogLine]) -> None:
        self.lines().extend(values)


# A rank's log window: a list where the lines were read, a LogWindow where a node
# summary's digest holds them.
LogLines = list[LogLine] | LogWindow


@dataclass(frozen=True, slots=True, eq=False)
class LogTemplates:
    """Which template each line of a rank's log window is, as a node summary said
    (summaries/log_window.py): ``runs`` are (template, lines) pairs in the window's order,
    and ``masked[template]`` is each of those lines with its numbers masked
    (``LINE_NUMBER`` → "#"), what the log comparison would compute from the line. It
    describes the window ``lines`` (that very list, at that length) and nothing else: a
    window changed after reading is compared from its lines. ``masked`` is shared by the
    ranks of a node. Runs, because a window is a few long runs of one template, and ranks
    with the same runs are compared once (views/log_compare.py)."""

    masked: tuple[str, ...]
    runs: tuple[tuple[int, int], ...]
    lines: LogLines

    def describes(self, lines: LogLines) -> bool:
        return lines is self.lines and len(lines) == sum(count for _, count in self.runs)


@dataclass(frozen=True, slots=True)
class GpuState:
    index: int | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_pct: float | None = None
    source: str = ""
    # Appended for issue 7: what this rank's own process holds on that GPU.
    process_memory_mib: float | None = None


@dataclass(slots=True)
class ProcessEvidence:
    """Everything known about one rank's process (or one unattributed process)."""

    rank: int | None = None
    host: str | None = None
    pid: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    group_rank: int | None = None
    cmdline: str | None = None
    start_time: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    stack_samples: list[StackSample] = field(default_factory=list)  # live samples only
    proc_samples: list[ProcSample] = field(default_factory=list)
    collectives: Records = field(default_factory=list)
    log_events: list[LogEvent] = field(default_factory=list)
    gpu: list[GpuState] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    exited: bool = False  # the process was gone at (some point of) collection
    # Appended for issue 15: the head and tail of the rank's own log lines, in order.
    log_lines: LogLines = field(default_factory=list)
    # Appended for issue 20: stacks read from text (logs, pastes), in reading order; see
    # the module docstring for how they differ from ``stack_samples``.
    text_stacks: list[TextStack] = field(default_factory=list)
    # Appended for issue 20: the templates of ``log_lines`` where a node summary gave them
    # (the log comparison then masks no line); no part of what the process is (compare off).
    log_templates: LogTemplates | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        if self.rank is not None:
            return f"rank {self.rank}"
        if self.pid is not None:
            return f"pid {self.pid}" + (f" on {self.host}" if self.host else "")
        return "unknown process"

    def whole_text_stacks(self) -> list[TextStack]:
        """The text stacks whose frames go to where the thread was (none cut before its
        exception line at a frame that may be an outer call: ``TextStack.cut``)."""
        return [s for s in self.text_stacks if not s.cut]

    def cut_text_stacks(self) -> list[TextStack]:
        """The tracebacks cut before their exception line (``TextStack.cut``): positions
        as far as their frames go, in reading order; never a death, an exception, or a
        sample to compare with a live one for progress."""
        return [s for s in self.text_stacks if s.cut]

    def latest_stacks(self) -> Stacks | None:
        """What the process was last seen doing: its latest live sample; the last stack
        read from text where no live sample exists, or where the process exited (the
        text then holds what it died in, after the samples). A traceback cut before its
        exception line is not one: its innermost frame shown may be an outer call of
        where the thread was (``cut_text_stacks``)."""
        whole = self.whole_text_stacks() if self.text_stacks else self.text_stacks
        if self.stack_samples and not (self.exited and whole):
            return self.stack_samples[-1]
        return whole[-1] if whole else None

    def stack_series(self) -> list[StackSample] | list[TextStack]:
        """The stacks a thread is followed through (locks, GIL, kernel waits): the live
        samples, or where none was taken, the whole text stacks in reading order."""
        return self.stack_samples if self.stack_samples else self.whole_text_stacks()

    def has_stacks(self) -> bool:
        return bool(self.stack_samples or self.whole_text_stacks())

    def primary_source(self) -> str:
        latest = self.latest_stacks()
        if latest is not None and latest.source:
            return latest.source
        return self.sources[0] if self.sources else ""


@dataclass(frozen=True, slots=True)
class InputFile:
    """One file the user gave (or that a dump held), what it was, and what went wrong."""

    path: str
    kind: InputKind
    ranks: tuple[int, ...] = ()
    error: str | None = None
    size: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "kind": self.kind.value,
            "ranks": list(self.ranks),
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class CollectStep:
    """One collector step as recorded in a dump's manifest."""

    step: str
    status: StepStatus
    rank: int | None = None
    pid: int | None = None
    sample: int | None = None
    reason: str | None = None
    host: str | None = None
    duration_s: float | None = None
    # The dump's typed "the process had exited" (collectors/dumpformat.py StepRecord);
    # None when the step does not say (a dump from before the key, another writer).
    exited: bool | None = None


@dataclass(slots=True)
class HostInfo:
    """What one node's dump says about the node itself."""

    host: str
    manifest: str | None = None
    pids_requested: tuple[int, ...] = ()
    local_world_size: int | None = None
    collected_at: str | None = None
    sample_times: tuple[float, ...] = ()
    interval_s: float | None = None


@dataclass(slots=True)
class ProcessGroupInfo:
    """A process group as a flight recorder or log names it: its id, description, members."""

    name: str
    desc: str | None = None
    ranks: tuple[int, ...] = ()  # global ranks; empty when unknown (gloo's dummy pg_config)


# The first note of an Evidence loaded with redaction off (``Evidence.redacted`` False),
# so that the reader of any report knows what it holds.
NO_REDACT_NOTE = (
    "redaction is OFF (--no-redact): this analysis shows environment values, command "
    "lines and log lines as they are, secrets included; do not attach it to a public ticket"
)


@dataclass(slots=True)
class Evidence:
    """All inputs, merged. Rules read this and nothing else."""

    processes: list[ProcessEvidence] = field(default_factory=list)
    process_groups: dict[str, ProcessGroupInfo] = field(default_factory=dict)
    inputs: list[InputFile] = field(default_factory=list)
    hosts: dict[str, HostInfo] = field(default_factory=dict)
    collect_steps: list[CollectStep] = field(default_factory=list)
    job_log_events: list[LogEvent] = field(default_factory=list)  # events with no rank
    notes: list[str] = field(default_factory=list)
    # Appended for issue 15: the job's own log lines that no rank claims (an unprefixed
    # console), in order, from each log's head and tail: what the job said last.
    job_log_lines: list[LogLine] = field(default_factory=list)
    # False when the loader was told not to redact (--no-redact): reports and the findings
    # JSON say so. The loader also puts NO_REDACT_NOTE first in ``notes``, for people.
    redacted: bool = True

    def ranked(self) -> dict[int, ProcessEvidence]:
        """Processes with a known rank, by rank (the first one wins on duplicates)."""
        out: dict[int, ProcessEvidence] = {}
        for proc in self.processes:
            if proc.rank is not None and proc.rank not in out:
                out[proc.rank] = proc
        return out

    def expected_world_size(self) -> int | None:
        """The largest WORLD_SIZE any rank reported; None when no rank said."""
        sizes = [p.world_size for p in self.processes if p.world_size]
        return max(sizes) if sizes else None

    def seen_ranks(self) -> list[int]:
        return sorted(self.ranked())

    def iter_threads(self) -> Iterator[tuple[ProcessEvidence, StackSample, ThreadStack]]:
        for proc in self.processes:
            for sample in proc.stack_samples:
                for thread in sample.threads:
                    yield proc, sample, thread


@dataclass(frozen=True, slots=True)
class EvidenceRef:
    """A pointer from a claim back to the file (and line) that supports it."""

    source: str
    detail: str
    rank: int | None = None
    line: int | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"rank": self.rank, "source": self.source, "detail": self.detail}
        if self.line is not None:
            out["line"] = self.line
        return out


@dataclass(frozen=True, slots=True)
class Finding:
    """One conclusion of one rule. ``strength`` says how strong its evidence is and orders
    findings of equal severity; ``confidence`` is the probability a report shows."""

    rule: str
    category: Category
    severity: Severity
    title: str
    explanation: str
    fix: str
    culprit_ranks: tuple[int, ...] = ()
    waiting_ranks: tuple[int, ...] = ()
    evidence: tuple[EvidenceRef, ...] = ()
    strength: Strength = Strength.HINT
    # A finding that by itself says the job is not hung (progress seen) sets this.
    says_not_hung: bool = False
    # The calibrated probability (analyzer/calibration.py), set by the engine; until
    # then the strength's own stated one stands.
    probability: float | None = None

    @property
    def confidence(self) -> float:
        """0..1: the calibrated probability when the engine set one, else the stated one."""
        return self.strength.stated if self.probability is None else self.probability

    def sort_key(self) -> tuple[int, int, int, str]:
        # Not-a-hang conclusions outrank the hang findings they contradict. The strength
        # orders, not the calibrated number: calibration never changes the order.
        return (0 if self.says_not_hung else 1, self.severity.order, -self.strength, self.rule)

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "category": self.category.value,
            "severity": self.severity.value,
            "title": self.title,
            "culprit_ranks": list(self.culprit_ranks),
            "waiting_ranks": list(self.waiting_ranks),
            "confidence": round(self.confidence, 2),
            "strength": self.strength.word,
            "explanation": self.explanation,
            "fix": self.fix,
            "evidence": [e.to_json() for e in self.evidence],
        }


# The sections of every rule's documentation: rules/base.py checks that a rule has them,
# the report's appendix shows them.
DOC_SECTIONS: tuple[str, ...] = (
    "What it means",
    "Why it hangs",
    "Evidence used",
    "How to confirm",
    "How to fix",
)


@dataclass(frozen=True, slots=True)
class DocSection:
    heading: str
    text: str


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """One rule's documentation as a report shows it: its docstring, by section."""

    id: str
    name: str
    sections: tuple[DocSection, ...]  # ("title", line), then the ## sections

    def get(self, heading: str) -> str:
        return next((s.text for s in self.sections if s.heading == heading), "")
