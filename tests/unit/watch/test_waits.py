"""What a blocked thread waits on, read from /proc of real blocked processes."""

from __future__ import annotations

import os
import platform
import socket

import pytest

from hangdoc.collectors.waits import _address, blocked_call
from tests.unit.watch.conftest import Start, wait_for

pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "aarch64"), reason="system call numbers of x86_64/aarch64"
)

SENDER = """
import socket, sys
conn = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("ready", flush=True)
conn.sendall(bytes(64 << 20))
"""
READER = """
import os
r, w = os.pipe()
print("ready", flush=True)
os.read(r, 1)
"""


def _call(pid: int) -> tuple[str, str] | None:
    return blocked_call(pid, pid)


def test_a_thread_blocked_sending_to_a_server_that_never_reads(start: Start) -> None:
    if os.geteuid() != 0:
        pytest.skip("/proc/PID/syscall of another process needs ptrace rights")
    with socket.create_server(("127.0.0.1", 0), backlog=1) as server:  # never accepts
        port = server.getsockname()[1]
        proc = start(SENDER, str(port))
        wait_for(lambda: _call(proc.pid) is not None)
        call, target = _call(proc.pid) or ("", "")
    assert call in ("sendto", "write", "sendmsg")
    assert target.startswith("socket tcp 127.0.0.1:") and f"-> 127.0.0.1:{port} " in target


def test_a_thread_blocked_reading_a_pipe(start: Start) -> None:
    if os.geteuid() != 0:
        pytest.skip("/proc/PID/syscall of another process needs ptrace rights")
    proc = start(READER)
    wait_for(lambda: _call(proc.pid) is not None)
    assert _call(proc.pid) == ("read", "pipe")


def test_proc_net_tcp_addresses() -> None:
    # /proc/net/tcp: the address as the kernel stores it (network order, read as a
    # little-endian word), the port in hex (proc(5))
    assert _address("0100007F:A8C1", v6=False) == "127.0.0.1:43201"
    assert _address("0000000000000000FFFF00000100007F:0050", v6=True) == "127.0.0.1:80"
    assert _address("00000000000000000000000001000000:01BB", v6=True) == (
        "[0000:0000:0000:0000:0000:0000:0000:0001]:443"
    )
