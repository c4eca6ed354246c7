"""The streams of ``hangdoc analyze``: a paste read from stdin, and a progress spinner
that appears on a terminal's stderr only when an analysis takes a while.

Kept out of cli.py (a list of thin commands) and out of outputs.py (reports).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from hangdoc.errors import UsageError

# Past this many seconds an analysis shows what it is doing (on a terminal's stderr).
PROGRESS_AFTER_S = 1.0


@contextlib.contextmanager
def stdin_paste(err_console: Console) -> Iterator[Path]:
    """``analyze -``: stdin saved to a file named ``stdin`` (the loader reads files, and
    the reports then name the input "stdin"), removed afterwards."""
    if sys.stdin is None:
        raise UsageError("- reads stdin, but there is no stdin")
    if sys.stdin.isatty():
        err_console.print("reading a paste from stdin; end it with Ctrl-D", highlight=False)
    with tempfile.TemporaryDirectory(prefix="hangdoc-stdin-") as tmp:
        target = Path(tmp) / "stdin"
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else b""
        target.write_bytes(data)
        yield target


@contextlib.contextmanager
def progress(err_console: Console, *, enabled: bool) -> Iterator[None]:
    """A spinner on stderr for analyses that take longer than PROGRESS_AFTER_S, and only
    when stderr is a terminal: a short run, a pipe or a log file never sees it."""
    if not enabled or not err_console.is_terminal:
        yield
        return
    status = err_console.status("analyzing… (loading inputs, running rules, writing reports)")
    lock = threading.Lock()
    state = {"started": False, "done": False}

    def start() -> None:
        with lock:
            if not state["done"]:
                status.start()
                state["started"] = True

    timer = threading.Timer(PROGRESS_AFTER_S, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["done"] = True
            if state["started"]:
                status.stop()
