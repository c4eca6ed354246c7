"""What a blocked thread waits on and who is at the other end, read from /proc of real
blocked processes (collectors/waits.py, wait_peers.py, syscalls.py): a file lock and its
holder, a pipe and its other end, a child waited for, poll on a child's pipes, a futex
two threads share; and the two /proc formats read, from their documentation."""

from __future__ import annotations

import contextlib
import os
import platform
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hangdoc.collectors import node_facts, waits
from hangdoc.collectors.dumpformat import ThreadRecord, WaitRecord
from hangdoc.collectors.syscalls import parse_syscall
from hangdoc.collectors.wait_peers import Scope, parse_locks

Start = Callable[..., subprocess.Popen[bytes]]
_LIVE = pytest.mark.skipif(
    os.geteuid() != 0 or platform.machine() not in ("x86_64", "aarch64"),
    reason="/proc/PID/syscall of another process needs ptrace rights (root), x86_64/aarch64",
)

HOLDER = """
import fcntl, sys, threading
handle = open(sys.argv[1], "a")
(fcntl.lockf if sys.argv[2] == "posix" else fcntl.flock)(handle, fcntl.LOCK_EX)
print("ready", flush=True)
threading.Event().wait()
"""
WAITER = """
import fcntl, sys
handle = open(sys.argv[1], "a")
print("ready", flush=True)
(fcntl.lockf if sys.argv[2] == "posix" else fcntl.flock)(handle, fcntl.LOCK_EX)
"""
# The parent writes a request it never flushes and reads the answer; the child reads the
# request first: each waits on the other's pipe.
PIPE_CYCLE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import sys; print('up', flush=True); "
                          "sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
child.stdout.readline()
child.stdin.write(b"request\\n")
print("ready", child.pid, flush=True)
child.stdout.readline()
"""
WAIT_CHILD = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"])
print("ready", child.pid, flush=True)
child.wait()
"""
COMMUNICATE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
print("ready", child.pid, flush=True)
child.communicate()
"""
# A request over a unix socket to a helper that never answers (it holds the socket and
# sleeps), as a local sidecar or daemon that stopped.
UNIX_SERVER = """
import socket, sys, threading
path = sys.argv[1]
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen()
print("ready", flush=True)
conn, _ = server.accept()
threading.Event().wait()
"""
UNIX_CLIENT = """
import socket, sys
client = socket.socket(socket.AF_UNIX)
client.connect(sys.argv[1])
print("ready", flush=True)
client.recv(1)
"""
# A named FIFO: a reader that waits for a line, and a writer that opened it and sleeps
# (read-write, which Linux allows on a FIFO without waiting for a reader).
FIFO_WRITER = """
import os, sys, threading
out = os.open(sys.argv[1], os.O_RDWR)
print("ready", flush=True)
threading.Event().wait()
"""
FIFO_READER = """
import sys
source = open(sys.argv[1])
print("ready", flush=True)
source.readline()
"""
# A prompt on a terminal nobody types on: stdin is a pseudo-terminal's slave end, its
# master held open and never written (an interactive login, input()). Beside it, the same
# read on a pipe, which is no terminal.
PROMPT = """
import os, sys
controller, terminal = os.openpty()
os.dup2(terminal if sys.argv[1] == "tty" else os.pipe()[0], 0)
print("ready", flush=True)
os.read(0, 1)
"""
TWO_ON_A_LOCK = """
import threading
lock = threading.Lock()
lock.acquire()
threading.Thread(target=lock.acquire, name="second", daemon=True).start()
print("ready", flush=True)
lock.acquire()
"""


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """Run a program in its own session; its process group is killed at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def run(program: str, *args: str) -> subprocess.Popen[bytes]:
        script = tmp_path / f"program{len(started)}.py"
        script.write_text(textwrap.dedent(program))
        proc = subprocess.Popen(
            [sys.executable, str(script), *args], stdout=subprocess.PIPE, start_new_session=True
        )
        started.append(proc)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready and proc.stdout.readline().startswith(b"ready")
        return proc

    yield run
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # our own child's group only
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _main_wait(pid: int, predicate: Callable[[WaitRecord], bool]) -> WaitRecord:
    """The main thread's wait once ``predicate`` holds (the program is past "ready")."""
    deadline = time.monotonic() + 20
    while True:
        sample = node_facts.read_sample(pid, 0)
        main = next((t for t in sample["threads"] if t["tid"] == pid), None)
        wait = main.get("wait") if main is not None else None
        if wait is not None and predicate(wait):
            return wait
        assert time.monotonic() < deadline, f"never seen: {wait}"
        time.sleep(0.05)


@_LIVE
@pytest.mark.parametrize(("style", "label"), [("flock", "FLOCK WRITE"), ("posix", "POSIX WRITE")])
def test_a_lock_wait_names_the_holder(start: Start, tmp_path: Path, style: str, label: str) -> None:
    # GIVEN a process holding a lock on a file and another blocked taking it
    lock = tmp_path / "cache.lock"
    holder = start(HOLDER, str(lock), style)
    waiter = start(WAITER, str(lock), style)
    # WHEN the waiter's threads are read
    wait = _main_wait(waiter.pid, lambda w: w["kind"] == "lock_file" and "peers" in w)
    # THEN it is in flock (or fcntl, for lockf) on that file, held by the holder
    assert wait["syscall"] == ("flock" if style == "flock" else "fcntl")
    assert wait.get("target") == str(lock)
    [peer] = wait["peers"]
    assert (peer["pid"], peer["role"], peer.get("lock")) == (holder.pid, "holder", label)
    assert peer["cmdline"] is not None and str(lock) in peer["cmdline"]
    assert peer["ancestors"][0] == os.getpid() and peer["start_time"] is not None


@_LIVE
def test_a_pipe_read_names_the_child_at_the_other_end_and_what_it_waits_on(
    start: Start,
) -> None:
    proc = start(PIPE_CYCLE)

    def settled(wait: WaitRecord) -> bool:  # the child sleeps in its read too
        peers = wait.get("peers", [])
        return wait["kind"] == "pipe" and bool(peers) and "wait" in peers[0]

    wait = _main_wait(proc.pid, settled)
    assert wait["syscall"] == "read" and wait.get("target", "").startswith("pipe:[")
    [child] = wait["peers"]
    assert child["role"] == "other_end" and child["ppid"] == proc.pid
    # The child in turn reads its stdin, whose other end the parent holds: a cycle.
    back = child.get("wait")
    assert back is not None and back["kind"] == "pipe" and back["syscall"] == "read"
    assert [p["pid"] for p in back.get("peers", [])] == [proc.pid]


@_LIVE
def test_a_wait4_names_the_child(start: Start) -> None:
    proc = start(WAIT_CHILD)

    def settled(wait: WaitRecord) -> bool:  # the child started and sleeps
        peers = wait.get("peers", [])
        return wait["kind"] == "child" and bool(peers) and "wait" in peers[0]

    wait = _main_wait(proc.pid, settled)
    [child] = wait["peers"]
    assert wait["syscall"] in ("wait4", "waitid") and child["role"] == "child"
    assert child["ppid"] == proc.pid and child["state"] == "S"
    assert child.get("wait", {}).get("kind") == "futex"


@_LIVE
def test_communicate_polls_the_childs_pipes(start: Start) -> None:
    proc = start(COMMUNICATE)
    wait = _main_wait(proc.pid, lambda w: w["syscall"] in ("poll", "ppoll") and "peers" in w)
    assert wait["kind"] == "pipe" and len(wait.get("fds", [])) == 2
    assert all(t.startswith("pipe:[") for t in wait.get("targets", []))
    assert [p["role"] for p in wait["peers"]] == ["other_end"]


@_LIVE
def test_a_unix_socket_names_the_process_at_its_other_end(start: Start, tmp_path: Path) -> None:
    path = tmp_path / "helper.sock"
    server = start(UNIX_SERVER, str(path))
    client = start(UNIX_CLIENT, str(path))
    wait = _main_wait(client.pid, lambda w: w["kind"] == "socket" and "peers" in w)
    assert wait["syscall"] in ("recvfrom", "read", "recvmsg")
    assert wait.get("target") == "socket unix"  # the client's end has no name of its own
    [peer] = wait["peers"]
    assert (peer["pid"], peer["role"]) == (server.pid, "peer")


@_LIVE
def test_a_named_fifo_is_a_pipe_with_the_writer_at_its_other_end(
    start: Start, tmp_path: Path
) -> None:
    fifo = tmp_path / "requests.fifo"
    os.mkfifo(fifo)
    writer = start(FIFO_WRITER, str(fifo))
    reader = start(FIFO_READER, str(fifo))
    wait = _main_wait(reader.pid, lambda w: w["kind"] == "pipe" and "peers" in w)
    assert (wait["syscall"], wait.get("target")) == ("read", str(fifo))
    [peer] = wait["peers"]
    assert (peer["pid"], peer["role"]) == (writer.pid, "other_end")


@_LIVE
def test_threads_waiting_on_one_futex_name_each_other(start: Start) -> None:
    proc = start(TWO_ON_A_LOCK)
    wait = _main_wait(proc.pid, lambda w: w["kind"] == "futex" and "sharers" in w)
    sample = node_facts.read_sample(proc.pid, 0)
    [second] = [t["tid"] for t in sample["threads"] if t["tid"] != proc.pid]
    assert wait["sharers"] == [second]


@_LIVE
def test_past_its_deadline_a_wait_is_recorded_without_its_peers(start: Start) -> None:
    proc = start(PIPE_CYCLE)
    _main_wait(proc.pid, lambda w: w["kind"] == "pipe")
    threads: list[ThreadRecord] = [
        {"tid": proc.pid, "name": "python", "state": "S", "wchan": None, "cpu_ticks": 0,
         "voluntary_ctxt_switches": None, "nonvoluntary_ctxt_switches": None}
    ]  # fmt: skip
    waits.read_waits(proc.pid, threads, Scope(proc.pid, (), deadline=0.0))
    wait = threads[0].get("wait")
    # No search for the pipe's other end once the sample's time is spent.
    assert wait is not None and wait["kind"] == "pipe" and "peers" not in wait


@_LIVE
def test_a_holders_command_line_is_redacted_like_the_ranks(start: Start, tmp_path: Path) -> None:
    lock = tmp_path / "cache.lock"
    token = "hf_" + "Zq8rT2" * 6  # shaped like an HF token, valid nowhere
    holder_py = tmp_path / "holder.py"
    holder_py.write_text(textwrap.dedent(HOLDER).replace("sys.argv[2]", "'flock'"))
    holder = subprocess.Popen(
        [sys.executable, str(holder_py), str(lock), "--hf-token", token],
        stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().startswith(b"ready")
        waiter = start(WAITER, str(lock), "flock")
        _main_wait(waiter.pid, lambda w: "peers" in w)
        sample = node_facts.read_sample(waiter.pid, 0, redact=lambda text: text)
        main = next(t for t in sample["threads"] if t["tid"] == waiter.pid)
        [peer] = main.get("wait", {}).get("peers", [])
        assert peer["cmdline"] is not None and token not in " ".join(peer["cmdline"])
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # our own child's group only
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()


def test_proc_locks_lines_are_read_as_proc5_documents_them() -> None:
    # proc(5), /proc/locks: ordinal, "->" for a blocked waiter listed under the lock that
    # blocks it, type, mode, access, pid (-1 for an open file description lock),
    # MAJOR:MINOR:INODE (device in hex), start, end.
    text = (
        "1: POSIX  ADVISORY  WRITE 472 03:07:133880 0 EOF\n"
        "2: FLOCK  ADVISORY  WRITE 467 08:02:1548 0 EOF\n"
        "2: -> FLOCK  ADVISORY  WRITE 488 08:02:1548 0 EOF\n"
        "3: OFDLCK ADVISORY  READ  -1 00:06:1028 0 EOF\n"
        "not a lock line\n"
    )
    lines = parse_locks(text)
    assert [(x.ordinal, x.blocked, x.label, x.pid) for x in lines] == [
        (1, False, "POSIX WRITE", 472),
        (2, False, "FLOCK WRITE", 467),
        (2, True, "FLOCK WRITE", 488),
        (3, False, "OFDLCK READ", -1),
    ]
    assert lines[1].device == (8, 2) and lines[1].inode == 1548


def test_the_syscall_file_is_read_per_architecture() -> None:
    # proc(5), /proc/PID/syscall: the number and six arguments in hex, then the stack and
    # instruction pointers; "-1 SP PC" asleep outside a call; "running".
    flock = parse_syscall("73 0x3 0x2 0x0 0x7f10 0x0 0x0 0x7ffe 0x7f10", "x86_64")
    assert flock is not None and (flock.name, flock.arg(0), flock.arg(1)) == ("flock", 3, 2)
    wait4 = parse_syscall("260 0xffffffffffffffff 0x0 0x0 0x0 0x0 0x0 0x1 0x2", "aarch64")
    assert wait4 is not None and wait4.name == "wait4" and wait4.arg(0, signed=True) == -1
    assert parse_syscall("-1 0x7ffe 0x7f10", "x86_64") is None
    assert parse_syscall("running", "x86_64") is None
    unknown = parse_syscall("999 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2", "x86_64")
    assert unknown is not None and unknown.name == "syscall 999"
    assert parse_syscall("0 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2", "riscv64") is None


@_LIVE
def test_a_read_of_a_terminal_is_a_terminal_wait_and_a_pipe_is_not(start: Start) -> None:
    # GIVEN two processes blocked reading fd 0: a pseudo-terminal, and a pipe
    tty, pipe = start(PROMPT, "tty"), start(PROMPT, "pipe")
    # THEN the terminal is told by its device (a character device of a tty major), the
    # pipe stays a pipe
    on_tty = _main_wait(tty.pid, lambda w: w["syscall"] == "read")
    assert on_tty["kind"] == "terminal" and on_tty.get("target", "").startswith("/dev/pts/")
    assert _main_wait(pipe.pid, lambda w: w["syscall"] == "read")["kind"] == "pipe"


def test_only_terminal_devices_are_terminals(tmp_path: Path) -> None:
    # GIVEN this process's own descriptors: a pty slave, a regular file, /dev/null
    controller, terminal = os.openpty()
    regular = os.open(tmp_path / "f", os.O_CREAT | os.O_RDONLY)
    null = os.open("/dev/null", os.O_RDONLY)
    try:
        pid = os.getpid()
        # THEN only the pty is a terminal (/dev/null is a character device too: major 1)
        assert waits._is_terminal(pid, terminal)
        assert not waits._is_terminal(pid, regular) and not waits._is_terminal(pid, null)
    finally:
        for fd in (controller, terminal, regular, null):
            os.close(fd)
