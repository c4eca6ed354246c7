"""A Python signal handler running on top of the code it interrupted, read from a stack.

CPython runs a Python-level signal handler on the main thread only, between two bytecodes
of whatever frame the main thread is executing (Modules/signalmodule.c: the C handler only
sets a flag; ``PyErr_CheckSignals``, called from the eval loop's periodic check, calls the
handler as ``handler(signum, frame)``). So in a py-spy stack the handler's frame sits on
top of the interrupted frame, whose line is the line that was running when the signal
came (py-spy prints no frame for the C call in between). Whatever the interrupted frames
hold (a ``with lock:`` block, a half-updated object) stays held until the handler
returns: a handler that takes the same non-reentrant lock waits forever on itself (the
CPython docs on ``signal``: handlers run "between the bytecode instructions"; "the
handler can be called … while the interrupted code is in any state").

The handler is known by its own name (the job's or the framework's words for a signal:
Lightning's ``_SignalConnector._slurm_sigusr_handler_fn`` and ``_sigterm_notifier_fn``,
torchelastic's ``_terminate_process_handler``: a signal word and a handler word) or, with
py-spy ``--locals``, by the two arguments CPython passes it (``signum, frame`` by the
docs' convention).

py-spy's JSON also marks a frame entered from C (``is_entry`` on 3.11,
``is_shim_entry`` on 3.12+), which a handler's is; so is any callback from C (a sort key,
a wrapper called with ``*args`` on 3.11), so the mark alone does not say "signal", and the
model does not keep it yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoc.analyzer.model import Frame
from hangdoc.analyzer.views.meaning import tokens

# A word of a function name that names a signal: "sig", "signal", "signum", SIGUSR1, …
_SIGNAL_WORD = re.compile(
    r"sig|signal|signals|signum|sig(?:usr[12]?|term|int|hup|alrm|quit|chld|cont|xcpu|abrt)"
)
# A word that says the function reacts to something (a handler, not a signal's sender).
_HANDLER_WORDS = frozenset({"handler", "handlers", "handle", "notifier", "hook", "callback"})
# The arguments CPython passes a handler, as the signal module's docs name them.
_HANDLER_ARGS = frozenset({"signum", "sig", "signal_number", "signo"})


@dataclass(frozen=True, slots=True)
class SignalHandler:
    """The handler's frame and the frame it interrupted (the one just below it)."""

    handler: Frame
    interrupted: Frame
    depth: int  # the handler's index in the stack (innermost first)


def _names_a_handler(frame: Frame) -> bool:
    words = tokens(frame.function)
    if any(_SIGNAL_WORD.fullmatch(w) for w in words) and _HANDLER_WORDS & set(words):
        return True
    names = {name for name, _ in frame.locals}
    return bool(names & _HANDLER_ARGS) and "frame" in names


def signal_handler(frames: tuple[Frame, ...]) -> SignalHandler | None:
    """The innermost Python signal handler of a stack (innermost first) that interrupted a
    Python frame below it; None when there is none or it is the stack's bottom."""
    for depth, frame in enumerate(frames[:-1]):
        if frame.native or not _names_a_handler(frame):
            continue
        below = next((f for f in frames[depth + 1 :] if not f.native), None)
        if below is not None:
            return SignalHandler(frame, below, depth)
    return None
