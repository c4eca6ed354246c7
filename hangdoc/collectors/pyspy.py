"""Python stacks of a live process through ``py-spy dump --json``.

py-spy runs as its own process, bounded by a timeout. The target is paused only while
py-spy reads its memory (unless ``nonblocking``); if py-spy overruns, *py-spy* is killed
and the kernel detaches it, so the target resumes. The target itself is never signalled.

A failure becomes a :class:`PySpyResult` with a reason a person can act on (install
py-spy, grant ptrace...), never an exception.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hangdoc.collectors import procfs
from hangdoc.collectors.dumpformat import StepStatus

INSTALL_REMEDY = "install it next to hangdoc with `pip install py-spy`"
PTRACE_REMEDY = (
    "py-spy needs ptrace rights over the target: run hangdoc as root (sudo), or as the "
    "job's user with `sysctl kernel.yama.ptrace_scope=0`; in a container, start it with "
    "`--cap-add SYS_PTRACE`"
)
STDERR_TAIL_CHARS = 600
# A py-spy dump of a rank is kilobytes (megabytes with --locals); more is not py-spy.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
STDERR_KEEP_BYTES = 64 * 1024
VERSION_TIMEOUT_S = 5.0

# Substrings of py-spy's stderr (lowercased) that name a cause. Checked in this order.
_PTRACE_MARKERS = ("permission denied", "operation not permitted", "ptrace", "eperm")
_EXITED_MARKERS = ("no such process", "check that the process is running", "process exited")
_NOT_PYTHON_MARKERS = ("failed to find python version", "failed to find a python interpreter")


class Failure(enum.Enum):
    MISSING = "py-spy not found"
    PTRACE_DENIED = "ptrace denied"
    EXITED = "process exited"
    NOT_PYTHON = "not a Python process"
    TIMEOUT = "timeout"
    BAD_OUTPUT = "output is not JSON"
    OTHER = "py-spy failed"


@dataclass(frozen=True, slots=True)
class PySpyResult:
    """One py-spy run. ``duration_s`` bounds how long the target may have been paused."""

    output: bytes | None
    duration_s: float
    failure: Failure | None = None
    reason: str | None = None
    remedy: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def status(self) -> StepStatus:
        if self.failure is None:
            return "ok"
        if self.failure is Failure.TIMEOUT:
            return "timeout"
        if self.failure is Failure.EXITED:
            return "skipped"
        return "failed"


def find_pyspy() -> Path | None:
    """py-spy on PATH, else the one installed beside this interpreter (a venv's bin/)."""
    on_path = shutil.which("py-spy")
    if on_path:
        return Path(on_path)
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    return None


def pyspy_version(exe: Path) -> str | None:
    """``py-spy --version`` (e.g. "py-spy 0.4.3"), or ``None`` when it does not answer."""
    try:
        done = subprocess.run(
            [str(exe), "--version"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.decode("utf-8", "replace").strip()
    return text or None


def build_command(
    exe: Path, pid: int, *, native: bool, subprocesses: bool, nonblocking: bool
) -> list[str]:
    cmd = [str(exe), "dump", "--pid", str(pid), "--json"]
    if native:
        cmd.append("--native")
    if subprocesses:
        cmd.append("--subprocesses")
    if nonblocking:
        cmd.append("--nonblocking")
    return cmd


def dump_stacks(
    pid: int,
    *,
    exe: Path | None,
    native: bool = False,
    subprocesses: bool = True,
    nonblocking: bool = False,
    timeout_s: float = 20.0,
) -> PySpyResult:
    """Run ``py-spy dump --json`` on ``pid``; stdout bytes on success, a reason otherwise.

    Note: py-spy (0.4.x) ignores ``--subprocesses`` in JSON mode; the caller dumps a
    rank's subprocesses itself (see :func:`merge_dumps`). The flag is still passed so a
    py-spy that honours it needs no change here.
    """
    if exe is None:
        return PySpyResult(
            None,
            0.0,
            Failure.MISSING,
            "py-spy not found on PATH nor next to the Python interpreter",
            INSTALL_REMEDY,
        )
    cmd = build_command(exe, pid, native=native, subprocesses=subprocesses, nonblocking=nonblocking)
    env = {**os.environ, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own group: a Ctrl-C meant for hangdoc stays ours
        )
    except OSError as exc:
        return PySpyResult(
            None, 0.0, Failure.MISSING, f"cannot run {exe}: {exc.strerror or exc}", INSTALL_REMEDY
        )
    try:
        stdout, stderr = _communicate_capped(proc, timeout_s)
    except _OutputTooLarge:
        _kill_pyspy(proc)
        reason = f"py-spy printed more than {MAX_OUTPUT_BYTES >> 20} MiB and was stopped"
        return PySpyResult(None, time.monotonic() - started, Failure.BAD_OUTPUT, reason)
    except subprocess.TimeoutExpired:
        _kill_pyspy(proc)
        duration = time.monotonic() - started
        reason = f"py-spy did not answer within {timeout_s:g}s and was stopped"
        if _left_stopped(pid):
            reason += (
                f"; the target is still in a stopped state: check `ps -o stat -p {pid}` "
                f"and resume it with `kill -CONT {pid}` if it stays stopped"
            )
        return PySpyResult(None, duration, Failure.TIMEOUT, reason)
    except BaseException:
        _kill_pyspy(proc)  # interrupted (Ctrl-C): py-spy must not outlive us mid-attach
        raise
    duration = time.monotonic() - started
    if proc.returncode == 0:
        try:
            json.loads(stdout)
        except ValueError:
            tail = _tail(stdout.decode("utf-8", "replace"))
            return PySpyResult(None, duration, Failure.BAD_OUTPUT, f"py-spy printed: {tail}")
        return PySpyResult(stdout, duration)
    failure, reason = classify_failure(
        proc.returncode, stderr.decode("utf-8", "replace"), alive=procfs.is_alive(pid)
    )
    remedy = PTRACE_REMEDY if failure is Failure.PTRACE_DENIED else None
    return PySpyResult(None, duration, failure, reason, remedy)


class _OutputTooLarge(Exception):
    """py-spy's stdout passed MAX_OUTPUT_BYTES (a broken or impostor py-spy)."""


def _communicate_capped(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[bytes, bytes]:
    """``proc.communicate(timeout)`` that keeps at most MAX_OUTPUT_BYTES of stdout and the
    last STDERR_KEEP_BYTES of stderr: a py-spy that floods its pipe must not fill
    hangdoc's memory before the timeout stops it."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    out: list[bytes] = []
    err = bytearray()
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, "out")
        selector.register(proc.stderr, selectors.EVENT_READ, "err")
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.data == "out":
                    size += len(chunk)
                    if size > MAX_OUTPUT_BYTES:
                        raise _OutputTooLarge
                    out.append(chunk)
                else:
                    err += chunk
                    del err[:-STDERR_KEEP_BYTES]
    proc.wait(max(0.0, deadline - time.monotonic()))
    return b"".join(out), bytes(err)


def classify_failure(returncode: int, stderr: str, *, alive: bool) -> tuple[Failure, str]:
    """Turn py-spy's exit status and stderr into a cause and a one-line reason."""
    tail = _tail(stderr)
    lowered = stderr.lower()
    if not alive or any(m in lowered for m in _EXITED_MARKERS):
        return Failure.EXITED, "process exited"
    if any(m in lowered for m in _PTRACE_MARKERS):
        return Failure.PTRACE_DENIED, f"py-spy was denied access to the process: {tail}"
    if any(m in lowered for m in _NOT_PYTHON_MARKERS):
        return Failure.NOT_PYTHON, "not a Python process (py-spy found no interpreter in it)"
    return Failure.OTHER, f"py-spy exited with status {returncode}: {tail or '(no stderr)'}"


def merge_dumps(main: bytes, extra: list[bytes]) -> bytes:
    """One py-spy JSON array holding a rank's threads and its subprocesses' threads.

    Every py-spy thread record carries its ``pid``, so the merged array still says
    which process each thread belongs to. With nothing to add, ``main`` is returned
    byte for byte. Threads of a pid already present in ``main`` are not repeated.
    """
    if not extra:
        return main
    threads: list[object] = json.loads(main)
    seen = {t.get("pid") for t in threads if isinstance(t, dict)}
    for blob in extra:
        more = json.loads(blob)
        if isinstance(more, list):
            threads.extend(t for t in more if not (isinstance(t, dict) and t.get("pid") in seen))
    return (json.dumps(threads, indent=2) + "\n").encode("utf-8")


def dumped_pids(output: bytes) -> set[int]:
    """The pids whose threads a py-spy JSON dump holds."""
    with contextlib.suppress(ValueError):
        data = json.loads(output)
        if isinstance(data, list):
            return {t["pid"] for t in data if isinstance(t, dict) and isinstance(t.get("pid"), int)}
    return set()


def _kill_pyspy(proc: subprocess.Popen[bytes]) -> None:
    """Kill py-spy (its own process group, which holds py-spy only) and reap it.

    A killed tracer is detached by the kernel, so the target resumes on its own.
    """
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=5.0)


def _left_stopped(pid: int) -> bool:
    """Whether the target is in a stopped state ("T"/"t") after py-spy's death.

    Checked twice, 50 ms apart: the kernel may take a moment to resume the threads.
    """
    for attempt in range(2):
        st = procfs.read_stat(pid)
        if st is None or st.state not in ("T", "t"):
            return False
        if attempt == 0:
            time.sleep(0.05)
    return True


def _tail(text: str) -> str:
    """The end of py-spy's message, on one line, without Rust's backtrace."""
    text = text.split("Stack backtrace:", 1)[0]
    flat = " ".join(text.split())
    return flat[-STDERR_TAIL_CHARS:]
