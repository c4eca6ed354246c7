"""Read a dump directory written by ``hangdoc collect`` (collectors/dumpformat.py).

The manifest says which host this is, when each sample was taken, which ranks were
found and how every collector step went; each rank folder holds ``process.json``
(/proc facts) and ``pyspy.<i>.json`` (stacks of sample i). A dump may be partial — the
collector was killed, a step failed, a file was cut mid-write — so everything is read
on a best-effort basis: what is there is loaded, and each problem becomes an
InputFile error plus a note. Files this module does not own (flight recorder, logs
that extra collectors copied in) are handed back to the loader with the rank, host
and pid of the folder they were found in, to be sniffed and parsed like loose files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from hangdoc.analyzer.model import (
    CollectStep,
    HostInfo,
    InputFile,
    InputKind,
    ProcessEvidence,
    StackSample,
    StepStatus,
)
from hangdoc.analyzer.parsers.base import MAX_TEXT_BYTES
from hangdoc.analyzer.parsers.hangdoc_json import (
    DUMP_FORMAT_PREFIX,
    load_json_object,
    process_from_json,
)
from hangdoc.analyzer.parsers.jsonio import (
    as_dict,
    decode_documents,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_str,
)
from hangdoc.analyzer.parsers.pyspy_json import traces_to_sample
from hangdoc.collectors.dumpformat import MANIFEST_NAME, PROCESS_NAME

_PYSPY_FILE = re.compile(r"pyspy\.(\d+)\.json$")
# The temporary file of an atomic write (hangdoc/common/atomic.py) that a killed collector
# left behind: a torn copy of a file whose previous version, if any, is in place.
_TEMP_FILE = re.compile(r"(?:^|/)\.[^/]+\.tmp$")
_RANK_DIR = re.compile(r"(?:rank|pid)\d+$")
# A step skipped because the process was gone by then (wording is the collector's).
# The fallback for steps without the typed ``exited`` key (dumps written before it, other
# writers' steps): a skipped step whose reason is worded like an exit.
_EXITED_REASON = re.compile(r"exit|gone|no such process|not running|vanished|died|zombie", re.I)


@dataclass(frozen=True, slots=True)
class FileContext:
    """Who a file found inside a dump belongs to, as far as its folder says."""

    rank: int | None = None
    host: str | None = None
    pid: int | None = None


@dataclass(slots=True)
class OtherFile:
    """A file in a dump that is not the dump's own; the loader sniffs and parses it."""

    path: Path
    display: str
    context: FileContext


@dataclass(slots=True)
class DumpContents:
    host: HostInfo | None = None
    processes: list[ProcessEvidence] = field(default_factory=list)
    steps: list[CollectStep] = field(default_factory=list)
    inputs: list[InputFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    other_files: list[OtherFile] = field(default_factory=list)


def is_dump_dir(path: Path) -> bool:
    """A directory with a manifest.json whose format is ``hangdoc.dump/…``; a manifest
    that cannot be parsed still counts when rank folders with process.json sit beside it
    (a dump whose manifest rewrite was cut short)."""
    manifest = path / MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        with manifest.open("rb") as handle:
            head = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    if f'"{DUMP_FORMAT_PREFIX}' in head:
        return True
    obj, _ = load_json_object(manifest)
    if obj is not None:
        return (get_str(obj, "format") or "").startswith(DUMP_FORMAT_PREFIX)
    return any((path / d / PROCESS_NAME).is_file() for d in _listdir(path))


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _is_temp(rel: str) -> bool:
    return _TEMP_FILE.search(rel) is not None


def iter_files(root: Path, rel: str = "") -> Iterator[tuple[Path, str]]:
    """Regular files under ``root`` (sorted, recursive) as (path, relative posix path).
    Directory symlinks are not followed, so a link cycle cannot trap the walk."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        name = f"{rel}{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            yield from iter_files(Path(entry.path), name + "/")
        elif entry.is_file():
            yield Path(entry.path), name


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _step(raw: object, host: str | None) -> CollectStep | None:
    obj = as_dict(raw)
    if obj is None:
        return None
    return CollectStep(
        step=get_str(obj, "step") or "?",
        status=StepStatus.parse(get_str(obj, "status")),
        rank=get_int(obj, "rank"),
        pid=get_int(obj, "pid"),
        sample=get_int(obj, "sample"),
        reason=get_str(obj, "reason"),
        host=host,
        duration_s=get_float(obj, "duration_s"),
        exited=get_bool(obj, "exited"),
    )


def _says_exited(step: CollectStep) -> bool:
    """Whether a step says its process had exited: the typed key where the dump has it,
    else (an older dump) a skipped step whose reason is worded like an exit."""
    if step.exited is not None:
        return step.exited
    return step.status == StepStatus.SKIPPED and bool(_EXITED_REASON.search(step.reason or ""))


class _DumpReader:
    def __init__(self, path: Path, display: str, ranks: frozenset[int] | None = None) -> None:
        self.path = path
        self.display = display
        # Only these ranks' folders (the summary reader's hydration); None: everything.
        self.only = ranks
        self.out = DumpContents()
        self.host: str | None = None
        self.sample_times: dict[int, float] = {}
        self.steps_by_pid: dict[int, list[CollectStep]] = {}
        self.steps_by_rank: dict[int, list[CollectStep]] = {}  # steps that name no pid
        self.promised: list[tuple[str, int | None]] = []  # files that "ok" steps wrote
        self.reported: set[str] = set()

    def read(self) -> DumpContents:
        manifest = self._manifest()
        handled: set[str] = {MANIFEST_NAME}
        for raw in get_list(manifest, "ranks"):
            record = as_dict(raw)
            if record is None:
                continue
            folder = get_str(record, "dir") or ""
            if folder in handled:
                continue
            if self.only is not None and get_int(record, "rank") not in self.only:
                handled.add(folder)
                continue
            if not folder or "/" in folder or "\\" in folder or folder in (".", ".."):
                self.out.notes.append(f"{self.display}: rank record with a bad dir {folder!r}")
                folder = ""
            else:
                handled.add(folder)
            self._rank(folder, record)
        for name in _listdir(self.path) if self.only is None else ():
            if name in handled:
                continue
            child = self.path / name
            files: Iterator[tuple[Path, str]]
            if child.is_dir() and not child.is_symlink():
                if _RANK_DIR.match(name) or (child / PROCESS_NAME).is_file():
                    self.out.notes.append(
                        f"{self.display}/{name}: a rank folder the manifest does not list"
                    )
                    self._rank(name, {})
                    continue
                files = ((p, f"{name}/{rel}") for p, rel in iter_files(child))
            else:
                files = iter([(child, name)]) if child.is_file() else iter(())
            for file_path, rel in files:
                if self._skip_temp(rel):
                    continue
                context = FileContext(host=self.host)
                self.out.other_files.append(OtherFile(file_path, f"{self.display}/{rel}", context))
        self._check_promised()
        return self.out

    def _skip_temp(self, rel: str) -> bool:
        """A temp file of an interrupted write is noted, never parsed (it is torn)."""
        if not _is_temp(rel):
            return False
        self.out.notes.append(
            f"{self.display}/{rel}: left over from a write that was interrupted (the "
            "collector was stopped mid-write?); ignored"
        )
        return True

    def _check_promised(self) -> None:
        """A file an "ok" step says it wrote, but that is not there (a dump copied
        half-way, or edited by hand), is reported like any other missing file."""
        for file, rank in self.promised:
            if self.only is not None and rank not in self.only:
                continue
            parts = Path(file).parts
            if Path(file).is_absolute() or ".." in parts:
                continue
            if not (self.path / file).is_file():
                kind = InputKind.UNKNOWN
                if _PYSPY_FILE.match(parts[-1]):
                    kind = InputKind.PYSPY_JSON
                elif parts[-1] == PROCESS_NAME:
                    kind = InputKind.PROCESS
                missing = "missing (the manifest says it was written)"
                self._problem(f"{self.display}/{file}", kind, missing, rank)

    def _manifest(self) -> dict[str, object]:
        display = f"{self.display}/{MANIFEST_NAME}"
        path = self.path / MANIFEST_NAME
        obj, error = load_json_object(path)
        self.out.inputs.append(
            InputFile(display, InputKind.MANIFEST, error=error, size=_size(path))
        )
        if obj is None:
            self.out.notes.append(f"{display}: {error}; reading the rank folders without it")
            return {}
        self.host = get_str(obj, "host")
        if get_bool(obj, "complete") is False:
            self.out.notes.append(
                f"{self.display}: partial dump (collection did not finish); "
                "what was written is used"
            )
        for raw in get_list(obj, "samples"):
            sample = as_dict(raw) or {}
            index, time = get_int(sample, "index"), get_float(sample, "time")
            if index is not None and time is not None:
                self.sample_times[index] = time
        for raw in get_list(obj, "steps"):
            step = _step(raw, self.host)
            file = get_str(as_dict(raw) or {}, "file")
            if step is not None and step.status == StepStatus.OK and file:
                self.promised.append((file, step.rank))
            if step is not None:
                self.out.steps.append(step)
                if step.pid is not None:
                    self.steps_by_pid.setdefault(step.pid, []).append(step)
                elif step.rank is not None:
                    self.steps_by_rank.setdefault(step.rank, []).append(step)
        for warning in get_list(obj, "warnings"):
            self.out.notes.append(f"{self.display}: collector warning: {warning}")
        options = get_dict(obj, "options")
        ranks = [as_dict(r) or {} for r in get_list(obj, "ranks")]
        local_sizes = [s for s in (get_int(r, "local_world_size") for r in ranks) if s]
        started = get_float(obj, "started_at")
        self.out.host = HostInfo(
            host=self.host or self.path.name,
            manifest=display,
            pids_requested=tuple(
                p for p in get_list(options, "pids_requested") if isinstance(p, int)
            ),
            local_world_size=local_sizes[0] if local_sizes else None,
            collected_at=(
                datetime.fromtimestamp(started, tz=UTC).isoformat(timespec="seconds")
                if started is not None
                else None
            ),
            sample_times=tuple(t for _, t in sorted(self.sample_times.items())),
            interval_s=get_float(options, "interval_s"),
        )
        return obj

    def _rank(self, folder: str, record: dict[str, object]) -> None:
        rank_dir = self.path / folder if folder else None
        display = f"{self.display}/{folder}"
        proc = self._process(rank_dir, display, record)
        context = FileContext(rank=proc.rank, host=proc.host, pid=proc.pid)
        samples: dict[int, StackSample] = {}
        present: set[int] = set()  # sample indices with a pyspy file, readable or not
        files = iter_files(rank_dir) if rank_dir is not None and rank_dir.is_dir() else iter(())
        for path, rel in files:
            if rel == PROCESS_NAME or self._skip_temp(f"{folder}/{rel}"):
                continue
            m = _PYSPY_FILE.match(rel)
            if m is None:
                self.out.other_files.append(OtherFile(path, f"{display}/{rel}", context))
                continue
            present.add(int(m.group(1)))
            sample = self._pyspy(path, f"{display}/{rel}", int(m.group(1)), proc)
            if sample is not None:
                samples[sample.index] = sample
                proc.sources.append(sample.source)
        proc.stack_samples = [samples[i] for i in sorted(samples)]
        steps = self.steps_by_pid.get(proc.pid, []) if proc.pid is not None else []
        if proc.rank is not None:
            steps = steps + self.steps_by_rank.get(proc.rank, [])
        for step in steps:
            if _says_exited(step):
                proc.exited = True
            ok_sample = (
                step.step == "pyspy" and step.status == StepStatus.OK and step.sample is not None
            )
            if ok_sample and step.sample not in present:
                name = f"{display}/pyspy.{step.sample}.json"
                self._problem(
                    name, InputKind.PYSPY_JSON, "missing (the manifest says it was written)",
                    proc.rank,
                )  # fmt: skip
        self.out.processes.append(proc)

    def _process(
        self, rank_dir: Path | None, display: str, record: dict[str, object]
    ) -> ProcessEvidence:
        proc: ProcessEvidence | None = None
        name = f"{display}/{PROCESS_NAME}"
        path = rank_dir / PROCESS_NAME if rank_dir is not None else None
        if rank_dir is None or not rank_dir.is_dir():
            self._problem(
                display, InputKind.PROCESS, "rank folder missing", get_int(record, "rank")
            )
        elif path is not None and path.is_file():
            obj, error = load_json_object(path)
            if obj is None:
                self._problem(
                    name, InputKind.PROCESS, error or "unreadable", get_int(record, "rank")
                )
            else:
                proc, notes = process_from_json(obj, name)
                self.out.notes.extend(notes)
                self.out.inputs.append(
                    InputFile(
                        name,
                        InputKind.PROCESS,
                        (proc.rank,) if proc.rank is not None else (),
                        size=_size(path),
                    )
                )
        else:
            self._problem(name, InputKind.PROCESS, "missing", get_int(record, "rank"))
        if proc is None:
            proc = ProcessEvidence(sources=[display])
        # The manifest's record fills what process.json did not say.
        for key in ("rank", "pid", "local_rank", "world_size", "local_world_size", "group_rank"):
            if getattr(proc, key) is None:
                setattr(proc, key, get_int(record, key))
        recorded = get_int(record, "rank")
        if recorded is not None and proc.rank != recorded:
            self.out.notes.append(
                f"{display}: process.json says rank {proc.rank}, the manifest {recorded}; "
                "using process.json"
            )
        if proc.host is None:
            proc.host = self.host
        if proc.rank is None and proc.pid is None:
            m = re.match(r"(rank|pid)(\d+)$", Path(display).name)
            if m:
                setattr(proc, "rank" if m.group(1) == "rank" else "pid", int(m.group(2)))
        return proc

    def _pyspy(
        self, path: Path, display: str, index: int, proc: ProcessEvidence
    ) -> StackSample | None:
        try:
            size = path.stat().st_size
            if size > MAX_TEXT_BYTES:  # a py-spy dump is kilobytes; this is not one
                why = f"{size} bytes: over the {MAX_TEXT_BYTES >> 20} MiB cap; not read"
                self._problem(display, InputKind.PYSPY_JSON, why, proc.rank)
                return None
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            self._problem(
                display, InputKind.PYSPY_JSON, f"cannot read: {exc.strerror or exc}", proc.rank
            )
            return None
        docs = decode_documents(text)
        lists = [v for v in docs.values if isinstance(v, list)]
        error = docs.error or (None if lists else "no py-spy trace list in this file")
        ranks = (proc.rank,) if proc.rank is not None else ()
        self.out.inputs.append(InputFile(display, InputKind.PYSPY_JSON, ranks, error, len(text)))
        if error:
            self.out.notes.append(f"{display}: {error}")
        if not lists:
            return None
        trace_set = traces_to_sample(
            lists[0], source=display, index=index, time=self.sample_times.get(index),
            expected_pid=proc.pid,
        )  # fmt: skip
        self.out.notes.extend(trace_set.notes)
        return trace_set.sample

    def _problem(self, display: str, kind: InputKind, error: str, rank: int | None) -> None:
        if display in self.reported:
            return
        self.reported.add(display)
        ranks = (rank,) if rank is not None else ()
        self.out.inputs.append(InputFile(display, kind, ranks, error))
        self.out.notes.append(f"{display}: {error}")


def read_dump(path: Path, display: str, ranks: frozenset[int] | None = None) -> DumpContents:
    """Read the dump directory at ``path``; ``display`` prefixes every reported path.
    With ``ranks``, only the folders the manifest lists for those ranks are read (files
    at the dump's top level too are left out)."""
    return _DumpReader(path, display, ranks).read()
