"""/proc readers on live, exited, zombie and reused-pid processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from hangdoc.collectors import procfs

if TYPE_CHECKING:
    from conftest import Spawn  # fixtures' types only; conftest is not importable at run time


def test_parse_stat_handles_parentheses_and_spaces_in_comm() -> None:
    fields = " ".join(["S", "42"] + ["0"] * 9 + ["7", "5"] + ["0"] * 6 + ["123456", "0"])
    st = procfs.parse_stat(f"1234 (pt (main) x) {fields}")
    assert st == procfs.Stat(
        pid=1234, comm="pt (main) x", state="S", ppid=42, cpu_ticks=12, start_ticks=123456
    )
    assert procfs.parse_stat("garbage") is None


def test_read_sample_of_a_live_rank(spawn: Spawn) -> None:
    target = spawn("worker", rank=0)
    sample = procfs.read_sample(target.pid, 3)
    assert sample["index"] == 3
    assert sample["alive"] is True
    assert sample["state"] == "S"  # blocked in Event.wait
    assert isinstance(sample["cpu_ticks"], int)
    main = next(t for t in sample["threads"] if t["tid"] == target.pid)
    assert main["state"] == "S"
    assert isinstance(main["voluntary_ctxt_switches"], int)
    assert isinstance(main["cpu_ticks"], int)
    assert set(sample["io"]) == set(procfs.IO_KEYS)
    # stderr goes to a regular file: its path and size are recorded; stdout is a pipe
    assert sample["output"] == {"stderr": {"path": str(target.stderr_path), "size": len("hello\n")}}
    assert abs(sample["time"] - time.time()) < 60


def test_read_sample_never_raises_for_a_gone_process() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    sample = procfs.read_sample(proc.pid, 0)
    assert sample["alive"] is False
    assert sample["threads"] == []
    assert sample.get("error") == "process exited"


def test_zombie_and_reused_pid_count_as_exited(spawn: Spawn) -> None:
    target = spawn("plain")
    static = procfs.read_static(target.pid)
    assert static is not None and static.start_ticks is not None
    # a pid now held by another process (other start time) is not our rank any more
    reused = procfs.read_sample(target.pid, 0, start_ticks=static.start_ticks + 1)
    assert reused["alive"] is False
    assert "another process" in (reused.get("error") or "")
    # killed but not yet reaped: a zombie
    os.kill(target.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (st := procfs.read_stat(target.pid)) is not None and st.state != "Z":
        assert time.monotonic() < deadline, "target did not become a zombie"
    zombie = procfs.read_sample(target.pid, 1, start_ticks=static.start_ticks)
    assert zombie["alive"] is False
    assert "zombie" in (zombie.get("error") or "")


def test_read_static_facts(spawn: Spawn) -> None:
    before = time.time()
    target = spawn("plain", rank=2)
    facts = procfs.read_static(target.pid)
    assert facts is not None
    assert facts.cmdline[0] == sys.executable
    assert facts.cmdline[2:4] == ["plain", "--hf-token"]
    assert facts.parent_pid == os.getpid()
    assert facts.start_time is not None and before - 2 <= facts.start_time <= time.time() + 2
    assert facts.environ["RANK"] == "2"
    assert facts.environ_error is None


def test_process_tree_helpers(spawn: Spawn) -> None:
    target = spawn("worker", rank=0)
    table = procfs.process_table()
    kids = procfs.children(table, target.pid)
    assert len(kids) == 1  # the forked dataloader-like worker
    assert procfs.descendants(table, target.pid) == kids
    assert procfs.python_descendants(table, target.pid) == kids
    assert procfs.python_descendants(table, target.pid, exclude=kids) == []
    assert procfs.ancestors(table, kids[0])[:2] == [target.pid, os.getpid()]
