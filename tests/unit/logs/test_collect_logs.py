# ruff: noqa: E501
"""The collect side: a live process's own log files, copied capped and redacted."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangdoc.collectors import logs as log_collector
from hangdoc.collectors.extras import EXTRA_COLLECTORS, ExtraContext, RankTarget


def test_expand_nccl_path() -> None:
    assert (
        log_collector.expand_nccl_path("/l/nccl.%h.%p.log", "node7.cluster.local", 42)
        == "/l/nccl.node7.42.log"
    )
    assert log_collector.expand_nccl_path("a%%b%x%", "h", 1) == "a%b%x%"


def test_read_capped_keeps_head_and_tail(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"".join(b"line %06d\n" % i for i in range(100000)))
    data, info = log_collector.read_capped(path, head=1000, tail=1000)
    assert info.truncated and info.size == path.stat().st_size
    assert data.startswith(b"line 000000\n") and data.endswith(b"line 099999\n")
    assert b"bytes of this log omitted" in data and len(data) < 2200


def test_collector_is_registered() -> None:
    assert ("logs", log_collector.collect_logs) in EXTRA_COLLECTORS


@pytest.fixture
def child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A 'rank' whose stdout is a file and stderr a pipe, working in tmp_path."""
    out = (tmp_path / "train.out").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; print('step 1 HF_TOKEN=hf_abcdefghijklmnopqrstuvwx', flush=True); time.sleep(60)",
        ],
        stdout=out,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    out.close()
    deadline = time.monotonic() + 10
    while (tmp_path / "train.out").stat().st_size == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc
    os.kill(proc.pid, signal.SIGKILL)  # the child this test started, by its pid
    proc.wait()


def test_collect_logs_of_a_live_rank(tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    host = socket.gethostname()
    nccl = tmp_path / f"nccl.{host.split('.')[0]}.{child.pid}.log"
    nccl.write_text(
        "h:1:2 [0] NCCL INFO comm 0x1 rank 3 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n"
    )
    error_file = tmp_path / "error.json"
    error_file.write_text(
        '{"message": "RuntimeError: login failed for hf_zyxwvutsrqponmlkjihgfedcba", "timestamp": 1}'
    )
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "dmesg.txt").write_text("NVRM: Xid (PCI:0000:cb:00): 79, GPU has fallen off the bus\n")
    dump = tmp_path / "dump"
    rank_dir = dump / "rank3"
    rank_dir.mkdir(parents=True)
    target = RankTarget(
        pid=child.pid, rank=3, local_rank=3, world_size=4, host=host,
        env={"NCCL_DEBUG_FILE": "nccl.%h.%p.log", "TORCHELASTIC_ERROR_FILE": str(error_file)},
    )  # fmt: skip
    ctx = ExtraContext(target, rank_dir, dump, timeout_s=10, extra_paths=(extra,))
    records = log_collector.collect_logs(ctx)
    by_step = {r["step"]: r for r in records}
    assert by_step["logs:nccl_debug_file"]["status"] == "ok"
    assert by_step["logs:stdout"]["status"] == "ok"
    assert by_step["logs:stderr"]["status"] == "skipped"  # a pipe: its past output is gone
    assert by_step["logs:error_file"]["status"] == "ok"
    assert by_step["logs:extra"]["status"] == "ok"
    copied = {p.name: p.read_text() for p in (rank_dir / "logs").iterdir()}
    stdout = next(v for k, v in copied.items() if k.startswith("stdout."))
    assert "step 1" in stdout and "hf_abcdefghijklmnopqrstuvwx" not in stdout
    assert "hf_zyxwvutsrqponmlkjihgfedcba" not in copied["error.json"]
    assert any(k.startswith("nccl.") for k in copied)
    assert (dump / "logs").is_dir() and len(list((dump / "logs").iterdir())) == 1
    for record in records:
        assert record["rank"] == 3 and record["pid"] == child.pid
    # A second rank does not copy the --log files again.
    again = log_collector.collect_logs(
        ExtraContext(target, dump / "rank4", dump, timeout_s=10, extra_paths=(extra,))
    )
    assert [r["status"] for r in again if r["step"] == "logs:extra"] == ["skipped"]


def test_collector_never_raises_for_a_vanished_process(tmp_path: Path) -> None:
    target = RankTarget(
        pid=2**22 + 12345,
        rank=0,
        local_rank=0,
        world_size=1,
        host="h",
        env={"NCCL_DEBUG_FILE": "/nope/%p"},
    )
    records = log_collector.collect_logs(
        ExtraContext(target, tmp_path / "r", tmp_path, timeout_s=5)
    )
    statuses = {r["step"]: r["status"] for r in records}
    assert statuses["logs:nccl_debug_file"] == "failed"
    assert statuses["logs:stdout"] == "failed"


def test_redaction_can_be_turned_off(tmp_path: Path) -> None:
    src = tmp_path / "a.log"
    src.write_text("token=abc123secret\n")
    target = RankTarget(pid=os.getpid(), rank=0, local_rank=0, world_size=1, host="h")
    ctx = ExtraContext(
        target, tmp_path / "r", tmp_path / "d", timeout_s=5, redact=False, extra_paths=(src,)
    )
    (tmp_path / "d").mkdir()
    log_collector.collect_logs(ctx)
    (copy,) = list((tmp_path / "d" / "logs").iterdir())
    assert "abc123secret" in copy.read_text()
