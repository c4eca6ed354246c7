"""A native frame that waits for the GIL, told by the address it waits on.

CPython's ``take_gil`` (Python/ceval_gil.c) waits on the GIL's condition variable with
``COND_TIMED_WAIT(gil->cond, gil->mutex, interval_us, timed_out)``, i.e.
``pthread_cond_timedwait``, and its ``MUTEX_LOCK(gil->mutex)`` takes the GIL's mutex.
Since Python 3.7 that GIL state lives inside the static ``_PyRuntime`` structure
(``_PyRuntime.ceval.gil``; from 3.12 the main interpreter's ``_gil``, still inside
``_PyRuntime``), so gdb prints the arguments of those waits as ``cond=0x… <_PyRuntime+384>``,
``mutex=0x… <_PyRuntime+432>``, ``futex_word=0x… <_PyRuntime+428>``; before 3.7 the GIL's
condition and mutex were the static ``gil_cond``/``gil_mutex`` (and ``switch_cond``/
``switch_mutex`` for the forced switch). A thread found inside such a wait waits for the
GIL, even when the paste was cut before the ``take_gil``/``PyEval_RestoreThread`` frames
that would say so (pytorch issue 119262, train case
pytorch-119262-autograd-engine-gil-deadlock: frames #0-#4, the GIL's condition variable,
and nothing above).

The arguments reach the frame as ``Frame.locals`` (the gdb parser keeps the pointer
arguments that gdb resolved to a symbol).
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import Frame

# The primitives take_gil blocks in: a condition wait (and the futex under it), or
# taking the GIL's mutex.
_WAIT_FUNCTION = re.compile(
    r"pthread_cond_(?:timed)?wait|__pthread_cond_wait_common|futex_(?:abs)?(?:timed_)?wait|"
    r"futex_wait|__lll_lock_wait|pthread_mutex_lock"
)
_GIL_SYMBOL = re.compile(r"<(?:_PyRuntime|gil_cond|gil_mutex|switch_cond|switch_mutex)\b")


def waits_for_gil(frame: Frame) -> bool:
    """A native wait whose condition variable, mutex or futex word is the GIL's."""
    if not frame.native or not frame.locals:
        return False
    if not _WAIT_FUNCTION.search(frame.function):
        return False
    return any(_GIL_SYMBOL.search(value) for _, value in frame.locals)
