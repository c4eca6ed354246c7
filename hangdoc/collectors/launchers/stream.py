"""The line protocol between a node's collector and the launcher, over the engine's stdout.

A launcher such as ``srun`` merges the output of every node into one stream, line by
line, and cuts lines longer than about 1 KiB into pieces (each labelled, with
``--label``, but interleaved with other nodes' lines). So everything a node says is one
short line of its own::

    @hangdoc1 <host> hello <node clock> <shared 0|1>
    @hangdoc1 <host> progress <done> <total> <text>
    @hangdoc1 <host> warn <text>
    @hangdoc1 <host> data <seq> <base64 of up to CHUNK bytes of the node's .tar.gz>
    @hangdoc1 <host> end <chunks> <bytes> <sha256 hex>
    @hangdoc1 <host> done <ok|partial|failed> <ranks "0,1,2" or -> <dir, %-quoted, or -> <text>
    @hangdoc1 <host> watch <say|stalled|moving|ended> <text>       (``hangdoc watch``)

Anything else (a traceback, a warning of Python itself) is a plain line: the launcher
keeps the last ones per node as the reason when the node fails. Text fields are the
rest of the line, with newlines escaped.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, BinaryIO, TextIO

MAGIC = "@hangdoc1"
# Raw bytes per data line: 600 → 800 base64 characters, a line well under srun's 1 KiB.
CHUNK = 600
_LABEL = re.compile(r"^\s*(\d+): ")  # srun --label
_SAFE_HOST = re.compile(r"^[A-Za-z0-9._-]{1,253}$")


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def unescape(text: str) -> str:
    out: list[str] = []
    it = iter(text)
    for ch in it:
        if ch != "\\":
            out.append(ch)
            continue
        nxt = next(it, "")
        out.append({"n": "\n", "r": "\r", "\\": "\\"}.get(nxt, "\\" + nxt))
    return "".join(out)


class Emitter:
    """The node side: writes framed lines to ``out`` (the process's stdout)."""

    def __init__(self, out: TextIO, host: str) -> None:
        self.out = out
        self.host = host if _SAFE_HOST.match(host) else "unknown-host"

    def _line(self, kind: str, rest: str) -> None:
        self.out.write(f"{MAGIC} {self.host} {kind} {rest}\n")
        self.out.flush()

    def hello(self, clock: float, shared: bool) -> None:
        self._line("hello", f"{clock:.6f} {int(shared)}")

    def progress(self, done: int, total: int, text: str) -> None:
        self._line("progress", f"{done} {total} {escape(text)[:700]}")

    def warn(self, text: str) -> None:
        self._line("warn", escape(text)[:800])

    def data(self, stream: BinaryIO) -> tuple[int, int, str]:
        """Send a file's bytes; returns (chunks, bytes, sha256) as the end line says."""
        digest = hashlib.sha256()
        chunks = size = 0
        while block := stream.read(CHUNK):
            digest.update(block)
            self._line("data", f"{chunks} {base64.b64encode(block).decode('ascii')}")
            chunks += 1
            size += len(block)
        self._line("end", f"{chunks} {size} {digest.hexdigest()}")
        return chunks, size, digest.hexdigest()

    def watch(self, event: str, text: str) -> None:
        """A node watcher's news: a line to log, a stall (its JSON), movement, the end."""
        self._line("watch", f"{event} {escape(text)[:900]}")

    def done(self, status: str, ranks: list[int], directory: str | None, text: str) -> None:
        rank_text = ",".join(str(r) for r in ranks) or "-"
        where = urllib.parse.quote(directory) if directory else "-"
        self._line("done", f"{status} {rank_text} {where} {escape(text)[:600]}")


@dataclass(frozen=True, slots=True)
class Frame:
    """One framed line, parsed."""

    host: str
    kind: str
    fields: tuple[str, ...]  # the space-separated fields; the last one holds the rest
    task: int | None  # srun's --label task number, when there was one


_ARITY = {"hello": 2, "progress": 3, "warn": 1, "data": 2, "end": 3, "done": 4, "watch": 2}


@dataclass(frozen=True, slots=True)
class PlainLine:
    """A line that is not a frame (a traceback line...), with srun's task label if any."""

    text: str
    task: int | None


def parse_line(line: str) -> Frame | PlainLine:
    text = line.rstrip("\r\n")
    task: int | None = None
    m = _LABEL.match(text)
    if m is not None:
        task = int(m.group(1))
        text = text[m.end() :]
    if not text.startswith(MAGIC + " "):
        return PlainLine(text, task)
    parts = text.split(" ", 2)
    if len(parts) < 3 or not _SAFE_HOST.match(parts[1]):
        return PlainLine(text, task)
    head, _, rest = parts[2].partition(" ")
    arity = _ARITY.get(head)
    if arity is None:
        return PlainLine(text, task)
    fields = tuple(rest.split(" ", arity - 1)) if arity > 1 else (rest,)
    if len(fields) != arity:
        return PlainLine(text, task)
    return Frame(parts[1], head, fields, task)


class Receiver:
    """The launcher side of one node's archive: chunks in order, checked at the end."""

    def __init__(self, sink: BinaryIO, max_bytes: int) -> None:
        self.sink = sink
        self.max_bytes = max_bytes
        self.expected = 0
        self.size = 0
        self.digest = hashlib.sha256()
        self.error: str | None = None

    def chunk(self, seq_text: str, payload: str) -> None:
        if self.error is not None:
            return
        try:
            seq = int(seq_text)
            block = base64.b64decode(payload, validate=True)
        except (ValueError, binascii.Error):
            self.error = f"a garbled data line (chunk {seq_text})"
            return
        if seq != self.expected:
            self.error = f"chunk {seq} arrived where {self.expected} was due (lines lost)"
            return
        self.size += len(block)
        if self.size > self.max_bytes:
            self.error = f"the archive exceeds {self.max_bytes >> 20} MiB; not kept"
            return
        self.expected += 1
        self.digest.update(block)
        self.sink.write(block)

    def end(self, chunks: str, size: str, sha256: str) -> str | None:
        """None when everything arrived intact, else why not."""
        if self.error is not None:
            return self.error
        if str(self.expected) != chunks or str(self.size) != size:
            return f"got {self.expected} chunks / {self.size} bytes of {chunks} / {size}"
        if self.digest.hexdigest() != sha256:
            return "the archive's checksum does not match"
        return None


def done_fields(frame: Frame) -> tuple[str, list[int], str | None, str]:
    """(status, ranks, directory on the node, text) of a ``done`` frame."""
    status, ranks, where, text = frame.fields
    numbers = [int(r) for r in ranks.split(",") if r.lstrip("-").isdigit()]
    return status, numbers, (None if where == "-" else urllib.parse.unquote(where)), unescape(text)


def iter_lines(stream: IO[str]) -> Iterator[str]:
    """Lines of a pipe as they come (``for line in stream`` may read ahead)."""
    while line := stream.readline():
        yield line
