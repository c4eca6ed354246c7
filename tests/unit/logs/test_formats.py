"""Where the rank is said, and other line formats, one small console each.

Formats documented by their tools rather than found in a paste: srun's ``--label``
("Prepend task number to lines of stdout/err", srun(1)), Lightning's
``initializing ddp: GLOBAL_RANK``, DeepSpeed's ``log_dist`` ``[Rank N]``, tqdm's
``\\r`` redraws; plus the negatives each recogniser must leave alone.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.base import ParsedFile
from hangdoc.analyzer.parsers.logs import recognise_line
from tests.unit.logs.helpers import events, fields, parse

_TIMEOUT = (
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
)


def _console(tmp_path: Path, text: str, name: str = "console.txt") -> ParsedFile:
    path = tmp_path / name
    path.write_text(text)
    return parse(path)


def _ranks(parsed: ParsedFile, kind: str) -> list[int | None]:
    return [r for r, _ in events(parsed, kind)]


# ---- rank prefixes and rank statements -------------------------------------------------


def test_srun_label_is_the_rank(tmp_path: Path) -> None:
    parsed = _console(
        tmp_path,
        " 3: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "12: RuntimeError: CUDA error: an illegal memory access was encountered\n",
    )
    assert _ranks(parsed, "cuda_oom") == [3]
    assert _ranks(parsed, "cuda_error") == [12]


def test_indented_numbered_text_is_not_an_srun_label(tmp_path: Path) -> None:
    parsed = _console(tmp_path, "      3: RuntimeError: CUDA error: an illegal memory access\n")
    assert _ranks(parsed, "cuda_error") == [None]


@pytest.mark.parametrize(
    "line",
    [
        "[RANK 4] torch.OutOfMemoryError: CUDA out of memory.",
        "[2024-05-10 10:00:00,123] [ERROR] [engine.py:100:step] [Rank 4] "
        "RuntimeError: CUDA error: out of memory",
    ],
)
def test_rank_said_at_the_start_of_a_line(tmp_path: Path, line: str) -> None:
    parsed = _console(tmp_path, line + "\n")
    assert [r for p in parsed.processes for r in [p.rank]] == [4]


def test_watchdog_rank_stays_a_group_rank(tmp_path: Path) -> None:
    """[Rank N] in a c10d line is the group rank: a non-default group is not attributed."""
    parsed = _console(
        tmp_path,
        "[E ProcessGroupNCCL.cpp:475] [PG 3 Rank 1] " + _TIMEOUT + "\n",
    )
    [(rank, event)] = events(parsed, "collective_timeout")
    assert rank is None and fields(event)["group_rank"] == 1


def test_lightning_ddp_init_names_global_rank_and_world(tmp_path: Path) -> None:
    parsed = _console(tmp_path, "initializing ddp: GLOBAL_RANK: 6, MEMBER: 7/8\n")
    [(rank, event)] = events(parsed, "phase")
    assert rank == 6 and fields(event)["world_size"] == 8


def test_ray_pid_prefix_follows_the_nccl_init_of_that_pid(tmp_path: Path) -> None:
    parsed = _console(
        tmp_path,
        "node1:4009:4009 [0] NCCL INFO comm 0x55 rank 1 nranks 2 cudaDev 0 busId 4000 - "
        "Init COMPLETE\n"
        "\x1b[36m(RayWorkerWrapper pid=4009, ip=10.0.0.2)\x1b[0m RuntimeError: CUDA error: "
        "an illegal memory access was encountered\n",
    )
    [(rank, event)] = events(parsed, "cuda_error")
    assert rank == 1 and fields(event)["rank_from"] == "pid"


def test_records_flattened_with_spaces(tmp_path: Path) -> None:
    parsed = _console(
        tmp_path,
        "[rank0]: RuntimeError: boom [rank1]: torch.OutOfMemoryError: CUDA out of memory.\n",
    )
    assert _ranks(parsed, "cuda_oom") == [1]
    assert sorted(r for r in _ranks(parsed, "exception") if r is not None) == [0, 1]


def test_a_message_quoting_a_rank_prefix_is_not_split(tmp_path: Path) -> None:
    parsed = _console(tmp_path, "RuntimeError: see the log of [rank1]: for details\n")
    assert _ranks(parsed, "exception") in ([], [None])


def test_tqdm_redraws_of_several_ranks_keep_each_ranks_last_state(tmp_path: Path) -> None:
    line = (
        "[default0]:Epoch 3:  50%|#    | 625/1250 [01:00<01:00, 10it/s]"
        "\r[default1]:Epoch 3:  50%|#    | 624/1248 [01:00<01:00, 10it/s]"
        "\r[default0]:Epoch 3: 100%|#####| 1250/1250 [02:00<00:00, 10it/s]"
        "\rEpoch 3: 100%|#####| 1250/1250 [02:00<00:00, 10it/s]"
        "\r[default1]:Epoch 3: 100%|#####| 1248/1248 [02:00<00:00, 10it/s]\n"
    )
    parsed = _console(tmp_path, line)
    totals = {r: fields(e)["progress.meter"] for r, e in events(parsed, "phase")}
    assert totals == {0: "1250/1250", 1: "1248/1248"}


def test_file_level_counts_feed_the_uneven_data_rule(tmp_path: Path) -> None:
    parsed = _console(
        tmp_path,
        "rank 0: 1250 batches\nrank 1 has 1248 batches\n[rank2]:len(train_loader) = 1250\n"
        "3: Number of batches: 1,250\n",
    )
    counts = {r: (fields(e)["what"], fields(e)["value"]) for r, e in events(parsed, "data_count")}
    assert counts == {
        0: ("batches", 1250),
        1: ("batches", 1248),
        2: ("len(train_loader)", 1250),
        3: ("batches", 1250),
    }


@pytest.mark.parametrize(
    "line",
    [
        "[Rank 1] (after 10 iterations) memory (MB) | allocated: 6.29",
        "Saving checkpoint after 500 steps",
        "done 20 batches so far",
    ],
)
def test_progress_is_not_a_data_length(line: str) -> None:
    hit = recognise_line(line)
    assert hit is None or hit.kind.value != "data_count"


# ---- NCCL lines without their header ----------------------------------------------------


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("NCCL WARN Cuda failure 'out of memory'", "cuda_oom"),
        (
            ":1234:5678 [0] NCCL INFO comm 0x55 rank 3 nranks 8 cudaDev 3 busId 4000 - "
            "Init COMPLETE",
            "nccl_init",
        ),
        (
            "[1] NCCL INFO AllReduce: opCount 3 sendbuff 0x7f recvbuff 0x7f count 1024 datatype 7 "
            "op 0 root 0 comm 0x55 [nranks=8] stream 0x1",
            "nccl_coll",
        ),
    ],
)
def test_nccl_lines_without_their_header(line: str, kind: str) -> None:
    hit = recognise_line(line)
    assert hit is not None and hit.kind.value == kind
    assert fields(hit)["partial_header"] is True


@pytest.mark.parametrize(
    "line",
    [
        "see NCCL WARN messages above for the cause",  # prose, not a header
        "export NCCL_DEBUG=INFO NCCL INFO",
    ],
)
def test_prose_mentioning_nccl_is_not_an_nccl_line(line: str) -> None:
    assert recognise_line(line) is None


# ---- store and crash lines --------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "error", "extra"),
    [
        ("torch.distributed.DistNetworkError: Connection reset by peer", "store_connection", {}),
        ("torch.distributed.DistStoreError: Socket Timeout", "store_connection", {}),
        (
            "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
            "rendezvous_closed",
            {},
        ),
        (
            "torch.distributed.DistNetworkError: The client socket has timed out after 1800s "
            "while trying to connect to (10.0.0.1, 29500).",
            "store_connect",
            {"timeout_ms": 1800000},
        ),
        (
            "RuntimeError: Timeout waiting for key: default_pg/0/0 after 1800000 ms",
            "store_wait",
            {"keys": "default_pg/0/0"},
        ),
    ],
)
def test_store_failures(line: str, error: str, extra: dict[str, object]) -> None:
    hit = recognise_line(line)
    assert hit is not None and hit.kind.value == "store_timeout"
    assert fields(hit)["error"] == error
    for key, value in extra.items():
        assert fields(hit)[key] == value


def test_elastic_signal_line_follows_the_workers_rank(tmp_path: Path) -> None:
    parsed = _console(
        tmp_path,
        "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/"
        "api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /usr/bin/python\n"
        "Signal 9 (SIGKILL) received by PID 2630\n",
    )
    assert _ranks(parsed, "worker_failed") == [5]
    [(rank, signal)] = events(parsed, "fatal_signal")
    assert rank == 5 and fields(signal)["signal"] == "SIGKILL"


def test_a_child_failed_table_cut_at_its_start_keeps_its_rank(tmp_path: Path) -> None:
    # torch/distributed/elastic/multiprocessing/errors ChildFailedError.format_msg, the
    # paste starting at an entry's rank field (its "[0]:", time and host cut away)
    parsed = _console(
        tmp_path,
        "  rank      : 3 (local_rank: 3)\n"
        "  exitcode  : -11 (pid: 6421)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 11 (SIGSEGV) received by PID 6421\n"
        "======================================================\n",
    )
    [(rank, failure)] = events(parsed, "child_failure")
    assert rank == 3 and fields(failure)["signal"] == "SIGSEGV"
    # and at its root-cause line
    parsed = _console(
        tmp_path,
        "Root Cause (first observed failure):\n[0]:\n  time      : 2025-01-02_03:04:05\n"
        "  host      : node-1\n  rank      : 5 (local_rank: 1)\n  exitcode  : 1 (pid: 77)\n",
        name="root.txt",
    )
    assert _ranks(parsed, "child_failure") == [5]


def test_a_spawned_childs_traceback_is_that_childs(tmp_path: Path) -> None:
    # torch/multiprocessing/spawn.py ProcessContext.join: "-- Process %d terminated with
    # the following error:" and the child's original trace, raised in the parent
    parsed = _console(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "train.py", line 9, in <module>\n'
        "    mp.spawn(main, nprocs=2)\n"
        "Exception: \n"
        "\n"
        "-- Process 1 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 5, in main\n'
        "    step()\n"
        "ValueError: bad batch\n"
        "\n"
        "ValueError: another line nobody spawned\n",
    )
    said = [(r, str(fields(e).get("message", ""))) for r, e in events(parsed, "exception")]
    assert (1, "bad batch") in said
    assert (None, "another line nobody spawned") in said  # the child's trace had ended


# ---- bounded work -----------------------------------------------------------------------


def test_pathological_lines_stay_linear(tmp_path: Path) -> None:
    """1 MB lines built to make a careless regex backtrack: \\r storms, NCCL words,
    rank prefixes, digits and colons."""
    lines = [
        "x\r" * 400_000,
        "[rank1]:" + "[rank2]: a" * 90_000,
        ("NCCL INFO " + "1:" * 50) * 5_000,
        ":" + "1" * 1_000_000,
        "rank 0: " + "9" * 1_000_000 + " batches",
        "host" + "1:2 " * 250_000 + "[0] NCCL WARN x",
    ]
    path = tmp_path / "evil.log"
    path.write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    parse(path)
    assert time.perf_counter() - start < 20


def test_a_50_mb_log_is_read_head_and_tail_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big log costs what its head and tail cost, whatever its size: the lines fed to
    the scanner are bounded by HEAD_BYTES + TAIL_BYTES (made small here so that the test
    is quick), and the events kept by the per-kind cap."""
    from hangdoc.analyzer.parsers.logs import parser as log_parser
    from hangdoc.analyzer.parsers.logs.scanner import Scanner

    monkeypatch.setattr(log_parser, "HEAD_BYTES", 512 * 1024)
    monkeypatch.setattr(log_parser, "TAIL_BYTES", 1024 * 1024)
    fed: list[int] = []
    original = Scanner.feed

    def counting_feed(self: Scanner, lineno: int, raw: str) -> None:
        fed.append(len(raw) + 1)
        original(self, lineno, raw)

    monkeypatch.setattr(Scanner, "feed", counting_feed)
    block = (
        "[rank3]:[E1125 10:42:03.436955737 ProcessGroupNCCL.cpp:689] [Rank 3] " + _TIMEOUT + "\n"
        "node1:1234:1290 [3] NCCL INFO misc/socket.cc:546 -> 6\n"
        " 3: Epoch 3:  50%|#    | 625/1250 [01:00<01:00, 10it/s]\r 3: Epoch 3:  51%|#  | 626/1250\n"
        "rank 3: 1250 batches\n"
        "some ordinary line of training output, loss=2.0\n"
    )
    path = tmp_path / "big.log"
    with path.open("w") as handle:
        for _ in range(50 * 1024 * 1024 // len(block) + 1):
            handle.write(block)
    start = time.perf_counter()
    parsed = parse(path)
    elapsed = time.perf_counter() - start
    assert any("read the first" in n for n in parsed.notes)
    assert sum(fed) <= (512 + 1024) * 1024 + 64 * 1024
    kept = sum(len(p.log_events) for p in parsed.processes) + len(parsed.job_log_events)
    assert kept < 2_000
    assert elapsed < 60, elapsed


def test_coll_lines_with_cut_headers_reach_the_divergence_rule(tmp_path: Path) -> None:
    """COLL lines whose host:pid:tid was cut, attributed by srun labels: rank 2's last
    opCount lags, as HD204 compares them."""
    from tests.unit.logs.helpers import diagnose, findings_of

    lines = []
    for rank, last in ((0, 0x1C), (1, 0x1C), (2, 0x1A), (3, 0x1C)):
        for op in range(0x19, last + 1):
            lines.append(
                f"{rank}: [{rank}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f5a "
                f"recvbuff 0x7f5b count 512 datatype 7 op 0 root 0 comm 0x7f0{rank}a0 "
                "[nranks=4] stream 0x55"
            )
    path = tmp_path / "coll.log"
    path.write_text("\n".join(lines) + "\n")
    parsed = parse(path)
    last = {r: fields(e)["opcount"] for r, e in events(parsed, "nccl_coll")}
    assert last == {0: 28, 1: 28, 2: 26, 3: 28}
    [finding] = findings_of(diagnose(path), "HD204")
    assert finding.culprit_ranks == (2,)


@pytest.mark.parametrize(
    ("line", "kind", "expected"),
    [
        (
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
            "memory.",
            "host_oom_kill",
            {"name": "ray memory monitor"},
        ),
        (
            "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
            "cuda_oom",
            {},
        ),
        (
            '    "message": "RendezvousConnectionError: The connection to the C10d store has '
            'failed. See inner exception for details.",',
            "store_timeout",
            {"error": "rendezvous_connection"},
        ),
        (
            "hpc-25-14:18569:18835 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 "
            "ranks has already checked in",
            "nccl_config_error",
            {"problem": "duplicate_rank", "rank_a": 1},
        ),
        (
            "pytorch-fairseq-worker-0:16:63 [0] NCCL INFO Call to connect returned Connection "
            "refused, retrying",
            "nccl_transport_error",
            {"error.tag": "connect_connection_refused", "retrying": True},
        ),
        ("Process 0 exit with status code 137.", "worker_failed", {"signal": "SIGKILL"}),
        (
            "h:1:2 [0] transport.cc:154 NCCL WARN Cuda failure 2 'out of memory'",
            "cuda_oom",
            {"error": "out of memory"},
        ),
    ],
)
def test_more_failure_lines(line: str, kind: str, expected: dict[str, object]) -> None:
    hit = recognise_line(line)
    assert hit is not None and hit.kind.value == kind, hit
    for key, value in expected.items():
        assert fields(hit)[key] == value


def test_connect_retries_before_a_completed_init_are_not_a_failure(tmp_path: Path) -> None:
    from tests.unit.logs.helpers import diagnose, findings_of

    head = "node0:16:63 [0] NCCL INFO "
    path = tmp_path / "nccl.log"
    retry = head + "Call to connect returned Connection refused, retrying\n"
    done = head + "comm 0x55 rank 0 nranks 2 cudaDev 0 busId 4000 - Init COMPLETE\n"
    path.write_text(retry * 3 + done)
    assert not findings_of(diagnose(path), "HD200")
    path.write_text(retry * 3)
    [finding] = findings_of(diagnose(path), "HD200")
    assert finding.category.value == "nccl_init_or_bootstrap_hang"


def test_ray_host_memory_kill_is_not_a_gpu_oom(tmp_path: Path) -> None:
    from tests.unit.logs.helpers import diagnose

    path = tmp_path / "console.txt"
    path.write_text(
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    )
    categories = [f.category.value for f in diagnose(path).findings]
    assert "cuda_oom" not in categories


# The raylet's summary of its memory monitor's kills, as Ray's docs quote it
# (doc/source/ray-core/scheduling/ray-oom-prevention.rst; src/ray/raylet/node_manager.cc).
_RAY_OOM_SUMMARY = (
    "(raylet) [2023-02-03 15:28:16,750 E 152312 152312] (raylet) node_manager.cc:3040: 1 Workers "
    "(tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other "
    "reasons at node (ID: 2c82620270df6b9dd7ae2791ef51ee4b5a9d5df9f795986c10dd219c, IP: "
    "172.31.183.172) over the last time period. To see more information about the Workers "
    "killed on this node, use `ray logs raylet.out -ip 172.31.183.172`\n"
)


def test_raylet_oom_kill_summary_is_a_host_memory_death(tmp_path: Path) -> None:
    from tests.unit.logs.helpers import diagnose, findings_of

    path = tmp_path / "driver.log"
    path.write_text(_RAY_OOM_SUMMARY)
    [(_, killed)] = events(parse(path), "host_oom_kill")
    assert killed.payload.events == 1
    [finding] = findings_of(diagnose(path), "HD030")
    assert finding.category.value == "rank_dead_or_crashed"
    assert "Ray memory monitor" in finding.title


def test_raylet_oom_summary_wrapped_inside_tasks_actors(tmp_path: Path) -> None:
    """A paste wrapped after "(tasks /" keeps the kill on its second line."""
    head, tail = _RAY_OOM_SUMMARY.split("(tasks / ", 1)
    path = tmp_path / "driver.log"
    path.write_text(head + "(tasks /\n " + tail)
    assert events(parse(path), "host_oom_kill")


def test_raylet_summary_of_crashes_only_is_no_oom_kill(tmp_path: Path) -> None:
    path = tmp_path / "driver.log"
    path.write_text(_RAY_OOM_SUMMARY.replace("1 Workers (tasks", "0 Workers (tasks"))
    assert not events(parse(path), "host_oom_kill")
