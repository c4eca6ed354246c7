"""The optional ``files`` and ``children`` keys of a process.json sample (issue 7), and a
thread's ``wait`` (issue 21).

``collectors/node_facts.py`` writes them; ``hangdoc_json.proc_sample`` calls these
converters so that ProcSample carries them. Untrusted input: every key is type-checked,
and a malformed entry is dropped rather than guessed at.
"""

from __future__ import annotations

from hangdoc.analyzer.model import (
    ChildProcess,
    FileMode,
    KernelWait,
    OpenFile,
    PeerRole,
    PeerWait,
    ProcState,
    WaitKind,
    WaitPeer,
)
from hangdoc.analyzer.parsers.jsonio import as_dict, get_float, get_int, get_list, get_str
from hangdoc.analyzer.vocabulary import parse_enum

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


_MAX_PEERS = 16


def _kind(obj: dict[str, object]) -> WaitKind:
    return parse_enum(WaitKind, get_str(obj, "kind"))


def kernel_wait(raw: object) -> KernelWait | None:
    """A thread's ``wait`` (collectors/waits.py)."""
    obj = as_dict(raw)
    syscall = None if obj is None else get_str(obj, "syscall")
    if obj is None or syscall is None:
        return None
    fds = [v for v in get_list(obj, "fds") if isinstance(v, int)]
    targets = [v for v in get_list(obj, "targets") if isinstance(v, str)]
    peers = (wait_peer(r) for r in get_list(obj, "peers")[:_MAX_PEERS])
    return KernelWait(
        kind=_kind(obj),
        syscall=syscall,
        fd=get_int(obj, "fd"),
        target=get_str(obj, "target"),
        watched=tuple(zip(fds, targets, strict=False))[:_MAX_ITEMS],
        address=get_str(obj, "address"),
        sharers=tuple(v for v in get_list(obj, "sharers")[:_MAX_ITEMS] if isinstance(v, int)),
        peers=tuple(p for p in peers if p is not None),
    )


def peer_wait(raw: object) -> PeerWait | None:
    """A peer's own wait, one level down: its peers by pid only."""
    obj = as_dict(raw)
    syscall = None if obj is None else get_str(obj, "syscall")
    if obj is None or syscall is None:
        return None
    pids = (get_int(p, "pid") for p in map(as_dict, get_list(obj, "peers")[:_MAX_PEERS]) if p)
    return PeerWait(
        kind=_kind(obj),
        syscall=syscall,
        target=get_str(obj, "target"),
        peer_pids=tuple(p for p in pids if p is not None),
    )


def wait_peer(raw: object) -> WaitPeer | None:
    obj = as_dict(raw)
    pid = None if obj is None else get_int(obj, "pid")
    if obj is None or pid is None:
        return None
    role = parse_enum(PeerRole, get_str(obj, "role"))
    if role is PeerRole.UNKNOWN:  # a peer we cannot place says nothing about the wait
        return None
    argv = [w for w in get_list(obj, "cmdline") if isinstance(w, str)]
    ancestors = [v for v in get_list(obj, "ancestors")[:_MAX_ITEMS] if isinstance(v, int)]
    return WaitPeer(
        pid=pid,
        role=role,
        name=get_str(obj, "name"),
        command=" ".join(argv) if argv else None,
        state=ProcState.parse(get_str(obj, "state")),
        ancestors=tuple(ancestors),
        start_time=get_float(obj, "start_time"),
        fd=get_int(obj, "fd"),
        lock=get_str(obj, "lock"),
        wait=peer_wait(obj.get("wait")),
    )
