"""hangdoc's own dump files: ``process.json`` and ``manifest.json`` (collectors/dumpformat).

The dump reader uses the converters here for files inside a dump directory; the two
parsers recognise the same files when a user attaches them loose (``rank3/process.json``
without its dump). The data is untrusted: every key is read with a type check, and a
wrong type reads as "unknown", never as a crash.
"""

from __future__ import annotations

import json
from pathlib import Path

from hangdoc.analyzer.model import (
    InputKind,
    IoCounters,
    OutputSizes,
    ProcessEvidence,
    ProcSample,
    ProcState,
    ThreadState,
)
from hangdoc.analyzer.parsers import node_facts
from hangdoc.analyzer.parsers.base import ParsedFile, decode_bytes, read_text_capped
from hangdoc.analyzer.parsers.jsonio import (
    NESTING_LIMIT_TEXT,
    as_dict,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_list,
    get_str,
    is_truncation,
)
from hangdoc.collectors.dumpformat import FORMAT, PROCESS_FORMAT

DUMP_FORMAT_PREFIX = FORMAT.split("/", 1)[0] + "/"  # "hangdoc.dump/"
PROCESS_FORMAT_PREFIX = PROCESS_FORMAT.split("/", 1)[0] + "/"  # "hangdoc.process/"


def thread_state(raw: object) -> ThreadState | None:
    obj = as_dict(raw)
    tid = None if obj is None else get_int(obj, "tid")
    if obj is None or tid is None:
        return None
    return ThreadState(
        tid=tid,
        name=get_str(obj, "name"),
        state=ProcState.parse(get_str(obj, "state")),
        wchan=get_str(obj, "wchan"),
        cpu_ticks=get_int(obj, "cpu_ticks"),
        voluntary_ctxt_switches=get_int(obj, "voluntary_ctxt_switches"),
        nonvoluntary_ctxt_switches=get_int(obj, "nonvoluntary_ctxt_switches"),
        syscall=get_str(obj, "syscall"),
        waits_on=get_str(obj, "waits_on"),
        wait=node_facts.kernel_wait(obj.get("wait")),
    )


def proc_sample(raw: object, position: int) -> tuple[ProcSample | None, str | None]:
    """One ProcSampleRecord → ProcSample, and the error the collector recorded, if any."""
    obj = as_dict(raw)
    if obj is None:
        return None, None
    io = get_dict(obj, "io")
    output = get_dict(obj, "output")
    index = get_int(obj, "index")
    alive = get_bool(obj, "alive")
    sample = ProcSample(
        index=position if index is None else index,
        time=get_float(obj, "time"),
        alive=True if alive is None else alive,
        state=ProcState.parse(get_str(obj, "state")),
        wchan=get_str(obj, "wchan"),
        cpu_ticks=get_int(obj, "cpu_ticks"),
        threads=tuple(t for t in map(thread_state, get_list(obj, "threads")) if t is not None),
        io=IoCounters(
            rchar=get_int(io, "rchar"),
            wchar=get_int(io, "wchar"),
            syscr=get_int(io, "syscr"),
            syscw=get_int(io, "syscw"),
            read_bytes=get_int(io, "read_bytes"),
            write_bytes=get_int(io, "write_bytes"),
        ),
        output_sizes=OutputSizes(
            stdout=get_int(as_dict(output.get("stdout")) or {}, "size"),
            stderr=get_int(as_dict(output.get("stderr")) or {}, "size"),
        ),
        # Optional keys of issue 7 (open files, subprocesses): see parsers/node_facts.py.
        open_files=node_facts.open_files(obj),
        children=node_facts.children(obj),
    )
    return sample, get_str(obj, "error")


def process_from_json(obj: dict[str, object], source: str) -> tuple[ProcessEvidence, list[str]]:
    """A ProcessFile → ProcessEvidence with its ProcSamples, and notes on what was odd."""
    notes: list[str] = []
    cmdline = [str(part) for part in get_list(obj, "cmdline")]
    env = {str(k): str(v) for k, v in get_dict(obj, "env").items() if isinstance(v, str)}
    proc = ProcessEvidence(
        rank=get_int(obj, "rank"),
        host=get_str(obj, "host"),
        pid=get_int(obj, "pid"),
        local_rank=get_int(obj, "local_rank"),
        world_size=get_int(obj, "world_size"),
        local_world_size=get_int(obj, "local_world_size"),
        group_rank=get_int(obj, "group_rank"),
        cmdline=" ".join(cmdline) if cmdline else None,
        start_time=get_float(obj, "start_time"),
        env=env,
        sources=[source],
    )
    for position, raw in enumerate(get_list(obj, "samples")):
        sample, error = proc_sample(raw, position)
        if sample is None:
            notes.append(f"{source}: sample {position} is not an object; skipped")
            continue
        proc.proc_samples.append(sample)
        if error:
            notes.append(f"{source}: sample {sample.index}: {error}")
        if not sample.alive:
            proc.exited = True
    return proc, notes


def load_json_object(path: Path) -> tuple[dict[str, object] | None, str | None]:
    """Read a whole JSON object file; (None, reason) when it is not one."""
    try:
        text, _ = read_text_capped(path)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if not text.strip():
        return None, "empty file"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated JSON" if is_truncation(exc, text) else "invalid JSON"
        return None, f"{what} at line {exc.lineno} column {exc.colno}: {exc.msg}"
    except RecursionError:  # hostile input: thousands of nested brackets
        return None, f"invalid JSON: nested deeper than {NESTING_LIMIT_TEXT}"
    obj = as_dict(value)
    if obj is None:
        return None, f"expected a JSON object, found {type(value).__name__}"
    return obj, None


def _has_format(head: bytes, prefix: str) -> bool:
    text = decode_bytes(head).lstrip(" \t\r\n\ufeff")
    return text.startswith("{") and f'"{prefix}' in text and '"format"' in text


class ProcessFileParser:
    """A dump's ``process.json`` given loose."""

    kind = InputKind.PROCESS

    def sniff(self, head: bytes) -> bool:
        return _has_format(head, PROCESS_FORMAT_PREFIX)

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        obj, error = load_json_object(path)
        if obj is None:
            return ParsedFile(kind=self.kind, error=error)
        proc, notes = process_from_json(obj, display_path)
        return ParsedFile(kind=self.kind, processes=[proc], notes=notes)


class ManifestParser:
    """A dump's ``manifest.json``. The loader reads the directory around it as a dump;
    alone it says nothing about any process."""

    kind = InputKind.MANIFEST

    def sniff(self, head: bytes) -> bool:
        return _has_format(head, DUMP_FORMAT_PREFIX)

    def parse(self, path: Path, display_path: str) -> ParsedFile:
        obj, error = load_json_object(path)
        if obj is None:
            return ParsedFile(kind=self.kind, error=error)
        return ParsedFile(
            kind=self.kind,
            notes=[f"{display_path}: a dump manifest without its dump directory"],
        )
