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
"""

from __future__ import annotations

import io
import pickle
from typing import IO, NoReturn


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for a global or a persistent object; it was not loaded."""


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


def safe_load(handle: IO[bytes]) -> object:
    """Unpickle plain data from ``handle``; raise UnsafePickleError on any global.

    Truncated or corrupt input raises what the C unpickler raises (``EOFError``,
    ``pickle.UnpicklingError``, ``ValueError``...); callers report those as a bad file.
    """
    return _PlainDataUnpickler(handle).load()


def safe_loads(data: bytes) -> object:
    """Like :func:`safe_load`, from bytes.

    A BytesIO alone has no ``peek``, and the C unpickler then reads opcode by opcode
    (3× slower); a BufferedReader the size of the data lets it prefetch everything.
    """
    return safe_load(io.BufferedReader(io.BytesIO(data), buffer_size=len(data) + 1))


def describe_load_error(exc: BaseException) -> str:
    """One line for the report: why a pickle could not be read."""
    if isinstance(exc, UnsafePickleError):
        return str(exc)
    if isinstance(exc, EOFError):
        return "truncated pickle: the file ends before the data does (cut off while written?)"
    return f"not a readable pickle: {type(exc).__name__}: {exc}"
