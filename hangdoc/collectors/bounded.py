"""Give up on a call that does not return: the one way to bound a read that blocks.

A read of /proc/PID/cmdline blocks for as long as the target holds its memory lock (a
process stuck on a dead NFS mount, in state D); no timeout argument exists for it. The
call runs in a daemon thread that is abandoned when it overruns: the thread may stay
blocked in the kernel, but collection goes on and the process can still exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class StepTimeout(Exception):
    """A bounded call overran its timeout; the worker thread is abandoned."""


def call_with_timeout(fn: Callable[[], T], timeout_s: float) -> T:
    """``fn()`` in a daemon thread; :class:`StepTimeout` if it has not returned in time."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as exc:
            error.append(exc)

    worker = threading.Thread(target=target, name="hangdoc-step", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise StepTimeout
    if error:
        raise error[0]
    return result[0]
