"""The optional ``files`` and ``children`` keys of a process.json sample (issue 7).

``collectors/node_facts.py`` writes them; ``hangdoc_json.proc_sample`` calls these
converters so that ProcSample carries them. Untrusted input: every key is type-checked,
and a malformed entry is dropped rather than guessed at.
"""

from __future__ import annotations

from hangdoc.analyzer.model import ChildProcess, FileMode, OpenFile, ProcState
from hangdoc.analyzer.parsers.jsonio import as_dict, get_int, get_list, get_str

# A sample lists at most this many of each; more is a malformed or hostile file.
_MAX_ITEMS = 256


def open_file(raw: object) -> OpenFile | None:
    obj = as_dict(raw)
    if obj is None:
        return None
    fd, path = get_int(obj, "fd"), get_str(obj, "path")
    if fd is None or not path:
        return None
    return OpenFile(
        fd=fd,
        path=path,
        mode=FileMode.parse(get_str(obj, "mode")),
        pos=get_int(obj, "pos"),
        size=get_int(obj, "size"),
        mount=get_str(obj, "mount"),
        fstype=get_str(obj, "fstype"),
    )


def open_files(obj: dict[str, object], key: str = "files") -> tuple[OpenFile, ...]:
    items = (open_file(raw) for raw in get_list(obj, key)[:_MAX_ITEMS])
    return tuple(f for f in items if f is not None)


def child_process(raw: object) -> ChildProcess | None:
    obj = as_dict(raw)
    pid = None if obj is None else get_int(obj, "pid")
    if obj is None or pid is None:
        return None
    return ChildProcess(
        pid=pid,
        ppid=get_int(obj, "ppid"),
        name=get_str(obj, "name"),
        state=ProcState.parse(get_str(obj, "state")),
        wchan=get_str(obj, "wchan"),
        cpu_ticks=get_int(obj, "cpu_ticks"),
        threads_in_d=get_int(obj, "threads_in_d") or 0,
        files=open_files(obj),
    )


def children(obj: dict[str, object]) -> tuple[ChildProcess, ...]:
    items = (child_process(raw) for raw in get_list(obj, "children")[:_MAX_ITEMS])
    return tuple(c for c in items if c is not None)
