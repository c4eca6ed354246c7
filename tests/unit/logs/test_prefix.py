# ruff: noqa: E501  (tables of real log lines read better unwrapped)
"""Prefix peeling and time stamps (FORMATS.md §8.1, §8.2, §8.7)."""

from __future__ import annotations

import calendar

import pytest

from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.timefmt import (
    CLOCK_EPOCH,
    CLOCK_LOCAL,
    CLOCK_LOCAL_ASSUMED_YEAR,
    Stamp,
    glog_stamp,
    resolve_stamps,
)

CASES = [
    # (raw line, text after peeling, rank, local_rank, level, origin)
    ("[default1]:[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog",
     "[Rank 1] Watchdog", 1, 1, "E", "ProcessGroupNCCL.cpp:616"),
    ("[rank3]:[rank3]: RuntimeError: x", "RuntimeError: x", 3, None, None, None),
    ("[1784] [rank0]:[E602 11:17:52.399 ProcessGroupNCCL.cpp:2268] [PG ID 1 PG GUID 1 Rank 0]  failure",
     "[PG ID 1 PG GUID 1 Rank 0]  failure", 0, None, "E", "ProcessGroupNCCL.cpp:2268"),
    ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught", "[Rank 1] Watchdog caught",
     None, None, "E", "ProcessGroupNCCL.cpp:737"),
    ("E1121 19:32:54.175000 8519 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)",
     "failed (exitcode: 1)", None, None, "E", "torch/distributed/elastic/multiprocessing/api.py:1002"),
    ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0",
     "failed (exitcode: -9) local_rank: 0", None, None, "E", "torch.distributed.elastic.multiprocessing.api"),
    ("[2023-10-13 17:40:02,544] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1)",
     "failed (exitcode: 1)", None, None, "E", "torch.distributed.elastic.multiprocessing.api"),
    ("2025-11-24T03:20:21.001125857Z \x1b[36m(RayTrainWorker pid=615, ip=10.72.7.6)\x1b[0m [rank1]: boom",
     "boom", 1, None, None, None),
    ("2025-11-24T03:20:21.001Z [36m(RayTrainWorker pid=615, ip=10.72.7.6)[0m [rank1]: boom",
     "boom", 1, None, None, None),
    ("[1,3]<stdout>:box:29881:30401 [0] NCCL INFO init.cc:903 -> 5", "box:29881:30401 [0] NCCL INFO init.cc:903 -> 5",
     3, None, None, None),
    ("Feb 14 05:03:41 gpu-1 kernel: NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
     "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus", None, None, None, None),
    ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0", "NVRM: The NVIDIA GPU 0000:b3:00.0", None, None, None, None),
    ("[NeMo I 2023-11-03 18:35:44 nemo_logging:349] saving checkpoint",
     "saving checkpoint", None, None, "I", None),
    ("stderr: [rank4]:[W1203 01:02:03.000000000 ProcessGroupNCCL.cpp:1] x", "x", 4, None, "W", "ProcessGroupNCCL.cpp:1"),
    ("progress 10%\r[rank2]: RuntimeError: late", "RuntimeError: late", 2, None, None, None),
    ("B-nemo-ft3/0 [default1]:[rank1]: torch.distributed.DistBackendError: x", "torch.distributed.DistBackendError: x", 1, 1, None, None),
    ("node7: [rank3]: ValueError: y", "ValueError: y", 3, None, None, None),
    ("RuntimeError: [rank3]: is not a prefix here", "RuntimeError: [rank3]: is not a prefix here", None, None, None, None),
    ("dgxh100-4:460770:460842 [0] NCCL INFO NET/IB", "dgxh100-4:460770:460842 [0] NCCL INFO NET/IB",
     None, None, None, None),
    ("  File \"/x.py\", line 3, in f", "  File \"/x.py\", line 3, in f", None, None, None, None),
    # Metaflow's task log (runtime.py "[%s (pid %s)] ") and an AWS Batch job id (batch_cli.py)
    ("2023-05-02 10:11:12.345 [12/train/34 (pid 4242)] [0f1e2d3c-4b5a-4978-8a7b-6c5d4e3f2a1b]   File \"/x.py\", line 3, in f",
     "  File \"/x.py\", line 3, in f", None, None, None, None),
    ("2023-05-02 10:11:12.345 [12/train/34 (pid 4242)] OSError: [Errno 28] No space left on device",
     "OSError: [Errno 28] No space left on device", None, None, None, None),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "text", "rank", "local", "level", "origin"), CASES)
def test_peel_line(
    raw: str, text: str, rank: int | None, local: int | None, level: str | None, origin: str | None
) -> None:
    tag = peel_line(raw)
    assert (tag.text, tag.rank, tag.local_rank, tag.level, tag.origin) == (
        text,
        rank,
        local,
        level,
        origin,
    )


def test_peel_keeps_times_of_every_layer() -> None:
    iso = peel_line("2025-11-24T03:20:21.5Z [rank1]: boom").stamp
    assert iso == Stamp(3 * 3600 + 20 * 60 + 21.5, 11, 24, 2025)
    glog = peel_line("[rank0]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] x").stamp
    assert glog is not None and (glog.month, glog.day, glog.year) == (7, 9, None)
    syslog = peel_line("Aug 30 11:43:09 node7 kernel: NVRM: Xid (PCI:0000:cb:00): 79, x")
    assert syslog.host == "node7" and syslog.stamp is not None and syslog.stamp.month == 8
    dmesg_t = peel_line("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 79, x").stamp
    assert dmesg_t is not None and dmesg_t.year == 2024


@pytest.mark.parametrize(
    ("mmdd", "month", "day"), [("709", 7, 9), ("0709", 7, 9), ("1206", 12, 6), ("1321", None, None)]
)
def test_glog_month_may_be_unpadded(mmdd: str, month: int | None, day: int | None) -> None:
    stamp = glog_stamp(mmdd, "17:05:38.1")
    assert (stamp.month if stamp else None, stamp.day if stamp else None) == (month, day)


def test_year_comes_from_the_file_and_rolls_over() -> None:
    stamps = [Stamp(10.0, 12, 31), Stamp(5.0, 12, 31, 2024), Stamp(20.0, 1, 1), None, Stamp(30.0)]
    resolved = resolve_stamps(stamps, assumed_year=1999)
    assert resolved[0].time == calendar.timegm((2024, 12, 31, 0, 0, 0)) + 10.0
    assert resolved[2].time == calendar.timegm((2025, 1, 1, 0, 0, 0)) + 20.0  # rolled over
    assert resolved[3].time is None
    assert (
        resolved[4].time == calendar.timegm((2025, 1, 1, 0, 0, 0)) + 30.0
    )  # date of the line before
    assert {r.clock for r in resolved if r.time is not None} == {CLOCK_LOCAL}


def test_assumed_year_and_epoch_clocks_are_marked() -> None:
    resolved = resolve_stamps([Stamp(1.0, 3, 4), Stamp(0.0, epoch=1700000000.0)], assumed_year=2026)
    assert resolved[0].clock == CLOCK_LOCAL_ASSUMED_YEAR
    assert resolved[1].time == 1700000000.0 and resolved[1].clock == CLOCK_EPOCH
