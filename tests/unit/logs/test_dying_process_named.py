"""The rank of a death whose own lines name none, from the other messages that name the
dying process; and the GPU Xids NVIDIA's catalog lays at the program's door, read as the
death of the process on that GPU.

Hand-written lines of documented formats: torch.multiprocessing's ``ProcessExitedException:
process %d terminated with signal %s`` / ``… with exit code %d`` (torch/multiprocessing/
spawn.py ProcessContext.join); libstdc++'s ``terminate called after throwing an instance of
'T'`` and its ``what():`` line; CUDA's device-side assertion (``block: [x,0,0], thread:
[y,0,0] Assertion `…` failed.``); ~ProcessGroupNCCL's abort reason ``Process Group
destroyed on rank N`` under C10D_NCCL_CHECK's ``NCCL error in: …`` (ProcessGroupNCCL.cpp,
NCCLUtils.hpp); the watchdog's ``[PG ID i PG GUID g Rank r] Process group watchdog thread
terminated with exception: …`` (ProcessGroupNCCL's logPrefix); torch's ``[rankN]:`` line
tag; the NVIDIA driver's ``NVRM: Xid (PCI:…): N, pid=…, name=…, …`` (open-gpu-kernel-modules
kernel_rc.c krcReportXid; codes from nverror.h).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.analyzer.payloads.host import GpuXid
from hangdoc.analyzer.payloads.xid import XID_CATALOG, XidFault, xid_meaning
from hangdoc.api import diagnose

_ABORT = (
    "terminate called after throwing an instance of 'c10::Error'\n"
    "  what():  CUDA error: an illegal memory access was encountered\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
_SPAWN = (
    "Traceback (most recent call last):\n"
    '  File "main.py", line 213, in <module>\n'
    "    torch.multiprocessing.spawn(train, nprocs=4, args=(opt,), join=True)\n"
    '  File "/usr/lib/python3.9/site-packages/torch/multiprocessing/spawn.py", line 145, in join\n'
    "    raise ProcessExitedException(\n"
    "torch.multiprocessing.spawn.ProcessExitedException: process {n} terminated with {how}\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_spawn_names_the_aborted_process_by_its_signal(tmp_path: Path) -> None:
    # GIVEN an abort whose lines name no rank, and spawn's report that process 3 ended by
    # SIGABRT (the abort's signal)
    crash = _write(tmp_path, "crash.txt", _ABORT)
    spawn = _write(tmp_path, "spawn.txt", _SPAWN.format(n=3, how="signal SIGABRT"))
    # WHEN it is diagnosed
    found = diagnose([crash, spawn]).findings[0]
    # THEN the crash is rank 3's: spawn's index is the rank it passed to the function
    assert (found.rule, found.category.value, found.culprit_ranks) == (
        "HD030",
        "rank_dead_or_crashed",
        (3,),
    )
    assert "launcher reports rank 3" in found.explanation


def test_two_workers_ended_by_the_signal_name_nobody(tmp_path: Path) -> None:
    # GIVEN the same abort, and reports that processes 3 and 1 both ended by SIGABRT:
    # which of them printed the abort, nothing says
    crash = _write(tmp_path, "crash.txt", _ABORT)
    spawn = _write(tmp_path, "spawn.txt", _SPAWN.format(n=3, how="signal SIGABRT"))
    other = _write(tmp_path, "other.txt", _SPAWN.format(n=1, how="signal SIGABRT"))
    found = diagnose([crash, spawn, other]).findings[0]
    # THEN no culprit is named
    assert found.rule == "HD030"
    assert found.culprit_ranks == ()


def test_a_signal_the_failure_does_not_show_is_not_its_ending(tmp_path: Path) -> None:
    # GIVEN a Python exception (its process exits with code 1), and spawn's report that
    # process 2 ended by SIGSEGV: not how the exception's process ends
    crash = _write(
        tmp_path,
        "crash.txt",
        'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n'
        "    main()\nValueError: bad input\n",
    )
    spawn = _write(tmp_path, "spawn.txt", _SPAWN.format(n=2, how="signal SIGSEGV"))
    found = diagnose([crash, spawn]).findings[0]
    # THEN the segfault is a death of its own (certain), not the exception's rank by the
    # launcher's word: no "launcher reports" reading is added
    assert "launcher reports rank 2 as the one worker" not in found.explanation


_TIMM = (
    "/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:276: operator(): block: [0,0,0],"
    ' thread: [28,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"`'
    " failed.\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 681, in train_one_epoch\n'
    "    loss = loss_fn(output, target)\n"
    "RuntimeError: CUDA error: device-side assert triggered\n"
    "terminate called after throwing an instance of 'c10::Error'\n"
    "  what():  NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181, unhandled cuda"
    " error, NCCL version 21.0.3\n"
    "Process Group destroyed on rank {rank}\n"
    "Exception raised from ncclCommAbort at ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181"
    " (most recent call first):\n"
)


def test_the_groups_destructor_names_the_rank_of_the_exception_above_it(tmp_path: Path) -> None:
    # GIVEN a device-side assertion, the exception that raises it, and the process's exit:
    # its abort, whose what() is ~ProcessGroupNCCL's failed abort "destroyed on rank 2"
    console = _write(tmp_path, "console.txt", _TIMM.format(rank=2))
    found = diagnose([console]).findings[0]
    # THEN the failure is rank 2's, and rank 2 is not said to have waited for it
    assert (found.rule, found.culprit_ranks, found.waiting_ranks) == ("HD030", (2,), ())
    assert "Process Group destroyed on rank 2" in found.explanation


def test_a_teardown_of_another_rank_in_the_window_names_nobody(tmp_path: Path) -> None:
    # GIVEN the same failure, with a second process's teardown line in the what() window:
    # two processes' lines
    text = _TIMM.format(rank=2).replace(
        "Process Group destroyed on rank 2\n",
        "Process Group destroyed on rank 2\nProcess Group destroyed on rank 5\n",
    )
    console = _write(tmp_path, "console.txt", text)
    found = diagnose([console]).findings[0]
    # THEN no rank is taken for the failure
    assert found.rule == "HD030"
    assert 2 not in found.culprit_ranks and 5 not in found.culprit_ranks


_WATCHDOG = (
    "{tag}[E811 01:10:50.482336908 ProcessGroupNCCL.cpp:1515] [PG ID 2 PG GUID 3 Rank {rank}] "
    "Process group watchdog thread terminated with exception: CUDA error: an illegal memory "
    "access was encountered\n"
    "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 "
    "(most recent call first):\n"
)


def test_a_groups_prefix_names_the_rank_where_nothing_names_a_global_one(tmp_path: Path) -> None:
    # GIVEN a watchdog's CUDA error under a non-default group's prefix, and no global rank
    console = _write(tmp_path, "console.txt", _WATCHDOG.format(tag="", rank=1))
    found = diagnose([console]).findings[0]
    # THEN the group's rank names the process, and the finding says whose numbering it is
    assert (found.rule, found.culprit_ranks) == ("HD030", (1,))
    assert "process-group prefix" in found.explanation


def test_a_groups_prefix_is_not_mixed_with_global_ranks(tmp_path: Path) -> None:
    # GIVEN the same line, and another process's line tagged with its global rank
    text = _WATCHDOG.format(tag="", rank=1) + (
        "[rank5]:[E811 01:20:51.0 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective"
        " operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"
    )
    console = _write(tmp_path, "console.txt", text)
    found = diagnose([console]).findings[0]
    # THEN the group rank (another numbering) is not taken as a global one
    assert 1 not in found.culprit_ranks


def test_a_first_line_rank_tag_cut_at_its_bracket_is_restored() -> None:
    # GIVEN a paste whose first line lost the "[" of torch's "[rank0]:" tag
    text = _WATCHDOG.format(tag="rank0]:", rank=0)
    fixed = unmangle(text)
    # THEN the tag is whole again, and the line is rank 0's
    assert fixed is not None
    assert fixed.text.startswith("[rank0]:[E811 ")


@pytest.mark.parametrize("cut", ["k0]:[E811 x", "[rank0]:[E811 x", "rank0]: x"])
def test_a_tag_cut_inside_its_word_or_whole_is_left(cut: str) -> None:
    # GIVEN a tag cut inside its word ("rank" or "default" not known), a whole one, or one
    # followed by a space (no tagged line's shape)
    fixed = unmangle(cut + "\nnext line\n")
    # THEN its first line is left as it is
    assert fixed is None or fixed.text.split("\n", 1)[0] == cut


def test_xid_meanings_come_from_one_table() -> None:
    # The catalog's classes: the program's own fault, the driver's clean-up, the hardware
    meaning_13, meaning_31 = xid_meaning(13), xid_meaning(31)
    assert meaning_13 is not None and meaning_13.fault is XidFault.APPLICATION
    assert meaning_13.mnemonic == "ROBUST_CHANNEL_GR_EXCEPTION"
    assert meaning_31 is not None and meaning_31.fault is XidFault.APPLICATION
    assert XID_CATALOG[45].fault is XidFault.AFTER_EFFECT
    assert XID_CATALOG[79].fault is XidFault.HARDWARE
    assert XID_CATALOG[63].fault is XidFault.WARNING
    assert xid_meaning(99999) is None and xid_meaning(None) is None
    # a derived Xid naming an earlier one is not the program's fault itself
    assert GpuXid(xid=13).program_fault
    assert not GpuXid(xid=45, caused_by_xid=13).program_fault
    assert not GpuXid(xid=79).program_fault


_XID_13 = (
    "NVRM: Xid (PCI:0000:63:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on "
    "(GPC 1, TPC 4, SM 1): Out Of Range Address\n"
)


def test_an_application_xid_is_the_death_of_the_process_on_that_gpu(tmp_path: Path) -> None:
    # GIVEN the driver's Xid 13 for a python process, nothing else
    dmesg = _write(tmp_path, "dmesg.txt", _XID_13)
    diagnosis = diagnose([dmesg])
    # THEN the process died of its kernel's fault (not the GPU's hardware)
    first = diagnosis.findings[0]
    assert (first.rule, first.category.value) == ("HD030", "rank_dead_or_crashed")
    assert "Xid 13" in first.title
    hd300 = next(f for f in diagnosis.findings if f.rule == "HD300")
    assert hd300.severity.value == "info"


def test_a_hardware_xid_is_no_death_of_the_program(tmp_path: Path) -> None:
    # GIVEN a double-bit ECC error's Xid (the GPU's memory)
    dmesg = _write(tmp_path, "dmesg.txt", "NVRM: Xid (PCI:0000:63:00): 48, pid=4242, DBE\n")
    first = diagnose([dmesg]).findings[0]
    # THEN the GPU's hardware is the cause
    assert (first.rule, first.category.value) == ("HD300", "gpu_hardware_or_driver")
