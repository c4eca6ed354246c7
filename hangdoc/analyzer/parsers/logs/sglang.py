"""SGLang's watchdogs: a process that made no progress for its timeout, taken down.

SGLang's scheduler runs a watchdog thread (python/sglang/srt/managers/scheduler.py,
``Scheduler.watchdog_thread``; from 2025 python/sglang/srt/utils/watchdog.py) that compares
the scheduler's forward counter every ``watchdog_timeout / 2`` seconds: when a batch is
current and the counter did not move for ``watchdog_timeout`` seconds (``--watchdog-
timeout``, 300 by default), it logs ``Watchdog timeout (self.watchdog_timeout=300)``
(newer: ``Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)``, and
the same of the TokenizerManager's and the detokenizer's), dumps the schedulers' stacks
with py-spy, waits five seconds and sends SIGQUIT to its parent, whose handler prints
"Received sigquit from a child process. It usually means the child failed." and kills the
whole process tree (a shell then says "Killed"). A soft watchdog (``self.soft=True``) only
logs.

So the line says one forward batch stopped advancing on that rank: the job was stuck (in a
kernel, a collective with the other TP ranks, or the CPU side of the forward), and what
follows (the SIGQUIT, the kill) is SGLang's own teardown, not a crash. It says nothing of
why: a consequence, like a collective's timeout.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.vocabulary import EventKind

# The f-string's "{self.watchdog_timeout=}" prints the expression, then its value.
_WATCHDOG = re.compile(
    r"(?P<who>\w+ )?[Ww]atchdog timeout \(self\.watchdog_timeout=(?P<timeout>\d+(?:\.\d+)?)"
    r"(?:, self\.soft=(?P<soft>True|False))?\)"
)

# Every line the recogniser makes an event of holds this (literals.Need).
NEED = Need.patterns(_WATCHDOG)


def match_sglang(text: str) -> Hit | None:
    """SGLang's watchdog firing: no forward progress for its timeout."""
    if not NEED.admits(text):
        return None
    m = _WATCHDOG.search(text)
    if m is None:
        return None
    payload = EventPayload(message=text[m.start() :].strip()[:200])
    # No key: one event a line (each TP rank prints its own; its rank is read from the
    # coordinates the line names, after the scan).
    return Hit(EventKind.STALL_WATCHDOG, payload=payload)
