"""The cheap signals, read from real processes: what moves, what does not, how one ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hangdoc.collectors import procfs
from hangdoc.collectors.watch import signals
from tests.unit.watch.conftest import WRITER, Start, wait_for


def test_a_growing_file_is_movement_and_a_blocked_process_is_not(
    start: Start, tmp_path: Path
) -> None:
    # GIVEN a process that writes its log for 1.5 s, then blocks
    log = tmp_path / "train.log"
    proc = start(WRITER, str(log), "1.5")
    st = procfs.read_stat(proc.pid)
    assert st is not None
    follow = signals.written_files(proc.pid)
    assert str(log) in follow.values()
    # WHEN read while it writes THEN the file's growth is movement
    first = signals.read(proc.pid, st.start_ticks, follow)
    time.sleep(0.5)
    second = signals.read(proc.pid, st.start_ticks, follow)
    moved = signals.compare(first, second)
    assert any(r.startswith("train.log grew") for r in moved.reasons), moved
    # WHEN read after it blocked THEN nothing moved (whatever its threads' CPU did)
    wait_for(lambda: time.time() - log.stat().st_mtime > 0.5)
    third = signals.read(proc.pid, st.start_ticks, follow)
    time.sleep(0.5)
    fourth = signals.read(proc.pid, st.start_ticks, follow)
    assert signals.compare(third, fourth).reasons == ()
    assert fourth.alive and fourth.state == "S"


def test_a_reused_pid_or_a_gone_process_reads_as_not_alive() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert signals.read(gone.pid, None, {}).alive is False
    me = procfs.read_stat(os.getpid())
    assert me is not None
    assert signals.read(os.getpid(), me.start_ticks + 1, {}).alive is False


def test_an_unreaped_rank_says_how_it_ended() -> None:
    # GIVEN a child killed by SIGKILL that its parent (this test) has not reaped yet
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(child.pid, signal.SIGKILL)
    wait_for(lambda: getattr(procfs.read_stat(child.pid), "state", None) == "Z")
    reading = signals.read(child.pid, None, {})
    child.wait()
    # THEN the zombie's wait status says it was killed
    assert reading.alive is False
    assert signals.describe_exit(reading.exit_code) == "killed by signal 9 (SIGKILL)"


def test_exit_statuses_in_words() -> None:
    assert signals.describe_exit(1 << 8) == "exited with 1"
    assert signals.describe_exit(signal.SIGTERM) == "killed by signal 15 (SIGTERM)"
    assert signals.describe_exit(None).startswith("exited (status unknown")


def test_io_counters_are_movement_cpu_is_recorded_only() -> None:
    before = signals.Reading(True, "S", cpu_ticks=10, main_switches=5, io={"wchar": 100})
    spinning = signals.Reading(True, "R", cpu_ticks=510, main_switches=5, io={"wchar": 100})
    writing = signals.Reading(True, "S", cpu_ticks=11, main_switches=9, io={"wchar": 300})
    spin = signals.compare(before, spinning)
    assert not spin.moved and spin.cpu_ticks == 500  # a spinning hang is not progress
    assert signals.compare(before, writing).reasons == ("wchar +200 B",)
