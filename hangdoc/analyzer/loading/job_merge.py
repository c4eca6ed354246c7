"""What only the whole job shows: checks across the hosts of one Evidence, and the job
manifest of a whole-job collection.

``merge.ProcessIndex`` already folds fragments into processes and notes a rank claimed by
two processes (the first keeps the rank). Here, once every host is loaded:

* the ranks a host holds must be one block (rank - local_rank the same on the host) and
  no local rank may appear twice on one host: two jobs on one node, or a dump copied
  under two names, look like that;
* every rank should report the same WORLD_SIZE;
* each host's collector stamps samples with its own clock. The spread of the hosts'
  first sample times (and the clock offsets the launcher measured, when a job manifest
  is there) is noted: times in logs of different hosts are only comparable to within it.

The job manifest (``job.json``, collectors/jobformat.py) lists nodes that failed or timed
out: their ranks are missing because collection failed, not because the ranks died, and
the notes say so.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.model import Evidence, InputFile, InputKind
from hangdoc.analyzer.ranges import format_ranks
from hangdoc.collectors.jobformat import JOB_FORMAT_PREFIX

# A spread of first-sample times under this is launch jitter, not worth a note.
CLOCK_SPREAD_NOTE_S = 1.0
_MAX_NAMED = 5


@dataclass(slots=True)
class JobInfo:
    """What a job manifest says about its nodes."""

    display: str
    launcher: str
    job_id: str
    failed: dict[str, str] = field(default_factory=dict)  # host -> status: reason
    offsets: dict[str, float] = field(default_factory=dict)  # host -> clock offset (s)


def is_job_manifest(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    return f'"{JOB_FORMAT_PREFIX}'.encode() in head


# job.json lists nodes: a few hundred bytes each, megabytes for the largest jobs.
MAX_JOB_MANIFEST_BYTES = 64 * 1024 * 1024


def read_job_manifest(path: Path, display: str) -> tuple[JobInfo | None, InputFile, list[str]]:
    """(job info, the input entry, notes) of a ``job.json``; never raises."""
    try:
        size = path.stat().st_size
        if size > MAX_JOB_MANIFEST_BYTES:
            raise ValueError(f"{size} bytes, over the {MAX_JOB_MANIFEST_BYTES} cap")
        obj = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        why = f"unreadable job manifest ({type(exc).__name__}: {exc})"
        return None, InputFile(display, InputKind.JOB_MANIFEST, error=why), [f"{display}: {why}"]
    if not isinstance(obj, dict) or not isinstance(obj.get("nodes"), list):
        why = "not a job manifest (no node list)"
        return None, InputFile(display, InputKind.JOB_MANIFEST, error=why), [f"{display}: {why}"]
    info = JobInfo(display, str(obj.get("launcher") or "?"), str(obj.get("job_id") or "?"))
    notes: list[str] = []
    for node in obj["nodes"]:
        if not isinstance(node, dict):
            continue
        host = str(node.get("host") or "?")
        status = str(node.get("status") or "?")
        offset = node.get("clock_offset_s")
        if isinstance(offset, int | float):
            info.offsets[host] = float(offset)
        if status not in ("ok",):
            reason = str(node.get("reason") or "no reason recorded")
            info.failed[host] = f"{status}: {reason}"
    if info.failed:
        shown = sorted(info.failed.items())[:_MAX_NAMED]
        listed = "; ".join(f"{host} ({why})" for host, why in shown)
        more = len(info.failed) - len(shown)
        notes.append(
            f"{display}: {len(info.failed)} node(s) of {info.launcher} job {info.job_id} "
            f"were not fully collected: {listed}"
            + (f"; and {more} more" if more else "")
            + ". Ranks of those nodes may be missing because collection failed, not because "
            "they died."
        )
    if obj.get("complete") is False:
        notes.append(f"{display}: the whole-job collection did not finish; what arrived is used")
    return info, InputFile(display, InputKind.JOB_MANIFEST), notes


def absorb_job_manifest(
    evidence: Evidence, path: Path, display: str
) -> tuple[bool, JobInfo | None]:
    """(whether ``path`` is a job manifest, what it says); its input entry and notes are
    added to ``evidence``."""
    if not path.is_file() or not is_job_manifest(path):
        return False, None
    info, item, notes = read_job_manifest(path, display)
    evidence.inputs.append(item)
    evidence.notes.extend(notes)
    return True, info


def host_notes(evidence: Evidence, jobs: list[JobInfo] | None = None) -> list[str]:
    """Cross-host checks on a loaded Evidence (see the module docstring)."""
    notes: list[str] = []
    ranked = [p for p in evidence.processes if p.rank is not None]
    by_host: dict[str, list[tuple[int, int | None]]] = {}
    for proc in ranked:
        assert proc.rank is not None
        by_host.setdefault(proc.host or "?", []).append((proc.rank, proc.local_rank))
    for host, members in sorted(by_host.items()):
        locals_ = Counter(local for _, local in members if local is not None)
        twice = sorted(local for local, n in locals_.items() if n > 1)
        if twice:
            notes.append(
                f"host {host}: local rank(s) {format_ranks(twice)} are held by more than one "
                "global rank (two jobs on one node, or one node's dump given twice?)"
            )
        bases = {rank - local for rank, local in members if local is not None}
        if len(bases) > 1:
            notes.append(
                f"host {host}: its ranks {format_ranks(r for r, _ in members)} do not form one "
                "block (RANK - LOCAL_RANK differs between them)"
            )
    sizes = Counter(p.world_size for p in ranked if p.world_size)
    if len(sizes) > 1:
        parts = ", ".join(f"{size} ({n} ranks)" for size, n in sorted(sizes.items()))
        notes.append(f"the ranks disagree on WORLD_SIZE: {parts}; the largest is used")
    notes.extend(_clock_notes(evidence, jobs or []))
    return notes


def _clock_notes(evidence: Evidence, jobs: list[JobInfo]) -> list[str]:
    firsts = {h: info.sample_times[0] for h, info in evidence.hosts.items() if info.sample_times}
    notes: list[str] = []
    if len(firsts) >= 2:
        early = min(firsts, key=lambda h: firsts[h])
        late = max(firsts, key=lambda h: firsts[h])
        spread = firsts[late] - firsts[early]
        if spread >= CLOCK_SPREAD_NOTE_S:
            notes.append(
                f"the first samples of the {len(firsts)} hosts span {spread:.1f} s "
                f"({early} earliest, {late} latest), each on its host's own clock: log times "
                f"of different hosts compare only to within about that much"
            )
    offsets = {h: o for job in jobs for h, o in job.offsets.items()}
    if len(offsets) >= 2:
        low = min(offsets, key=lambda h: offsets[h])
        high = max(offsets, key=lambda h: offsets[h])
        skew = offsets[high] - offsets[low]
        if skew >= CLOCK_SPREAD_NOTE_S:
            notes.append(
                f"host clocks differ by up to {skew:.1f} s as the launcher measured them "
                f"({low} {offsets[low]:+.1f} s, {high} {offsets[high]:+.1f} s against the "
                "launcher): compare log times across hosts with care"
            )
    return notes
