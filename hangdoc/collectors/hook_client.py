"""Talking to a live rank: hangdoc's hook and torch's worker server, over unix sockets
(and the worker server of ``torch.distributed.debug``, over TCP).

Both answer on a unix socket the target process created, named as the target sees its
own filesystem and pid: paths are tried as given and through ``/proc/<pid>/root`` (a
container), and the hook's name under every pid the target has in nested pid
namespaces (``NSpid``). Every call has a timeout; a full listen backlog (EAGAIN on
unix sockets) is retried until then.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from hangdoc.hook import PROTOCOL, SOCKET_NAME

MAX_REPLY_BYTES = 512 * 1024 * 1024


def resolve(path: str, pid: int) -> str | None:
    for candidate in (path, f"/proc/{pid}/root{path}"):
        if os.path.exists(candidate):
            return candidate
    return None


def http_over_unix(path: str, endpoint: str, timeout: float) -> tuple[int, bytes]:
    """POST ``endpoint`` to an HTTP server on a unix socket; (status, body)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        _connect(conn, path, timeout)
        return _post(conn, endpoint)


def http_over_tcp(host: str, port: int, endpoint: str, timeout: float) -> tuple[int, bytes]:
    """POST ``endpoint`` to torch's worker server on a TCP port; (status, body)."""
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.settimeout(timeout)
        return _post(conn, endpoint)


def _post(conn: socket.socket, endpoint: str) -> tuple[int, bytes]:
    """torch's _WorkerServer protocol: POST /handler/<name>, no body, the reply to EOF."""
    request = f"POST {endpoint} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
    conn.sendall((request + "Connection: close\r\n\r\n").encode())
    data = _read_all(conn, MAX_REPLY_BYTES)
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
    return status, body


def hook_socket_candidates(pid: int, env: dict[str, str]) -> list[str]:
    """The hook's socket as the target names it (its own pid in its pid namespace)."""
    pids = [pid, *namespace_pids(pid)]
    directory = env.get("HANGDOC_HOOK_DIR") or "/tmp"
    out: list[str] = []
    for each in dict.fromkeys(pids):
        path = os.path.join(directory, SOCKET_NAME.format(pid=each))
        resolved = resolve(path, pid)
        if resolved:
            out.append(resolved)
    return out


def namespace_pids(pid: int) -> list[int]:
    """NSpid from /proc/PID/status: the pid as each nested pid namespace sees it."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


@dataclass(frozen=True, slots=True)
class HookArtifact:
    name: str
    data: bytes
    error: str | None


def ask_hook(path: str, want: list[str], timeout: float) -> list[HookArtifact]:
    """One request to a hangdoc hook; raises OSError/ValueError on a broken exchange."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        _connect(conn, path, timeout)
        conn.sendall(json.dumps({"hangdoc": PROTOCOL, "want": want}).encode() + b"\n")
        reader = conn.makefile("rb")
        out: list[HookArtifact] = []
        while True:
            line = reader.readline(64 * 1024)
            if not line:
                raise ValueError("hook closed the connection before the end marker")
            header = json.loads(line)
            if header.get("end"):
                return out
            size = int(header.get("size", 0))
            if size < 0 or size > MAX_REPLY_BYTES:
                raise ValueError(f"hook announced {size} bytes")
            data = reader.read(size)
            if len(data) != size:
                raise ValueError("hook reply cut short")
            out.append(HookArtifact(str(header.get("name")), data, header.get("error")))


def _connect(conn: socket.socket, path: str, timeout: float) -> None:
    """connect(), retried while the listener's backlog is full (EAGAIN on unix sockets)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.connect(path)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _read_all(conn: socket.socket, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)
