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


# The main process's own receipt of a worker's batch (torch/utils/data/dataloader.py,
# _MultiProcessingDataLoaderIter without pin_memory): ``_next_data`` → ``_get_data`` →
# ``_try_get_data``, whose ``self._data_queue.get(timeout=…)`` unpickles the batch
# (multiprocessing/queues.py ``get`` → ``_ForkingPickler.loads``) and so rebuilds each
# shared storage (``rebuild_storage_fd``: the descriptor asked of the worker's resource
# sharer, multiprocessing/resource_sharer.py ``DupFd.detach`` → ``get_connection``).
# ``_try_get_data`` catches what that raises, looks for a dead worker ("DataLoader worker
# (pid(s) …) exited unexpectedly") and for the descriptors running out ("Too many open
# files … set_sharing_strategy('file_system')"), and raises again: a failure under that
# frame is the DataLoader's worker-to-main transport, whatever its exception line said.
MAIN_RECEIPT = ("torch/utils/data/dataloader.py", frozenset({"_try_get_data"}))
# Deeper frames of the same receipt: the resource sharer's request for the descriptor.
SHARER_REQUEST = ("multiprocessing/resource_sharer.py", frozenset({"detach", "get_connection"}))


def receiving_worker_batch(frames: Iterable[Frame]) -> bool:
    """The frames (outermost first) are the main process's DataLoader receiving a batch a
    worker shared: ``_try_get_data`` and, inside it, the innermost frame shown the
    storage's rebuild (or the resource sharer's request for its descriptor). Every frame
    cut is inside that receipt."""
    shown = list(frames)
    if not shown or not any(_is(f, MAIN_RECEIPT) for f in shown):
        return False
    last = shown[-1]
    return _is(last, SHARED_RECEIPT) or _is(last, SHARER_REQUEST)
