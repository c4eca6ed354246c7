"""Node-local reduction: one dump directory → ``summary.json`` (its format:
collectors/jobformat.py ``SUMMARY_FORMAT``).

The node that collected a dump is idle while the launcher waits for the slowest node, so
it does the expensive part of loading once, for its own ranks: it reads its dump with
the parsers ``analyze`` uses and writes what the rules read, reduced
(analyzer/summarize/reduce.py):

* stacks are deduplicated: each distinct frame and thread shape is written once per node,
  a rank's thread is a [shape, os_thread_id, thread_id] triple, and ranks are grouped
  into *stack classes* (same main-thread call path at the last sample);
* the flight recorder keeps, per process group, the last completed collectives and all
  unfinished ones (the frontier where a hang is), not the 2,000-entry history;
* /proc keeps the threads a rule can use; log events are capped per rank; environments
  keep what the node's ranks share once and each rank's differences.

``analyze`` reads summaries (analyzer/summaries/read.py) instead of raw files and opens the
raw files of the few ranks that stand out. The human-facing parts (stack classes, flight
recorder state per group, log highlights) make a summary worth reading by itself.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
import typing
from collections.abc import Sequence
from pathlib import Path

from hangdoc.analyzer.loading.loader import load_dump
from hangdoc.analyzer.loading.redaction import redact_evidence
from hangdoc.analyzer.model import (
    CollectStep,
    Evidence,
    HostInfo,
    InputFile,
    InputKind,
    LogEvent,
    LogLine,
    ProcessEvidence,
    ProcessGroupInfo,
    StackSample,
    StepStatus,
    ThreadStack,
)
from hangdoc.analyzer.summaries.codec import DUMP_TOKEN, FrameTable, encoder
from hangdoc.analyzer.summaries.columns import TABLES, encode_table
from hangdoc.analyzer.summaries.log_window import TemplateTable, encode_window
from hangdoc.analyzer.summaries.rank_runs import rank_runs
from hangdoc.analyzer.summaries.read import read_manifest_head
from hangdoc.analyzer.summarize.reduce import (
    JOB_LOG_EVENTS,
    LOG_EVENTS_PER_RANK,
    cap_events,
    fr_groups,
    fr_window,
    log_highlights,
    reduce_proc,
)
from hangdoc.analyzer.views.activity import classify_process
from hangdoc.collectors.jobformat import (
    SUMMARY_FORMAT,
    SUMMARY_NAME,
    NodeSummary,
    RankSummary,
    StackClass,
    StackSampleRecord,
    ThreadRef,
    ThreadShape,
)
from hangdoc.common.atomic import write_bytes_atomic
from hangdoc.common.version import __version__

# Inputs the summary carries one by one: rules read flight recorder inputs by kind, and a
# person wants the loose logs; the hundreds of per-rank stack files are only counted.
_KEEP_INPUT_KINDS = frozenset({InputKind.FLIGHT_RECORDER, InputKind.LOG, InputKind.FAULTHANDLER})
# ProcessEvidence fields written their own way; every other field of the model goes,
# generically, into RankSummary["extra"], so a field appended later is not lost.
_SPECIAL_FIELDS = frozenset(
    {
        "rank", "pid", "host", "local_rank", "world_size", "local_world_size", "group_rank",
        "cmdline", "start_time", "exited", "env", "sources", "stack_samples", "proc_samples",
        "collectives", "log_events", "gpu", "log_lines", "log_templates",
    }
)  # fmt: skip


@functools.cache
def _extra_fields() -> list[tuple[str, object]]:
    hints = typing.get_type_hints(ProcessEvidence)
    return [
        (f.name, hints[f.name])
        for f in dataclasses.fields(ProcessEvidence)
        if f.name not in _SPECIAL_FIELDS
    ]


class _Writer:
    """Numbers frames and thread shapes while the ranks of one node are written."""

    def __init__(self) -> None:
        self.frames = FrameTable()
        self.templates = TemplateTable()
        self.numbers: list[str] = []  # the windows' runs' numbers, in turn
        self.shapes: list[ThreadShape] = []
        self.shape_index: dict[tuple[object, ...], int] = {}
        # each rank's records of each table (``tables``), in the order of the ranks
        self.table_rows: dict[str, list[Sequence[object]]] = {name: [] for name in TABLES}

    def encode(self, cls: type, value: object) -> dict[str, object]:
        out: dict[str, object] = encoder(cls)(value, self.frames)
        return out

    def shape(self, thread: ThreadStack) -> int:
        key = (thread.frames, thread.name, thread.active, thread.owns_gil, thread.is_main)
        index = self.shape_index.get(key)
        if index is None:
            index = len(self.shapes)
            self.shape_index[key] = index
            self.shapes.append(
                {
                    "frames": self.frames.add_all(thread.frames),
                    "name": thread.name,
                    "active": thread.active,
                    "owns_gil": thread.owns_gil,
                    "is_main": thread.is_main,
                }
            )
        return index

    def thread_ref(self, thread: ThreadStack, source: str) -> ThreadRef:
        ref: ThreadRef = [self.shape(thread), thread.os_thread_id, thread.thread_id]
        if thread.source != source:
            ref.append(thread.source)
        return ref

    def sample(self, sample: StackSample) -> StackSampleRecord:
        record: StackSampleRecord = {
            "index": sample.index,
            "time": sample.time,
            "source": sample.source,
            "threads": [self.thread_ref(t, sample.source) for t in sample.threads],
        }
        if sample.children:
            record["children"] = [
                {
                    "pid": child.pid,
                    "cmdline": child.cmdline,
                    "threads": [self.thread_ref(t, sample.source) for t in child.threads],
                }
                for child in sample.children
            ]
        return record

    def rank(self, proc: ProcessEvidence, base_env: dict[str, str]) -> RankSummary:
        proc_samples, dropped_threads = reduce_proc(proc)
        collectives = fr_window(proc.collectives)
        events = cap_events(proc.log_events, LOG_EVENTS_PER_RANK)
        for name, records in (("proc", proc_samples), ("collectives", collectives),
                              ("log_events", events), ("gpu", proc.gpu)):  # fmt: skip
            self.table_rows[name].append(records)
        activity = classify_process(proc.rank if proc.rank is not None else -1, proc)
        record: RankSummary = {
            "rank": proc.rank,
            "pid": proc.pid,
            "host": proc.host,
            "local_rank": proc.local_rank,
            "world_size": proc.world_size,
            "local_world_size": proc.local_world_size,
            "group_rank": proc.group_rank,
            "cmdline": proc.cmdline,
            "start_time": proc.start_time,
            "exited": proc.exited,
            "env": {k: v for k, v in proc.env.items() if base_env.get(k) != v},
            "sources": list(proc.sources),
            "stacks": [self.sample(s) for s in proc.stack_samples],
            "activity": activity.description() if activity is not None else "no Python stack",
            "reduced": {
                "fr_records": len(proc.collectives) - len(collectives),
                "log_events": len(proc.log_events) - len(events),
                "proc_threads": dropped_threads,
            },
        }
        extra: dict[str, object] = {
            name: encoder(hint)(getattr(proc, name), self.frames) for name, hint in _extra_fields()
        }
        try:
            if proc.log_lines:
                record["log_window"] = encode_window(proc.log_lines, self.templates, self.numbers)
        except ValueError:  # a line with a newline in it: written as the lines themselves
            extra["log_lines"] = encoder(list[LogLine])(proc.log_lines, self.frames)
        absent = sorted(k for k in base_env if k not in proc.env)
        if absent:
            extra["env_absent"] = absent
        if extra:
            record["extra"] = extra
        return record


def _common_env(processes: list[ProcessEvidence]) -> dict[str, str]:
    """Items every rank of the node (with an environment) has: written once."""
    envs = [p.env for p in processes if p.env]
    if not envs:
        return {}
    common = dict(envs[0])
    for env in envs[1:]:
        common = {k: v for k, v in common.items() if env.get(k) == v}
    return common


def _stack_classes(processes: list[ProcessEvidence], writer: _Writer) -> list[StackClass]:
    classes: dict[int | None, StackClass] = {}
    for proc in processes:
        latest = proc.latest_stacks()
        main = latest.main_thread() if latest is not None else None
        shape = writer.shape(main) if main is not None else None
        entry = classes.get(shape)
        if entry is None:
            activity = classify_process(proc.rank if proc.rank is not None else -1, proc)
            words = activity.description() if activity is not None else "no Python stack"
            entry = classes[shape] = {"ranks": [], "pids": [], "shape": shape, "activity": words}
        if proc.rank is not None:
            entry["ranks"].append(proc.rank)
        elif proc.pid is not None:
            entry["pids"].append(proc.pid)
    return sorted(classes.values(), key=lambda c: (-len(c["ranks"]) - len(c["pids"]), c["ranks"]))


def build_node_summary(
    evidence: Evidence, *, dump_format: str | None, finished_at: float | None, complete: bool
) -> NodeSummary:
    """The summary of one node's Evidence (loaded with display ``DUMP_TOKEN``)."""
    writer = _Writer()
    processes = evidence.processes
    base_env = _common_env(processes)
    ranks = [writer.rank(p, base_env) for p in processes]
    host = next(iter(evidence.hosts.values()), None)
    kept_inputs = [i for i in evidence.inputs if i.error is not None or i.kind in _KEEP_INPUT_KINDS]
    bad_steps = [s for s in evidence.collect_steps if s.status != StepStatus.OK]
    job_events = cap_events(evidence.job_log_events, JOB_LOG_EVENTS)
    return {
        "format": SUMMARY_FORMAT,
        "hangdoc_version": __version__,
        "host": host.host if host is not None else "?",
        "created_at": time.time(),
        "dump_format": dump_format,
        "manifest_finished_at": finished_at,
        "complete": complete,
        "sample_times": list(host.sample_times) if host is not None else [],
        "env": base_env,
        "frames": writer.frames.rows,
        "threads": writer.shapes,
        "stack_classes": _stack_classes(processes, writer),
        "fr_groups": fr_groups(processes),
        "log_highlights": log_highlights(processes, evidence.job_log_events),
        "ranks": ranks,
        "tables": {
            name: encode_table(cls, writer.table_rows[name], writer.frames)
            for name, cls in TABLES.items()
        },
        "log_templates": writer.templates.rows,
        "host_info": writer.encode(HostInfo, host) if host is not None else None,
        "process_groups": [_group(writer, g) for g in evidence.process_groups.values()],
        "job_log_events": [writer.encode(LogEvent, e) for e in job_events],
        "inputs": [writer.encode(InputFile, i) for i in kept_inputs],
        "steps": [writer.encode(CollectStep, s) for s in bad_steps],
        "notes": list(evidence.notes),
        "counts": {
            "inputs": len(evidence.inputs),
            "inputs_not_listed": len(evidence.inputs) - len(kept_inputs),
            "steps": len(evidence.collect_steps),
            "job_log_events_dropped": len(evidence.job_log_events) - len(job_events),
        },
        # last: the reader finds it at the end of the file, unparsed (summaries/read.py)
        "window_numbers": "".join(writer.numbers),
    }


def _group(writer: _Writer, group: ProcessGroupInfo) -> dict[str, object]:
    """A process group's record, its ranks as runs where that is shorter."""
    record = writer.encode(ProcessGroupInfo, group)
    runs = rank_runs(group.ranks)
    if runs is not None:
        del record["ranks"]
        record["rank_runs"] = runs
    return record


def write_node_summary(dump_dir: Path) -> Path:
    """Read the dump at ``dump_dir`` (raw files, redacted as ``analyze`` would) and write
    its ``summary.json`` atomically; returns the summary's path. Raises OSError when the
    file cannot be written and ValueError when the dump cannot be summarised."""
    evidence = load_dump(dump_dir, DUMP_TOKEN)
    redact_evidence(evidence)
    head = read_manifest_head(dump_dir)
    summary = build_node_summary(
        evidence,
        dump_format=head.format,
        finished_at=head.finished_at,
        complete=head.complete,
    )
    data = json.dumps(summary, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    path = dump_dir / SUMMARY_NAME
    write_bytes_atomic(path, data.encode("utf-8"))
    return path
