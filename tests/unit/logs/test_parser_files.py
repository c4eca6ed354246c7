# ruff: noqa: E501
"""Whole files: multi-line records, rank attribution, sniffing, caps (FORMATS.md §8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers import PARSERS
from hangdoc.analyzer.parsers.logs import LogParser
from hangdoc.analyzer.parsers.logs import parser as log_parser
from hangdoc.analyzer.parsers.text import TextParser
from hangdoc.analyzer.payloads.nccl import OpCountGroup
from tests.unit.logs.helpers import MULTIRANK, PUBLIC, RECORDED, SAMPLES, events, fields, parse

ALL_FIXTURES = sorted(
    p for d in (PUBLIC, RECORDED, MULTIRANK) for p in d.iterdir() if p.suffix != ".md"
)


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_every_fixture_is_sniffed_and_parsed(path: Path) -> None:
    parser = LogParser()
    assert parser.sniff(path.read_bytes()[:65536])
    parsed = parser.parse(path, path.name)
    assert parsed.error is None
    assert parsed.kind is InputKind.LOG
    assert parsed.processes or parsed.job_log_events


def test_text_path_is_registered_last() -> None:
    # every text goes to the text path, whose log side is this parser
    assert isinstance(PARSERS[-1], TextParser)


@pytest.mark.parametrize(
    "head",
    [
        b"\x00\x01binary\x00",
        b'[{"pid": 1, "thread_id": 2, "frames": []}]',
        b'{"version": "2.10", "pg_config": {}, "entries": []}',
        b"just some notes about the weekend\n",
    ],
)
def test_sniff_rejects_other_content(head: bytes) -> None:
    assert not LogParser().sniff(head)


def test_sniff_accepts_a_log_starting_with_a_bracket_prefix() -> None:
    assert LogParser().sniff(
        b"[rank3]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error\n"
    )
    assert LogParser().sniff(
        b"[2024-01-01 10:00:00,000] [INFO] [launch.py:1:main] Killing subprocess 12\n"
    )


def test_sniff_accepts_a_big_log_whose_head_holds_nothing_known() -> None:
    head = b"".join(b"epoch 1 step %d loss 2.0\n" % i for i in range(5000))[:65536]
    assert LogParser().sniff(head)
    assert not LogParser().sniff(b"epoch 1 step 1 loss 2.0\n")  # small: all of it was seen


def test_childfailed_block_entries_and_root_cause() -> None:
    parsed = parse(SAMPLES / "torchrun" / "childfailed_record_tee.txt")
    failures = {rank: fields(e) for rank, e in events(parsed, "child_failure")}
    assert failures[1]["root_cause"] is True
    assert failures[1]["exc_type"] == "RuntimeError"
    assert failures[1]["message"] == "disk full while saving step 3"
    assert failures[0]["signal"] == "SIGTERM" and failures[0]["exit_code"] == -15
    assert failures[1]["error_file"].endswith("attempt_0/1/error.json")
    # [default1]:[rank1]: lines map local rank 1 to global rank 1; the agent line finds it by pid
    assert {r for r, _ in events(parsed, "worker_failed")} == {1}
    assert {r for r, _ in events(parsed, "exception")} == {1}


def test_error_json_shapes() -> None:
    new = parse(SAMPLES / "torchrun" / "error.json", "logs/attempt_0/3/error.json")
    (_, event), *_ = events(new, "error_file")
    assert fields(event)["exc_type"] == "RuntimeError"
    assert event.time == 1795289573.0 and fields(event)["clock"] == "epoch"
    legacy = parse(PUBLIC / "torchelastic_error_legacy.json", "rank7/error.json")
    assert [r for r, _ in events(legacy, "error_file")] == [7]
    (_, legacy_event), *_ = events(legacy, "error_file")
    assert fields(legacy_event)["message"].startswith("CUDA error: uncorrectable ECC")
    assert fields(legacy_event)["category"] == "system_terminated_error"


def test_nccl_host_pid_lines_take_the_rank_of_their_init_line() -> None:
    parsed = parse(PUBLIC / "nccl-2.19_ib_completion_error.log")
    errors = events(parsed, "nccl_transport_error")
    assert sorted({r for r, _ in errors if r is not None}) == [0, 2]
    by_rank = {p.rank: p for p in parsed.processes}
    assert (by_rank[4].host, by_rank[4].pid, by_rank[4].world_size) == ("gpu-a03", 120400, 6)
    flush = [e for _, e in errors if fields(e)["error.tag"] == "ib_completion_status_5"]
    assert flush and fields(flush[0])["peer"] == "10.20.1.13"


def test_last_error_line_is_attached_and_recognised() -> None:
    parsed = parse(PUBLIC / "torch-2.2_remote_error_last_error.log")
    ((rank, error),) = events(parsed, "nccl_error")
    assert rank == 3
    assert fields(error)["error_class"] == "ncclRemoteError"
    assert fields(error)["last_error_peer"] == "node2.cluster.local"
    assert [r for r, _ in events(parsed, "nccl_transport_error")] == [3]


def test_watchdog_lines_without_prefix_use_their_rank_field() -> None:
    parsed = parse(PUBLIC / "torch-1.13_watchdog_broadcast_old.log")
    timeouts = events(parsed, "collective_timeout")
    assert sorted(r for r, _ in timeouts if r is not None) == [1, 2, 3]
    assert all(fields(e)["rank_from"] == "group_rank" for r, e in timeouts if r is not None)


def test_group_ranks_of_other_groups_are_not_global() -> None:
    parsed = parse(PUBLIC / "torch-2.7_failure_detected_stack.log")
    statuses = events(parsed, "watchdog_status")
    assert {r for r, _ in statuses} == {0, 5}  # from the [rankN]: prefixes, not "Rank 0" of PG 1
    ((rank, stack),) = events(parsed, "failed_collective_stack")
    assert rank == 0
    frames = fields(stack)["frames"]
    assert frames[0].startswith("#0 all_gather_into_tensor") and len(frames) == 3


def test_hard_wrapped_terminal_lines_are_rejoined() -> None:
    parsed = parse(PUBLIC / "torch-2.5_terminal_wrapped.log")
    timeouts = events(parsed, "collective_timeout")
    assert sorted(r for r, _ in timeouts if r is not None) == [2, 3, 6]
    assert {fields(e)["op"] for _, e in timeouts} == {"BROADCAST"}
    assert {fields(e)["numel_in"] for _, e in timeouts} == {112}


def test_spliced_progress_bar_and_error_lines() -> None:
    parsed = parse(PUBLIC / "torch-2.1_watchdog_numel_terminated.log")
    assert sorted(r for r, _ in events(parsed, "collective_timeout") if r is not None) == [1, 2, 3]
    bars = [e for _, e in events(parsed, "phase")]
    assert bars and fields(bars[-1])["progress.n"] == 282000
    agent = events(parsed, "agent_terminating")
    assert len(agent) == 3 and all(e.time is not None for _, e in agent)


def test_tqdm_splices_in_a_tee_console() -> None:
    parsed = parse(RECORDED / "slow_preprocess.log")
    (bar_rank, last_bar) = events(parsed, "phase")[-1]
    assert bar_rank == 0 and fields(last_bar)["phase"] == "preprocess"
    assert [r for r, _ in events(parsed, "collective_timeout")] == [1]


def test_repeats_are_counted_not_stored() -> None:
    parsed = parse(RECORDED / "monitored_barrier.log")
    found = events(parsed, "monitored_barrier_failure")
    ((_, event),) = [(r, e) for r, e in found if fields(e)["reporter"] != "peer"]
    assert fields(event)["repeats"] == 2
    # rank 2's side ("… received errors while waiting for send/recv from rank 0"), once
    ((_, peer),) = [(r, e) for r, e in found if fields(e)["reporter"] == "peer"]
    assert fields(peer)["ranks"] == (0,)


def test_ras_report_groups() -> None:
    parsed = parse(PUBLIC / "nccl-2.26_ras_mismatch.txt")
    (_, mismatch), *_ = events(parsed, "ras_mismatch")
    assert fields(mismatch)["op"] == "AllGather"
    assert fields(mismatch)["groups"] == (OpCountGroup(640, 30), OpCountGroup(641, 2, (12, 13)))
    (_, row), *_ = events(parsed, "ras_report")
    assert (fields(row)["status"], fields(row)["state"], fields(row)["ranks_per_comm"]) == (
        "RUNNING",
        "MISMATCH",
        32,
    )


def test_fr_trace_outputs_of_three_eras() -> None:
    new = parse(SAMPLES / "fr_trace_mismatch_output.txt")
    ((_, missing),) = events(new, "fr_missing_ranks")
    assert (fields(missing)["seq"], fields(missing)["missing"], fields(missing)["collective"]) == (
        6,
        (1,),
        "gloo:all_reduce",
    )
    old = parse(PUBLIC / "frtrace-2.5_old_outputs.txt")
    ((_, mm),) = events(old, "fr_mismatch")
    assert (fields(mm)["culprit"], fields(mm)["error"]) == (2, "COLLECTIVE_TYPE_MISMATCH")


def test_nvidia_smi_table_csv_topo() -> None:
    table = parse(PUBLIC / "nvidia-smi_table_r550.txt")
    rows = [fields(e) for _, e in events(table, "gpu_status")]
    gpu1 = next(r for r in rows if r["row"] == "gpu" and r["index"] == 1)
    assert (gpu1["bus_id"], gpu1["ecc_uncorrected"], gpu1["memory_used_mib"]) == (
        "00000000:2a:00.0",
        2,
        71110.0,
    )
    assert any(r["row"] == "process" and r["pid"] == 460770 for r in rows)
    csv = parse(PUBLIC / "nvidia-smi_query.csv")
    rows = [fields(e) for _, e in events(csv, "gpu_status")]
    assert [r.get("utilization_pct") for r in rows] == [100.0, 0.0, None]
    topo = parse(PUBLIC / "nvidia-smi_topo_pcie.txt")
    ((_, t),) = events(topo, "gpu_topology")
    assert (fields(t)["pcie_pairs"], fields(t)["nvlink_pairs"]) == (6, 0)
    nv = parse(PUBLIC / "nvidia-smi_topo_nvlink.txt")
    ((_, t2),) = events(nv, "gpu_topology")
    assert (fields(t2)["nvlink_pairs"], fields(t2)["pcie_pairs"]) == (6, 0)


def test_multi_line_fallen_off_bus_takes_the_pci_of_the_line_before() -> None:
    parsed = parse(PUBLIC / "dmesg_xid_fallen_off_bus.txt")
    xids = [fields(e) for _, e in events(parsed, "gpu_xid")]
    assert {(x["xid"], x["pci"]) for x in xids} >= {
        (79, "0000:cb:00"),
        (79, "0000:b3:00.0"),
        (45, "0000:dc:00"),
    }


def test_detail_mismatch_inside_childfailed_traceback() -> None:
    parsed = parse(PUBLIC / "torch-2.6_detail_barrier_seq.log")
    ((rank, mismatch),) = events(parsed, "collective_mismatch")
    assert rank == 1 and fields(mismatch)["side_a.seq"] == 1
    assert fields(mismatch)["side_b.seq"] == 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rank3.log", 3),
        ("node0_rank_12.txt", 12),
        ("stderr-5.txt", 5),
        # a k8s pod's index, not a rank: the stacks' and the logs' rule (common/rank_names.py)
        ("worker-5.txt", None),
        ("logs/rank7/stderr.log", 7),
        ("stderr.log", None),
    ],
)
def test_file_name_gives_the_rank_of_a_single_rank_file(
    tmp_path: Path, name: str, expected: int | None
) -> None:
    path = tmp_path / "f.log"
    path.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    parsed = parse(path, name)
    ranks = [r for r, _ in events(parsed, "cuda_error")]
    assert ranks == [expected]


def test_torchrun_log_dir_gives_the_local_rank(tmp_path: Path) -> None:
    path = tmp_path / "stderr.log"
    path.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    parsed = parse(path, "logs/none_x/attempt_0/2/stderr.log")
    assert [r for r, _ in events(parsed, "cuda_error")] == [2]


def test_file_name_is_not_used_when_lines_name_ranks(tmp_path: Path) -> None:
    path = tmp_path / "rank9.log"
    path.write_text("[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert [r for r, _ in events(parse(path), "cuda_error")] == [2]


def test_local_rank_prefix_maps_through_co_occurring_global_prefix(tmp_path: Path) -> None:
    path = tmp_path / "console.log"
    path.write_text(
        "[default1]:[rank9]: starting\n"
        "[default1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "[default0]:RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    parsed = parse(path)
    assert [r for r, _ in events(parsed, "cuda_oom")] == [9]
    # local rank 0 has no global mapping and the file shows two nodes' numbering: unknown
    assert [r for r, _ in events(parsed, "cuda_error")] == [None]


def test_unknown_rank_stays_job_level(tmp_path: Path) -> None:
    path = tmp_path / "combined.txt"
    path.write_text("h1:1:1 [0] misc/socket.cc:1 NCCL WARN Net : Connection closed by remote peer h2<1>\n"
                    "h2:2:2 [0] misc/socket.cc:1 NCCL WARN Net : Connection closed by remote peer h1<1>\n")  # fmt: skip
    parsed = parse(path, "rank4.txt")  # two processes in it: the file name is not believed
    assert not parsed.processes and len(parsed.job_log_events) == 2


def test_large_file_is_read_head_and_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_parser, "HEAD_BYTES", 4096)
    monkeypatch.setattr(log_parser, "TAIL_BYTES", 4096)
    path = tmp_path / "big.log"
    filler = "".join(f"step {i} loss 1.0 ok\n" for i in range(20000))
    head = "h:1:2 [0] NCCL INFO comm 0x1 rank 5 nranks 8 cudaDev 0 busId 1000 - Init COMPLETE\n"
    middle = "h:1:2 [0] enqueue.cc:1 NCCL WARN Cuda failure 'invalid argument'\n"
    tail = "h:1:3 [0] misc/socket.cc:1 NCCL WARN Net : Connection closed by remote peer h9<1>\n"
    path.write_text(head + filler + middle + filler + tail)
    parsed = parse(path)
    assert any("read the first" in n for n in parsed.notes)
    kinds = {e.kind for p in parsed.processes for e in p.log_events}
    assert "nccl_init" in kinds and "nccl_transport_error" in kinds and "cuda_error" not in kinds
    (rank, err), *_ = events(parsed, "nccl_transport_error")
    assert rank == 5  # the head's init line attributes the tail
    assert err.line == 40003  # line numbers stay true after the skipped middle


def test_utf16_and_crlf_and_invalid_bytes(tmp_path: Path) -> None:
    text = "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\r\n"
    (tmp_path / "u16.log").write_bytes(text.encode("utf-16"))
    assert [r for r, _ in events(parse(tmp_path / "u16.log"), "cuda_error")] == [1]
    (tmp_path / "bad.log").write_bytes(b"ok line\n\xfe\xfd\xc3 garbage\n" + text.encode())
    assert [r for r, _ in events(parse(tmp_path / "bad.log"), "cuda_error")] == [1]


def test_empty_and_unrecognised_files_leave_a_note(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_text("an error was mentioned but nothing we know\n")
    parsed = parse(path)
    assert not parsed.processes and not parsed.job_log_events
    assert any("no recognised log lines" in n for n in parsed.notes)


def test_per_kind_cap_bounds_memory(tmp_path: Path) -> None:
    path = tmp_path / "spam.log"
    path.write_text(
        "".join(f"h:1:2 [0] x.cc:1 NCCL WARN unusual thing number {i}\n" for i in range(2000))
    )
    parsed = parse(path)
    assert len(events(parsed, "nccl_warn")) == 400
    assert any("not kept" in n for n in parsed.notes)


def test_coll_lines_keep_the_last_per_communicator() -> None:
    parsed = parse(PUBLIC / "nccl-2.8_coll_opcount_lag.log")
    colls = {r: fields(e) for r, e in events(parsed, "nccl_coll")}
    assert colls[0]["opcount"] == 0x11C and colls[0]["folded_lines"] == 3
    assert colls[3]["opcount"] == 0x11A


def test_json_error_file_parse_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "error.json"
    path.write_text(
        json.dumps({"message": {"message": "ValueError: x", "extraInfo": {"timestamp": "12"}}})
    )
    ((_, event),) = events(parse(path), "error_file")
    assert fields(event)["exc_type"] == "ValueError" and event.time == 12.0
