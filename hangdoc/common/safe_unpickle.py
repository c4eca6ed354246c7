"""Load untrusted pickles that may hold plain data only (flight recorder dumps).

A flight recorder pickle comes from a stranger's job: a ticket attachment, a file
copied off a node. ``pickle.load`` on it runs whatever callable the file names
(``os.system``, ``subprocess.Popen``, ``builtins.eval`` through ``__reduce__``). The
dumps torch writes hold dicts, lists, tuples, strings, ints, floats, bools and None
only, so the unpickler here refuses the one door through which code gets in.

Why refusing ``find_class`` is enough: every opcode that can call something
(REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX) needs a callable or a class on the
stack, and the only opcodes that put one there are GLOBAL, STACK_GLOBAL and the
extension-registry opcodes EXT1/EXT2/EXT4, all of which go through ``find_class``
(the C unpickler calls it for each). Persistent ids (PERSID, BINPERSID) go through
``persistent_load``, refused too. BUILD on a plain container cannot reach code:
dicts and lists have no ``__setstate__`` and no ``__dict__``. So a pickle that names
any global stops at that opcode, before the global is even imported, and nothing
in it runs.

Speed matters (16,384 files of 2,000 entries): the subclass keeps the C unpickler's
fast path; the overrides run only when a pickle names a global, i.e. only on refusal.

Refusing code is not enough for a file from a stranger: the C unpickler of the
Pythons we support (fixed upstream only in late 2025, gh-115952) trusts sizes the
file claims. A PUT / LONG_BINPUT naming memo index 2**28 makes it allocate and zero
a 4 GiB memo table; a BINBYTES claiming 2 GiB makes the file reader allocate that
much before it finds the file short. Ten bytes can take the analysis down. A pre-scan
of the opcode stream in Python would cost ten times the load itself (a 2,000-entry
dump is 176,000 opcodes), so instead each load runs under an address-space ceiling
(``RLIMIT_AS``): what the process maps now, plus room for the objects a file of that
size can honestly hold. An allocation past it fails at once, before any page is
touched; the C unpickler raises MemoryError, reported as a refused file. Two
syscalls per file; on systems without ``/proc`` (not Linux) the ceiling is skipped.
"""

from __future__ import annotations

import io
import os
import pickle
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, NoReturn

# Room a load may take on top of what the process already maps. Plain containers cost
# about ten times their pickled size (a 350 KB dump of 2,000 entries → ~3.5 MB of
# objects); 64× the file plus a fixed 256 MiB (a new thread's malloc arena, the
# unpickler's buffers) leaves every honest file far inside it.
_ROOM_FIXED = 256 << 20
_ROOM_PER_BYTE = 64
_ROOM_UNKNOWN_SIZE = 1 << 30


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for a global or a persistent object; it was not loaded."""


class OversizedPickleError(pickle.UnpicklingError):
    """Reading the pickle would take far more memory than a file of its size holds."""


class _PlainDataUnpickler(pickle.Unpickler):
    """The C unpickler, with every way to name code refused."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise UnsafePickleError(
            f"refused: the pickle names the global {module}.{name}; flight recorder "
            "dumps hold plain containers and scalars only, so this file is not one "
            "(or was tampered with). Nothing in it was executed."
        )

    def persistent_load(self, pid: object) -> NoReturn:
        raise UnsafePickleError(
            "refused: the pickle refers to a persistent object id; flight recorder dumps "
            "have none. Nothing in it was executed."
        )


def _mapped_bytes() -> int | None:
    """The process's virtual size now, or None where /proc does not say it."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def memory_ceiling(room: int) -> Iterator[None]:
    """Make allocations beyond ``room`` more bytes than mapped now fail (MemoryError).

    The limit is the process's soft ``RLIMIT_AS``, restored on exit; a tighter limit
    the user set is kept. Other threads share it for the duration: the room is wide
    enough for their small allocations.
    """
    mapped = _mapped_bytes()
    if mapped is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = mapped + room
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    if soft != resource.RLIM_INFINITY and soft <= ceiling:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _file_size(handle: IO[bytes]) -> int | None:
    try:
        return os.fstat(handle.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        return None


def safe_load(handle: IO[bytes], size: int | None = None) -> object:
    """Unpickle plain data from ``handle``; raise UnsafePickleError on any global.

    ``size`` (the pickle's length, read off the file when not given) sets the memory the
    load may take; a pickle that asks for more raises OversizedPickleError. Truncated
    or corrupt input raises what the C unpickler raises (``EOFError``,
    ``pickle.UnpicklingError``, ``ValueError``...); callers report those as a bad file.
    """
    if size is None:
        size = _file_size(handle)
    with memory_guard(size):
        return _PlainDataUnpickler(handle).load()


@contextmanager
def memory_guard(size: int | None) -> Iterator[None]:
    """The ceiling for reading a pickle of ``size`` bytes; past it, OversizedPickleError."""
    room = _ROOM_UNKNOWN_SIZE if size is None else _ROOM_FIXED + _ROOM_PER_BYTE * size
    try:
        with memory_ceiling(room):
            yield
    except MemoryError:
        raise OversizedPickleError(
            f"refused: reading this pickle would take more than {room >> 20} MiB of memory"
            + (f" for a file of {size:,} bytes" if size is not None else "")
            + "; a flight recorder dump never does (a crafted or corrupt size or memo "
            "index, e.g. LONG_BINPUT 2**28). Nothing in it was executed."
        ) from None


def load_with_memo(stream: bytes, memo: object = None) -> tuple[object, object]:
    """Unpickle a piece of a larger pickle, given the memo so far; the memo after it.

    For ``fr_scan``, which hands the unpickler the parts of a dump it does not read
    itself. ``memo`` is what an earlier call returned (the unpickler's memo proxy: a
    dict assigned to ``Unpickler.memo`` is silently dropped by CPython ≤ 3.13);
    ``memo.copy()`` gives it as a dict. Same refusals as :func:`safe_load`; the caller
    holds the memory guard.
    """
    unpickler = _PlainDataUnpickler(io.BufferedReader(io.BytesIO(stream), len(stream) + 1))
    if memo is not None:
        unpickler.memo = memo  # type: ignore[assignment]
    return unpickler.load(), unpickler.memo


def safe_loads(data: bytes) -> object:
    """Like :func:`safe_load`, from bytes.

    A BytesIO alone has no ``peek``, and the C unpickler then reads opcode by opcode
    (3× slower); a BufferedReader the size of the data lets it prefetch everything.
    """
    return safe_load(io.BufferedReader(io.BytesIO(data), buffer_size=len(data) + 1), len(data))


def describe_load_error(exc: BaseException) -> str:
    """One line for the report: why a pickle could not be read."""
    if isinstance(exc, (UnsafePickleError, OversizedPickleError)):
        return str(exc)
    if isinstance(exc, EOFError):
        return "truncated pickle: the file ends before the data does (cut off while written?)"
    return f"not a readable pickle: {type(exc).__name__}: {exc}"
