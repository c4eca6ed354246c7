"""The vocabulary of log events: what a recognised log line is, and the closed sets of
words its typed payload (analyzer/payloads/) and the model use.

The log parsers write :class:`~hangdoc.analyzer.model.LogEvent` objects of these kinds;
``LogEvent.kind`` is the :class:`EventKind` (the findings JSON, dumps and summaries carry
its value, read back with :func:`parse_enum`). Imports nothing of hangdoc: the payloads
and the model import it.
"""

from __future__ import annotations

import enum
import re
from typing import TypeVar

_E = TypeVar("_E", bound=enum.StrEnum)


def parse_enum(cls: type[_E], value: object) -> _E:
    """``value`` as a member of ``cls``, for values read back from a dump, a summary or a
    JSON file: a value this version does not know (written by a newer hangdoc, damaged,
    hostile) becomes ``cls.UNKNOWN`` instead of stopping the load."""
    unknown = cls.__members__["UNKNOWN"]
    if not isinstance(value, str):
        return unknown
    try:
        return cls(value)
    except ValueError:
        return unknown


class EventKind(enum.StrEnum):
    """What a recognised log line (or block) is. Values are stable: they reach JSON."""

    # torch.distributed process groups (FORMATS.md §2)
    COLLECTIVE_TIMEOUT = "collective_timeout"  # watchdog / blocking wait / gloo timeout
    WATCHDOG_STATUS = "watchdog_status"  # failed seq, last enqueued / completed
    WATCHDOG_TEARDOWN = "watchdog_teardown"  # "taking the entire process down", terminate
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"  # monitor thread: watchdog got stuck
    DUMP_SIGNAL = "dump_signal"  # flight recorder dump requested (names who timed out)
    FAILED_COLLECTIVE_STACK = "failed_collective_stack"  # "Stack trace of the failed collective"
    NCCL_ERROR = "nccl_error"  # NCCL error class surfaced in torch (ncclRemoteError...)
    COLLECTIVE_MISMATCH = "collective_mismatch"  # TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprint
    COLLECTIVE_ISSUED = "collective_issued"  # DETAIL wrapper: "Running collective: …" (last)
    MONITORED_BARRIER = "monitored_barrier_failure"
    MISSING_RANKS = "missing_ranks"  # a library named ranks that never submitted an op (Horovod)
    STORE_TIMEOUT = "store_timeout"  # TCPStore / rendezvous waiting for clients
    CONNECTION_LOST = "connection_lost"  # peer closed / reset (gloo, NCCL service thread)
    # NCCL (FORMATS.md §1)
    NCCL_VERSION = "nccl_version"
    NCCL_INIT = "nccl_init"  # comm init start / complete / abort / destroy
    NCCL_NETWORK = "nccl_network"  # bootstrap and data interfaces, network plugin
    NCCL_TRANSPORT = "nccl_transport"  # channels via P2P / SHM / NET (one per process)
    NCCL_TRANSPORT_ERROR = "nccl_transport_error"  # IB completion, socket closed/reset
    NCCL_CONFIG_ERROR = "nccl_config_error"  # duplicate GPU, rank count mismatch
    NCCL_RESOURCE_ERROR = "nccl_resource_error"  # a resource of the host ran out (/dev/shm)
    NCCL_WARN = "nccl_warn"  # any other WARN
    NCCL_RETURN = "nccl_return"  # "file.cc:47 -> 3" chain with no WARN before it
    NCCL_COLL = "nccl_coll"  # last COLL line of one communicator on one process
    RAS_REPORT = "ras_report"  # ncclras status: one per communicator group line
    RAS_MISMATCH = "ras_mismatch"  # ranks at different operation counts
    RAS_DEAD = "ras_dead"  # processes considered dead / declared DEAD
    RAS_INCOMPLETE = "ras_incomplete"  # ranks/processes that did not answer
    RAS_ERROR = "ras_error"  # init / async errors per communicator
    # launchers (FORMATS.md §3)
    WORKER_FAILED = "worker_failed"  # torchrun agent: failed (exitcode: N) local_rank: L
    CHILD_FAILURE = "child_failure"  # one entry of a ChildFailedError block
    AGENT_TERMINATING = "agent_terminating"  # agent sends SIGTERM to the survivors
    AGENT_SIGNAL = "agent_signal"  # agent itself got a death signal (scheduler, user)
    ERROR_FILE = "error_file"  # TORCHELASTIC_ERROR_FILE contents
    ACTOR_DIED = "actor_died"  # Ray actor / worker died
    DATALOADER_WORKER_DIED = "dataloader_worker_died"  # torch's DataLoader worker messages
    # the rank's process
    EXCEPTION = "exception"  # uncaught Python exception (last line of a traceback)
    CUDA_OOM = "cuda_oom"
    CUDA_ERROR = "cuda_error"  # other CUDA errors (illegal access, ECC, assert)
    FATAL_SIGNAL = "fatal_signal"  # segfault, abort, bus error, "Killed"
    HOST_OOM_KILL = "host_oom_kill"  # kernel OOM killer
    # A process's host memory as the job prints it (RSS, psutil's used): its readings
    # folded into one event per process (parsers/logs/memory.py).
    HOST_MEMORY = "host_memory"
    FAULTHANDLER_TIMEOUT = "faulthandler_timeout"  # faulthandler.dump_traceback_later fired
    # A framework's own watchdog saw no progress for its timeout and takes the process down
    # (SGLang's scheduler: its forward batch did not advance); the job was stuck, not why.
    STALL_WATCHDOG = "stall_watchdog"
    # An inference server's health check that timed out waiting for the model's output
    # (SGLang's /health_generate: no answer from the detokenizer for HEALTH_CHECK_TIMEOUT
    # seconds): the model answered nothing for that long, busy or stuck, not which.
    HEALTH_CHECK_FAILED = "health_check_failed"
    # An HTTP request an ASGI server (uvicorn) answered: its access-log line, printed when
    # the response starts (parsers/logs/serving.py).
    HTTP_REQUEST = "http_request"
    KERNEL_HUNG_TASK = "kernel_hung_task"  # a task in D state and its kernel call trace
    IO_STALL = "io_stall"  # a D-state process row, a file-system kernel frame, NFS not responding
    NIC_COUNTER = "nic_counter"  # a non-zero InfiniBand/RoCE port error counter (sysfs, perfquery)
    NIC_LINK = "nic_link"  # kernel: a NIC's link down/up, cable module event, transmit timeout
    # A system service's state as ``systemctl status`` prints it: the unit its header or
    # ``Loaded:`` line names, or its ``Active:`` state (parsers/logs/services.py).
    SERVICE_STATUS = "service_status"
    # A checkpoint file as a directory listing shows it (``ls -l``): its name and size.
    FILE_LISTED = "file_listed"
    # GPU (FORMATS.md §6)
    GPU_XID = "gpu_xid"
    GPU_STATUS = "gpu_status"  # one GPU row of nvidia-smi
    GPU_TOPOLOGY = "gpu_topology"  # nvidia-smi topo -m summary
    # flight recorder analyser text output (FORMATS.md §5)
    FR_MISSING_RANKS = "fr_missing_ranks"
    FR_MISMATCH = "fr_mismatch"
    # framework phase markers and progress bars (FORMATS.md §7)
    PHASE = "phase"
    DATA_COUNT = "data_count"  # a rank's number of batches/steps/samples (len(dataloader)…)
    # A kind this version does not know, read from a summary a newer hangdoc wrote.
    UNKNOWN = "unknown"


class RankFrom(enum.StrEnum):
    """How a log event's rank was worked out (parsers/logs/attribution.py, strongest first)."""

    PREFIX = "prefix"  # a [rankN]: (or mpirun [1,N]<stdout>) prefix on the line
    CONTENT = "content"  # the line names the global rank (ChildFailedError, Slurm task...)
    NCCL_INIT = "nccl_init"  # NCCL host:pid mapped through the process's init line
    PID = "pid"  # a pid named with a rank elsewhere in the file
    LOCAL_RANK = "local_rank"  # torchrun's [defaultN]: mapped to a global rank
    LOCAL_RANK_SINGLE_NODE = "local_rank_single_node"  # the local rank, on a lone node
    GROUP_RANK = "group_rank"  # the watchdog's [Rank N] of the default process group
    FILE_NAME = "file_name"  # the file's name (rank3.log)
    # The line's own words (parsers/logs/mentions.py), weaker than a file's name and
    # stronger than a label typed over the lines: the global rank named ("[rank: 3]",
    # "rank=3", "Rank 3, world_size 8: …"), the local rank named and mapped ("local_rank
    # 3"), the device named and mapped as a local rank ("[GPU 3]"), parallel coordinates
    # ("[… PP1 TP3]") with the sizes known.
    MENTION = "mention"
    MENTION_LOCAL = "mention_local"
    MENTION_DEVICE = "mention_device"
    COORDINATES = "coordinates"
    STACK_MARKER = "stack_marker"  # the rank marker of the stack dump the line is in
    LABEL = "label"  # a rank label written over the lines ("rank 3:", "=== Rank 3 ===")
    UNKNOWN = "unknown"


class Clock(enum.StrEnum):
    """Which clock a log event's time is on: rules compare only times of one clock."""

    LOCAL = "local"  # naive wall-clock time read as UTC (consistent within a job)
    LOCAL_ASSUMED_YEAR = "local?"  # the same, with the year assumed (the file's date)
    EPOCH = "epoch"  # true POSIX seconds (error.json)
    UNKNOWN = "unknown"


class Phase(enum.StrEnum):
    """Values of the ``phase`` field of PHASE events."""

    PREPROCESS = "preprocess"  # tokenizing, dataset map/filter, packing, downloading
    LOAD = "load"  # loading model / checkpoint shards
    TRAIN = "train"  # training steps / progress
    EVAL = "eval"
    CHECKPOINT_SAVE = "checkpoint_save"
    CHECKPOINT_SAVED = "checkpoint_saved"
    INIT = "init"  # distributed init / rendezvous messages of frameworks
    DATA_EXHAUSTED = "data_exhausted"  # a rank ran out of batches before the others (join)
    EVAL_DONE = "eval_done"  # an evaluation reported its result (the end of an EVAL phase)
    UNKNOWN = "unknown"  # read from a summary of a newer hangdoc


class BenignWarning(enum.StrEnum):
    """A warning its own library documents as harmless, that users take for the hang
    (parsers/logs/benign.py reads them; LogLine.benign)."""

    TOKENIZERS_FORK = "tokenizers_fork"  # huggingface/tokenizers: parallelism disabled
    OPENMPI_CMA_EPERM = "openmpi_cma_eperm"  # Open MPI vader's CMA read refused (EPERM)
    UNKNOWN = "unknown"  # read from a summary of a newer hangdoc


# Storage failures in POSIX strerror words, as Python's OSError ("[Errno 5] Input/output
# error: '/ckpt/x'") and C libraries print them, and torch.save's writer
# (caffe2/serialize/inline_container.cc "PytorchStreamWriter failed writing file …"): the
# file system or the device under it failed, or is full. ENOTCONN counts only with a path
# after it or a file call before it (a FUSE mount whose daemon died), not on a socket.
STORAGE_ERROR_TEXT = re.compile(
    r"\[Errno (?:5|28|30|116|121|122)\]|Input/output error|Stale (?:NFS )?file handle"
    r"|Remote I/O error|No space left on device|Disk quota exceeded|Read-only file system"
    r"|Transport endpoint is not connected: '|PytorchStreamWriter failed writing file"
    # A file syscall failing as c10d's FileStore (and most C++ code) reports it,
    # std::system_error's "<call>: <strerror>": "flock: Transport endpoint is not connected".
    r"|\b(?:flock|fcntl|open|read|write|fsync|lseek|ftruncate|stat|mkdir|rename|unlink): "
    r"Transport endpoint is not connected"
    # Hugging Face datasets' check before it downloads and prepares a dataset into its
    # cache (datasets/builder.py, download_and_prepare: raise OSError(f"Not enough disk
    # space. Needed: {size_str(…)} (download: …, generated: …, post-processed: …)")).
    r"|Not enough disk space\. Needed: "
)
# Shared memory (/dev/shm) full or too small is not storage: the DataLoader's "unable to write
# to file </torch_…>: No space left on device" and NCCL's "Error while creating shared memory
# segment /dev/shm/nccl-…" are a container's --shm-size.
_SHARED_MEMORY_TEXT = re.compile(r"/dev/shm|shared memory|</torch_|\btorch_shm_", re.IGNORECASE)


def about_shared_memory(text: str) -> bool:
    """Whether ``text`` is about shared memory (/dev/shm, a tmpfs: the host's memory, not
    storage; _SHARED_MEMORY_TEXT)."""
    return _SHARED_MEMORY_TEXT.search(text) is not None


def storage_error(text: str) -> str | None:
    """The storage-failure words in ``text`` (STORAGE_ERROR_TEXT), unless it is about
    shared memory."""
    m = STORAGE_ERROR_TEXT.search(text)
    if m is None or _SHARED_MEMORY_TEXT.search(text):
        return None
    return m.group(0)


# A save failing on the file system (fixtures/cases/README.md's convention: the storage's
# own error decides). torch.save's writer (caffe2/serialize/inline_container.cc) checks the
# target's directory ("Parent directory <dir> does not exist.") and fails a short write
# ("… file write failed", then "unexpected pos <n> vs <m>"): those are saves by whom says
# them. Any other error of a file-system call, OSError's "[Errno N] <strerror>", is one
# when the traceback shows a save (``saving``), or when it is a rename's or a link's
# (CPython's OSError_str with two file names, "[Errno N] <strerror>: 'a' -> 'b'": os.rename,
# os.replace, os.link, os.symlink, calls of a writer) of a checkpoint's file. One file name
# alone may be a load's (a resumed checkpoint's path that does not exist).
_SAVE_WRITER_ERROR = re.compile(
    r"Parent directory \S.{0,300} does not exist\.|PytorchStreamWriter failed \w+ [^\n]{0,200}"
    r"|inline_container\.cc:\d+\] \. unexpected pos \d+ vs \d+"
)
# The zip writer's own checks (CAFFE_ENFORCE, valid()) in inline_container.cc, as c10
# prints them ("[enforce fail at inline_container.cc:857] . PytorchStreamWriter failed
# writing file data/3: file write failed"): raised in a save, they are its writes failing
# whatever words of the message a paste kept. Its reader's are a load's, hence the save.
_WRITER_ENFORCE = re.compile(r"\[enforce fail at inline_container\.cc:\d+\][^\n]{0,200}")
_ERRNO = re.compile(r"\[Errno (?P<n>\d+)\] [^\n]{1,200}")


class ErrnoKind(enum.StrEnum):
    """What a file-system call's errno says failed (ERRNO_KINDS)."""

    # The storage itself: the device or file system failed, is full or read-only, or its
    # server went away. The fix is in the storage (fixtures/cases/README.md).
    STORAGE = "storage"
    # A name's state, which the storage reports faithfully: it exists, it is missing, the
    # directory is not empty or in use, the rename crosses file systems. On a path several
    # ranks write, another process changed the name first: the fix is in the program.
    NAMESPACE = "namespace"
    # The process may not do it (the directory's owner or mode, a mount's options).
    PERMISSION = "permission"
    # Not the file system's: an interrupted call, a would-block, host memory, the network.
    NOT_FILE_SYSTEM = "not_file_system"


# Linux's errno numbers (asm-generic/errno-base.h, errno.h) by what errno(3) and the
# calls' own pages (rename(2), mkdir(2), rmdir(2), open(2), write(2)) say they mean.
ERRNO_KINDS: dict[int, ErrnoKind] = {
    1: ErrnoKind.PERMISSION,  # EPERM: operation not permitted (sticky directory, a mount's)
    2: ErrnoKind.NAMESPACE,  # ENOENT: a component of the path does not exist
    4: ErrnoKind.NOT_FILE_SYSTEM,  # EINTR
    5: ErrnoKind.STORAGE,  # EIO: a low-level I/O error while reading or writing
    6: ErrnoKind.STORAGE,  # ENXIO: the device is not there
    11: ErrnoKind.NOT_FILE_SYSTEM,  # EAGAIN
    12: ErrnoKind.NOT_FILE_SYSTEM,  # ENOMEM: the kernel's (host) memory
    13: ErrnoKind.PERMISSION,  # EACCES: write or search permission denied
    16: ErrnoKind.NAMESPACE,  # EBUSY: the directory is in use (a mount point, a cwd)
    17: ErrnoKind.NAMESPACE,  # EEXIST: the name exists (mkdir(2), link(2), O_EXCL)
    18: ErrnoKind.NAMESPACE,  # EXDEV: rename(2) across mounts
    20: ErrnoKind.NAMESPACE,  # ENOTDIR: a component, or the new name, is not a directory
    21: ErrnoKind.NAMESPACE,  # EISDIR: the new name is a directory, the old one not
    28: ErrnoKind.STORAGE,  # ENOSPC: no space left on the device
    30: ErrnoKind.STORAGE,  # EROFS: a read-only file system (a remount after errors)
    32: ErrnoKind.NOT_FILE_SYSTEM,  # EPIPE
    36: ErrnoKind.NAMESPACE,  # ENAMETOOLONG
    39: ErrnoKind.NAMESPACE,  # ENOTEMPTY: rename(2)/rmdir(2) onto a non-empty directory
    40: ErrnoKind.NAMESPACE,  # ELOOP: too many symbolic links
    **dict.fromkeys(range(98, 114), ErrnoKind.NOT_FILE_SYSTEM),  # the network's
    116: ErrnoKind.STORAGE,  # ESTALE: a stale file handle (NFS)
    117: ErrnoKind.STORAGE,  # EUCLEAN: the file system's structure needs cleaning
    121: ErrnoKind.STORAGE,  # EREMOTEIO: a remote I/O error
    122: ErrnoKind.STORAGE,  # EDQUOT: the user's quota is exhausted
}
_ERRNO_NAMED = re.compile(r"\[Errno (?P<n>-?\d+)\]")


def errno_kind(text: str) -> ErrnoKind | None:
    """What the first ``[Errno N]`` in ``text`` says failed, None without one or for an
    errno the table does not give a meaning."""
    m = _ERRNO_NAMED.search(text)
    return None if m is None else ERRNO_KINDS.get(int(m.group("n")))


# Errnos that are not the file system's: an interrupted call, a would-block, host memory
# (ENOMEM), and the network's (EPIPE, EADDRINUSE…EHOSTUNREACH: 98-113 on Linux).
_NOT_FILE_SYSTEM = frozenset(n for n, k in ERRNO_KINDS.items() if k == ErrnoKind.NOT_FILE_SYSTEM)
_CHECKPOINT_FILE = (
    r"'[^']{0,300}(?:\.(?:pt|pth|ckpt|safetensors|distcp)(?:\.tar)?|checkpoint[^'/]*)'"
)
_CHECKPOINT_MOVED = re.compile(
    rf"{_CHECKPOINT_FILE} -> '[^']{{0,300}}'|'[^']{{0,300}}' -> {_CHECKPOINT_FILE}", re.IGNORECASE
)


# CPython's OSError_str (Objects/exceptions.c) where the error names its files: "[Errno %S]
# %S: %R" and "[Errno %S] %S: %R -> %R" (os.rename, os.replace, os.link, shutil's copies,
# os.makedirs, shutil.rmtree's calls…). Only an OSError prints a message so.
_OS_ERROR_FILES = re.compile(r"^\[Errno -?\d+\] [^'\n]{1,120}?: '")


def os_error_with_files(message: str) -> bool:
    """``message`` is an OSError's that names the file(s) its call failed on."""
    return _OS_ERROR_FILES.match(message) is not None


# Errnos only a call that makes, moves or removes an entry raises (EBUSY, EEXIST, EXDEV,
# ENOTEMPTY: os.makedirs without exist_ok, os.rename across devices, os.rmdir and
# shutil.rmtree of a directory another rank still fills): with one checkpoint path named,
# a save's (or its rotation's) failure, where ENOENT with one name may be a load's.
_MAKING_OR_REMOVING = frozenset({16, 17, 18, 39})
_CHECKPOINT_NAMED = re.compile(_CHECKPOINT_FILE, re.IGNORECASE)


def save_storage_error(said: str, saving: str = "") -> str | None:
    """The file-system error a save failed with (``said``: "<type>: <message>"; ``saving``:
    a line of its traceback that shows a save), or None."""
    writer = _SAVE_WRITER_ERROR.search(said)
    if writer is not None:
        return writer.group(0)
    if saving and (enforce := _WRITER_ENFORCE.search(said)) is not None:
        return enforce.group(0)  # the zip writer's check failed inside a save
    errno = _ERRNO.search(said)
    if errno is None or int(errno.group("n")) in _NOT_FILE_SYSTEM:
        return None
    if saving or _CHECKPOINT_MOVED.search(said):
        return errno.group(0)
    if int(errno.group("n")) in _MAKING_OR_REMOVING and _CHECKPOINT_NAMED.search(said):
        return errno.group(0)  # a checkpoint's directory made or removed, never a load
    return None


# glibc's gai_strerror texts of a name that did not resolve (resolv/gai_strerror
# strings): the words torch's c10d tcputil::connect (before c10d/socket.cpp) put after
# "host not found: " (parsers/logs/torch_pg.py _STORE_RESOLVE).
GAI_NAME_ERROR = (
    r"(?:Name or service not known|Temporary failure in name resolution"
    r"|No address associated with hostname|Non-recoverable failure in name resolution"
    r"|Address family for hostname not supported)"
)
# Messages that a rank prints *because another rank failed* (or because the job was
# torn down): never the cause of a hang by themselves.
CONSEQUENCE_TEXT = re.compile(
    r"timed out|timeout|watchdog|DistBackendError|NCCL error|nccl\w*Error|remote process exiting|"
    r"Connection closed by peer|Connection reset by peer|Read error|pair closure|monitoredBarrier|"
    r"aborted|Signal 15|SIGTERM|KeyboardInterrupt|Detected mismatch between collectives|"
    r"DistStoreError|DistNetworkError|Rendezvous|Broken pipe|Socket Timeout|ChildFailedError|"
    r"NCCL communicator|ProcessGroup\w* is|heartbeat|collective operation|SignalException|"
    r"got signal: 15|Terminated"
    # c10d's FileStore failing to open its file (parsers/logs/torch_pg.py _FILE_STORE_OPEN):
    # the store failed, as with DistStoreError, and HD201 reads its STORE_TIMEOUT event.
    r"|^open\([^()\s]{1,300}\): [A-Z]"
    # an older torch's TCPStore client failing to resolve the store's host (the same
    # reader's STORE_RESOLVE): the store's set-up failed, HD201's.
    rf"|^host not found: {GAI_NAME_ERROR}",
    re.IGNORECASE,
)
