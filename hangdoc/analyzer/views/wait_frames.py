"""What a thread waits on, told by its innermost frames: for stacks read from text (a
paste, a log's faulthandler dump) and live samples without /proc, where the kernel's
word (views/waits.py) is missing.

Data, as the frame catalog: a row matches a Python frame by its file (whole path
components at the end, so ``filelock/_api.py`` matches ``…/site-packages/filelock/_api.py``)
and function, or a native frame (py-spy --native, gdb, pystack) by a word of its
function. Only the innermost frames count: a wait is where a thread sleeps, not what
called it. ``selectors``' ``select`` says only "waiting on descriptors"; the caller above
it says on what (``subprocess._communicate``: the child's pipes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoc.analyzer.model import Frame, StackTextKind, ThreadStack, WaitKind


@dataclass(frozen=True, slots=True)
class WaitFrame:
    kind: WaitKind
    files: tuple[str, ...] = ()  # Python frames: the file's last path components
    functions: frozenset[str] = frozenset({"*"})  # ... and the function's last dotted part
    native: re.Pattern[str] | None = None  # native frames: the function


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


# fmt: off
_FILELOCK = WaitFrame(WaitKind.LOCK_FILE, ("filelock/_api.py", "filelock/_unix.py",
                                           "filelock/_core/_lock.py", "filelock/_native/_unix.py"),
                      _f("acquire", "_acquire", "__enter__", "_poll_acquire"))
_FILE_BATON = WaitFrame(WaitKind.LOCK_FILE, ("torch/utils/file_baton.py",), _f("wait"))
WAIT_FRAMES: tuple[WaitFrame, ...] = (
    # File locks: filelock (tox-dev/filelock: FileLock.acquire polls flock(LOCK_NB) and
    # sleeps), portalocker, fasteners; glibc's flock, lockf and fcntl (F_SETLKW).
    _FILELOCK,
    WaitFrame(WaitKind.LOCK_FILE, ("portalocker/portalocker.py", "portalocker/utils.py"),
              _f("lock", "acquire", "_get_lock", "__enter__")),
    WaitFrame(WaitKind.LOCK_FILE, ("fasteners/process_lock.py",), _f("acquire", "_do_open",
                                                                      "__enter__")),
    # A lock file polled for its existence (POLLED_LOCKS): torch's FileBaton.
    _FILE_BATON,
    WaitFrame(WaitKind.LOCK_FILE, native=re.compile(
        r"^(?:__GI___)?(?:flock|lockf64|lockf|__libc_fcntl64|fcntl64|__fcntl64_nocancel)\b")),
    # A child process: subprocess's waits, multiprocessing's, and glibc's.
    WaitFrame(WaitKind.CHILD, ("subprocess.py",), _f("wait", "_wait", "_try_wait", "run",
                                                     "call", "check_call", "check_output")),
    WaitFrame(WaitKind.PIPE, ("subprocess.py",), _f("communicate", "_communicate")),
    WaitFrame(WaitKind.CHILD, ("multiprocessing/popen_fork.py",), _f("wait", "poll")),
    WaitFrame(WaitKind.CHILD, native=re.compile(
        r"^(?:__GI___)?(?:wait4|waitpid|__waitpid|waitid|__libc_wait)\b")),
    # Sockets: the standard library's clients and glibc's calls.
    WaitFrame(WaitKind.SOCKET, ("socket.py",), _f("recv", "recv_into", "recvfrom", "send",
                                                  "sendall", "connect", "accept", "readinto",
                                                  "create_connection")),
    WaitFrame(WaitKind.SOCKET, ("ssl.py",), _f("read", "recv", "recv_into", "write", "send",
                                               "sendall", "do_handshake")),
    WaitFrame(WaitKind.SOCKET, native=re.compile(
        r"^(?:__GI___|__libc_)?(?:recv|recvfrom|recvmsg|send|sendto|sendmsg|connect|accept4?)\b")),
    # Descriptors in general: the caller above says which (selectors.select).
    WaitFrame(WaitKind.POLL, ("selectors.py",), _f("select")),
    WaitFrame(WaitKind.POLL, native=re.compile(
        r"^(?:__GI___)?(?:__)?(?:poll|ppoll|select|pselect6?|epoll_wait|epoll_pwait2?)\b")),
    # The process's own locks and conditions (a futex underneath).
    WaitFrame(WaitKind.FUTEX, ("threading.py",), _f("acquire", "wait", "join",
                                                    "_wait_for_tstate_lock")),
    WaitFrame(WaitKind.FUTEX, ("queue.py",), _f("get", "put", "join")),
    WaitFrame(WaitKind.FUTEX, native=re.compile(
        r"pthread_cond_(?:timed)?wait|__lll_lock_wait|pthread_mutex_(?:timed)?lock|sem_wait|"
        r"futex_(?:abs_)?(?:timed_)?wait|PyThread_acquire_lock|take_gil|PyEval_RestoreThread")),
    WaitFrame(WaitKind.SLEEP, native=re.compile(r"^(?:__GI___)?(?:clock_)?nanosleep\b|^pause\b")),
)
# fmt: on
# Lock-file waits that poll: a loop that sleeps and tries again, so the kernel shows a
# sleep (nanosleep, select with a timeout), not a wait in flock, and /proc/locks shows no
# waiter. Read from the libraries' sources: torch/utils/file_baton.py FileBaton.wait
# (`while os.path.exists(self.lock_file_path): time.sleep(self.wait_seconds)`: the file's
# existence is the lock, a killed holder's file stays), filelock's acquire (tox-dev/filelock
# _api.py BaseFileLock.acquire: `_acquire()` with LOCK_NB, then `time.sleep(poll_interval)`;
# the flock of UnixFileLock dies with its holder, SoftFileLock's file does not), as used by
# huggingface_hub, datasets and transformers for their caches.
POLLED_LOCKS: tuple[WaitFrame, ...] = (_FILE_BATON, _FILELOCK)
# How deep a wait may sit: past the few innermost frames, a frame is a caller.
INNERMOST = 4
# Text kinds whose "owns_gil=False" means "waiting for the GIL" (pystack's and gdb's
# py-bt status line), where py-spy's means only "does not hold it".
_GIL_STATUS_KINDS = frozenset({StackTextKind.PYSTACK, StackTextKind.PY_BT, StackTextKind.GDB})


def _matches(row: WaitFrame, frame: Frame) -> bool:
    if frame.native:
        return row.native is not None and row.native.search(frame.function) is not None
    if not row.files or ("*" not in row.functions and frame.function_leaf not in row.functions):
        return False
    path = frame.file.replace("\\", "/")
    return any(path == f or path.endswith("/" + f) for f in row.files)


def polls_a_lock_file(frame: Frame | None) -> bool:
    """The frame is a lock-file wait that sleeps between tries (POLLED_LOCKS): the kernel
    shows it asleep, not in flock."""
    return frame is not None and any(_matches(row, frame) for row in POLLED_LOCKS)


def frame_kind(frame: Frame) -> WaitKind | None:
    return next((row.kind for row in WAIT_FRAMES if _matches(row, frame)), None)


def frames_wait(
    thread: ThreadStack, kinds: tuple[StackTextKind, ...] = ()
) -> tuple[WaitKind, Frame | None, str | None] | None:
    """(kind, the frame that says it, target) for a thread whose innermost frames wait;
    ``kinds``: the text kinds the stack was read from (pystack's GIL status)."""
    if thread.owns_gil is False and _GIL_STATUS_KINDS & set(kinds):
        return WaitKind.FUTEX, thread.frames[0] if thread.frames else None, "the GIL"
    python_seen = 0
    found: tuple[WaitKind, Frame] | None = None
    for frame in thread.frames:
        if not frame.native:
            python_seen += 1
            if python_seen > INNERMOST:
                break
        kind = frame_kind(frame)
        if found is not None:
            if kind is not None and kind is not WaitKind.POLL:
                return kind, frame, None  # the caller of a select says on what
            if not frame.native:
                break
            continue
        if kind is WaitKind.POLL:
            found = (kind, frame)
        elif kind is not None:
            return kind, frame, "the GIL" if "gil" in frame.function.lower() else None
    return (found[0], found[1], None) if found is not None else None
