"""hangdoc from Python: load a hang's evidence, diagnose it, and look at it as DataFrames.

The command line answers one question per run; a notebook lets a person slice the same
evidence further (which ranks share a stack, when each rank's last collective was
created, which log events came first). This module is that door, the way HTA hands
traces to notebook users: plain functions over the same ``Evidence`` and ``Diagnosis``
the CLI uses, so a notebook never sees something the report does not.

    import hangdoc
    diagnosis = hangdoc.diagnose("hangdoc-node1-20261121T203000Z/")
    hangdoc.findings_frame(diagnosis)
    hangdoc.stacks_frame(diagnosis).query("is_main and depth == 0")

pandas is imported only when a frame is built, and this module only when one of its
names is first used (``hangdoc/__init__.py``), so ``import hangdoc`` stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import pandas as pd

    from hangdoc.analyzer.diagnosis import Diagnosis
    from hangdoc.analyzer.model import Evidence, ThreadStack

# hangdoc/__init__.py hands these on lazily (its API_NAMES; tests/unit/test_api.py
# checks that the two lists agree).
__all__ = [
    "collectives_frame",
    "diagnose",
    "findings_frame",
    "load",
    "log_events_frame",
    "ranks_frame",
    "stacks_frame",
]

PathLike: TypeAlias = "str | os.PathLike[str]"
Paths: TypeAlias = "PathLike | Sequence[PathLike]"
Source: TypeAlias = "Diagnosis | Evidence"


def _paths(paths: Paths) -> list[Path]:
    """One path or many: a str is one path, never a sequence of characters."""
    if isinstance(paths, str | os.PathLike):
        return [Path(paths)]
    return [Path(p) for p in paths]


def load(paths: Paths, *, redact: bool = True, summaries: bool = True) -> Evidence:
    """Read dumps, archives and loose files into one Evidence, as ``hangdoc analyze`` does.

    Never raises for a bad input: each input is listed in ``evidence.inputs`` with its
    error, and when nothing was usable the first note says why. ``redact=False`` keeps
    secrets (a note says so); ``summaries=False`` reads raw files over node summaries.
    """
    from hangdoc.analyzer.loading.loader import load_paths

    return load_paths(_paths(paths), redact=redact, summaries=summaries)


def diagnose(
    paths_or_evidence: Paths | Evidence, *, redact: bool = True, summaries: bool = True
) -> Diagnosis:
    """Run every rule: the verdict, the findings (the primary cause first), the ranks.

    Takes paths (loaded with ``load``) or an Evidence already loaded, so a notebook can
    load once and diagnose again after editing the evidence.
    """
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.model import Evidence

    if isinstance(paths_or_evidence, Evidence):
        evidence = paths_or_evidence
    else:
        evidence = load(paths_or_evidence, redact=redact, summaries=summaries)
    return analyze(evidence)


def _evidence(source: Source) -> Evidence:
    from hangdoc.analyzer.model import Evidence

    return source if isinstance(source, Evidence) else source.evidence


def _frame(
    rows: Iterable[dict[str, Any]], columns: Sequence[str], ints: Sequence[str]
) -> pd.DataFrame:
    """A DataFrame with the given columns even when there are no rows; integer columns
    that may be missing (rank, pid) use pandas' nullable Int64, so 3 stays 3, not 3.0."""
    import pandas as pd

    frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
    return frame.astype({c: "Int64" for c in ints})


_RANK_COLUMNS = (
    "rank", "host", "pid", "local_rank", "world_size", "exited", "stack_samples",
    "proc_samples", "collectives", "log_events", "activity", "in_collective", "culprit",
    "waiting", "sources", "text_stacks",
)  # fmt: skip


def ranks_frame(source: Source) -> pd.DataFrame:
    """One row per process (a rank, or a process whose rank is unknown): where it is,
    what it is doing at its last sample, and whether the primary finding blames it."""
    from hangdoc.analyzer.diagnosis import Diagnosis
    from hangdoc.analyzer.views.activity import classify_ranks

    evidence = _evidence(source)
    if isinstance(source, Diagnosis):
        activities = source.activities
        primary = source.primary
    else:
        activities, primary = classify_ranks(evidence), None
    culprits = set(primary.culprit_ranks) if primary else set()
    waiting = set(primary.waiting_ranks) if primary else set()
    rows = []
    for proc in evidence.processes:
        activity = activities.get(proc.rank) if proc.rank is not None else None
        rows.append(
            {
                "rank": proc.rank,
                "host": proc.host,
                "pid": proc.pid,
                "local_rank": proc.local_rank,
                "world_size": proc.world_size,
                "exited": proc.exited,
                "stack_samples": len(proc.stack_samples),
                "proc_samples": len(proc.proc_samples),
                "collectives": len(proc.collectives),
                "log_events": len(proc.log_events),
                "activity": activity.description() if activity else None,
                "in_collective": activity.in_collective if activity else False,
                "culprit": proc.rank in culprits,
                "waiting": proc.rank in waiting,
                "sources": ", ".join(proc.sources),
                "text_stacks": len(proc.text_stacks),
            }
        )
    frame = _frame(rows, _RANK_COLUMNS, ("rank", "pid", "local_rank", "world_size"))
    return frame.sort_values(["rank", "pid"], na_position="last", ignore_index=True)


_STACK_COLUMNS = (
    "rank", "pid", "host", "sample", "time", "child_pid", "thread_id", "os_thread_id",
    "thread_name", "is_main", "active", "owns_gil", "depth", "function", "file", "line",
    "native", "source", "text_stack", "text_kinds", "text_line", "exception",
)  # fmt: skip


def stacks_frame(source: Source) -> pd.DataFrame:
    """One row per frame of every sampled thread (and dataloader worker, ``child_pid``
    set). ``depth`` 0 is the innermost frame: where the thread is right now.

    Stacks read from text (tracebacks in logs, pasted dumps) are rows too, labelled as
    such: ``sample`` and ``time`` are empty and ``text_stack`` is their index among the
    process's text stacks, with ``text_kinds`` ("traceback", "pyspy"…), ``text_line``
    (where they start in ``source``) and the ``exception`` a traceback ended with. Filter
    on ``sample.notna()`` for live samples only."""
    from hangdoc.analyzer.model import StackSample, TextStack

    rows = []
    for proc in _evidence(source).processes:
        stacks: list[StackSample | TextStack] = [*proc.stack_samples, *proc.text_stacks]
        for stack in stacks:
            text = stack if isinstance(stack, TextStack) else None
            live = stack if isinstance(stack, StackSample) else None
            threads: list[tuple[int | None, ThreadStack]] = [(None, t) for t in stack.threads]
            threads += [(c.pid, t) for c in stack.children for t in c.threads]
            for child_pid, thread in threads:
                for depth, frame in enumerate(thread.frames):
                    rows.append(
                        {
                            "rank": proc.rank,
                            "pid": proc.pid,
                            "host": proc.host,
                            "sample": live.index if live is not None else None,
                            "time": live.time if live is not None else None,
                            "child_pid": child_pid,
                            "thread_id": thread.thread_id,
                            "os_thread_id": thread.os_thread_id,
                            "thread_name": thread.name,
                            "is_main": thread.is_main,
                            "active": thread.active,
                            "owns_gil": thread.owns_gil,
                            "depth": depth,
                            "function": frame.function,
                            "file": frame.file,
                            "line": frame.line,
                            "native": frame.native,
                            "source": thread.source or stack.source,
                            "text_stack": text.index if text is not None else None,
                            "text_kinds": (
                                ", ".join(k.value for k in text.kinds) if text else None
                            ),
                            "text_line": text.line if text is not None else None,
                            "exception": thread.exception,
                        }
                    )
    ints = (
        "rank", "pid", "sample", "child_pid", "thread_id", "os_thread_id", "depth", "line",
        "text_stack", "text_line",
    )  # fmt: skip
    return _frame(rows, _STACK_COLUMNS, ints)


_COLLECTIVE_COLUMNS = (
    "rank", "group", "group_desc", "seq_id", "p2p_seq_id", "record_id", "op", "state",
    "is_p2p", "peer", "input_sizes", "output_sizes", "dtypes", "backend", "time_created_ns",
    "source",
)  # fmt: skip


def collectives_frame(source: Source) -> pd.DataFrame:
    """One row per collective a rank recorded (flight recorder, or logs): compare
    ``seq_id`` across ranks of a group to see who is behind or in another op."""
    rows = []
    for proc in _evidence(source).processes:
        for rec in proc.collectives:
            rows.append(
                {
                    "rank": proc.rank,
                    "group": rec.group,
                    "group_desc": rec.group_desc,
                    "seq_id": rec.seq_id,
                    "p2p_seq_id": rec.p2p_seq_id,
                    "record_id": rec.record_id,
                    "op": rec.op,
                    "state": rec.state,
                    "is_p2p": rec.is_p2p,
                    "peer": rec.peer,
                    "input_sizes": [list(s) for s in rec.input_sizes],
                    "output_sizes": [list(s) for s in rec.output_sizes],
                    "dtypes": list(rec.dtypes),
                    "backend": rec.backend,
                    "time_created_ns": rec.time_created_ns,
                    "source": rec.source,
                }
            )
    ints = ("rank", "seq_id", "p2p_seq_id", "record_id", "peer", "time_created_ns")
    frame = _frame(rows, _COLLECTIVE_COLUMNS, ints)
    return frame.sort_values(["group", "rank", "seq_id"], ignore_index=True)


_LOG_COLUMNS = (
    "rank", "time", "kind", "text", "source", "line", "host", "pid", "local_rank", "fields",
)  # fmt: skip


def log_events_frame(source: Source) -> pd.DataFrame:
    """One row per log line that matters (watchdog timeouts, NCCL warnings, exits),
    of a rank or of the job (``rank`` missing), in time order where times are known.
    ``fields`` holds what the parser read from the line (the event's typed payload, as
    plain values by field name: analyzer/payloads.py)."""
    from hangdoc.analyzer.payloads import payload_fields

    evidence = _evidence(source)
    rows = []
    events = [(p.rank, e) for p in evidence.processes for e in p.log_events]
    events += [(None, e) for e in evidence.job_log_events]
    for rank, event in events:
        rows.append(
            {
                "rank": rank,
                "time": event.time,
                "kind": str(event.kind),
                "text": event.text,
                "source": event.source,
                "line": event.line,
                "host": event.host,
                "pid": event.pid,
                "local_rank": event.local_rank,
                "fields": payload_fields(event.payload),
            }
        )
    frame = _frame(rows, _LOG_COLUMNS, ("rank", "line", "pid", "local_rank"))
    return frame.sort_values(["time", "rank"], na_position="last", kind="stable", ignore_index=True)


_FINDING_COLUMNS = (
    "rule", "category", "severity", "confidence", "strength", "primary", "title",
    "culprit_ranks", "waiting_ranks", "explanation", "fix", "evidence",
)  # fmt: skip


def findings_frame(diagnosis: Diagnosis) -> pd.DataFrame:
    """One row per finding, in the diagnosis' order: the first row (``primary``) is the
    cause the report leads with."""
    rows = [
        {
            "rule": f.rule,
            "category": f.category.value,
            "severity": f.severity.value,
            "confidence": f.confidence,
            "strength": f.strength.word,
            "primary": index == 0,
            "title": f.title,
            "culprit_ranks": list(f.culprit_ranks),
            "waiting_ranks": list(f.waiting_ranks),
            "explanation": f.explanation,
            "fix": f.fix,
            "evidence": [e.source for e in f.evidence],
        }
        for index, f in enumerate(diagnosis.findings)
    ]
    return _frame(rows, _FINDING_COLUMNS, ())
