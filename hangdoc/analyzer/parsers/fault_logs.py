"""Log lines printed next to a faulthandler dump, read as log events.

faulthandler writes to the process's stderr, so a console that holds a dump also holds
what the process printed just before it died, and that line often names the cause:
torch's DataLoader prints "ERROR: Unexpected bus error encountered in worker. This might
be caused by insufficient shared memory (shm)." from its worker's SIGBUS handler
(torch/csrc/DataLoader.cpp, ``SIGNAL_HANDLER(SIGBUS, …)``) right before the worker's
faulthandler dump "Fatal Python error: Bus error" (returnn issue 1648, train case
returnn-1648-shm-bus-error-faulthandler). A NCCL watchdog line, a CUDA OOM or a
"Killed" line above a dump are the same situation.

The faulthandler parser's own reading of a whole file (the loader reads text through the
text path, ``parsers/text.py``, whose log side reads every line) once dropped every line
that was not part of a dump. Here each such line (not blank, not indented, none of
faulthandler's own headers) is given to the log parser's line recogniser, one line at a
time, and what it recognises becomes a log event of the process the dump belongs to.
faulthandler's own "Fatal Python error" header already makes its event in the
faulthandler parser and is skipped here unless that parser did not read it (a pasted
NUL shown as ``^@`` before it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hangdoc.analyzer.model import LogEvent

# faulthandler's own lines (analyzer/parsers/faulthandler.py reads them), anchored at
# the line start as that parser matches them.
_OWN = re.compile(
    r"(?:Fatal Python error|Windows fatal exception): |Timeout \(\d+:\d\d:\d\d|"
    r"(?:Current thread|Thread) 0x[0-9a-fA-F]+|Stack \(most recent call first\)|"
    r"Current thread's C stack trace|C stack trace|Extension modules:|\.\.\.\s*$"
)
# Lines longer than this are not log lines a recogniser should see (base64, JSON blobs).
_MAX_LINE = 4000


def foreign_events(lines: Iterable[tuple[int, str]], source: str) -> list[LogEvent]:
    """Log events of the lines around the dumps in one stream section."""
    from hangdoc.analyzer.parsers.logs import recognise_line  # the logs package imports us
    from hangdoc.analyzer.parsers.logs.hit import Origin, log_event

    events: list[LogEvent] = []
    seen: set[tuple[object, ...]] = set()
    for number, raw in lines:
        text = raw.rstrip()
        if not text.strip() or text[:1] in " \t" or len(text) > _MAX_LINE or _OWN.match(text):
            continue
        hit = recognise_line(text)
        if hit is None:
            continue
        key = hit.key if hit.key is not None else (hit.kind, text.strip())
        if key in seen:
            continue
        seen.add(key)
        text = (hit.text or text.strip())[:500]
        origin = Origin(
            hit.host,
            hit.pid,
            tid=hit.tid,
            cuda_dev=hit.cuda_dev,
            named_host=hit.named_host,
            named_pid=hit.named_pid,
            named_local_rank=hit.named_local_rank,
        )
        events.append(log_event(hit.kind, text, source, number, None, hit.payload, origin=origin))
    return events
