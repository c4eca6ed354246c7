"""hangdoc's opt-in in-process hook: lets ``hangdoc collect`` ask a live rank for its
flight recorder, all-thread Python stacks and CUDA memory summary.

Three ways to turn it on, pick the one that fits how the job starts:

* one line in the training script, anywhere before the job can hang::

      import hangdoc.hook; hangdoc.hook.install()

* a launcher wrapper, no code change (works under torchrun too)::

      python -m hangdoc.hook train.py --epochs 3
      torchrun --nproc-per-node 8 -m hangdoc.hook train.py --epochs 3

* an environment variable, for jobs whose command line you cannot touch: run
  ``python -m hangdoc.hook --install-pth`` once in the job's Python environment (it
  writes a one-line ``hangdoc-hook.pth`` into site-packages), then start the job with
  ``HANGDOC_HOOK=1``. Without the variable the .pth line does nothing.

What it costs: one daemon thread blocked in ``accept()`` on a unix socket (no CPU,
no GIL held while idle). The socket is ``$HANGDOC_HOOK_DIR/hangdoc-hook-<pid>.sock``
(default directory ``/tmp``), mode 0600, so only the job's user and root can ask.

Why a thread in the process: torch's collectives release the GIL while they wait, so
the thread runs while the main thread is blocked inside ``all_reduce``; torch's FR
dump functions are plain C++ calls that can be made from any thread. Nothing here can
take the job down: every step is guarded, torch is imported only if the job already
imported it, and a failing step becomes an error line in the reply.

Wire protocol (``hangdoc.hook/1``): the client sends one JSON line
``{"hangdoc": "hook/1", "want": ["fr", "stacks", "cuda", "info"]}``; the hook answers
with, per artifact, a JSON header line ``{"name", "size", "error", "seconds"}`` and
``size`` raw bytes, and finally ``{"end": true}``.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

PROTOCOL = "hook/1"
ENV_ENABLE = "HANGDOC_HOOK"
ENV_DIR = "HANGDOC_HOOK_DIR"
SOCKET_NAME = "hangdoc-hook-{pid}.sock"
ARTIFACTS = ("fr", "stacks", "cuda", "info", "fr_pickle")
DEFAULT_WANT = ("fr", "stacks", "cuda", "info")  # fr_pickle (with call stacks) on request
_REQUEST_LIMIT = 64 * 1024
_REQUEST_TIMEOUT_S = 10.0
_SEND_TIMEOUT_S = 60.0
_PTH_NAME = "hangdoc-hook.pth"
_PTH_LINE = "import hangdoc.hook; hangdoc.hook.autostart()\n"


def socket_path(pid: int | None = None, directory: str | None = None) -> str:
    """Where the hook of process ``pid`` listens (as that process sees its filesystem)."""
    base = directory or os.environ.get(ENV_DIR) or "/tmp"
    return os.path.join(base, SOCKET_NAME.format(pid=os.getpid() if pid is None else pid))


class _State:
    thread: threading.Thread | None = None
    path: str | None = None
    sock: socket.socket | None = None
    lock = threading.Lock()


def install(directory: str | None = None) -> bool:
    """Start the hook thread (idempotent). Returns whether it is listening; never raises."""
    try:
        with _State.lock:
            if _State.thread is not None and _State.thread.is_alive():
                return True
            path = socket_path(directory=directory)
            server = _listen(path)
            _State.sock, _State.path = server, path
            thread = threading.Thread(
                target=_serve_forever, args=(server,), name="hangdoc-hook", daemon=True
            )
            thread.start()
            _State.thread = thread
        atexit.register(_cleanup)
        return True
    except Exception as exc:  # never take the job down
        _warn(f"hangdoc hook not started: {type(exc).__name__}: {exc}")
        return False


def autostart() -> None:
    """Called by the .pth line at interpreter start: install only when HANGDOC_HOOK is set."""
    if os.environ.get(ENV_ENABLE, "").strip().lower() in ("1", "true", "yes", "on"):
        install()


def _listen(path: str) -> socket.socket:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):  # left by an earlier process that had our pid
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        server.bind(path)
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    server.listen(16)
    return server


def _cleanup() -> None:
    path = _State.path
    if path and os.path.exists(path):
        with contextlib.suppress(OSError):
            os.unlink(path)


def _after_fork_in_child() -> None:
    # A forked child (DataLoader worker) has no hook thread; it must not answer for
    # the parent nor remove the parent's socket at exit.
    _State.thread, _State.sock, _State.path = None, None, None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _serve_forever(server: socket.socket) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return  # socket closed at exit
        except Exception:
            continue
        try:
            with conn:
                _handle(conn)
        except Exception:
            pass  # a broken client must not stop the hook


def _handle(conn: socket.socket) -> None:
    conn.settimeout(_REQUEST_TIMEOUT_S)
    data = b""
    while b"\n" not in data and len(data) < _REQUEST_LIMIT:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    try:
        request = json.loads(data.split(b"\n", 1)[0] or b"{}")
    except ValueError:
        request = {}
    want = request.get("want") if isinstance(request, dict) else None
    wanted = [w for w in want if w in ARTIFACTS] if isinstance(want, list) else list(DEFAULT_WANT)
    conn.settimeout(_SEND_TIMEOUT_S)  # a client that stops reading cannot hold the hook
    for name, payload, error, seconds in _artifacts(wanted):
        header = {"name": name, "size": len(payload), "error": error, "seconds": seconds}
        conn.sendall(json.dumps(header).encode() + b"\n" + payload)
    conn.sendall(b'{"end": true}\n')


def _artifacts(wanted: list[str]) -> Iterator[tuple[str, bytes, str | None, float]]:
    producers: list[tuple[str, str, Callable[[], bytes | None]]] = [
        ("info", "info.json", _info),
        ("stacks", "faulthandler.txt", _stacks),
        ("fr", "fr_trace.json", lambda: _fr_dump("_dump_fr_trace_json")),
        ("fr", "fr_trace_nccl.json", lambda: _fr_dump("_dump_nccl_trace_json")),
        ("cuda", "cuda_memory.txt", _cuda_memory),
        ("fr_pickle", "fr_trace.pkl", _fr_pickle),
    ]
    for key, name, produce in producers:
        if key not in wanted:
            continue
        start = time.monotonic()
        try:
            payload = produce()
            if payload is None:
                continue  # not applicable here (no torch, no NCCL, no CUDA)
            error = None
        except Exception as exc:
            payload, error = b"", f"{type(exc).__name__}: {exc}"
        yield name, payload, error, round(time.monotonic() - start, 4)


def _torch() -> object | None:
    """torch as the job loaded it; None when the job never imported torch."""
    return sys.modules.get("torch")


def _fr_dump(function: str) -> bytes | None:
    torch = _torch()
    if torch is None:
        return None
    try:
        c10d = torch._C._distributed_c10d  # type: ignore[attr-defined]
    except AttributeError:
        return None
    dump = getattr(c10d, function, None)
    if dump is None:
        return None
    out = dump(True, False)  # includeCollectives, onlyActive
    return out if isinstance(out, bytes) else str(out).encode()


def _fr_pickle() -> bytes | None:
    torch = _torch()
    dump = getattr(
        getattr(getattr(torch, "_C", None), "_distributed_c10d", None), "_dump_fr_trace", None
    )
    if dump is None:
        return None
    out = dump(True, True, False)  # includeCollectives, includeStackTraces, onlyActive
    return out if isinstance(out, bytes) else None


def _stacks() -> bytes:
    with tempfile.TemporaryFile() as handle:
        faulthandler.dump_traceback(handle, all_threads=True)
        handle.seek(0)
        return handle.read()


def _cuda_memory() -> bytes | None:
    torch = _torch()
    if torch is None:
        return None
    cuda = getattr(torch, "cuda", None)
    # Never initialise CUDA from here: a context on a new device costs GPU memory.
    if cuda is None or not cuda.is_available() or not cuda.is_initialized():
        return None
    text: str = cuda.memory_summary(device=cuda.current_device(), abbreviated=False)
    return text.encode()


def _info() -> bytes:
    threads = [
        {"ident": t.ident, "native_id": t.native_id, "name": t.name, "daemon": t.daemon}
        for t in threading.enumerate()
    ]
    torch = _torch()
    info = {
        "pid": os.getpid(),
        "argv": sys.argv,
        "python": sys.version.split()[0],
        "torch": getattr(torch, "__version__", None) if torch is not None else None,
        "threads": threads,
        "main_thread_ident": threading.main_thread().ident,
        "time": time.time(),
    }
    return json.dumps(info, default=str).encode()


def _warn(message: str) -> None:
    with contextlib.suppress(Exception):
        sys.stderr.write(f"[hangdoc] {message}\n")


def _pth_path() -> str:
    import sysconfig

    return os.path.join(sysconfig.get_paths()["purelib"], _PTH_NAME)


def _run_target(args: list[str]) -> int:
    import runpy

    if not args:
        sys.stderr.write(
            "usage: python -m hangdoc.hook [--install-pth | --uninstall-pth] "
            "(SCRIPT | -m MODULE) [ARGS...]\n"
        )
        return 2
    if args[0] == "--install-pth":
        with open(_pth_path(), "w") as handle:
            handle.write(_PTH_LINE)
        print(f"wrote {_pth_path()}; start jobs with {ENV_ENABLE}=1 to enable the hook")
        return 0
    if args[0] == "--uninstall-pth":
        if os.path.exists(_pth_path()):
            os.unlink(_pth_path())
        return 0
    install()
    if args[0] == "-m" and len(args) >= 2:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    # Run through the importable module, not this __main__ copy, so that a script that
    # also calls hangdoc.hook.install() finds the hook already running.
    from hangdoc import hook as _hook

    raise SystemExit(_hook._run_target(sys.argv[1:]))
