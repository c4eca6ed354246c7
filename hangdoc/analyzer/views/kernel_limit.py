"""A kernel cut by the device's run-time limit while its process waited in a collective.

CUDA's cudaErrorLaunchTimeout ("the launch timed out and was terminated") says that a
kernel ran past the run-time limit the device's driver imposes where kernel timeouts are
enabled (a GPU that drives a display, Windows' WDDM: the CUDA runtime API's cudaError_t
documentation). The error does not say which kernel ran long; the process's stack where
the error was raised does. An NCCL collective's kernel spins on the GPU until every peer
has arrived (NCCL's primitives wait on their peers' flags in device code), so a process
that waits in a collective (a barrier, an all-reduce's ``work.wait()``, a ``WorkNCCL``
synchronised or released) for longer than the limit has that kernel cut: the error is
then the wait outlasting the device's limit, the peers' lateness, and says nothing of the
GPU or its driver failing, nor which peer was late.

The stack is the one printed with the error: the C++ backtrace c10::Error appends to its
what() (``frame #0: c10::Error::Error …`` on the lines after it), or the Python traceback
the error's exception line ends. What the stack is doing is read by the frame catalog
(views/activity.py), as for any other stack.
"""

from __future__ import annotations

from hangdoc.analyzer.model import Evidence, StackTextKind, TextStack
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.views.activity import classify_thread
from hangdoc.analyzer.views.timeline import Placed

# c10::Error's what() is followed at once by its backtrace ("Exception raised from …" or
# its first "frame #0:" line); a line between them is a paste's blank.
_BACKTRACE_AFTER = 3
# Lines a Python traceback takes per frame ("File …" and its source line, 3.11's carets).
_LINES_PER_FRAME = 3
_TRACEBACK_HEAD = 4  # its header, a chained exception's lines, the exception line


def _printed_with(stack: TextStack, line: int) -> bool:
    """``stack`` is the one printed with the error on ``line``: the C++ backtrace right
    under it, or the Python traceback whose exception line it is."""
    start = stack.line
    if start is None:
        return False
    if StackTextKind.CPP in stack.kinds:
        return line < start <= line + _BACKTRACE_AFTER
    if StackTextKind.TRACEBACK not in stack.kinds:
        return False
    thread = stack.main_thread()
    if thread is None or thread.exception is None:
        return False
    return start < line <= start + _TRACEBACK_HEAD + _LINES_PER_FRAME * len(thread.frames)


def cut_while_waiting(evidence: Evidence, placed: Placed) -> bool:
    """The event is a CUDA error of a kernel cut by the device's run-time limit
    (Sign.KERNEL_TIME_LIMIT) whose stack, printed with it, waits in a collective: the
    collective's kernel ran past the limit waiting for its peers (module docstring)."""
    event = placed.event
    if Sign.KERNEL_TIME_LIMIT not in event.payload.signs or event.line is None:
        return False
    for process in evidence.processes:
        for stack in process.text_stacks:
            if stack.source != event.source or not _printed_with(stack, event.line):
                continue
            thread = stack.main_thread()
            if thread is not None and classify_thread(thread).collective is not None:
                return True
    return False
