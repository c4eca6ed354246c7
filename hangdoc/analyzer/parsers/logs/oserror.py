"""The operating-system failure an exception reports: its errno and that errno's family.

Read from the sources that print them, not from a list of cases: Python's own tables
(``errno.errorcode``: the number "[Errno N]" prints; PEP 3151's mapping of errnos to the
OSError subclasses Python raises for them, read by constructing ``OSError(n, …)``, so
``FileExistsError`` *is* EEXIST; ``os.strerror``: the words C libraries and std::system_error
print after a call's name, "flock: No space left on device"), and Python's exception
hierarchy (``MemoryError`` is the host's memory whatever the message). What an errno
*means* for the job is a family written once per errno (``_FAMILY``, from errno(3) and the
Linux man pages of the calls that return it); views/death_kind.py decides with the stage
the exception was raised in (a path that is not there while a checkpoint is saved is the
file system's race, while the ranks set up a FileStore the set-up's).
"""

from __future__ import annotations

import builtins
import errno as errno_mod
import functools
import os
import re

from hangdoc.analyzer.payloads.launch import OsFailure
from hangdoc.analyzer.vocabulary import about_shared_memory

_F = OsFailure
# Each errno's family, by POSIX's name (errno(3)); an errno not named here gives no family.
_FAMILY: dict[str, OsFailure] = {
    # the storage failed or is full
    "EIO": _F.STORAGE,
    "ENOSPC": _F.STORAGE,
    "EDQUOT": _F.STORAGE,
    "EROFS": _F.STORAGE,
    "ESTALE": _F.STORAGE,
    "EREMOTEIO": _F.STORAGE,
    "EUCLEAN": _F.STORAGE,
    "ENOMEDIUM": _F.STORAGE,
    "EFBIG": _F.STORAGE,
    # a path is not what the call expected, or may not be used so
    "ENOENT": _F.FILE_STATE,
    "EEXIST": _F.FILE_STATE,
    "ENOTDIR": _F.FILE_STATE,
    "EISDIR": _F.FILE_STATE,
    "ENOTEMPTY": _F.FILE_STATE,
    "EXDEV": _F.FILE_STATE,
    "EBUSY": _F.FILE_STATE,
    "ETXTBSY": _F.FILE_STATE,
    "EACCES": _F.FILE_STATE,
    "EPERM": _F.FILE_STATE,
    "ENAMETOOLONG": _F.FILE_STATE,
    "ELOOP": _F.FILE_STATE,
    "EMLINK": _F.FILE_STATE,
    # a buffer the kernel could not read or write: on a network file system (NFS's
    # page-cache writes of an mmap'd file) the storage client's failure
    "EFAULT": _F.FILE_STATE,
    # the host's memory
    "ENOMEM": _F.HOST_MEMORY,
    # a limit of the process or the user: fork's EAGAIN (RLIMIT_NPROC), open files
    "EAGAIN": _F.PROCESS_LIMIT,
    "EMFILE": _F.PROCESS_LIMIT,
    "ENFILE": _F.PROCESS_LIMIT,
    # the network
    "ECONNREFUSED": _F.NETWORK,
    "ECONNRESET": _F.NETWORK,
    "ECONNABORTED": _F.NETWORK,
    "ETIMEDOUT": _F.NETWORK,
    "EHOSTUNREACH": _F.NETWORK,
    "EHOSTDOWN": _F.NETWORK,
    "ENETUNREACH": _F.NETWORK,
    "ENETDOWN": _F.NETWORK,
    "ENETRESET": _F.NETWORK,
    "EADDRINUSE": _F.NETWORK,
    "EADDRNOTAVAIL": _F.NETWORK,
    "EPIPE": _F.NETWORK,
    "ENOTCONN": _F.NETWORK,
}


def _subclass_errnos() -> dict[str, tuple[str, ...]]:
    """PEP 3151: the OSError subclass Python raises for each errno (``OSError(n, …)``
    constructs it), as class name → the errnos it stands for."""
    out: dict[str, list[str]] = {}
    for number, name in sorted(errno_mod.errorcode.items()):
        cls = type(OSError(number, "x")).__name__
        if cls != "OSError":
            out.setdefault(cls, []).append(name)
    return {cls: tuple(names) for cls, names in out.items()}


_SUBCLASS_ERRNOS = _subclass_errnos()
# os.strerror's words of every errno with a family (the C library's table, as a call's
# std::system_error or a C library prints them: "<call>: <strerror>"), longest first.
_STRERROR = {os.strerror(number): name for number, name in errno_mod.errorcode.items()}
_STRERROR_WORDS = re.compile(
    r"(?:^|: )(?P<words>"
    + "|".join(
        re.escape(words)
        for words in sorted(_STRERROR, key=len, reverse=True)
        if _STRERROR[words] in _FAMILY
    )
    + r")(?:$|[:.,;'\s])"
)
_ERRNO_NUMBER = re.compile(r"\[Errno (?P<n>\d+)\]")


def _type_name(exc_type: str) -> str:
    return exc_type.rsplit(".", 1)[-1].strip()


@functools.lru_cache(maxsize=4096)
def errno_of(exc_type: str, message: str) -> str | None:
    """The errno an exception reports, by POSIX's name: "[Errno N]" in its message, else
    the errno of its OSError subclass (one only: PermissionError is EACCES or EPERM, read
    by family alone), else the strerror words its message prints after a call's name or
    alone. None when it reports none."""
    m = _ERRNO_NUMBER.search(message)
    if m is not None:
        return errno_mod.errorcode.get(int(m.group("n")))
    named = _SUBCLASS_ERRNOS.get(_type_name(exc_type), ())
    if len(named) == 1:
        return named[0]
    words = _STRERROR_WORDS.search(message)
    return _STRERROR[words.group("words")] if words is not None else None


@functools.lru_cache(maxsize=4096)
def os_failure_of(exc_type: str, message: str) -> OsFailure | None:
    """The family of the failure an exception reports: its errno's (``_FAMILY``), else its
    OSError subclass's when all the errnos it stands for share one, else MemoryError's (a
    builtin whose class is MemoryError or derives from it: the host's memory)."""
    name = errno_of(exc_type, message)
    if name is not None:
        family = _FAMILY.get(name)
        if family is OsFailure.STORAGE and about_shared_memory(message):
            # /dev/shm is a tmpfs: full, it is the host's memory (a container's
            # --shm-size), not the storage (vocabulary.storage_error says the same)
            return OsFailure.HOST_MEMORY
        return family
    families = {_FAMILY.get(e) for e in _SUBCLASS_ERRNOS.get(_type_name(exc_type), ())}
    if len(families) == 1 and None not in families:
        return families.pop()
    cls = getattr(builtins, _type_name(exc_type), None)
    if isinstance(cls, type) and issubclass(cls, MemoryError):
        return OsFailure.HOST_MEMORY
    if _HOST_ALLOCATOR.search(message):
        return OsFailure.HOST_MEMORY  # c10's MemoryError: its CPU allocator's malloc failed
    return None


# c10's CPU allocator refusing an allocation (c10/core/impl/alloc_cpu.cpp alloc_cpu:
# "DefaultCPUAllocator: not enough memory: you tried to allocate N bytes.", older
# "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. Error code
# 12 (Cannot allocate memory)"), raised as a RuntimeError by CAFFE_ENFORCE: the host's
# memory, as Python's MemoryError is.
_HOST_ALLOCATOR = re.compile(r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory)")


# The calls that make, move or remove a directory entry (the Python library reference:
# os's "Files and Directories", shutil's rmtree and move, pathlib.Path's methods): which
# errnos of theirs mean a race is payloads/launch.py's ENTRY_ERRNOS.
# The library frame a traceback ends in: (module file's tail, its functions that do so).
_ENTRY_FRAMES: tuple[tuple[str, frozenset[str]], ...] = (
    ("/os.py", frozenset({"makedirs", "renames", "removedirs"})),
    (
        "/shutil.py",
        frozenset({"rmtree", "_rmtree_safe_fd", "_rmtree_unsafe", "_rmtree_safe_fd_step", "move"}),
    ),
    (
        "pathlib.py",  # pathlib.py, pathlib/_local.py (3.13)
        frozenset(
            {"mkdir", "rename", "replace", "rmdir", "unlink", "touch", "symlink_to", "hardlink_to"}
        ),
    ),
    ("pathlib/_local.py", frozenset({"mkdir", "rename", "replace", "rmdir", "unlink", "touch"})),
)
# The source line that made the call (the traceback's innermost one): os's and shutil's
# functions called by their module, or imported bare; pathlib's methods whose names no
# other common type has (not ``.rename(``/``.replace(``: str.replace, DataFrame.rename).
_ENTRY_CALL_LINE = re.compile(
    r"\b(?:os\.(?:mkdir|makedirs|rename|renames|replace|rmdir|removedirs|remove|unlink|link"
    r"|symlink)|shutil\.(?:rmtree|move)|(?<![.\w])(?:makedirs|rmtree|symlink))\s*\("
    r"|\.(?:mkdir|rmdir|unlink|symlink_to|hardlink_to)\s*\("
)
# CPython's OSError with two file names ("[Errno N] <strerror>: 'a' -> 'b'", Objects/
# exceptions.c OSError_str): only the calls that take two paths set the second
# (Modules/posixmodule.c path_error2: os.link, os.rename/os.replace, os.symlink).
_TWO_PATHS = re.compile(r"^\[Errno -?\d+\] [^'\n]{1,120}?: '.*' -> '.*'")


def entry_call(
    message: str, where_file: str | None, where_function: str | None, source: str | None
) -> str | None:
    """The call that raised, when it makes, moves or removes a directory entry: by the
    message's two file names, the traceback's innermost library frame, or its innermost
    source line; None when none shows one."""
    if _TWO_PATHS.match(message):
        return "a rename or link (two paths)"
    if where_file and where_function:
        func = where_function.rsplit(".", 1)[-1]
        for tail, functions in _ENTRY_FRAMES:
            if where_file.endswith(tail) and func in functions:
                return f"{tail.rsplit('/', 1)[-1].removesuffix('.py')}.{func}"
    if source and (m := _ENTRY_CALL_LINE.search(source)) is not None:
        return m.group(0).rstrip("( ")
    return None
