"""Stack samples that confirm a stall before anything is collected.

When the cheap signals have said nothing for ``--stall-after`` seconds, the watcher takes
one ``py-spy dump --nonblocking`` of every rank (py-spy reads the memory of a running
process, so no rank is paused even for a millisecond: the job may still be healthy),
waits a few seconds, and takes another. A thread that computes, even without output,
is somewhere else the second time; a blocked one is at the same frame and line.

Threads are compared by thread id; only the main thread and threads py-spy saw running
in either sample count, so an idle helper thread that woke between samples (a timer, a
heartbeat) does not make a stuck job look alive. A failed dump (py-spy missing, ptrace
denied) cannot confirm anything: the comparison then says nothing changed, and the
collection that follows records the failure with its remedy.

A nonblocking read races the process it reads: when frames are freed while py-spy copies
them it fails with "Failed to copy PyFrameObject … Bad address". That failure is itself a
sign the stack is changing, and a blocked thread's frames hold still, so such a dump is
taken again (``READ_TRIES``) rather than reported as unreadable. py-spy's search for the
interpreter reads the same moving memory and can miss it too ("Failed to find a python
interpreter in the .data section": 1 in 200 dumps of a computing process here, against 50
"Bad address"; the CI run of 2026-11-28 met it), so that failure is retried as well. A shot
that still failed in one of these ways is ``raced``: the loop takes another rather than
decide from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hangdoc.collectors import pyspy

READ_TRIES = 4  # a dump that failed while the frames moved under it is taken again
# py-spy's failures that a nonblocking read of a running process can cause by itself
RACES = frozenset({pyspy.Failure.OTHER, pyspy.Failure.NOT_PYTHON})

Frames = tuple[tuple[str, str, int], ...]  # (function, file, line), innermost first


@dataclass(frozen=True, slots=True)
class ThreadShot:
    name: str
    main: bool
    active: bool
    frames: Frames


@dataclass(frozen=True, slots=True)
class StackShot:
    """One nonblocking dump of one process; ``threads`` empty when it failed (``error``),
    ``raced`` when it failed in a way the process's own running can cause."""

    pid: int
    threads: dict[int, ThreadShot]
    error: str | None = None
    raced: bool = False


def take(pid: int, exe: Path | None, timeout_s: float) -> StackShot:
    """A nonblocking py-spy dump of ``pid`` (its subprocesses are not needed here)."""
    for _ in range(READ_TRIES):
        result = pyspy.dump_stacks(
            pid, exe=exe, native=False, subprocesses=False, nonblocking=True, timeout_s=timeout_s
        )
        if result.failure not in RACES:  # read, or a failure a retry won't fix
            break
    if result.output is None:
        return StackShot(pid, {}, result.reason or "py-spy failed", result.failure in RACES)
    return StackShot(pid, parse(result.output))


def parse(output: bytes) -> dict[int, ThreadShot]:
    """py-spy's JSON (a list of threads) as {thread id: ThreadShot}; junk gives {}."""
    try:
        data = json.loads(output)
    except ValueError:
        return {}
    threads: dict[int, ThreadShot] = {}
    for index, item in enumerate(data if isinstance(data, list) else []):
        if not isinstance(item, dict) or not isinstance(item.get("thread_id"), int):
            continue
        frames = tuple(
            (str(f.get("name")), str(f.get("filename")), int(f.get("line") or 0))
            for f in item.get("frames") or []
            if isinstance(f, dict)
        )
        name = str(item.get("thread_name") or "")
        threads[item["thread_id"]] = ThreadShot(
            name=name,
            main=name == "MainThread" or (index == 0 and not name),
            active=bool(item.get("active")),
            frames=frames,
        )
    return threads


def change(before: StackShot, after: StackShot) -> str | None:
    """How a thread that counts moved between two shots of one process; None if none did."""
    for tid, old in before.threads.items():
        new = after.threads.get(tid)
        if new is None or not (old.main or old.active or new.active):
            continue
        if new.frames != old.frames:
            who = "main thread" if old.main else f'thread "{old.name or tid}"'
            return f"{who} moved from {_where(old.frames)} to {_where(new.frames)}"
    return None


def _where(frames: Frames) -> str:
    if not frames:
        return "no Python frame"
    function, file, line = frames[0]
    return f"{function} ({Path(file).name}:{line})"
