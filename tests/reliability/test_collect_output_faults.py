"""Faults on the output side of ``collect``: a full disk, a file-size limit, and the
collector itself killed half-way. Each leaves a dump that ``load_paths`` reads, whose
manifest (the last one that fit) says it is partial and why; the target is untouched.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.collectors import output
from hangdoc.collectors.collect import CollectOptions, run_collect
from hangdoc.common import atomic
from hangdoc.errors import CollectionError
from tests.reliability.conftest import Spawn
from tests.reliability.stats import count
from tests.reliability.test_collect_faults import assert_undisturbed

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def small_tmpfs(path: Path, kib: int) -> Iterator[Path]:
    """A real file system of ``kib`` KiB (needs root and mount rights), unmounted after."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "hangdoc-test", str(path)],
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_really_full_disk(spawn: Spawn, tmp_path: Path) -> None:
    # GIVEN two ranks and an output file system with room for about one sample
    ranks = [spawn(0), spawn(1)]
    with small_tmpfs(tmp_path / "small", 300) as mount:
        # WHEN collected into it
        opts = CollectOptions(pids=tuple(r.pid for r in ranks), out=mount / "d", samples=4,
                              interval_s=0)  # fmt: skip
        with pytest.raises(CollectionError, match="partial: the output file system is full"):
            run_collect(opts)
        count("faults: injected", 1)
        # THEN the last manifest that fit says so, and the dump loads
        manifest = json.loads((mount / "d" / "manifest.json").read_text())
        assert manifest["complete"] is False
        assert any("file system is full" in w for w in manifest["warnings"])
        assert not (mount / "d" / output.RESERVE_NAME).exists()
        evidence = load_paths([mount / "d"])
        assert any("partial dump" in n for n in evidence.notes)
        assert any("file system is full" in n for n in evidence.notes)
        assert {p.rank for p in evidence.processes} == {0, 1}
    assert_undisturbed(*ranks)


def test_no_space_for_a_sample_file(
    spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a disk that fills up when the second sample's stacks are written
    real = atomic.write_bytes_atomic

    def fill_up(path: Path, data: bytes) -> None:
        if path.name == "pyspy.1.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data)

    monkeypatch.setattr(output, "write_bytes_atomic", fill_up)
    target = spawn(0)
    opts = CollectOptions(pids=(target.pid,), out=tmp_path / "d", samples=3, interval_s=0)
    with pytest.raises(CollectionError, match="partial"):
        run_collect(opts)
    count("faults: injected", 1)
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    pyspy_steps = [(s["sample"], s["status"]) for s in manifest["steps"] if s["step"] == "pyspy"]
    assert pyspy_steps == [(0, "ok"), (1, "failed"), (2, "skipped")]
    failed = next(s for s in manifest["steps"] if s["step"] == "pyspy" and s["sample"] == 1)
    assert "No space left" in (failed["reason"] or "") and not failed.get("file")
    evidence = load_paths([tmp_path / "d"])
    [proc] = evidence.processes
    assert len(proc.stack_samples) == 1
    assert not any("says it was written" in (i.error or "") for i in evidence.inputs)
    assert_undisturbed(target)


def _hangdoc(
    args: list[str], preexec_fn: Callable[[], None] | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "hangdoc", *args], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=preexec_fn,
    )  # fmt: skip


def test_a_file_size_limit_on_the_collector(spawn: Spawn, tmp_path: Path) -> None:
    # GIVEN `hangdoc collect` run under RLIMIT_FSIZE (writes past 3000 bytes fail: EFBIG)
    target = spawn(0)

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))

    dump = tmp_path / "d"
    child = _hangdoc(["collect", "--pid", str(target.pid), "--out", str(dump), "--samples", "3",
                      "--interval", "0"], preexec_fn=limit)  # fmt: skip
    _, err = child.communicate(timeout=120)
    count("faults: injected", 1)
    # THEN it says the dump is partial (exit 3, no traceback), and the dump loads
    assert child.returncode == 3, err.decode()
    assert b"partial" in err and b"Traceback" not in err
    evidence = load_paths([dump])
    assert any("partial dump" in n for n in evidence.notes)
    assert_undisturbed(target)


def _pyspy_running_on(pid: int) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv and argv[0].endswith(b"py-spy") and str(pid).encode() in argv:
                return True
    return False


def test_collect_killed_between_samples(spawn: Spawn, tmp_path: Path) -> None:
    # GIVEN a collection of 5 samples, 1 s apart
    target = spawn(0)
    dump = tmp_path / "d"
    child = _hangdoc(["collect", "--pid", str(target.pid), "--out", str(dump), "--samples", "5",
                      "--interval", "1"])  # fmt: skip
    # WHEN it is SIGKILLed once its manifest shows the second sample started
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError, ValueError):
            if len(json.loads((dump / "manifest.json").read_text())["samples"]) >= 2:
                break
        assert child.poll() is None and time.monotonic() < deadline, "collect never got there"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)  # our own child: the collector, not the target
    child.communicate(timeout=10)
    count("faults: injected", 1)
    # THEN the dump loads, says it is partial, and holds the samples taken
    evidence = load_paths([dump])
    assert any("partial dump" in n for n in evidence.notes)
    [proc] = evidence.processes
    assert proc.stack_samples, evidence.notes
    # AND once any py-spy it started has finished, the target runs on, untouched
    deadline = time.monotonic() + 30
    while _pyspy_running_on(target.pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert_undisturbed(target)
