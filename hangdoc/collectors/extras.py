"""Extension point: per-rank collectors beyond py-spy and /proc.

The orchestrator (``collect.py``) calls every registered collector once per rank after
the samples are taken (flight recorder retrieval, the job's own logs, GPU state...).
A collector writes its files under ``rank_dir`` (atomically) and returns one StepRecord
per thing it tried, failures included; it must never raise and must respect
``timeout_s``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.collectors.dumpformat import StepRecord


@dataclass(frozen=True, slots=True)
class RankTarget:
    """One rank's process as discovery found it."""

    pid: int
    rank: int | None
    local_rank: int | None
    world_size: int | None
    host: str
    env: dict[str, str] = field(default_factory=dict)  # full, unredacted: never write it out


@dataclass(frozen=True, slots=True)
class ExtraContext:
    target: RankTarget
    rank_dir: Path
    dump_dir: Path
    timeout_s: float
    redact: bool = True
    extra_paths: tuple[Path, ...] = ()  # --log PATH values


ExtraCollector = Callable[[ExtraContext], list[StepRecord]]

# Registered collectors, in call order. Append from the module that implements one.
EXTRA_COLLECTORS: list[tuple[str, ExtraCollector]] = []


def register(name: str) -> Callable[[ExtraCollector], ExtraCollector]:
    def wrap(fn: ExtraCollector) -> ExtraCollector:
        EXTRA_COLLECTORS.append((name, fn))
        return fn

    return wrap


# Built-in extra collectors register themselves on import (issue 4: the job's own logs).
from hangdoc.collectors import logs as _logs  # noqa: E402  (after register: it uses it)

del _logs
