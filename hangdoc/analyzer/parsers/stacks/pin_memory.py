"""The DataLoader's pin-memory thread receiving a batch a worker shared: its frames.

torch's DataLoader with ``pin_memory=True`` runs a thread in the rank
(torch/utils/data/_utils/pin_memory.py ``_pin_memory_loop``, started by
``_MultiProcessingDataLoaderIter``) that takes each batch the worker processes put on the
data queue (``in_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)``) and copies it into pinned
memory. A worker shares a batch's tensors through a file descriptor
(torch/multiprocessing/reductions.py ``reduce_storage``; on receipt ``rebuild_storage_fd``
asks the worker's resource sharer for the descriptor: multiprocessing/resource_sharer.py
``DupFd.detach`` → ``get_connection``). When the worker is gone first, that request fails
(``ConnectionResetError``, ``ConnectionRefusedError``, ``FileNotFoundError``). torch's own
loop says where that happens: "Weird things can happen when shutting down, e.g., fd being
closed when tensors are shared via fds" (its ``except Exception`` of ``in_queue.get``,
which ends the loop quietly once the iterator's ``done_event`` is set, and lets the
exception go when the process exits without that).

A traceback of that thread cut before its exception line still says what the thread was
doing, as python_tb.py's cut_in_group_creation and saves.py argue: CPython prints a
traceback outermost first, so every frame shown encloses the ones cut. Frames of the
pin-memory loop and, inside it, of the descriptor's receipt: the thread failed to receive a
batch a worker had shared.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Frame

# (file suffix, function leaf names)
PIN_MEMORY_LOOP = ("torch/utils/data/_utils/pin_memory.py", frozenset({"_pin_memory_loop"}))
SHARED_RECEIPT = (
    "torch/multiprocessing/reductions.py",
    frozenset({"rebuild_storage_fd", "rebuild_storage_filename"}),
)


def _is(frame: Frame, where: tuple[str, frozenset[str]]) -> bool:
    if frame.native:
        return False
    path = frame.file.replace("\\", "/")
    suffix, functions = where
    return frame.function_leaf in functions and (path == suffix or path.endswith("/" + suffix))


def receiving_shared_batch(frames: Iterable[Frame]) -> bool:
    """The frames (any order) are the pin-memory loop's, receiving a batch a worker shared
    through a file descriptor (or a file name): the loop frame and, inside it, the
    receipt's."""
    shown = list(frames)
    return any(_is(f, PIN_MEMORY_LOOP) for f in shown) and any(
        _is(f, SHARED_RECEIPT) for f in shown
    )
