"""The in-process hook, in real subprocesses (no torch needed): how it is turned on, what
it answers, and that a misbehaving client cannot take the process down."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hangdoc.collectors.flight_recorder import ask_hook
from hangdoc.hook import _PTH_LINE, socket_path

REPO = Path(__file__).resolve().parents[3]

JOB = """
import os, sys, threading, time
from pathlib import Path
{setup}
Path(sys.argv[1]).write_text(str(os.getpid()))
def stuck_in_main():
    threading.Event().wait()
stuck_in_main()
"""


Spawn = Callable[..., int]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(
        setup: str, *, env: dict[str, str] | None = None, argv: list[str] | None = None
    ) -> int:
        ready = tmp_path / f"ready{len(procs)}"
        script = tmp_path / f"job{len(procs)}.py"
        script.write_text(JOB.format(setup=setup))
        full_env = dict(
            os.environ, PYTHONPATH=str(REPO), HANGDOC_HOOK_DIR=str(tmp_path), **(env or {})
        )
        cmd = [sys.executable, *(argv or []), str(script), str(ready)]
        procs.append(subprocess.Popen(cmd, env=full_env, stderr=subprocess.PIPE))
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert procs[-1].poll() is None, procs[-1].stderr.read() if procs[-1].stderr else ""
            assert time.monotonic() < deadline, "job never became ready"
            time.sleep(0.02)
        pid = int(ready.read_text())
        path = socket_path(pid, str(tmp_path))
        while not os.path.exists(path):  # the hook binds before the marker is written
            assert time.monotonic() < deadline
            time.sleep(0.02)
        return pid

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def _ask(tmp_path: Path, pid: int, want: list[str]) -> dict[str, bytes]:
    return {a.name: a.data for a in ask_hook(socket_path(pid, str(tmp_path)), want, timeout=10)}


def test_install_line_answers_while_main_thread_is_blocked(spawn: Spawn, tmp_path: Path) -> None:
    pid = spawn("import hangdoc.hook; hangdoc.hook.install()")
    got = _ask(tmp_path, pid, ["info", "stacks", "fr", "cuda"])
    # no torch in this process: no FR, no CUDA, and no error either
    assert set(got) == {"info.json", "faulthandler.txt"}
    info = json.loads(got["info.json"])
    assert info["pid"] == pid and info["torch"] is None
    assert {t["name"] for t in info["threads"]} == {"MainThread", "hangdoc-hook"}
    assert "in stuck_in_main" in got["faulthandler.txt"].decode()
    mode = stat.S_IMODE(os.stat(socket_path(pid, str(tmp_path))).st_mode)
    assert mode == 0o600


def test_launcher_wrapper(spawn: Spawn, tmp_path: Path) -> None:
    pid = spawn("", argv=["-m", "hangdoc.hook"])
    info = json.loads(_ask(tmp_path, pid, ["info"])["info.json"])
    assert info["argv"][0].endswith(".py")
    # installing again from the script (through the real module) is a no-op
    assert "hangdoc-hook" in {t["name"] for t in info["threads"]}


def test_environment_variable_through_the_pth_line(spawn: Spawn, tmp_path: Path) -> None:
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "hangdoc-hook.pth").write_text(_PTH_LINE)
    setup = f"import site; site.addsitedir({str(site_dir)!r})"
    pid = spawn(setup, env={"HANGDOC_HOOK": "1"})
    assert "info.json" in _ask(tmp_path, pid, ["info"])


def test_pth_line_does_nothing_without_the_variable(tmp_path: Path) -> None:
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "hangdoc-hook.pth").write_text(_PTH_LINE)
    code = (
        f"import site, threading; site.addsitedir({str(site_dir)!r}); "
        "print(sorted(t.name for t in threading.enumerate()))"
    )
    env = {k: v for k, v in os.environ.items() if k != "HANGDOC_HOOK"}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.strip() == "['MainThread']"


def test_bad_clients_do_not_hurt_the_job(spawn: Spawn, tmp_path: Path) -> None:
    pid = spawn("import hangdoc.hook; hangdoc.hook.install()")
    path = socket_path(pid, str(tmp_path))
    for payload in (b"", b"not json\n", b'{"want": 7}\n', b"\xff" * 70000):
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(path)
            conn.sendall(payload)
    with socket.socket(socket.AF_UNIX) as conn:  # a client that hangs up mid-reply
        conn.connect(path)
        conn.sendall(b'{"want": ["stacks"]}\n')
    os.kill(pid, 0)  # still alive
    assert "faulthandler.txt" in _ask(tmp_path, pid, ["stacks"])


def test_forked_child_has_no_hook_and_leaves_the_socket(spawn: Spawn, tmp_path: Path) -> None:
    setup = (
        "import hangdoc.hook; hangdoc.hook.install()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    import hangdoc.hook as h; assert h._State.thread is None; os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    pid = spawn(setup)
    assert os.path.exists(socket_path(pid, str(tmp_path)))
    assert "info.json" in _ask(tmp_path, pid, ["info"])
