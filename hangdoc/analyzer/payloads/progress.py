"""Payloads of what the job said it was doing (parsers/logs/phases.py, pipelining.py):
phase markers, progress bars and per-rank data counts."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.torch_pg import Direction
from hangdoc.analyzer.vocabulary import Phase


class Exhausted(enum.StrEnum):
    """How a trainer said a rank ran out of data (a DATA_EXHAUSTED marker)."""

    JOIN = "join"  # torch's Join: "Rank 3 exhausted all inputs", "rank that exhausted inputs"
    EPOCH_END = "epoch_end"  # AllenNLP: "Worker 0 completed its entire epoch"
    UNEVEN_WORKLOAD = "uneven_workload"  # wenet's join check failed
    # fairseq's all_gather_list: the workers fell out of sync (one finished its epoch early,
    # or ran out of memory: an OOM shows its own error)
    OUT_OF_SYNC = "out_of_sync"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Progress:
    """A tqdm meter: ``{pct}%|{bar}| {n}/{total} [{elapsed}<{remaining}, …]``."""

    pct: int
    n: float | None  # "1.25k" as a number
    total: float | None
    elapsed_s: int | None
    meter: str  # "n/total" as printed ("1.25k/2.97M"), for people
    elapsed: str  # as printed ("30:00"), for people
    # The line goes on after the meter's closing "]": tqdm writes each state of a bar after
    # a "\r" and never a newline (tqdm/std.py, tqdm.display/fp_write), so text there is the
    # next write, glued to the bar while it was the live last state (another rank's line).
    glued: bool = False
    # Appended (precision6): the meter's own estimate of the time left ("<00:03"), None
    # where tqdm printed "?" (no rate yet) or the meter was cut.
    remaining_s: int | None = None


@dataclass(frozen=True, slots=True)
class PhaseMarker(EventPayload):
    """PHASE: what a framework's line or progress bar says the job is doing."""

    phase: Phase | None = None
    label: str | None = None  # the bar's description or the marker's words, for people
    progress: Progress | None = None  # a progress bar's meter
    marker: bool = False  # a framework's begin/end message (not a bar)
    # A bar printed without a description (``tqdm(items)``): its phase is a guess.
    described: bool = True
    world_size: int | None = None  # a distributed-init line's world size
    exhausted: Exhausted | None = None  # DATA_EXHAUSTED: which trainer's words
    store_key: str | None = None  # "Completed store-based barrier for key: K"
    # "Added key: K to store for rank: R": the rank entered the store-based barrier of K
    # (it waits there until every rank added its key; not a completion). "" where a wrap
    # cut the key off the line.
    store_key_added: str | None = None
    # Pipeline-parallel shape inference (torch.distributed.pipelining): this stage, the
    # stage it receives from or sends to, and which.
    p2p: Direction | None = None
    stage: int | None = None
    peer_stage: int | None = None


@dataclass(frozen=True, slots=True)
class DataCount(EventPayload):
    """DATA_COUNT: how much data a rank said it has ("1250 batches", "len(loader) = 1250")."""

    what: str | None = None  # "batches", "len(train_loader)", "steps per epoch"
    value: int | None = None
