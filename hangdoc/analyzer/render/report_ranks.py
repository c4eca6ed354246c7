"""Report sections about each rank: details grouped by rank, environment differences, logs.

Ranks that look the same (same process state, threads, activity) share one row, so the
section has a handful of rows at 16,384 ranks and the odd rank out stands alone; the page
still answers "what about rank 1234?" through its rank index and filter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hangdoc.analyzer.model import Evidence, LogEvent, ProcessEvidence, TextStack, ThreadStack
from hangdoc.analyzer.render.report_common import (
    JsonDict,
    RankSets,
    format_mib,
    format_time,
    truncate,
)
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.waits import kernel_wait_text
from hangdoc.common.redact import is_secret_name, redact_text

MAX_RANK_GROUPS = 200
MAX_ENV_KEYS = 100
MAX_ENV_VALUES = 10
MAX_EVENT_GROUPS = 200
MAX_EVENT_SOURCES = 5

# Keys that differ between ranks by construction; showing them hides the differences
# that matter (a different NCCL_* or CUDA setting on one node).
_PER_RANK_KEY = re.compile(r"(^|_)RANK$|^HOSTNAME$|^HOST$")
FAILURE_WORDS = ("error", "fail", "timeout", "timed_out", "exit", "oom", "crash", "exception",
                  "signal", "abort", "fatal", "warn")  # fmt: skip
_DIGITS = re.compile(r"\d+")


@dataclass(slots=True)
class _Group:
    ranks: list[int] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    gpu_used: list[float] = field(default_factory=list)
    gpu_total: list[float] = field(default_factory=list)
    first: ProcessEvidence | None = None


def rank_groups(
    evidence: Evidence,
    activities: Mapping[int, RankActivity],
    missing: Iterable[int],
    culprits: set[int],
    sets: RankSets,
) -> tuple[JsonDict, list[list[object]]]:
    """Rows of ranks that look alike, and the rank index ``[rank, host, pid, row]``."""
    groups: dict[tuple[object, ...], _Group] = {}
    keys: dict[int, tuple[object, ...]] = {}
    for rank, proc in sorted(evidence.ranked().items()):
        key = _rank_key(proc, activities.get(rank))
        group = groups.setdefault(key, _Group(first=proc))
        group.ranks.append(rank)
        keys[rank] = key
        if proc.host:
            group.hosts.add(proc.host)
        gpu = proc.gpu[-1] if proc.gpu else None
        if gpu is not None and gpu.memory_used_mib is not None:
            group.gpu_used.append(gpu.memory_used_mib)
        if gpu is not None and gpu.memory_total_mib is not None:
            group.gpu_total.append(gpu.memory_total_mib)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1].ranks), kv[1].ranks[0]))
    rows: list[JsonDict] = []
    row_of: dict[tuple[object, ...], int] = {}
    cut: list[int] = []
    for key, group in ordered:
        if len(rows) >= MAX_RANK_GROUPS:
            cut.extend(group.ranks)
            continue
        row_of[key] = len(rows)
        rows.append(_row(key, group, activities, culprits, sets))
    index: list[list[object]] = []
    for rank, proc in sorted(evidence.ranked().items()):
        index.append([rank, proc.host, proc.pid, row_of.get(keys[rank])])
    unranked = [
        {"label": p.label, "host": p.host, "pid": p.pid, "cmdline": p.cmdline}
        for p in evidence.processes
        if p.rank is None
    ]
    missing_list = sorted(missing)
    return {
        "rows": rows,
        "omitted": {**sets.fields(cut), "groups": len(ordered) - len(rows)} if cut else None,
        "missing": sets.fields(missing_list) if missing_list else None,
        "unranked": unranked,
    }, index


def _rank_key(proc: ProcessEvidence, activity: RankActivity | None) -> tuple[object, ...]:
    proc_sample = proc.proc_samples[-1] if proc.proc_samples else None
    stacks = proc.latest_stacks()
    return (
        proc_sample.state if proc_sample else None,
        proc_sample.wchan if proc_sample else None,
        proc.exited or (proc_sample is not None and not proc_sample.alive),
        len(stacks.threads) if stacks else None,
        activity.description() if activity else None,
        isinstance(stacks, TextStack),
    )


def _row(
    key: tuple[object, ...],
    group: _Group,
    activities: Mapping[int, RankActivity],
    culprits: set[int],
    sets: RankSets,
) -> JsonDict:
    state, wchan, exited, n_threads, doing, _from_text = key
    hosts = sorted(group.hosts)
    proc = group.first
    assert proc is not None
    latest = proc.latest_stacks()
    gpu = None
    if group.gpu_used:
        lo, hi = format_mib(min(group.gpu_used)), format_mib(max(group.gpu_used))
        total = format_mib(max(group.gpu_total)) if group.gpu_total else None
        gpu = (lo if lo == hi else f"{lo} – {hi}") + (f" of {total}" if total else "")
    return {
        **sets.fields(group.ranks),
        "culprit": bool(culprits.intersection(group.ranks)),
        "hosts": hosts[:3],
        "host_count": len(hosts),
        "state": state,
        "wchan": wchan,
        "exited": exited,
        "threads": n_threads,
        "doing": doing if doing is not None else "no stacks collected",
        # Where the example rank's stacks were read when they are text, not a live sample.
        "read_from_text": latest.label() if isinstance(latest, TextStack) else None,
        "gpu_memory": gpu,
        "example_rank": group.ranks[0],
        "example_threads": _threads(proc, activities.get(group.ranks[0])),
    }


def _threads(proc: ProcessEvidence, activity: RankActivity | None) -> list[JsonDict]:
    """Threads of one representative rank: py-spy's view joined with the kernel's."""
    kernel: dict[int, tuple[str | None, str | None]] = {}
    waits: dict[int, str] = {}  # what a sleeping thread waits on, where /proc said (issue 21)
    if proc.proc_samples:
        for t in proc.proc_samples[-1].threads:
            kernel[t.tid] = (t.state, t.wchan)
            if t.wait is not None:
                waits[t.tid] = kernel_wait_text(t.wait)
    out: list[JsonDict] = []
    for thread_activity in activity.threads if activity else ():
        thread = thread_activity.thread
        state, wchan = kernel.get(thread.os_thread_id or -1, (None, None))
        user = thread_activity.user_frame.label() if thread_activity.user_frame else None
        tag = thread_activity.primary_tag
        row = {
            **_thread_json(thread, None),
            "state": state,
            "wchan": wchan,
            "user_frame": user,
            "tag": tag.value if tag is not None else None,
        }
        if (wait := waits.get(thread.os_thread_id or -1)) is not None:
            row["waits"] = wait
        out.append(row)
    # Threads a traceback in the text says raised, beside a live sample: shown as what
    # they are (read from text, with their exception), after the sampled threads.
    for thread, text in activity.raised if activity else ():
        user = next((f.label() for f in thread.frames if not f.native), None)
        out.append({**_thread_json(thread, text), "state": None, "wchan": None, "user_frame": user})
    return out


def _thread_json(thread: ThreadStack, text: TextStack | None) -> JsonDict:
    return {
        "name": thread.name,
        "tid": thread.os_thread_id,
        "main": thread.is_main,
        "active": thread.active,
        "owns_gil": thread.owns_gil,
        "innermost": thread.frames[0].label() if thread.frames else None,
        "exception": thread.exception,
        "read_from_text": text.label() if text is not None else None,
        "tag": None,
    }


def env_differences(evidence: Evidence, sets: RankSets) -> JsonDict:
    """Environment keys whose values are not the same on every rank (absent counts)."""
    ranked = sorted(evidence.ranked().items())
    with_env = [(rank, proc.env) for rank, proc in ranked if proc.env]
    keys = sorted({k for _, env in with_env for k in env})
    differing: list[JsonDict] = []
    per_rank: list[str] = []
    for key in keys:
        if _PER_RANK_KEY.search(key):
            continue
        values: dict[str | None, list[int]] = {}
        for rank, env in with_env:
            values.setdefault(env.get(key), []).append(rank)
        if len(values) < 2:
            continue
        if len(values) == len(with_env) and len(with_env) > 2:
            per_rank.append(key)
            continue
        ordered = sorted(values.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
        # Evidence from load_paths is redacted already; an Evidence built another way
        # (the API, a test) is masked here by the same rules.
        secret = is_secret_name(key)
        shown = [
            {
                **sets.fields(members),
                "value": None
                if value is None
                else ("‹redacted›" if secret else redact_text(value)),
            }
            for value, members in ordered[:MAX_ENV_VALUES]
        ]
        differing.append(
            {"key": key, "by_value": shown, "more_values": max(0, len(ordered) - MAX_ENV_VALUES)}
        )
    return {
        "ranks_with_env": len(with_env),
        "variables": differing[:MAX_ENV_KEYS],
        "more_variables": max(0, len(differing) - MAX_ENV_KEYS),
        "unique_per_rank": per_rank,
    }


@dataclass(slots=True)
class _EventGroup:
    first: LogEvent
    first_rank: int | None
    ranks: set[int] = field(default_factory=set)
    count: int = 0
    sources: list[tuple[str, int | None]] = field(default_factory=list)
    last_time: float | None = None


def timeline(evidence: Evidence, sets: RankSets) -> JsonDict:
    """Log events grouped by kind and text (numbers ignored), in time order.

    4,096 ranks each logging "Watchdog caught collective operation timeout ... rank N"
    become one row with a rank range; the first failure is the earliest failure-like row.
    """
    pairs: list[tuple[int | None, LogEvent]] = [(None, e) for e in evidence.job_log_events]
    for proc in evidence.processes:
        pairs.extend((proc.rank, e) for e in proc.log_events)
    pairs.sort(key=_event_order)
    groups: dict[tuple[str, str], _EventGroup] = {}
    for rank, event in pairs:
        key = (event.kind, _DIGITS.sub("#", event.text))
        group = groups.get(key)
        if group is None:
            group = groups[key] = _EventGroup(first=event, first_rank=rank)
        group.count += 1
        if rank is not None:
            group.ranks.add(rank)
        if len(group.sources) < MAX_EVENT_SOURCES:
            group.sources.append((event.source, event.line))
        if event.time is not None:
            group.last_time = event.time
    ordered = list(groups.values())
    start = next((e.time for _, e in pairs if e.time is not None), None)
    rows = [_event_row(g, start, sets) for g in ordered[:MAX_EVENT_GROUPS]]
    first_failure = next((i for i, row in enumerate(rows) if row["failure"]), None)
    if first_failure is not None:
        rows[first_failure]["first_failure"] = True
    return {
        "events": len(pairs),
        "rows": rows,
        "more_rows": max(0, len(ordered) - MAX_EVENT_GROUPS),
        "first_failure": first_failure,
        "start": format_time(start),
    }


def _event_order(pair: tuple[int | None, LogEvent]) -> tuple[object, ...]:
    rank, event = pair
    return (
        event.time is None,
        event.time or 0.0,
        -1 if rank is None else rank,
        event.source,
        event.line or 0,
    )


def _event_row(group: _EventGroup, start: float | None, sets: RankSets) -> JsonDict:
    event = group.first
    kind = event.kind.lower()
    offset = None
    if event.time is not None and start is not None:
        offset = round(event.time - start, 3)
    return {
        "kind": str(event.kind),
        "text": truncate(event.text, 2000),
        "count": group.count,
        "rank_set": sets.fields(group.ranks) if group.ranks else None,
        "first_rank": group.first_rank,
        "time": format_time(event.time),
        "last_time": format_time(group.last_time) if group.count > 1 else None,
        "offset_s": offset,
        "sources": [{"source": s, "line": line} for s, line in group.sources],
        "failure": any(word in kind for word in FAILURE_WORDS),
        "first_failure": False,
    }
