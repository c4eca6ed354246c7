"""Payloads of how a rank's process ended (parsers/logs/elastic.py, process.py, the stack
and faulthandler parsers): launcher reports, exceptions, fatal signals, OOM killers."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.vocabulary import parse_enum


class SignalName(enum.StrEnum):
    """A POSIX signal by its name (Linux numbering in :meth:`of_number`)."""

    SIGHUP = "SIGHUP"
    SIGINT = "SIGINT"
    SIGQUIT = "SIGQUIT"
    SIGILL = "SIGILL"
    SIGTRAP = "SIGTRAP"
    SIGABRT = "SIGABRT"
    SIGBUS = "SIGBUS"
    SIGFPE = "SIGFPE"
    SIGKILL = "SIGKILL"
    SIGUSR1 = "SIGUSR1"
    SIGSEGV = "SIGSEGV"
    SIGUSR2 = "SIGUSR2"
    SIGPIPE = "SIGPIPE"
    SIGALRM = "SIGALRM"
    SIGTERM = "SIGTERM"
    SIGSTKFLT = "SIGSTKFLT"
    SIGCHLD = "SIGCHLD"
    SIGCONT = "SIGCONT"
    SIGSTOP = "SIGSTOP"
    SIGTSTP = "SIGTSTP"
    SIGTTIN = "SIGTTIN"
    SIGTTOU = "SIGTTOU"
    SIGURG = "SIGURG"
    SIGXCPU = "SIGXCPU"
    SIGXFSZ = "SIGXFSZ"
    SIGVTALRM = "SIGVTALRM"
    SIGPROF = "SIGPROF"
    SIGWINCH = "SIGWINCH"
    SIGIO = "SIGIO"
    SIGPWR = "SIGPWR"
    SIGSYS = "SIGSYS"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, name: str) -> SignalName:
        """A signal's name as a line printed it ("SIGKILL"); UNKNOWN for one this table
        does not hold (a real-time signal)."""
        return parse_enum(cls, name)

    @classmethod
    def of_number(cls, number: int) -> SignalName | None:
        """The signal Linux numbers ``number`` (x86-64 and arm64 share these: the
        kernel's uapi asm-generic/signal.h, glibc's bits/signum-generic.h); None for 0,
        a real-time signal or a number no signal has."""
        return _LINUX_NUMBERS.get(number)


# Linux's signal numbers (include/uapi/asm-generic/signal.h: SIGHUP 1 … SIGSYS 31).
_LINUX_NUMBERS: dict[int, SignalName] = dict(
    enumerate(
        (
            SignalName.SIGHUP,
            SignalName.SIGINT,
            SignalName.SIGQUIT,
            SignalName.SIGILL,
            SignalName.SIGTRAP,
            SignalName.SIGABRT,
            SignalName.SIGBUS,
            SignalName.SIGFPE,
            SignalName.SIGKILL,
            SignalName.SIGUSR1,
            SignalName.SIGSEGV,
            SignalName.SIGUSR2,
            SignalName.SIGPIPE,
            SignalName.SIGALRM,
            SignalName.SIGTERM,
            SignalName.SIGSTKFLT,
            SignalName.SIGCHLD,
            SignalName.SIGCONT,
            SignalName.SIGSTOP,
            SignalName.SIGTSTP,
            SignalName.SIGTTIN,
            SignalName.SIGTTOU,
            SignalName.SIGURG,
            SignalName.SIGXCPU,
            SignalName.SIGXFSZ,
            SignalName.SIGVTALRM,
            SignalName.SIGPROF,
            SignalName.SIGWINCH,
            SignalName.SIGIO,
            SignalName.SIGPWR,
            SignalName.SIGSYS,
        ),
        start=1,
    )
)


class ExitConvention(enum.StrEnum):
    """How the number a launcher prints for a process that ended encodes its end: an exit
    status, or the signal that killed it. Each printer's convention is read from the code
    that prints the number (meanings.toml gives it per catalog family)."""

    # Python's multiprocessing ``Process.exitcode`` and subprocess's ``Popen.returncode``
    # (CPython Lib/multiprocessing/popen_fork.py: ``-os.WTERMSIG(sts)`` when signalled,
    # ``os.WEXITSTATUS(sts)`` otherwise; Lib/subprocess.py _handle_exitstatus alike):
    # -N is "killed by signal N", 0..255 an exit status. torchrun's "exitcode", vLLM's
    # "exit code", DeepSpeed's "return code", torch.multiprocessing's "exit code".
    POPEN = "popen"
    # A shell's ``$?`` (bash: 128 + N for a command killed by signal N), and launchers that
    # report it (horovodrun's "exit with status code 137", a container's exit code).
    SHELL = "shell"
    # The raw status ``os.waitpid`` returns (POSIX wait(2): the signal in the low 7 bits,
    # 0x80 for a core dump, the exit status in the next byte): SGLang's SIGCHLD handler
    # prints it as it is ("Child process unexpectedly failed with an exit code 256": exit
    # status 1; 9: killed by SIGKILL; 134: SIGABRT and a core dump).
    WAIT_STATUS = "wait_status"
    UNKNOWN = "unknown"  # read from a summary of a newer hangdoc: the number is left as printed


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """A printed number read by its printer's convention: the process exited with
    ``exit_code``, or was killed by ``signal`` (``core_dumped`` where the status says so)."""

    exit_code: int | None = None
    signal: SignalName | None = None
    core_dumped: bool = False


def read_exit(number: int, convention: ExitConvention) -> ExitStatus:
    """What ``number``, printed by a launcher of ``convention``, says of the process's end.

    A number that is no exit status of the convention (a signal number no signal has) is
    kept as an exit code: what the line printed, unread."""
    if convention is ExitConvention.WAIT_STATUS:
        low = number & 0x7F
        if low == 0:
            return ExitStatus(exit_code=(number >> 8) & 0xFF)
        signal = SignalName.of_number(low)
        if signal is not None and low != 0x7F:  # 0x7f: stopped, not ended (WIFSTOPPED)
            return ExitStatus(signal=signal, core_dumped=bool(number & 0x80))
        return ExitStatus(exit_code=number)
    if convention is ExitConvention.POPEN and number < 0:
        signal = SignalName.of_number(-number)
        return ExitStatus(exit_code=number, signal=signal)
    if convention is ExitConvention.SHELL and number > 128:
        return ExitStatus(exit_code=number, signal=SignalName.of_number(number - 128))
    return ExitStatus(exit_code=number)


class Launcher(enum.StrEnum):
    TORCHRUN = "torchrun"
    SLURM = "slurm"
    MPIRUN = "mpirun"
    DEEPSPEED = "deepspeed"
    HOROVOD = "horovod"
    TORCH_MULTIPROCESSING = "torch.multiprocessing"
    LIGHTNING = "lightning"  # its launcher of a node's other local ranks
    VLLM = "vllm"  # its executors' worker monitors (multiproc_worker_utils, multiproc_executor)
    SGLANG = "sglang"  # its engine's launcher of scheduler processes (entrypoints/engine.py)
    TGI = "tgi"  # Text Generation Inference's launcher of shards (launcher/src/main.rs)
    UNKNOWN = "unknown"


class FatalReport(enum.StrEnum):
    """Who printed a fatal signal."""

    PYTHON = "python"  # "Fatal Python error: Segmentation fault" (faulthandler's header)
    GLOG = "glog"  # "*** SIGSEGV (@0x0) received by PID 123"
    TERMINATE = "terminate"  # "terminate called after throwing an instance of 'T'": abort
    SHELL = "shell"  # bash's "line 3: 1234 Killed", a bare "Segmentation fault"
    TORCHELASTIC = "torchelastic"  # "Signal 9 (SIGKILL) received by PID 812"
    FAULTHANDLER = "faulthandler"  # a faulthandler dump's own header
    UCX = "ucx"  # UCX's error signal handler: "[host:pid:tid] Caught signal 7 (Bus error: …)"
    # gdb on a core file or a run: "Program terminated with signal SIGSEGV, Segmentation fault."
    GDB = "gdb"
    TVM_FFI = "tvm_ffi"  # apache/tvm-ffi's SIGSEGV handler: "!!!!!!! Segfault encountered !!!!!!!"
    # CPython's fatal_error ("Fatal Python error: none_dealloc: deallocating None"): abort()
    PYTHON_FATAL_ERROR = "python_fatal_error"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class LauncherReport(EventPayload):
    """WORKER_FAILED, CHILD_FAILURE, AGENT_TERMINATING, AGENT_SIGNAL: a launcher's report
    of a worker that ended, or of the signal it got or sent. The worker's pid, host and
    local rank are the event's own (LogEvent.pid…)."""

    launcher: Launcher | None = None
    exit_code: int | None = None
    signal: SignalName | None = None
    host_oom: bool = False  # killed for its memory (Slurm "Out Of Memory")
    why: str | None = None  # AGENT_SIGNAL: the scheduler's words (Slurm's CANCELLED reason)
    # CHILD_FAILURE (torchrun's ChildFailedError table): the entry and its fields.
    ordinal: int | None = None
    rank: int | None = None
    root_cause: bool = False  # the "Root Cause" entry: only the first to exit on its node
    error_file: str | None = None
    # How ``exit_code`` encodes the end (a catalog row's printer: meanings.toml), where
    # the recogniser did not read it into ``signal`` itself.
    exit_convention: ExitConvention | None = None
    core_dumped: bool = False


class CodeStage(enum.StrEnum):
    """The stage of the job a traceback's frames show it was raised in (the innermost
    frame or call that names one: parsers/logs/tb_stage.py). It decides whether a crash
    is a failure of its own or has a more specific cause: an exception raised while the
    ranks set up communication is that set-up failing, one raised while the process
    exits is the end of a failure already told."""

    SETUP = "setup"  # init_process_group, a rendezvous, a store, new_group, DDP's construction
    CHECKPOINT_SAVE = "checkpoint_save"
    CHECKPOINT_LOAD = "checkpoint_load"
    DATA = "data"  # a DataLoader fetching a batch (its __getitem__, collate)
    EVAL = "eval"
    TRAIN = "train"
    TEARDOWN = "teardown"  # destroy_process_group, a destructor, interpreter exit
    # A check that compares the ranks (DDP's parameter shapes, FSDP's forward order): what
    # it raises is the ranks found to differ, reported, not a crash of the rank.
    RANK_CHECK = "rank_check"
    # Starting a child process (Python's multiprocessing: fork, spawn, forkserver), in the
    # process that starts it: what it raises is the child failing to start (fork's ENOMEM,
    # a process object that cannot be pickled for spawn). Not read where the frames show
    # the ranks themselves, a Pool's or an executor's workers being started.
    WORKER_START = "worker_start"
    # Waiting at a "rank 0 first" gate: a context manager that holds the other ranks in a
    # barrier while the main process does the work inside it first (transformers'
    # TrainingArguments.main_process_first, accelerate's main_process_first, ultralytics'
    # and YOLOv5's torch_distributed_zero_first): what it raises is the wait for that work.
    RANK_ZERO_FIRST = "rank_zero_first"
    # A serving worker setting its device up (vLLM's Worker.init_device, and the
    # WorkerWrapperBase.init_device that calls it): the device, a dtype check, a memory
    # snapshot, then the distributed environment (init_worker_distributed_environment:
    # the process groups and their NCCL communicators). Not set-up as a whole: only an
    # NCCL error raised there is the communicators' creation failing (its only NCCL calls);
    # its dtype and memory checks are failures of their own.
    DEVICE_INIT = "device_init"
    # An RL framework's worker building its model, the one method the controller calls on
    # each worker of a group before any step (verl's init_model of every worker class,
    # SkyRL's init_model, OpenRLHF's init_model_from_pretrained): the process group is
    # created there or just before it, and its first collectives (FSDP's or DeepSpeed's
    # wrapping broadcasts, a barrier) run there, which is when torch creates the NCCL
    # communicator. As DEVICE_INIT, only an NCCL error of a set-up class raised there is
    # the communicators' creation failing; a model that cannot load is a failure of its own.
    WORKER_INIT = "worker_init"
    UNKNOWN = "unknown"  # read from a summary of a newer hangdoc


class OsFailure(enum.StrEnum):
    """What kind of operating-system failure an exception reports, by its errno (POSIX's
    name, read from "[Errno N]", from the OSError subclass Python raises for it, PEP 3151,
    or from its strerror words) or by its Python type (MemoryError): the family decides
    with the stage it was raised in what failed (views/death_kind.py). Families are
    written per errno in parsers/logs/oserror.py."""

    # the storage or the device under it failed or is full (EIO, ENOSPC, EDQUOT, EROFS,
    # ESTALE, EREMOTEIO)
    STORAGE = "storage"
    # a path is not what the call expected (ENOENT, EEXIST, ENOTDIR, EISDIR, ENOTEMPTY,
    # EXDEV, EBUSY, EACCES/EPERM, EFAULT, ENAMETOOLONG …): a race between writers, a
    # directory not shared, a permission
    FILE_STATE = "file_state"
    HOST_MEMORY = "host_memory"  # ENOMEM, MemoryError: the host's memory
    # a per-process or per-user limit (EAGAIN of fork, EMFILE, ENFILE): a process or file
    # could not be made
    PROCESS_LIMIT = "process_limit"
    # the network (ECONNREFUSED, ECONNRESET, ETIMEDOUT, EHOSTUNREACH, EADDRINUSE …)
    NETWORK = "network"
    UNKNOWN = "unknown"


# POSIX's errnos of the calls that make, move or remove a directory entry (the Python
# library reference: os's "Files and Directories" — mkdir, makedirs, rename, renames,
# replace, rmdir, removedirs, remove, unlink, link, symlink —, shutil's rmtree and move,
# pathlib.Path's mkdir, rename, replace, rmdir, unlink, touch, symlink_to, hardlink_to)
# that mean another process got there first. Where several processes share a directory
# (each node's rank 0 writing one output directory, a save rotating old checkpoints
# out), one's call finds the entry made, moved or removed by another: ENOENT, EEXIST,
# ENOTEMPTY, EBUSY. EXDEV is a move across file systems: a directory on another mount
# than the job thought. An open() or a read is not one of these calls: a path that is
# not there for a reader is the job's path, not the file system.
ENTRY_ERRNOS = frozenset({"ENOENT", "EEXIST", "ENOTEMPTY", "EBUSY", "EXDEV"})


@dataclass(frozen=True, slots=True)
class ExceptionRaised(EventPayload):
    """EXCEPTION: an uncaught Python exception (the line that ends a traceback)."""

    where: str | None = None  # the traceback's last frame: 'File "x.py", line 3, in f'
    # The stage its frames show (the innermost frame or call naming one), when they do.
    stage: CodeStage | None = None
    # Raised by torch.distributed's collective API itself (its innermost frame is one of
    # distributed_c10d.py's collectives): the call refused its arguments, or
    # (``in_wait``) the wait for the other ranks reported a failure (``work.wait()``, a
    # barrier), which it reports for them as often as for its own rank.
    in_collective: bool = False
    in_wait: bool = False
    # Its words are a row of the message catalog with a meaning: a library printed them,
    # and what they mean is written down (parsers/logs/errors.py catalog_meaning).
    known: bool = False
    # That meaning's category when it is another than a crash, at a strength the row's
    # words give (moderate or above; a value of DESIGN's vocabulary, model.Category:
    # "nccl_network_or_transport_error", …): the exception reports that failure, it is
    # not a crash of the program of its own.
    known_as: str | None = None
    # Its words say nothing hangdoc knows of what failed: no catalog row holds them, or
    # only a framework's record that something raised (parsers/logs/errors.py
    # words_unread), and its type is one torch's C++ side raises (RuntimeError,
    # torch.distributed's DistError family) or none is printed: where it was raised is
    # then all that can say (views/death_kind.py).
    unread: bool = False
    bare: bool = False  # a paste's last line, no traceback above it: weak on its own
    saving: str | None = None  # a line of the traceback that shows a save (torch.save…)
    # The traceback's innermost source line, when it is a call that writes a file
    # (process.WRITE_CALL): an OSError raised there is the storage failing the write.
    writing: str | None = None
    # ``where`` read: the file and the function of the traceback's last frame (the
    # innermost call, where the exception was raised or entered the library).
    where_file: str | None = None
    where_function: str | None = None
    # Its frames show torch's DataLoader (torch/utils/data/dataloader.py): with
    # ``stage`` WORKER_START, the child that could not start is a DataLoader worker.
    by_dataloader: bool = False
    # A Ray wrapper ("RayTaskError(RuntimeError): ray::Actor.method() (pid=…)") whose
    # remote exception's own line follows it in the same output (Ray's str() of the
    # wrapper is the remote traceback): that line is the failure, read on its own; the
    # wrapper is the caller's report of it, not a second failure.
    cause_shown: bool = False
    # The errno it reports, by POSIX's name ("ENOSPC"), and that errno's family (or
    # MemoryError's): read once by the parser (parsers/logs/oserror.py) from the stdlib's
    # tables, decided on by views/death_kind.py with the stage.
    errno: str | None = None
    os_failure: OsFailure | None = None
    # The traceback's innermost source line (the call it raised from), kept for the
    # parser's reading of which call failed (``entry_call``); not evidence on its own.
    source: str | None = None
    # The call that raised makes, moves or removes a directory entry (os.makedirs,
    # os.rename, shutil.rmtree, a two-path OSError's link or rename …), by its name:
    # parsers/logs/oserror.py entry_call, from the library's frames and CPython's message.
    entry_call: str | None = None
    # Raised in a DataLoader worker process: its frames show the worker's loop
    # (torch/utils/data/_utils/worker.py _worker_loop), or it is the main process's
    # re-raise of a worker's exception (torch/_utils.py ExceptionWrapper: "Caught
    # <type> in DataLoader worker process N").
    in_loader_worker: bool = False


@dataclass(frozen=True, slots=True)
class ErrorFile(EventPayload):
    """ERROR_FILE: a TORCHELASTIC_ERROR_FILE (error.json)."""

    category: str | None = None  # errorTraits.category: "system_terminated_error"
    timestamp: float | None = None  # the file's own time, POSIX seconds


@dataclass(frozen=True, slots=True)
class FatalSignal(EventPayload):
    """FATAL_SIGNAL: a process killed by a signal (its exc_type: the C++ exception an
    abort threw)."""

    signal: SignalName | None = None
    reported_by: FatalReport | None = None
    # The stage the native backtrace printed under the signal shows (tvm-ffi's handler
    # prints it as traceback frames: parsers/logs/tb_stage.py), None when none is shown.
    stage: CodeStage | None = None


# HostOomKill.name when Ray's memory monitor, not the kernel, killed the worker.
RAY_MEMORY_MONITOR = "ray memory monitor"


@dataclass(frozen=True, slots=True)
class HostOomKill(EventPayload):
    """HOST_OOM_KILL: the kernel's (or Ray's) OOM killer."""

    name: str | None = None  # the process it killed: "python"
    events: int | None = None  # slurmstepd: "Detected N oom_kill events"


@dataclass(frozen=True, slots=True)
class HostMemory(EventPayload):
    """HOST_MEMORY: a process's host-memory readings, folded into one event per process
    (parsers/logs/memory.py): how many, the lowest, the last and the one before it (GiB),
    and the last share of the host's memory in use where the line prints one (%)."""

    readings: int = 1
    low_gib: float = 0.0
    last_gib: float = 0.0
    previous_gib: float | None = None
    peak_gib: float = 0.0
    percent: float | None = None

    @classmethod
    def first(cls, gib: float, percent: float | None = None) -> HostMemory:
        """One reading."""
        return cls(low_gib=gib, last_gib=gib, peak_gib=gib, percent=percent)

    def then(self, later: HostMemory) -> HostMemory:
        """The series with ``later``'s reading after its own."""
        return HostMemory(
            readings=self.readings + later.readings,
            low_gib=min(self.low_gib, later.low_gib),
            last_gib=later.last_gib,
            previous_gib=self.last_gib,
            peak_gib=max(self.peak_gib, later.peak_gib),
            percent=later.percent,
        )

    @property
    def climbed(self) -> bool:
        """The series ends climbing to its peak: three readings or more, the last the
        highest and above the one before, and either four times the lowest (and a GiB or
        more: a process's memory does not grow so in steady work, and the kernel's OOM
        killer takes the largest process) or the host's memory nearly all in use
        (MEMORY_FULL_PERCENT)."""
        if self.readings < _CLIMB_READINGS or self.previous_gib is None:
            return False
        if self.last_gib < self.peak_gib or self.last_gib <= self.previous_gib:
            return False
        full = self.percent is not None and self.percent >= MEMORY_FULL_PERCENT
        steep = self.last_gib >= _CLIMB_FACTOR * self.low_gib and self.last_gib >= 1.0
        return full or steep


_CLIMB_READINGS = 3
_CLIMB_FACTOR = 4.0
MEMORY_FULL_PERCENT = 95.0


@dataclass(frozen=True, slots=True)
class LoaderWorkerDied(EventPayload):
    """DATALOADER_WORKER_DIED: torch's messages when a DataLoader worker dies."""

    signal: SignalName | None = None
    worker_pids: tuple[int, ...] = ()
    timeout_s: int | None = None  # "DataLoader timed out after N seconds"
    shm: bool = False  # shared memory (/dev/shm) too small, by the message
    shm_error: str | None = None  # the shared-memory file's error: "No space left on device"
