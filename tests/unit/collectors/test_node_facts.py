"""collectors/node_facts.py on real processes (open files with offsets, subprocesses with
their states, a zombie) and on recorded /proc text; and the round trip through
process.json into ProcSample."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.hangdoc_json import proc_sample
from hangdoc.collectors import node_facts
from hangdoc.collectors.dumpformat import ProcSampleRecord

TARGET = textwrap.dedent(
    """
    import os, sys, threading
    out = open(sys.argv[1], "wb")
    out.write(b"x" * 12345)
    out.flush()
    zombie = os.fork()
    if zombie == 0:
        os._exit(0)
    sleeper = os.fork()
    if sleeper == 0:
        handle = open(sys.argv[1], "rb")
        print("ready", flush=True)
        threading.Event().wait()
    os.waitpid(sleeper, os.WNOHANG)
    sys.stdout.flush()
    threading.Event().wait()
    """
)


@pytest.fixture
def target(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    path = tmp_path / "model.pt"
    proc = subprocess.Popen(
        [sys.executable, "-c", TARGET, str(path)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"  # said by the forked sleeper
        yield proc, path
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _settled(pid: int) -> ProcSampleRecord:
    """A sample once the zombie has exited and the sleeper sleeps (forks take a moment);
    polled against a deadline, never a fixed sleep."""
    deadline = time.monotonic() + 10
    while True:
        sample = node_facts.read_sample(pid, 0)
        states = sorted(c["state"] or "" for c in sample.get("children", []))
        if states == ["S", "Z"] or time.monotonic() > deadline:
            return sample
        time.sleep(0.02)


def test_open_files_and_children_of_a_live_process(
    target: tuple[subprocess.Popen[bytes], Path],
) -> None:
    proc, path = target
    sample = _settled(proc.pid)
    files = {f["path"]: f for f in sample.get("files", [])}
    written = files[str(path)]
    assert written["mode"] == "w"
    assert written["pos"] == 12345
    assert written["size"] == 12345  # a local file system: the size is taken too
    assert written["mount"] and written["fstype"]
    children = sample.get("children", [])
    states = sorted(c["state"] or "" for c in children)
    assert states == ["S", "Z"]
    sleeper = next(c for c in children if c["state"] == "S")
    assert sleeper["ppid"] == proc.pid
    assert any(f["path"] == str(path) and f["mode"] == "r" for f in sleeper["files"])
    zombie = next(c for c in children if c["state"] == "Z")
    assert zombie["files"] == [] and zombie["wchan"] is None


def test_round_trip_through_process_json(target: tuple[subprocess.Popen[bytes], Path]) -> None:
    proc, path = target
    record = json.loads(json.dumps(_settled(proc.pid)))
    sample, _ = proc_sample(record, 0)
    assert sample is not None
    assert any(f.path == str(path) and f.pos == 12345 for f in sample.open_files)
    assert {c.state for c in sample.children} == {"S", "Z"}


def test_redaction_applies_to_paths(target: tuple[subprocess.Popen[bytes], Path]) -> None:
    proc, _path = target
    sample = node_facts.read_sample(proc.pid, 0, redact=lambda text: text.replace("model", "M"))
    assert any(f["path"].endswith("M.pt") for f in sample.get("files", []))


def test_gone_process_has_no_facts() -> None:
    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert done.returncode == 0
    sample = node_facts.read_sample(2**22 + 7, 0)
    assert sample["alive"] is False
    assert "files" not in sample and "children" not in sample


def test_mountinfo_and_fdinfo_parsing() -> None:
    text = (
        "36 35 98:0 /mnt1 /mnt/my\\040ckpt rw,noatime master:1 - ext4 /dev/root rw\n"
        "40 35 0:52 / /mnt/nfs rw,relatime shared:7 - nfs4 srv:/export rw,vers=4.2\n"
        "garbage line\n"
    )
    assert node_facts.parse_mountinfo(text) == {
        36: ("/mnt/my ckpt", "ext4"),
        40: ("/mnt/nfs", "nfs4"),
    }
    assert node_facts.parse_fdinfo("pos:\t580000\nflags:\t02100001\nmnt_id:\t42\n") == {
        "pos": 580000,
        "flags": 0o2100001,
        "mnt_id": 42,
    }


@pytest.mark.parametrize(
    ("fstype", "blocks"),
    [("nfs4", True), ("fuse.gcsfuse", True), ("lustre", True), ("ext4", False),
     ("xfs", False), ("fuseblk", False), (None, True)],
)  # fmt: skip
def test_which_file_systems_may_block_a_stat(fstype: str | None, blocks: bool) -> None:
    assert node_facts.may_block(fstype) is blocks


def test_d_state_detection_on_a_record() -> None:
    base = node_facts.read_sample(os.getpid(), 0)
    assert node_facts.uninterruptible_in(base) is False
    base["threads"][0]["state"] = "D"
    assert node_facts.uninterruptible_in(base) is True
