"""One node of a whole-job collection as the launcher follows it: its state, the archive
it streams back, and its line in the job manifest.

A streamed archive is written to ``OUT/.incoming/<host>.tar.gz`` chunk by chunk, checked
against the node's own count and checksum, and unpacked into ``OUT/<host>`` with
tarfile's "data" filter (no links out of the tree, no absolute names, no devices) and a
cap on the unpacked size: the node is ours, but the bytes crossed a pipe.
"""

from __future__ import annotations

import contextlib
import shutil
import tarfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from hangdoc.collectors.jobformat import NodeRecord, NodeStatus, Transfer, TransferMode
from hangdoc.collectors.launchers.stream import Receiver

MAX_ARCHIVE_BYTES = 4 << 30  # compressed, as it arrives
MAX_UNPACKED_BYTES = 64 << 30
MAX_MEMBERS = 1_000_000
KEEP_LINES = 12  # a failed node's last plain output lines, its reason
_STATUSES: dict[str, NodeStatus] = {"ok": "ok", "partial": "partial", "timeout": "timeout"}


@dataclass
class NodeState:
    host: str
    command: int  # index of the launch command that reaches it
    status: str = "waiting"  # waiting | running | then a NodeStatus
    reason: str | None = None
    hello_at: float | None = None  # launcher clock
    finished_at: float | None = None
    offset: float | None = None  # node clock minus launcher clock at hello
    shared: bool | None = None
    remote_dir: str | None = None
    ranks: list[int] = field(default_factory=list)
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=KEEP_LINES))
    receiver: Receiver | None = None
    archive: IO[bytes] | None = None
    archive_error: str | None = None
    received: int = 0

    @property
    def finished(self) -> bool:
        return self.status not in ("waiting", "running")

    def chunk(self, incoming: Path, seq: str, payload: str) -> None:
        """One data line of the node's archive."""
        if self.receiver is None:
            incoming.mkdir(exist_ok=True)
            self.archive = (incoming / f"{self.host}.tar.gz").open("wb")
            self.receiver = Receiver(self.archive, MAX_ARCHIVE_BYTES)
        self.receiver.chunk(seq, payload)

    def archive_end(self, incoming: Path, out: Path, fields: tuple[str, ...]) -> None:
        """The node's ``end`` line: check what arrived and unpack it into OUT/<host>."""
        if self.receiver is None or self.archive is None:
            self.archive_error = "an archive end without its data"
            return
        self.archive_error = self.receiver.end(*fields)
        self.received = self.receiver.size
        self.archive.close()
        if self.archive_error is None:
            self.archive_error = unpack(incoming / f"{self.host}.tar.gz", out / self.host)

    def close(self) -> None:
        if self.archive is not None and not self.archive.closed:
            self.archive.close()

    def transfer(self, requested: TransferMode) -> Transfer | None:
        if self.shared is None:
            return None
        if self.shared and requested in ("auto", "shared"):
            return "shared"
        return "summary" if requested == "summary" else "stream"

    def record(self, out: Path, started: float, requested: TransferMode) -> NodeRecord:
        status = _STATUSES.get(self.status, "failed")  # still running at the end: failed
        here = (out / self.host).is_dir()
        done = self.finished_at
        return {
            "host": self.host,
            "status": status,
            "reason": self.reason if self.finished else "still running",
            "dir": self.host if here else None,
            "transfer": self.transfer(requested),
            "remote_dir": self.remote_dir,
            "ranks": self.ranks,
            "started_at": self.hello_at,
            "finished_at": done,
            "duration_s": round(done - started, 3) if done is not None else None,
            "clock_offset_s": self.offset,
            "bytes": self.received,
        }


def ranks_text(ranks: list[int]) -> str:
    shown = ",".join(str(r) for r in ranks[:16]) + ("…" if len(ranks) > 16 else "")
    return shown or "none"


def unpack(archive: Path, dest: Path) -> str | None:
    """Unpack a node's archive (one top folder) into ``dest``; None, or why not."""
    staging = archive.with_name(archive.name + ".d")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            if len(members) > MAX_MEMBERS:
                return f"the archive holds {len(members)} entries (over {MAX_MEMBERS})"
            size = sum(m.size for m in members)
            if size > MAX_UNPACKED_BYTES:
                return (
                    f"the archive unpacks to {size >> 20} MiB (over {MAX_UNPACKED_BYTES >> 30} GiB)"
                )
            tar.extractall(staging, members=members, filter="data")
        tops = list(staging.iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            return f"the archive holds {len(tops)} top entries, not one dump folder"
        tops[0].rename(dest)
    except (OSError, tarfile.TarError, EOFError) as exc:
        return f"cannot unpack its archive: {exc}"
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            archive.unlink()
    return None
