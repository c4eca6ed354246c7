"""Merge fragments about the same process into one ProcessEvidence, in linear time.

Every input file says something about some processes: a dump's process.json gives
rank, host and pid; a pasted py-spy text gives a pid and stacks; a faulthandler file
gives stacks and (from its prefixes or name) a rank. Fragments that agree on the
same rank, or on the same (host, pid), describe one process. Lookups go through
dictionaries keyed by rank, (host, pid) and pid, so merging N fragments costs O(N),
which is what a 16,384-rank job needs.

Two fragments that claim the same rank but name different processes (different
pids, or different hosts) conflict: the first keeps the rank, the other stays a
separate process with ``rank=None`` (so no rule counts the rank twice), and a note
names both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hangdoc.analyzer.model import LogLines, ProcessEvidence, ProcSample, RecordRows, StackSample

_SCALARS = (
    "host",
    "pid",
    "local_rank",
    "world_size",
    "local_world_size",
    "group_rank",
    "cmdline",
    "start_time",
)
# (hydrate() fills them the same way from a summary record)
SCALAR_FIELDS = _SCALARS


def short_host(host: str | None) -> str | None:
    """NCCL prints "node1", torchrun "node1.cluster.local": compare the first label."""
    return host.split(".", 1)[0].lower() if host else None


def _who(proc: ProcessEvidence) -> str:
    parts = [f"pid {proc.pid}" if proc.pid is not None else "unknown pid"]
    if proc.host:
        parts.append(f"on {proc.host}")
    if proc.sources:
        parts.append(f"({proc.sources[0]})")
    return " ".join(parts)


def _compatible(a: ProcessEvidence, b: ProcessEvidence) -> bool:
    if a.rank is not None and b.rank is not None and a.rank != b.rank:
        return False
    if a.pid is not None and b.pid is not None and a.pid != b.pid:
        return False
    ha, hb = short_host(a.host), short_host(b.host)
    return ha is None or hb is None or ha == hb


def _extend_lines(proc: ProcessEvidence, lines: LogLines) -> None:
    proc.log_lines.extend(lines)


class ProcessIndex:
    """Accumulates fragments; ``finish`` returns the merged processes."""

    def __init__(
        self, add_lines: Callable[[ProcessEvidence, LogLines], None] | None = None
    ) -> None:
        # how a fragment's log lines join the process's (the loader's joins its windows)
        self._add_lines = add_lines if add_lines is not None else _extend_lines
        self._processes: list[ProcessEvidence] = []
        self._by_rank: dict[int, ProcessEvidence] = {}
        self._by_host_pid: dict[tuple[str | None, int], ProcessEvidence] = {}
        self._by_pid: dict[int, list[ProcessEvidence]] = {}
        self._in_pid_bucket: set[int] = set()  # id() of processes already in _by_pid
        # id() of processes whose stack / proc samples came from more than one fragment
        self._mixed_stacks: set[int] = set()
        self._mixed_texts: set[int] = set()
        self._mixed_procs: set[int] = set()
        self._notes: dict[str, None] = {}  # ordered set

    @property
    def count(self) -> int:
        """How many distinct processes so far."""
        return len(self._processes)

    @property
    def notes(self) -> list[str]:
        return list(self._notes)

    def add(self, fragment: ProcessEvidence) -> ProcessEvidence:
        """Merge ``fragment`` into the process it describes (or keep it as a new one);
        returns the process that now holds its data."""
        target = self._find(fragment)
        if target is None:
            self._processes.append(fragment)
            self._register(fragment)
            return fragment
        self._merge(target, fragment)
        return target

    def _find(self, frag: ProcessEvidence) -> ProcessEvidence | None:
        if frag.rank is not None:
            holder = self._by_rank.get(frag.rank)
            if holder is not None:
                if _compatible(holder, frag):
                    return holder
                self._notes[
                    f"rank {frag.rank} is claimed by {_who(holder)} and by {_who(frag)}; "
                    f"the first is kept as rank {frag.rank}, the other is shown by its pid"
                ] = None
                frag.rank = None
        if frag.pid is None:
            return None
        host = short_host(frag.host)
        if host is not None:
            target = self._by_host_pid.get((host, frag.pid))
            if target is None:
                target = self._by_host_pid.get((None, frag.pid))
        else:
            candidates = self._by_pid.get(frag.pid, [])
            target = candidates[0] if len(candidates) == 1 else None
            if len(candidates) > 1:
                self._notes[
                    f"pid {frag.pid} ({frag.sources[0] if frag.sources else '?'}) matches "
                    f"{len(candidates)} processes on different hosts; kept apart"
                ] = None
        if target is not None and _compatible(target, frag):
            return target
        return None

    def _register(self, proc: ProcessEvidence) -> None:
        if proc.rank is not None:
            self._by_rank.setdefault(proc.rank, proc)
        if proc.pid is not None:
            self._by_host_pid.setdefault((short_host(proc.host), proc.pid), proc)
            if id(proc) not in self._in_pid_bucket:
                self._in_pid_bucket.add(id(proc))
                self._by_pid.setdefault(proc.pid, []).append(proc)

    def _merge(self, target: ProcessEvidence, frag: ProcessEvidence) -> None:
        if target.stack_samples and frag.stack_samples:
            self._mixed_stacks.add(id(target))
        if target.text_stacks and frag.text_stacks:
            self._mixed_texts.add(id(target))
        if target.proc_samples and frag.proc_samples:
            self._mixed_procs.add(id(target))
        gained_key = False
        if target.rank is None and frag.rank is not None:
            if frag.rank in self._by_rank:  # cannot happen via _find, kept for safety
                self._notes[f"rank {frag.rank}: {_who(frag)} merged without its rank"] = None
            else:
                target.rank = frag.rank
                gained_key = True
        for name in _SCALARS:
            if getattr(target, name) is None and getattr(frag, name) is not None:
                setattr(target, name, getattr(frag, name))
                gained_key = gained_key or name in ("host", "pid")
        for key, value in frag.env.items():
            target.env.setdefault(key, value)
        target.stack_samples.extend(frag.stack_samples)
        target.text_stacks.extend(frag.text_stacks)
        target.proc_samples.extend(frag.proc_samples)
        if not target.collectives and isinstance(frag.collectives, RecordRows):
            target.collectives = frag.collectives  # kept compact (a list would be 16 KB)
        else:
            target.collectives.extend(frag.collectives)
        target.log_events.extend(frag.log_events)
        self._add_lines(target, frag.log_lines)
        target.gpu.extend(frag.gpu)
        target.sources.extend(frag.sources)
        target.exited = target.exited or frag.exited
        if gained_key:
            self._register(target)

    def finish(self) -> list[ProcessEvidence]:
        """Processes ordered by rank (unknown ranks last), their sources without
        duplicates. A process merged from several fragments gets its samples in time
        order, re-indexed 0..n-1; one read from a single dump keeps the dump's sample
        indices, which line up with the manifest's sample times. Text stacks keep the
        order they were read in (they have no time), re-indexed likewise."""
        for proc in self._processes:
            if id(proc) in self._mixed_stacks:
                proc.stack_samples = _reindex_stacks(proc.stack_samples)
            if id(proc) in self._mixed_texts:
                proc.text_stacks = [
                    s if s.index == i else replace(s, index=i)
                    for i, s in enumerate(proc.text_stacks)
                ]
            if id(proc) in self._mixed_procs:
                proc.proc_samples = _reindex_procs(proc.proc_samples)
            proc.sources = list(dict.fromkeys(proc.sources))
        return sorted(
            self._processes,
            key=lambda p: (p.rank is None, p.rank or 0, p.host or "", p.pid or 0),
        )


def _time_key(time: float | None) -> tuple[bool, float]:
    # Samples without a time (loose py-spy JSON) go after timed ones, in the order given.
    return (time is None, time or 0.0)


def _reindex_stacks(samples: list[StackSample]) -> list[StackSample]:
    ordered = sorted(samples, key=lambda s: _time_key(s.time))
    return [s if s.index == i else replace(s, index=i) for i, s in enumerate(ordered)]


def _reindex_procs(samples: list[ProcSample]) -> list[ProcSample]:
    ordered = sorted(samples, key=lambda s: _time_key(s.time))
    return [s if s.index == i else replace(s, index=i) for i, s in enumerate(ordered)]
