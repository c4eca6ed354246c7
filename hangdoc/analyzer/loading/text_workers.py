"""Read a dump's rank logs in worker processes, ahead of the loader that absorbs them.

A whole-job collection holds one stdout log per rank (1 MB each in the all-inputs
benchmark): reading them is most of a raw analysis (the log side costs about 20 µs a
line), and the loader used one core for it. The logs of a dump are independent of each
other, so as soon as the dump reader has listed them they are handed to worker
processes, which do exactly what the loader would do with each (sniff, parse with the
text reader, cut the rank's line windows) and send the result back. The loader still
walks the files in its own order and absorbs each result where it would have parsed the
file, so the Evidence (inputs, notes, events, their order) is the same as in one process.

Only files the loader would give to the text reader are read ahead, and only with a
rank known from their folder (the line windows need no other rank to be read). A file
the worker could not read as the loader would (a sniffer that raised, another format)
comes back as nothing, and the loader reads it itself; a parser that raised comes back
as the loader's own "could not parse" reason, naming the file; a worker pool that fails
(it died, cannot start) leaves every remaining file to the loader, with one note.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hangdoc.analyzer.loading.dump_reader import FileContext
from hangdoc.analyzer.loading.huge_files import bounded_view
from hangdoc.analyzer.loading.window_digest import (
    JobTemplates,
    RankWindow,
    digest_windows,
)
from hangdoc.analyzer.model import LogLines
from hangdoc.analyzer.parsers import PARSERS
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile
from hangdoc.analyzer.parsers.logs.window import read_window_columns
from hangdoc.analyzer.parsers.text import TEXT_KINDS, TextParser, tail_copy
from hangdoc.common.archive import archive_kind
from hangdoc.common.text import looks_binary

# A dump whose logs hold less than this is read in the loader's process: a casebook
# dump's few kilobytes cost less to parse than to send to a worker and back.
MIN_BATCH_BYTES = 2 * 1024 * 1024

Windows = dict[int, LogLines]


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """What a worker made of one file: the parser's result and the note of a bounded
    view, or the parser's failure; the rank's line windows when they could be cut, as
    digests (loading/window_digest.py; the unattributed lines as columns): pickled
    records were most of what a worker sent back, and cost 2 ms a rank log each way,
    and the loader keeps the digests."""

    parsed: ParsedFile | None
    note: str | None
    failure: str | None  # "could not parse: …", as the loader words it
    columns: dict[int, RankWindow] | None  # None: the loader cuts them itself
    source: str = ""  # the file's display path, every window line's source

    def windows(self, templates: JobTemplates) -> Windows | None:
        """The rank's line windows (``read_line_window``'s lines, digests held as
        ``DigestWindow``s of ``templates``), None: the loader cuts them."""
        if self.columns is None:
            return None
        return templates.windows(self.columns, self.source)


def read_ahead(path: str, display: str, size: int, rank: int) -> ReadAhead | None:
    """One file as the loader would read it, in a worker; None where the loader's own
    reading could differ (not a text for the text reader, a sniffer that raised)."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
        if archive_kind(head) is not None:
            return None
        sniffed = next((parser for parser in PARSERS if parser.sniff(head)), None)
    except Exception:  # an unreadable file or a sniffer's bug: the loader reports it
        return None
    if sniffed is None and looks_binary(head):
        return None
    if sniffed is not None and not isinstance(sniffed, TextParser):
        return None
    try:
        with bounded_view(file, size) as (readable, note):
            parsed = TextParser().parse(readable, display)
    except Exception as exc:  # the loader's words for a parser bug
        return ReadAhead(None, None, f"could not parse: {type(exc).__name__}: {exc}", None)
    columns: dict[int, RankWindow] | None = None
    if parsed.kind in TEXT_KINDS:
        try:
            if parsed.tail_bytes is None:
                columns = digest_windows(read_window_columns(file, rank))
            else:
                with tail_copy(file, parsed.tail_bytes) as tail:
                    columns = digest_windows(read_window_columns(tail, rank))
        except Exception:  # the loader cuts them again and meets the same problem
            columns = None
    return ReadAhead(parsed, note, None, columns, display)


def start_method() -> str:
    """fork is cheapest; with other threads running (a progress spinner) a fork could
    inherit a held lock, so then clean workers come from a fork server."""
    return "fork" if threading.active_count() == 1 else "forkserver"


def _fork_safe() -> bool:
    return (
        (os.cpu_count() or 1) > 1
        and not multiprocessing.current_process().daemon
        and "fork" in multiprocessing.get_all_start_methods()
    )


class TextReadAhead:
    """The loader's worker pool for rank logs: ``submit`` a dump's files, ``take`` each
    result when the loader reaches that file. Started at the first dump worth it, kept
    across dumps, closed by ``close`` (before the flight recorder pool starts, which
    forks only from a process without other threads)."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs if jobs is not None else min(2, os.cpu_count() or 1)
        self.min_batch_bytes = MIN_BATCH_BYTES
        self._pool: ProcessPoolExecutor | None = None
        self._pending: dict[str, Future[ReadAhead | None]] = {}
        self.failure: str | None = None  # why the pool was given up, for one note

    def submit(self, files: Iterable[tuple[Path, str, FileContext]]) -> None:
        """Start reading the files the loader will meet next (a dump's other files)."""
        if self.failure is not None or self.jobs < 2 or not _fork_safe():
            return
        batch: list[tuple[str, str, int, int]] = []
        for path, display, context in files:
            if context.rank is None or str(path) in self._pending:
                continue
            try:
                size = path.stat().st_size
            except OSError:
                continue  # the loader names the file and its reason
            if size:
                batch.append((str(path), display, size, context.rank))
        if sum(item[2] for item in batch) < self.min_batch_bytes:
            return
        try:
            pool = self._started()
            for item in batch:
                self._pending[item[0]] = pool.submit(read_ahead, *item)
        except Exception as exc:  # no workers: the loader reads the files itself
            self._give_up(exc)

    def take(self, path: Path) -> ReadAhead | None:
        """The worker's reading of ``path``, None when the loader must read it."""
        result = self._pending.pop(str(path), None)
        if result is None:
            return None
        try:
            return result.result()
        except Exception as exc:  # the worker died (BrokenProcessPool) or could not answer
            self._give_up(exc)
            return None

    def close(self) -> None:
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            gc.unfreeze()

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = multiprocessing.get_context(start_method())
            # The workers run with the cyclic collector on (the loader runs with it off),
            # so a worker that reads thousands of logs stays at what one log needs; what
            # they inherit is frozen first, or their first full collection would touch
            # every object of the parent (hydrate() forks from the whole job's Evidence)
            # and copy its pages.
            gc.freeze()
            self._pool = ProcessPoolExecutor(self.jobs, context, initializer=gc.enable)
        return self._pool

    def _give_up(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = f"{type(exc).__name__}: {exc}"
        self.close()
