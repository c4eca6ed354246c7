"""What the watch loop hands over: a confirmed stall, the ranks that ended, and the
handler's answer (collectors/watch/loop.py finds them; hangdoc/watch/report.py reports a
stall on one node, collectors/watch/node.py tells the login node of a Slurm job)."""

from __future__ import annotations

import enum
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hangdoc.collectors.discovery import DiscoveredRank


class Outcome(enum.Enum):
    REPORTED = "reported"  # not again until the job moves
    RECHECK = "recheck"  # check again after another stall_after_s of quiet


@dataclass(frozen=True)
class Exited:
    """A rank that ended while the job was watched."""

    rank: int | None
    pid: int
    at: float  # POSIX time it was found gone
    how: str  # "killed by signal 9 (SIGKILL)"
    outputs: tuple[str, ...]  # the files its stdout/stderr went to (its last words)

    def label(self) -> str:
        return rank_label(self.rank, self.pid)


@dataclass(frozen=True)
class Stall:
    """A confirmed stall, as the handler gets it."""

    quiet_since: float  # POSIX time of the last movement
    detected_at: float  # when the cheap signals had been quiet for stall_after_s
    confirmed_at: float  # when the stacks agreed
    ranks: tuple[DiscoveredRank, ...]  # the live ranks
    exited: tuple[Exited, ...]  # ranks that ended while watched, oldest first
    notes: tuple[str, ...]  # what a person should know (ranks busy while quiet...)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(r.target.pid for r in self.ranks)

    def summary(self, host: str | None = None) -> dict[str, Any]:
        """The stall as JSON (hang.json; the line a Slurm node sends to the login node)."""
        return {
            "host": host or socket.gethostname(),
            "quiet_since": round(self.quiet_since, 3),
            "detected_at": round(self.detected_at, 3),
            "confirmed_at": round(self.confirmed_at, 3),
            "ranks": [{"rank": r.target.rank, "pid": r.target.pid} for r in self.ranks],
            "exited": [
                {
                    "rank": e.rank,
                    "pid": e.pid,
                    "at": round(e.at, 3),
                    "how": e.how,
                    "outputs": list(e.outputs),
                }
                for e in self.exited
            ],
            "notes": list(self.notes),
        }


class StallHandler(Protocol):
    def stalled(self, stall: Stall) -> Outcome: ...

    def resumed(self, reasons: list[str]) -> None: ...

    def collecting(self) -> bool:
        """True while a collection of this job made elsewhere runs on this node (its
        probes touch the ranks: a lookup in the job's store moves rank 0's I/O)."""
        ...


Say = Callable[[str], None]


class Stop(Protocol):
    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def rank_label(rank: int | None, pid: int) -> str:
    return f"rank {rank} (pid {pid})" if rank is not None else f"pid {pid}"
