"""``py-spy dump --json`` (FORMATS.md §4): the stack format hangdoc collects itself.

The output is a list of thread traces ``{pid, thread_id, thread_name, os_thread_id,
active, owns_gil, frames, process_info}``, frames innermost first. Every key is
treated as optional because py-spy versions and wrappers differ. With
``--subprocesses`` the traces of several pids share one list: the rank is the pid
the caller expects (the dump manifest's pid) or else the one with most threads
(ties: lowest pid), and the others become ``ChildStacks`` (dataloader workers...).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hangdoc.analyzer.model import (
    ChildStacks,
    Frame,
    InputKind,
    ProcessEvidence,
    StackSample,
    ThreadStack,
)
from hangdoc.analyzer.parsers.base import ParsedFile, decode_bytes, read_text_capped
from hangdoc.analyzer.parsers.jsonio import (
    as_dict,
    decode_documents,
    get_bool,
    get_dict,
    get_int,
    get_list,
    get_str,
)
from hangdoc.analyzer.parsers.prefixes import split_streams
from hangdoc.common.redact import redact_local

# A native frame's "file" is a shared object or a C source (``libc.so.6``,
# ``Modules/timemodule.c``); Python frames have a .py/.pyx file or a pseudo-file such as
# ``<frozen importlib._bootstrap>``.
_PY_FILE = re.compile(r"\.py[cwxi]?\b|^<")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+$")
_PREFIXED_JSON = re.compile(r"(?:\[[A-Za-z_]+\d+\]: ?)+[\[{]")


def is_native(function: str, file: str) -> bool:
    """True for frames of native code that py-spy ``--native`` interleaves."""
    if function.startswith("0x") and _ADDRESS.match(function):
        return True
    return _native_file(file)


@functools.lru_cache(maxsize=65536)
def _native_file(file: str) -> bool:
    return not _PY_FILE.search(file)


def is_main_thread(pid: int | None, os_thread_id: int | None, name: str | None) -> bool:
    """py-spy's main thread: its OS thread id is the pid, or Python named it so."""
    return (pid is not None and os_thread_id == pid) or name == "MainThread"


# torch.distributed's collective API (and c10d_logger's wrapper of it, beside it).
_COLLECTIVE_API = ("distributed/distributed_c10d.py", "distributed/c10d_logger.py")


def looks_main(frames: Sequence[Frame]) -> bool:
    """Frames (innermost first) that are a main thread's by themselves, where no header
    names the thread: the outermost is the script's ``<module>``, or they wait inside
    torch.distributed's collective API and the outermost is no ``threading`` start
    (``Thread._bootstrap``). Pasted ranks' stacks are cut below the collective more often
    than not, and the thread a job issues its collectives from is its main one. Two runs
    of frames that both look so are two processes' (parsers/stacks/pyspy_frames.py)."""
    if not frames:
        return False
    bottom = frames[-1].function
    if bottom == "<module>":
        return True
    if bottom.endswith("_bootstrap"):
        return False
    return any(f.file.endswith(_COLLECTIVE_API) for f in frames)


@functools.lru_cache(maxsize=1 << 18)
def _shared_frame(function: str, file: str, line: int | None) -> Frame:
    # Thousands of ranks repeat the same frames: share one immutable Frame for each,
    # which saves both the construction time and the memory of 16k copies.
    return Frame(function=function, file=file, line=line, native=is_native(function, file))


def frame_from_json(raw: object) -> Frame | None:
    """One py-spy frame object → Frame (line 0 → None, locals → (name, repr) pairs)."""
    if not isinstance(raw, dict):
        return None
    name = raw.get("name")
    file = raw.get("filename")
    if not isinstance(file, str):
        file = raw.get("short_filename")
    line = raw.get("line")
    frame = _shared_frame(
        name if isinstance(name, str) else "?",
        file if isinstance(file, str) else "?",
        line if type(line) is int and line > 0 else None,  # py-spy writes 0 for "no line"
    )
    local_items = raw.get("locals")
    if not local_items or not isinstance(local_items, list):
        return frame
    pairs: list[tuple[str, str]] = []
    for item in local_items:
        if isinstance(item, dict):
            local_name, local_repr = item.get("name"), item.get("repr")
            local = local_name if isinstance(local_name, str) else "?"
            value = local_repr if isinstance(local_repr, str) else "?"
            pairs.append((local, redact_local(local, value)))
    return replace(frame, locals=tuple(pairs))


_FRAME_CACHE: dict[tuple[object, object, object], Frame] = {}
_FRAME_CACHE_MAX = 1 << 20


def _frames(raw_frames: list[object]) -> tuple[Frame, ...]:
    """Frames of one trace. The hot loop of loading a big job: frames without locals are
    looked up by their raw (name, filename, line) before any type checking."""
    out: list[Frame] = []
    cache = _FRAME_CACHE
    for raw in raw_frames:
        if type(raw) is dict and not raw.get("locals"):
            key: tuple[object, object, object] | None
            key = (raw.get("name"), raw.get("filename"), raw.get("line"))
            try:
                frame = cache.get(key)
            except TypeError:  # an unhashable value where a scalar belongs
                frame, key = None, None
            if frame is None:
                frame = frame_from_json(raw)
                if frame is not None and key is not None:
                    if len(cache) >= _FRAME_CACHE_MAX:
                        cache.clear()
                    cache[key] = frame
        else:
            frame = frame_from_json(raw)
        if frame is not None:
            out.append(frame)
    return tuple(out)


def thread_from_json(raw: object, source: str) -> tuple[int | None, ThreadStack] | None:
    """One trace → (its pid, its ThreadStack); None when it is not a trace object."""
    obj = as_dict(raw)
    if obj is None or not ("frames" in obj or "thread_id" in obj):
        return None
    pid = get_int(obj, "pid")
    os_tid = get_int(obj, "os_thread_id")
    name = get_str(obj, "thread_name")
    frames = _frames(get_list(obj, "frames"))
    thread = ThreadStack(
        frames=frames,
        os_thread_id=os_tid,
        thread_id=get_int(obj, "thread_id"),
        name=name,
        active=get_bool(obj, "active"),
        owns_gil=get_bool(obj, "owns_gil"),
        is_main=is_main_thread(pid, os_tid, name),
        source=source,
    )
    return pid, thread


@dataclass(slots=True)
class TraceSet:
    """One py-spy JSON document: the rank process's sample and its children."""

    pid: int | None
    cmdline: str | None
    sample: StackSample
    notes: list[str] = field(default_factory=list)


def _cmdline(process_info: dict[str, object]) -> str | None:
    return get_str(process_info, "command_line")


def traces_to_sample(
    traces: Sequence[object],
    *,
    source: str,
    index: int = 0,
    time: float | None = None,
    expected_pid: int | None = None,
) -> TraceSet:
    """Turn one document's trace list into the rank's StackSample (children split off)."""
    by_pid: dict[int | None, list[ThreadStack]] = {}
    cmdlines: dict[int | None, str] = {}
    parents: dict[int, int] = {}
    skipped = 0
    for raw in traces:
        parsed = thread_from_json(raw, source)
        if parsed is None:
            skipped += 1
            continue
        pid, thread = parsed
        by_pid.setdefault(pid, []).append(thread)
        info = get_dict(as_dict(raw) or {}, "process_info")
        if info:
            cmd = _cmdline(info)
            if cmd and pid not in cmdlines:
                cmdlines[pid] = cmd
            parent = get_int(get_dict(info, "parent"), "pid")
            if pid is not None and parent is not None:
                parents[pid] = parent
    notes = [f"{source}: skipped {skipped} entries that are not py-spy traces"] if skipped else []
    main = _choose_main_pid(by_pid, parents, expected_pid)
    if expected_pid is not None and main != expected_pid and by_pid:
        notes.append(
            f"{source}: no trace of the expected pid {expected_pid}; using pid {main} instead"
        )
    children = tuple(
        ChildStacks(pid=pid, threads=tuple(threads), cmdline=cmdlines.get(pid))
        for pid, threads in sorted(by_pid.items(), key=lambda kv: kv[0] or 0)
        if pid != main and pid is not None
    )
    sample = StackSample(
        index=index,
        time=time,
        threads=tuple(by_pid.get(main, ())),
        children=children,
        source=source,
    )
    return TraceSet(pid=main, cmdline=cmdlines.get(main), sample=sample, notes=notes)


def _choose_main_pid(
    by_pid: dict[int | None, list[ThreadStack]],
    parents: dict[int, int],
    expected_pid: int | None,
) -> int | None:
    if not by_pid:
        return expected_pid
    if expected_pid in by_pid:
        return expected_pid
    if len(by_pid) == 1:
        return next(iter(by_pid))
    known = [pid for pid in by_pid if pid is not None]
    # process_info (py-spy >= 0.4 with --subprocesses) names each trace's parent: the
    # root is the one pid whose parent is not in the list.
    roots = [pid for pid in known if parents.get(pid) not in by_pid]
    if parents and len(roots) == 1:
        return roots[0]
    return min(known, key=lambda pid: (-len(by_pid[pid]), pid)) if known else None


def _trace_lists(value: object) -> list[object] | None:
    """The trace list of a document: py-spy's bare list, or a wrapper's
    ``{"stack_traces": [...]}``."""
    if isinstance(value, list):
        return value
    obj = as_dict(value)
    if obj is not None and isinstance(obj.get("stack_traces"), list):
        return get_list(obj, "stack_traces")
    return None


def parse_pyspy_json_text(text: str, source: str, expected_pid: int | None = None) -> ParsedFile:
    """Parse the text of a py-spy JSON file (one or more documents, maybe prefixed)."""
    result = ParsedFile(kind=InputKind.PYSPY_JSON)
    stripped = text.lstrip(" \t\r\n\ufeff")
    chunks: list[tuple[int | None, str]]
    if stripped[:1] in ("[", "{") and not _PREFIXED_JSON.match(stripped[:200]):
        chunks = [(None, text)]
    else:  # "[default0]:[" — py-spy's JSON tee'd through torchrun or another launcher
        chunks = [(s.rank, "\n".join(t for _, t in s.lines)) for s in split_streams(text)]
    processes: dict[tuple[int | None, int | None], ProcessEvidence] = {}
    for rank, chunk in chunks:
        docs = decode_documents(chunk)
        if docs.error:
            result.error = result.error or docs.error
        for value in docs.values:
            traces = _trace_lists(value)
            if traces is None:
                result.notes.append(f"{source}: a JSON value that is not a py-spy trace list")
                continue
            trace_set = traces_to_sample(traces, source=source, expected_pid=expected_pid)
            key = (rank, trace_set.pid)
            proc = processes.get(key)
            if proc is None:
                proc = processes[key] = ProcessEvidence(
                    rank=rank, pid=trace_set.pid, cmdline=trace_set.cmdline, sources=[source]
                )
            sample = trace_set.sample
            if proc.stack_samples:
                sample = replace(sample, index=len(proc.stack_samples))
            proc.stack_samples.append(sample)
            result.notes.extend(trace_set.notes)
    result.processes = list(processes.values())
    if not result.processes and result.error is None:
        result.error = "no py-spy trace in this JSON"
    return result


class PyspyJsonParser:
    """``py-spy dump --json`` output."""

    kind = InputKind.PYSPY_JSON

    def sniff(self, head: bytes) -> bool:
        text = decode_bytes(head)
        start = text.lstrip(" \t\r\n\ufeff")
        if start.startswith("{"):
            if '"stack_traces"' not in text:  # a wrapper's {"stack_traces": [...]}
                return False
        elif not start.startswith("["):
            first = start.split("\n", 1)[0]
            # Prefixed JSON: "[default0]:[" / "[rank0]: [".
            if not _PREFIXED_JSON.match(first):
                return False
        # "owns_gil"/"os_thread_id" set py-spy traces apart from flight recorder
        # entries, which also carry "frames" and "thread_id".
        return '"frames"' in text and ('"owns_gil"' in text or '"os_thread_id"' in text)

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        text, truncated = read_text_capped(path)
        result = parse_pyspy_json_text(text, display_path)
        if truncated:
            result.notes.append(f"{display_path}: file too large, only its tail was read")
        return result
