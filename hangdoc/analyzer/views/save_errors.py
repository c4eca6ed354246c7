"""A checkpoint save that a file-system call raised in, from a traceback cut before its
exception line.

A Python traceback is printed only for an exception, and its innermost frame is where the
exception was raised. When that frame is one of the standard library's file-system calls
(``os.makedirs``, ``os.replace``, ``shutil.copyfile``: below them there is only the system
call) and the thread was inside a checkpoint save, the save failed on the file system even
when the paste lost the exception line that named the errno ("[rank8]: File "<frozen os>",
line 225, in makedirs" under ``save_checkpoint``). The casebook's convention
(fixtures/cases/README.md, Labels) makes that the storage's failure (HD110), not a save
that hangs (HD108).
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence, Frame, StackTextKind, TextStack, ThreadStack
from hangdoc.analyzer.views.activity import classify_thread
from hangdoc.analyzer.views.activity_table import Activity

# The standard library's modules of file-system calls, as tracebacks name them (frozen
# modules since Python 3.11).
_FS_FILES = ("<frozen os>", "/os.py", "<frozen shutil>", "/shutil.py")


@dataclass(frozen=True, slots=True)
class FailedSaveCall:
    """A traceback of one process whose innermost frame is a file-system call in a save."""

    rank: int | None
    stack: TextStack
    thread: ThreadStack
    call: Frame  # the file-system call that raised


def failed_save_calls(evidence: Evidence) -> list[FailedSaveCall]:
    """Every traceback, cut before its exception line, whose innermost frame is a
    file-system call of the standard library and whose thread was saving a checkpoint."""
    found: list[FailedSaveCall] = []
    for process in evidence.processes:
        for stack in process.text_stacks:
            if StackTextKind.TRACEBACK not in stack.kinds:
                continue
            for thread in stack.threads:
                if thread.exception is not None or not thread.frames:
                    continue  # an exception line the log side reads (its errno, or none)
                call = thread.frames[0]
                if call.native or not call.file.endswith(_FS_FILES):
                    continue
                if classify_thread(thread).has(Activity.CHECKPOINT_SAVE):
                    found.append(FailedSaveCall(process.rank, stack, thread, call))
    return found
