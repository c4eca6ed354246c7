"""Signals the first-sight batch 2026-11-27f showed unread, each read from the source that
prints it (issue 21: recognition), and kept when the paste is mangled.

Every input here is hand-written in a documented format, cited at each test: NCCL's
net_ib.cc and enqueue.cc WARNs, py-spy's ``dump`` text with Ray's worker frames, the CUDA
driver API's error as libraries print it, torch's ProcessGroupNCCL watchdog lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.catalog import default_matcher
from hangdoc.analyzer.parsers.catalog.template import net_tag, regex_source, sample
from hangdoc.analyzer.parsers.logs.process import match_process
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.api import diagnose
from tests.unit.recognition_kit import MANGLINGS, Mangle


def _answer(tmp_path: Path, text: str, name: str = "console.txt") -> tuple[Category, str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    primary = diagnose([path]).primary
    assert primary is not None
    return primary.category, primary.rule


# ---- 1. NCCL's net_ib messages under a network plugin's tag ------------------------------
# NCCL 2.20-2.21 src/transport/net_ib.cc ncclIbTest: WARN("NET/IB : Got completion from peer
# %s with status=%d opcode=%d len=%d vendor err %d (%s)%s%s%s%s", …); a plugin built from
# that file names itself (ncclNet_t.name: nccl-rdma-sharp-plugins' "IBext"), a fork prints
# the same body under its tag, with or without the blank after the colon.
_COMPLETION = (
    "{tag}Got completion from peer 10.0.0.2<36315> with status=12 opcode=0 len=0 "
    "vendor err 129 (Send)"
)


@pytest.mark.parametrize("tag", ["NET/IB : ", "NET/IB: ", "NET/IBext : ", "NET/IBP:", "NET/OFI :"])
def test_an_ib_completion_error_is_read_under_any_transports_tag(tag: str) -> None:
    found = default_matcher().match(_COMPLETION.format(tag=tag))
    assert found is not None and found.row.project == "nccl"
    assert "Got completion from peer" in found.row.template


def test_the_rows_own_tag_wins_over_another_rows_with_the_same_body() -> None:
    found = default_matcher().match(_COMPLETION.format(tag="NET/IB : "))
    assert found is not None and found.text.startswith(net_tag(found.row.parts))


def test_a_tag_stays_exact_where_the_body_alone_says_too_little() -> None:
    # net_socket.cc "NET/Socket : Using%s" (the interfaces it found): "Using" alone is any
    # line's word, so the row keeps its own tag.
    parts = ("NET/Socket : Using",)
    assert net_tag(parts) == ""
    assert regex_source(parts).startswith("NET/Socket")
    long_body = ("NET/IB : Got completion with error ", "x")
    assert net_tag(long_body) == "NET/IB : "
    assert sample(long_body).startswith("NET/IB : ")


def test_a_tag_alone_matches_nothing() -> None:
    assert default_matcher().match("NET/IBP: peer 10.0.0.2 status=12") is None


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_plugins_completion_error_is_the_network_however_pasted(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = "The NCCL test script failed with:\n" + _COMPLETION.format(tag="NET/IBP:") + "\n"
    category, rule = _answer(tmp_path, mangle(text))
    assert category is Category.NCCL_NETWORK, how
    assert rule == "HD200"


# ---- 2. no algorithm/protocol at the first collective ------------------------------------
# NCCL 2.5-2.18 src/enqueue.cc getAlgoInfo (topoGetAlgoInfo from 2.19): WARN("Error : no
# algorithm/protocol available") when no enabled algorithm/protocol pair fits the op
# (NCCL_ALGO=CollNet without SHARP); every rank fails its first collective.
_NO_ALGO = (
    "node1:41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n"
    "node1:41368:41368 [2] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n"
    "Traceback (most recent call last):\n"
    '  File "/w/megatron/initialize.py", line 139, in _compile_dependencies\n'
    "    torch.distributed.barrier()\n"
    '  File "/opt/torch/distributed/distributed_c10d.py", line 2654, in barrier\n'
    "    work = default_pg.barrier(opts=opts)\n"
)


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_no_algorithm_at_the_first_collective_is_set_up(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    category, _ = _answer(tmp_path, mangle(_NO_ALGO))
    assert category is Category.NCCL_INIT, how


def test_no_algorithm_after_collectives_ran_is_not_set_up(tmp_path: Path) -> None:
    # A collective that completed before (NCCL's INFO line of a running collective,
    # enqueue.cc's "AllReduce: opCount …"): the communicator worked, so the stage rule
    # does not make the WARN a set-up failure.
    ran = (
        "node1:41367:41367 [1] NCCL INFO AllReduce: opCount 5 sendbuff 0x7f0 recvbuff 0x7f0 "
        "count 1 datatype 7 op 0 root 0 comm 0x55 [nranks=2] stream 0x56\n"
    )
    category, _ = _answer(tmp_path, ran + _NO_ALGO.split("Traceback")[0])
    assert category is not Category.NCCL_INIT


# ---- 3. a Ray worker's training thread waiting for its DataLoader ------------------------
# py-spy dump's text (py-spy src/dump.rs: "Process %d: %s", "Thread %#x (idle): \"%s\"",
# "    %s (%s:%d)"); Ray's default_worker.py runs Worker.main_loop on the main thread and Ray
# Train runs the training function in a thread of its own.
_RAY_DUMP = """\
Process 119809: ray::RayTrainWorker
Python v3.10.14 (/usr/bin/python3.10)

Thread 119809 (idle): "MainThread"
    main_loop (ray/_private/worker.py:946)
    <module> (ray/_private/workers/default_worker.py:330)
Thread 120110 (idle): "Thread-1"
    push_local_metrics (ray/train/v2/_internal/callbacks/metrics.py:223)
    run (threading.py:917)
    _bootstrap (threading.py:937)
Thread 120142 (idle): "TrainingThread(train_fn_per_worker)"
    select (selectors.py:416)
    wait (multiprocessing/connection.py:931)
    poll (multiprocessing/connection.py:257)
    get (multiprocessing/queues.py:113)
    _try_get_data (torch/utils/data/dataloader.py:1133)
    _get_data (torch/utils/data/dataloader.py:1278)
    _next_data (torch/utils/data/dataloader.py:1329)
    __next__ (torch/utils/data/dataloader.py:631)
    train_epoch (train.py:92)
    train_fn_per_worker (train.py:340)
    train_fn (ray/train/v2/_internal/util.py:77)
"""


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS[:3])
def test_a_ray_workers_training_thread_is_what_the_process_does(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    category, _ = _answer(tmp_path, mangle(_RAY_DUMP), "pyspy.txt")
    assert category is Category.DATALOADER, how


def test_a_ray_worker_with_nothing_in_its_other_threads_stays_on_the_main_thread(
    tmp_path: Path,
) -> None:
    idle = _RAY_DUMP.split("Thread 120142")[0]
    category, _ = _answer(tmp_path, idle, "pyspy.txt")
    assert category is not Category.DATALOADER


# ---- 4. the CUDA driver API's out-of-memory ----------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        # torch_memory_saver csrc/utils.h CURESULT_CHECK
        "[torch_memory_saver.cpp] CUresult error: 2 (out of memory) file=csrc/utils.h "
        "func=cu_mem_create line=187",
        # torch c10/cuda/driver_api.h C10_CUDA_DRIVER_CHECK (cuGetErrorString)
        "RuntimeError: CUDA driver error: out of memory",
        # cuGetErrorName, as CuPy's CUDADriverError prints it
        "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    ],
)
def test_the_driver_apis_out_of_memory_is_an_oom(line: str) -> None:
    hit = match_process(line)
    assert hit is not None and hit.kind is EventKind.CUDA_OOM


@pytest.mark.parametrize(
    "line",
    [
        "[torch_memory_saver.cpp] CUresult error: 1 (invalid argument) file=csrc/core.cpp",
        "CUresult error: 12 (out of memory? no: invalid pitch)",
    ],
)
def test_other_driver_errors_are_not_an_oom(line: str) -> None:
    hit = match_process(line)
    assert hit is None or hit.kind is not EventKind.CUDA_OOM


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_driver_oom_is_named_however_pasted(tmp_path: Path, how: str, mangle: Mangle) -> None:
    text = (
        "The actor fails in async_train.\n"
        "Error Log:`[torch_memory_saver.cpp] CUresult error: 2 (out of memory) "
        "file=csrc/utils.h func=cu_mem_create line=187`\n"
    )
    category, _ = _answer(tmp_path, mangle(text))
    assert category is Category.CUDA_OOM, how


# ---- 5. a counter of the job's own work going on past the watchdog's timeout -------------
# torch ProcessGroupNCCL.cpp (2.0-2.1) watchdog line; the job's own counter printed every
# 1000 items with the time taken so far (fixtures/cases/README.md: slow work shown
# advancing at the timeout is not a hang).
_WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=17, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran "
    "for 1800995 milliseconds before timing out.\n"
)
_COUNTED = "".join(f"skipped {n}000 batches, taken {n * 300}.5 seconds\n" for n in range(1, 8))


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_counter_going_on_after_the_timeout_is_slow_work(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = "resuming from the checkpoint\n" + _COUNTED + _WATCHDOG
    text += "resume done, taken 4100.2 seconds\n"
    category, rule = _answer(tmp_path, mangle(text))
    assert (category, rule) == (Category.NOT_A_HANG, "HD039"), how


def test_a_counter_that_stops_before_the_timeout_says_nothing(tmp_path: Path) -> None:
    category, _ = _answer(tmp_path, _COUNTED + _WATCHDOG)
    assert category is not Category.NOT_A_HANG


def test_a_counter_whose_clock_is_short_of_the_timeout_says_nothing(tmp_path: Path) -> None:
    # its work had run 6 s when the others had waited 30 minutes: not timed against it
    short = "".join(f"skipped {n}000 batches, taken {n}.5 seconds\n" for n in range(1, 5))
    text = short + _WATCHDOG + "resume done, taken 6.0 seconds\n"
    category, _ = _answer(tmp_path, text)
    assert category is not Category.NOT_A_HANG


def test_training_steps_are_not_such_a_counter(tmp_path: Path) -> None:
    steps = "".join(f"step {n} loss 0.{n} taken {n * 400} seconds\n" for n in range(1, 6))
    text = steps + _WATCHDOG + "step 6 loss 0.6 taken 2400 seconds\n"
    category, _ = _answer(tmp_path, text)
    assert category is not Category.NOT_A_HANG


# ---- 6. the watchdog's wait for the flight-recorder dump is no store timeout -------------
# torch 2.6-2.7 ProcessGroupNCCL.cpp, the watchdog's handler of a failed work: LOG(WARNING)
# << "timed out after waiting for " << waitTimeoutDumpInMilSec_ << "ms" << " flight
# recorder dumps to finish."
_FR_WAIT = (
    "[rank3]:[W602 11:18:52.489301002 ProcessGroupNCCL.cpp:2111] [PG ID 1 PG GUID 1 Rank 3] "
    "timed out after waiting for 60000ms flight recorder dumps to finish.\n"
    "[rank4]:[E602 11:18:52.531176265 ProcessGroupNCCL.cpp:684] [Rank 4] Some NCCL operations "
    "have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
    "operations might run on corrupted/incomplete data.\n"
)


def test_the_flight_recorder_dump_wait_is_not_a_store_timeout() -> None:
    found = default_matcher().match(_FR_WAIT.splitlines()[0])
    assert found is not None and found.row.meaning is not None
    assert found.row.meaning.for_text(found.text).kind is None


def test_training_steps_then_the_watchdog_is_not_set_up(tmp_path: Path) -> None:
    bars = "".join(
        f" 1%|          | {n}/1752 [00:{n + 10}<1:22:01,  2.83s/it]\n" for n in range(10, 24)
    )
    category, rule = _answer(tmp_path, bars + _FR_WAIT)
    assert category is not Category.NCCL_INIT and rule != "HD201"


def test_a_store_timeout_of_no_known_class_after_training_is_not_set_up(tmp_path: Path) -> None:
    # c10d socket.cpp's "[c10d] Socket Timeout" names no use of the store; after logged
    # training steps the store served something else (HD201's _GENERIC_STORE).
    bars = "".join(
        f" 1%|          | {n}/1752 [00:{n + 10}<1:22:01,  2.83s/it]\n" for n in range(10, 24)
    )
    category, rule = _answer(tmp_path, bars + "[W socket.cpp:601] [c10d] Socket Timeout\n")
    assert rule != "HD201" and category is not Category.NCCL_INIT
    _, before = _answer(tmp_path, "[W socket.cpp:601] [c10d] Socket Timeout\n", "alone.txt")
    assert before == "HD201"  # with nothing before it, the store's timeout is the set-up's
