"""Files a rank writes, followed across samples, and threads stuck in the file system.

Why two samples matter here: a thread in uninterruptible sleep (``D``) for an instant is
ordinary disk I/O, and a save on slow storage spends much of its time there. What tells
a stall from a slow save is change: the writer's file offset (``pos``) or size grows
between samples when the save progresses, and stays put when the file system does not
answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import FileMode, OpenFile, ProcessEvidence, ProcState
from hangdoc.analyzer.views.kernel import ThreadTrack, thread_tracks, wchan_kind

_STD_FDS = frozenset({0, 1, 2})


@dataclass(frozen=True, slots=True)
class FileTrack:
    """One file a process holds open for writing, at every sample it was seen in."""

    fd: int
    path: str
    seen: tuple[tuple[float | None, OpenFile], ...]  # (sample time, file) per sample

    @property
    def latest(self) -> OpenFile:
        return self.seen[-1][1]

    def _values(self) -> list[int]:
        # The offset is the writer's progress (and never needed a stat); else the size.
        pos = [f.pos for _, f in self.seen if f.pos is not None]
        if len(pos) == len(self.seen):
            return pos
        return [f.size for _, f in self.seen if f.size is not None]

    def growth(self) -> int | None:
        """Bytes written between the first and the last sample; None if seen once."""
        values = self._values()
        return values[-1] - values[0] if len(values) >= 2 else None

    def span_s(self) -> float | None:
        times = [t for t, _ in self.seen if t is not None]
        return times[-1] - times[0] if len(times) >= 2 else None

    def where(self) -> str:
        f = self.latest
        mount = f" on {f.mount} ({f.fstype})" if f.mount and f.fstype else ""
        return f"{self.path}{mount}"

    def short_progress(self) -> str:
        """For titles: 'model.pt grew by 768.0 KiB in 3.0 s'."""
        grew, span = self.growth(), self.span_s()
        name = self.path.rsplit("/", 1)[-1]
        if grew is None or grew <= 0:
            return f"{name} did not grow"
        return f"{name} grew by {_human(grew)}{_over(span)}"

    def progress_text(self) -> str:
        grew, span = self.growth(), self.span_s()
        if grew is None:
            return f"{self.path}: seen at one sample only"
        size = _human(self.latest.size if self.latest.size is not None else self.latest.pos)
        if grew <= 0:
            return f"{self.path} did not grow{_over(span)} (at {size})"
        rate = f", {_human(int(grew / span))}/s" if span else ""
        return f"{self.path} grew by {_human(grew)}{_over(span)}{rate} (now {size})"


def _over(span: float | None) -> str:
    return f" in {span:.1f} s" if span else " between samples"


def _human(value: int | None) -> str:
    if value is None:
        return "unknown size"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(amount) < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"


def written_files(process: ProcessEvidence) -> list[FileTrack]:
    """Regular files (not stdout/stderr) the process holds open for writing."""
    seen: dict[tuple[int, str], list[tuple[float | None, OpenFile]]] = {}
    for sample in process.proc_samples:
        if not sample.alive:
            continue
        for f in sample.open_files:
            if f.fd in _STD_FDS or f.mode not in (FileMode.WRITE, FileMode.READ_WRITE):
                continue
            seen.setdefault((f.fd, f.path), []).append((sample.time, f))
    return [FileTrack(fd, path, tuple(items)) for (fd, path), items in sorted(seen.items())]


def has_file_facts(process: ProcessEvidence) -> bool:
    """Whether the dump recorded open files at all (older dumps did not)."""
    return any(s.open_files for s in process.proc_samples)


@dataclass(frozen=True, slots=True)
class Stall:
    """Threads of one rank stuck in the file system, and what they hold open."""

    threads: tuple[ThreadTrack, ...]
    uninterruptible: bool  # in D state (not only a file-system wait channel)
    files: tuple[FileTrack, ...]  # files open for writing that did not grow
    samples: int

    def wchans(self) -> list[str]:
        return sorted({w for t in self.threads for w in t.wchans()})


def fs_stall(process: ProcessEvidence) -> Stall | None:
    """Threads in D state, or waiting in a file-system wait channel, at every /proc
    sample, while no file the rank writes grows. None when a written file grows (a slow
    save, not a stall) or no thread is stuck."""
    samples = len([s for s in process.proc_samples if s.alive])
    if samples == 0:
        return None
    stuck = [
        t
        for t in thread_tracks(process)
        if len(t.states) == samples
        and (
            t.always_in(ProcState.DISK_SLEEP)
            or all(wchan_kind(s.wchan) == "filesystem" for s in t.states)
        )
    ]
    if not stuck:
        return None
    files = written_files(process)
    if any((g := f.growth()) is not None and g > 0 for f in files):
        return None
    return Stall(
        threads=tuple(stuck),
        uninterruptible=any(t.always_in(ProcState.DISK_SLEEP) for t in stuck),
        files=tuple(files),
        samples=samples,
    )


def growing_files(process: ProcessEvidence) -> list[FileTrack]:
    """Files the process writes that grew between the first and last sample."""
    return [f for f in written_files(process) if (g := f.growth()) is not None and g > 0]
