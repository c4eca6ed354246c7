"""Read a node's ``summary.json`` back into model records, in place of its raw files.

A summary is used only when it belongs to the dump beside it: same format family, and
written after the manifest it summarises was final (its ``finished_at`` is copied into
the summary). Anything else — no summary, a torn or foreign one, one older than the
manifest — makes the loader read the raw files, with a note saying why (none when there
is simply no summary, as in dumps of older collectors).

Decoding is the hot path of analysing thousands of nodes: every thread shape's frames
become one tuple shared by every rank (and every node) that has it, so the rules'
per-thread work is done once per shape, not once per rank.
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangdoc.analyzer.model import (
    ChildStacks,
    CollectiveRecord,
    CollectStep,
    Evidence,
    Frame,
    GpuState,
    HostInfo,
    InputFile,
    InputKind,
    LogEvent,
    LogLine,
    LogTemplates,
    ProcessEvidence,
    ProcessGroupInfo,
    ProcSample,
    StackSample,
    ThreadStack,
)
from hangdoc.analyzer.summaries.codec import DecodeContext, decode_frames, decoder
from hangdoc.analyzer.summaries.columns import TABLES, decode_table
from hangdoc.analyzer.summaries.log_window import (
    DigestWindow,
    NodeNumbers,
    TemplateFormats,
    decode_window,
)
from hangdoc.analyzer.summaries.rank_runs import ranks_of_runs
from hangdoc.collectors.dumpformat import MANIFEST_NAME
from hangdoc.collectors.jobformat import (
    SUMMARY_FORMAT,
    SUMMARY_FORMAT_PREFIX,
    SUMMARY_FORMATS_READ,
    SUMMARY_NAME,
)

_HEAD_BYTES = 4096
_FORMAT = re.compile(rb'"format"\s*:\s*"([^"]*)"')
_FINISHED_AT = re.compile(rb'"finished_at"\s*:\s*(null|-?[0-9.eE+-]+)')
_COMPLETE = re.compile(rb'"complete"\s*:\s*(true|false)')
# Frame tuples of thread shapes, shared by every summary read in this process.
_STACKS: dict[tuple[Frame, ...], tuple[Frame, ...]] = {}


@dataclass(frozen=True, slots=True)
class ManifestHead:
    """What a dump's manifest says in its first keys (read without parsing it whole: a
    reader of 2,048 summaries must not parse 2,048 manifests with their step lists)."""

    found: bool
    format: str | None = None
    finished_at: float | None = None
    complete: bool = False


def read_manifest_head(dump_dir: Path) -> ManifestHead:
    try:
        with (dump_dir / MANIFEST_NAME).open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError:
        return ManifestHead(found=False)
    fmt, done, complete = _FORMAT.search(head), _FINISHED_AT.search(head), _COMPLETE.search(head)
    finished: float | None = None
    if done is not None and done.group(1) != b"null":
        try:
            finished = float(done.group(1))
        except ValueError:
            finished = None
    return ManifestHead(
        found=fmt is not None,
        format=fmt.group(1).decode("utf-8", "replace") if fmt is not None else None,
        finished_at=finished,
        complete=complete is not None and complete.group(1) == b"true",
    )


@dataclass(slots=True)
class SummaryContents:
    """One node as its summary describes it; the loader merges it like a read dump."""

    host: HostInfo | None
    processes: list[ProcessEvidence] = field(default_factory=list)
    process_groups: list[ProcessGroupInfo] = field(default_factory=list)
    job_log_events: list[LogEvent] = field(default_factory=list)
    inputs: list[InputFile] = field(default_factory=list)
    steps: list[CollectStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw_files_not_opened: int = 0
    # Ranks whose every log event the summary carries (the node dropped none), with their
    # log windows and text stacks: hydrate() takes those from here rather than parsing the
    # rank's logs again (``log_files``: the logs the summary lists, by display path, with
    # the ranks each holds lines of).
    whole_logs: frozenset[int] = frozenset()
    log_files: tuple[tuple[str, tuple[int, ...]], ...] = ()


# A node's summary is kilobytes (12.5 KiB for 8 ranks); one past this is not ours.
MAX_SUMMARY_BYTES = 64 * 1024 * 1024


def read_summary(dump_dir: Path, display: str) -> tuple[SummaryContents | None, str | None]:
    """(contents, None) for a usable summary; (None, why) for one that must not be used;
    (None, None) when the dump has none."""
    path = dump_dir / SUMMARY_NAME
    if not path.is_file():
        return None, None
    try:
        size = path.stat().st_size
        if size > MAX_SUMMARY_BYTES:
            return None, f"{SUMMARY_NAME} is {size} bytes, over the {MAX_SUMMARY_BYTES} cap"
        obj, numbers = _parse(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"{SUMMARY_NAME} is unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(obj, dict):
        return None, f"{SUMMARY_NAME} is not a JSON object"
    fmt = obj.get("format")
    if not isinstance(fmt, str) or not fmt.startswith(SUMMARY_FORMAT_PREFIX):
        return None, f"{SUMMARY_NAME} is not a hangdoc summary (format {fmt!r})"
    if fmt not in SUMMARY_FORMATS_READ:
        return None, f"{SUMMARY_NAME} has format {fmt}; this hangdoc reads {SUMMARY_FORMAT}"
    head = read_manifest_head(dump_dir)
    if head.found and head.finished_at != obj.get("manifest_finished_at"):
        return None, f"{SUMMARY_NAME} does not match {MANIFEST_NAME} (written for another run)"
    try:
        return _decode(obj, display, numbers), None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        return None, f"{SUMMARY_NAME} is damaged ({type(exc).__name__}: {exc})"


_NUMBERS_KEY = b',"window_numbers":"'


def _parse(data: bytes) -> tuple[Any, str | None]:
    """The summary's JSON, and its windows' numbers (/6: ``window_numbers``, the last key)
    found after the rest and not scanned by ``json.loads`` (they are most of a summary,
    and most are never read). The key is looked for from the start: a string holds no
    unescaped quote, so where the part before it parses as an object, that is the
    object's key; its value runs to the file's last ``"}`` without a quote (one memchr),
    decoded from the file's bytes in place and checked a run at a time when the run is
    first read (log_window.RunTexts: a backslash or a newline in it is a damaged run
    there; the windows' lengths must add up to it). A file written otherwise (by hand,
    re-indented, its keys in another order) is parsed whole."""
    at = data.find(_NUMBERS_KEY)
    start = at + len(_NUMBERS_KEY)
    # (a quote after it: keys after it, written by another writer; one memchr)
    if at >= 0 and data.endswith(b'"}') and data.find(b'"', start, len(data) - 2) < 0:
        try:
            head = json.loads(data[:at] + b"}")
        except ValueError:
            head = None
        if isinstance(head, dict) and "window_numbers" not in head:
            return head, codecs.utf_8_decode(memoryview(data)[start:-2], "strict", True)[0]
    obj = json.loads(data)
    numbers = obj.get("window_numbers") if isinstance(obj, dict) else None
    return obj, numbers if isinstance(numbers, str) else None


class _Shapes:
    """Thread shapes of one summary, ready to stamp out one ThreadStack per rank."""

    def __init__(self, raw: list[Any], frames: list[Frame]) -> None:
        self.rows: list[tuple[tuple[Frame, ...], str | None, bool | None, bool | None, bool]] = []
        for shape in raw:
            stack = tuple([frames[i] for i in shape["frames"]])
            stack = _STACKS.setdefault(stack, stack)
            self.rows.append(
                (stack, shape.get("name"), shape.get("active"), shape.get("owns_gil"),
                 bool(shape.get("is_main")))
            )  # fmt: skip

    def threads(self, refs: list[Any], source: str, ctx: DecodeContext) -> tuple[ThreadStack, ...]:
        out = []
        for ref in refs:
            frames, name, active, owns_gil, is_main = self.rows[ref[0]]
            out.append(
                ThreadStack(
                    frames=frames,
                    os_thread_id=ref[1],
                    thread_id=ref[2],
                    name=name,
                    active=active,
                    owns_gil=owns_gil,
                    is_main=is_main,
                    source=ctx.relocate(ref[3]) if len(ref) > 3 else source,
                )
            )
        return tuple(out)


def _samples(raw: list[Any], shapes: _Shapes, ctx: DecodeContext) -> list[StackSample]:
    out = []
    for rec in raw:
        source = ctx.relocate(rec["source"])
        children = tuple(
            ChildStacks(
                pid=child["pid"],
                threads=shapes.threads(child["threads"], source, ctx),
                cmdline=child.get("cmdline"),
            )
            for child in rec.get("children", ())
        )
        out.append(
            StackSample(
                index=rec["index"],
                time=rec.get("time"),
                threads=shapes.threads(rec["threads"], source, ctx),
                children=children,
                source=source,
            )
        )
    return out


_PROC = decoder(ProcSample)
_COLLECTIVE = decoder(CollectiveRecord)
_EVENT = decoder(LogEvent)
_GPU = decoder(GpuState)


def _process(
    rec: dict[str, Any],
    shapes: _Shapes,
    env: dict[str, str],
    ctx: DecodeContext,
    templates: TemplateFormats | None,
    records: dict[str, list[Any]] | None,
    numbers: NodeNumbers | None,
) -> ProcessEvidence:
    """One rank; ``records``: its records from the summary's tables (/6), else None (they
    are in its own record, one object each)."""
    extra: dict[str, Any] = rec.get("extra") or {}
    rank_env = {**env, **rec.get("env", {})}
    for key in extra.get("env_absent", ()):
        rank_env.pop(key, None)
    proc = ProcessEvidence(
        rank=rec.get("rank"),
        host=rec.get("host"),
        pid=rec.get("pid"),
        local_rank=rec.get("local_rank"),
        world_size=rec.get("world_size"),
        local_world_size=rec.get("local_world_size"),
        group_rank=rec.get("group_rank"),
        cmdline=rec.get("cmdline"),
        start_time=rec.get("start_time"),
        env=rank_env,
        stack_samples=_samples(rec.get("stacks", []), shapes, ctx),
        proc_samples=(
            records["proc"] if records is not None else [_PROC(s, ctx) for s in rec.get("proc", ())]
        ),
        collectives=(
            records["collectives"]
            if records is not None
            else [_COLLECTIVE(c, ctx) for c in rec.get("collectives", ())]
        ),
        log_events=(
            records["log_events"]
            if records is not None
            else [_EVENT(e, ctx) for e in rec.get("log_events", ())]
        ),
        gpu=records["gpu"] if records is not None else [_GPU(g, ctx) for g in rec.get("gpu", ())],
        sources=[ctx.relocate(s) for s in rec.get("sources", ())],
        exited=bool(rec.get("exited")),
    )
    window = rec.get("log_window")
    if window is not None:
        if templates is None:
            raise ValueError("a rank's log window without the node's log templates")
        lines = decode_window(window, templates, ctx.relocate, numbers, rec.get("rank"))
        proc.log_lines = lines
        runs = lines.template_runs() if isinstance(lines, DigestWindow) else ()
        proc.log_templates = LogTemplates(templates.masked, runs, lines)
    for name, value in extra.items():
        if name != "env_absent" and hasattr(proc, name):
            setattr(proc, name, _extra_decoder(name)(value, ctx))
    return proc


# Fields read as another type than the model's: a window written whole (``/2``, or one
# that could not be a digest) is a list of lines, never a LogWindow.
_EXTRA_TYPES: dict[str, Any] = {"log_lines": list[LogLine]}


@functools.cache
def _extra_decoder(name: str) -> Any:
    return decoder(_EXTRA_TYPES.get(name) or typing.get_type_hints(ProcessEvidence)[name])


_GROUP = decoder(ProcessGroupInfo)


def _group(raw: dict[str, Any], ctx: DecodeContext) -> ProcessGroupInfo:
    """A process group; its ranks from their runs where the summary wrote runs (/4)."""
    if "rank_runs" not in raw:
        return _GROUP(raw, ctx)  # type: ignore[no-any-return]
    group: ProcessGroupInfo = _GROUP({k: v for k, v in raw.items() if k != "rank_runs"}, ctx)
    return dataclasses.replace(group, ranks=ranks_of_runs(raw["rank_runs"]))


def _tables(raw: Any, ranks: int, ctx: DecodeContext) -> list[dict[str, list[Any]]] | None:
    """Each rank's records by table (/6: ``tables``, summaries/columns.py); None when the
    summary writes them in each rank's record (/2 to /5)."""
    if raw is None:
        return None
    if type(raw) is not dict:
        raise TypeError("a summary's tables are not an object")
    out: list[dict[str, list[Any]]] = [{} for _ in range(ranks)]
    for name, cls in TABLES.items():
        per_rank = decode_table(cls, raw[name], ctx)
        if len(per_rank) != ranks:
            raise ValueError(f"the summary's table of {name} is not one a rank")
        for rank, records in zip(out, per_rank, strict=True):
            rank[name] = records
    return out


def _decode(obj: dict[str, Any], display: str, numbers: str | None = None) -> SummaryContents:
    ctx = DecodeContext(frames=decode_frames(obj["frames"]), display=display)
    shapes = _Shapes(obj["threads"], ctx.frames)
    env: dict[str, str] = obj.get("env") or {}
    raw_host = obj.get("host_info")
    host = decoder(HostInfo)(raw_host, ctx) if raw_host else None
    out = SummaryContents(host=host)
    raw_templates = obj.get("log_templates")
    templates = TemplateFormats(raw_templates) if raw_templates is not None else None
    ranks: list[Any] = obj["ranks"]
    tables = _tables(obj.get("tables"), len(ranks), ctx)
    cut = NodeNumbers(numbers, f"{display}/{SUMMARY_NAME}") if numbers is not None else None
    out.processes = [
        _process(r, shapes, env, ctx, templates, tables[n] if tables is not None else None, cut)
        for n, r in enumerate(ranks)
    ]
    if cut is not None:
        cut.check_all_taken()
    out.whole_logs = frozenset(
        r["rank"]
        for r in obj["ranks"]
        if isinstance(r.get("rank"), int) and not (r.get("reduced") or {}).get("log_events")
    )
    out.process_groups = [_group(g, ctx) for g in obj.get("process_groups", ())]
    out.job_log_events = [_EVENT(e, ctx) for e in obj.get("job_log_events", ())]
    out.inputs = [decoder(InputFile)(i, ctx) for i in obj.get("inputs", ())]
    seen = tuple(sorted({p.rank for p in out.processes if p.rank is not None}))
    out.inputs.insert(0, InputFile(f"{display}/{SUMMARY_NAME}", InputKind.SUMMARY, seen))
    out.log_files = tuple((i.path, i.ranks) for i in out.inputs if i.kind is InputKind.LOG)
    out.steps = [decoder(CollectStep)(s, ctx) for s in obj.get("steps", ())]
    out.notes = [ctx.relocate_text(n) for n in obj.get("notes", ())]
    counts = obj.get("counts") or {}
    out.raw_files_not_opened = int(counts.get("inputs_not_listed", 0))
    return out


def absorb_summary(
    evidence: Evidence,
    contents: SummaryContents,
    display: str,
    add: Callable[[ProcessEvidence], object],
) -> None:
    """Merge one node's summary into ``evidence`` as the loader merges a read dump;
    ``add`` takes each process (the loader's ProcessIndex.add)."""
    evidence.inputs.extend(contents.inputs)
    evidence.notes.extend(contents.notes)
    evidence.collect_steps.extend(contents.steps)
    evidence.job_log_events.extend(contents.job_log_events)
    host = contents.host
    if host is not None:
        if host.host in evidence.hosts:
            evidence.notes.append(
                f"{display}: a second dump of host {host.host} (the first was "
                f"{evidence.hosts[host.host].manifest}); both are read"
            )
        else:
            evidence.hosts[host.host] = host
    for proc in contents.processes:
        add(proc)
    for group in contents.process_groups:
        known = evidence.process_groups.get(group.name)
        if known is None:
            evidence.process_groups[group.name] = group
        else:
            known.desc = known.desc or group.desc
            known.ranks = known.ranks or group.ranks
