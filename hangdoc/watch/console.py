"""Where watch's lines go: stdout (for the person or the batch log) and ``OUT/watch.log``.

One line per event, with the local time, flushed at once: a watch that runs for days in a
batch script's output must show its last line even when the node dies next.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

LOG_NAME = "watch.log"


class WatchConsole:
    """A callable ``say(text)``; safe from several threads (the Slurm reader threads)."""

    def __init__(self, out_dir: Path | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.log = out_dir / LOG_NAME if out_dir is not None else None
        self.lock = threading.Lock()
        self.failed = False

    def __call__(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        line = f"[{stamp}] {text}"
        with self.lock:
            with contextlib.suppress(OSError, ValueError):
                self.stream.write(line + "\n")
                self.stream.flush()
            if self.log is not None and not self.failed:
                try:
                    with self.log.open("a", encoding="utf-8") as handle:
                        handle.write(f"{time.strftime('%Y-%m-%d')} {line}\n")
                except OSError as exc:
                    self.failed = True
                    with contextlib.suppress(OSError, ValueError):
                        self.stream.write(f"[{stamp}] cannot write {self.log}: {exc}\n")
