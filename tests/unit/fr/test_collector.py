"""The FR collector's sources, in order: files the job wrote, torch's worker server, the
hook; each outcome recorded, nothing raised."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hangdoc.collectors.dumpformat import StepRecord
from hangdoc.collectors.extras import EXTRA_COLLECTORS, ExtraContext, RankTarget
from hangdoc.collectors.flight_recorder import (
    HookArtifact,
    _fold_stacks,
    collect_flight_recorder,
    dump_prefixes,
    matches_rank,
)

FR_JSON = b'{"version": "2.10", "pg_config": {}, "entries": []}'


def _ctx(tmp_path: Path, env: dict[str, str], rank: int = 3) -> ExtraContext:
    target = RankTarget(
        pid=os.getpid(), rank=rank, local_rank=rank, world_size=8, host="h", env=env
    )
    rank_dir = tmp_path / "dump" / f"rank{rank}"
    rank_dir.mkdir(parents=True)
    return ExtraContext(target=target, rank_dir=rank_dir, dump_dir=tmp_path / "dump", timeout_s=5)


def _steps(records: list[StepRecord]) -> list[tuple[str, str]]:
    return [(r["step"], r["status"]) for r in records]


def test_registered_as_an_extra_collector() -> None:
    assert "flight_recorder" in [name for name, _ in EXTRA_COLLECTORS]


def test_dump_prefixes_follow_torch() -> None:
    assert dump_prefixes({"TORCH_FR_DUMP_TEMP_FILE": "/x/fr_", "HOME": "/h"})[:2] == [
        "/x/fr_",
        "/h/.cache/torch/comm_lib_trace_rank_",
    ]
    assert dump_prefixes({"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/y/t_"})[0] == "/y/t_"
    assert dump_prefixes({"XDG_CACHE_HOME": "/c"})[0] == "/c/torch/comm_lib_trace_rank_"
    assert dump_prefixes({})[0] == "/tmp/.cache/torch/comm_lib_trace_rank_"
    assert "/tmp/nccl_trace_rank_" in dump_prefixes({})


@pytest.mark.parametrize(
    ("name", "rank", "ok"),
    [
        ("trace_3", 3, True),
        ("trace_13", 3, False),
        ("trace_node02_3", 3, True),
        ("trace_container-node02_13", 13, True),
        ("trace_3.json", 3, True),
        ("trace_30", 3, False),
        ("other_3", 3, False),
    ],
)
def test_matches_rank(name: str, rank: int, ok: bool) -> None:
    assert matches_rank(name, "trace_", rank) is ok


def test_fresh_file_is_copied_and_stale_one_skipped(tmp_path: Path) -> None:
    prefix = tmp_path / "job" / "trace_"
    prefix.parent.mkdir()
    fresh = Path(f"{prefix}3")
    fresh.write_bytes(FR_JSON)
    stale = Path(f"{prefix}old-host_3")
    stale.write_bytes(b"{}")
    os.utime(stale, (1, 1))  # 1970: an earlier run's file
    env = {"TORCH_FR_DUMP_TEMP_FILE": str(prefix), "HANGDOC_HOOK_DIR": str(tmp_path / "none")}
    ctx = _ctx(tmp_path, env)
    records = collect_flight_recorder(ctx)
    assert _steps(records) == [
        ("flight_recorder:file", "skipped"),  # the stale one
        ("flight_recorder:file", "ok"),
        ("flight_recorder:worker_server", "skipped"),  # FR already retrieved
        ("flight_recorder:debug_server", "skipped"),
        ("flight_recorder:hook", "skipped"),  # no hook in this process
    ]
    assert (ctx.rank_dir / "flight_recorder.file.trace_3").read_bytes() == FR_JSON
    assert records[1]["file"] == "rank3/flight_recorder.file.trace_3"


class _FakeWorkerServer:
    """torch's _WorkerServer protocol: POST /handler/<name> over HTTP on a unix socket
    (TORCH_WORKER_SERVER_SOCKET) or on a TCP port (torch.distributed.debug)."""

    def __init__(self, path: Path | None) -> None:
        if path is None:
            self.server = socket.socket(socket.AF_INET)
            self.server.bind(("127.0.0.1", 0))
        else:
            self.server = socket.socket(socket.AF_UNIX)
            self.server.bind(str(path))
        self.server.listen(4)
        self.requests: list[str] = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                request = conn.recv(65536).decode()
                line = request.split("\r\n", 1)[0]
                self.requests.append(line)
                if line == "POST /handler/fr_trace_json HTTP/1.1":
                    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(FR_JSON)}\r\n\r\n"
                    conn.sendall(head.encode() + FR_JSON)
                else:
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture
def worker_server(tmp_path: Path) -> Iterator[tuple[Path, _FakeWorkerServer]]:
    path = tmp_path / "worker.sock"
    server = _FakeWorkerServer(path)
    yield path, server
    server.server.close()


def test_live_dump_from_torch_worker_server(
    tmp_path: Path, worker_server: tuple[Path, _FakeWorkerServer]
) -> None:
    path, server = worker_server
    env = {
        "TORCH_WORKER_SERVER_SOCKET": str(path),
        "HOME": str(tmp_path / "home"),
        "HANGDOC_HOOK_DIR": str(tmp_path / "none"),
    }
    ctx = _ctx(tmp_path, env)
    records = collect_flight_recorder(ctx)
    assert ("flight_recorder:worker_server", "ok") in _steps(records)
    assert (ctx.rank_dir / "flight_recorder.worker_server.json").read_bytes() == FR_JSON
    assert server.requests[0] == "POST /handler/fr_trace_json HTTP/1.1"


def test_missing_worker_socket_is_a_recorded_failure(tmp_path: Path) -> None:
    env = {"TORCH_WORKER_SERVER_SOCKET": str(tmp_path / "gone.sock"), "HOME": str(tmp_path)}
    records = collect_flight_recorder(_ctx(tmp_path, env))
    failed = [r for r in records if r["status"] == "failed"]
    assert failed and "does not exist" in str(failed[0]["reason"])


@pytest.fixture
def job_store() -> Iterator[Any]:
    """A real TCPStore, as torchrun's rank 0 hosts it."""
    from torch._C._distributed_c10d import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    yield store


def _store_env(tmp_path: Path, port: int) -> dict[str, str]:
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": "3",
        "HOME": str(tmp_path / "home"),
        "HANGDOC_HOOK_DIR": str(tmp_path / "none"),
    }


def test_debug_server_address_comes_from_the_jobs_store(tmp_path: Path, job_store: Any) -> None:
    server = _FakeWorkerServer(None)
    port = server.server.getsockname()[1]
    job_store.set("debug_server/rank3", f"http://{socket.gethostname()}:{port}")
    ctx = _ctx(tmp_path, _store_env(tmp_path, job_store.port))
    records = collect_flight_recorder(ctx)
    assert ("flight_recorder:debug_server", "ok") in _steps(records)
    assert (ctx.rank_dir / "flight_recorder.debug_server.json").read_bytes() == FR_JSON
    assert server.requests[0] == "POST /handler/fr_trace_json HTTP/1.1"
    server.server.close()


def test_no_debug_server_in_the_store_is_skipped(tmp_path: Path, job_store: Any) -> None:
    job_store.set("debug_server/rank0", "http://elsewhere:1")  # another rank's, not ours
    records = collect_flight_recorder(_ctx(tmp_path, _store_env(tmp_path, job_store.port)))
    step = next(r for r in records if r["step"] == "flight_recorder:debug_server")
    assert (step["status"], step["reason"]) == (
        "skipped",
        "the job runs no torch.distributed.debug server",
    )


def test_unreachable_store_is_a_failure_and_bounded(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    began = time.monotonic()
    records = collect_flight_recorder(_ctx(tmp_path, _store_env(tmp_path, port)))
    step = next(r for r in records if r["step"] == "flight_recorder:debug_server")
    assert step["status"] == "failed" and f"127.0.0.1:{port}" in str(step["reason"])
    assert time.monotonic() - began < 15


def test_a_job_without_a_store_is_not_asked(tmp_path: Path) -> None:
    records = collect_flight_recorder(_ctx(tmp_path, {"HOME": str(tmp_path)}))
    step = next(r for r in records if r["step"] == "flight_recorder:debug_server")
    assert step["status"] == "skipped" and "MASTER_ADDR" in str(step["reason"])


def test_hook_stacks_fold_into_info_when_pyspy_took_samples(tmp_path: Path) -> None:
    artifacts = [
        HookArtifact("info.json", json.dumps({"pid": 1}).encode(), None),
        HookArtifact("faulthandler.txt", b"Thread 0x1 (most recent call first):\n", None),
        HookArtifact("fr_trace.json", FR_JSON, None),
    ]
    assert _fold_stacks(artifacts, tmp_path) == artifacts  # no py-spy: stacks stay a file
    (tmp_path / "pyspy.0.json").write_text("[]")
    folded = _fold_stacks(artifacts, tmp_path)
    assert [a.name for a in folded] == ["info.json", "fr_trace.json"]
    assert "most recent call first" in json.loads(folded[0].data)["faulthandler"]


def test_collector_never_raises(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {"TORCH_FR_DUMP_TEMP_FILE": "\x00bad"})
    began = time.monotonic()
    records = collect_flight_recorder(ctx)
    assert records and time.monotonic() - began < 5


def test_stale_hook_socket_is_skipped_not_failed(tmp_path: Path) -> None:
    # a socket file left by a killed process that had this pid: nobody listens
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(tmp_path / f"hangdoc-hook-{os.getpid()}.sock"))
    stale.close()
    env = {"HANGDOC_HOOK_DIR": str(tmp_path), "HOME": str(tmp_path / "home")}
    records = collect_flight_recorder(_ctx(tmp_path, env))
    hook = [r for r in records if r["step"] == "flight_recorder:hook"]
    assert [r["status"] for r in hook] == ["skipped"]
    assert "stale" in str(hook[0]["reason"])
