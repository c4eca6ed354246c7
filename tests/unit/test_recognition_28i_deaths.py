"""How a rank died or faulted, as the first-sight batch 2026-11-28i showed it unread, each
read from the source that prints it (issue 21: recognition), and kept when the paste is
mangled.

Every input here is hand-written in a documented format, cited at each test:
torch_memory_saver's first CURESULT_CHECK, CPython's fatal_error (Python/pylifecycle.c),
gloo's ibverbs pair (gloo/transport/ibverbs/pair.cc handleCompletion) and torch's
ProcessGroupGloo::monitoredBarrier.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.catalog import default_matcher
from hangdoc.analyzer.parsers.logs.process import match_process
from hangdoc.analyzer.payloads.launch import FatalReport, FatalSignal, SignalName
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.api import diagnose
from tests.unit.recognition_kit import MANGLINGS, Mangle
from tests.unit.recognition_kit import answer as _answer

# ---- 1. torch_memory_saver's first CURESULT_CHECK: the bare CUresult ----------------------
# torch_memory_saver 5c99b42 (Dec 2024) csrc/torch_memory_saver.cpp: std::cerr <<
# "[torch_memory_saver.cpp] CUresult error " << " result=" << __result << " file=" …;
# cuda.h: CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_INVALID_VALUE = 1, 20 … other errors.
_SAVER = "[torch_memory_saver.cpp] CUresult error  result={code} file=csrc/x.cpp func=f line=9"


def test_the_bare_cuda_driver_oom_code_is_an_oom() -> None:
    hit = match_process(_SAVER.format(code=2))
    assert hit is not None and hit.kind is EventKind.CUDA_OOM


@pytest.mark.parametrize("code", [1, 20, 201, 999])
def test_other_bare_cuda_driver_codes_are_not_an_oom(code: int) -> None:
    hit = match_process(_SAVER.format(code=code))
    assert hit is None or hit.kind is not EventKind.CUDA_OOM


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_bare_driver_oom_before_a_timeout_is_named(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = (
        "(WorkerDict pid=811) resuming the rollout's memory before generation\n"
        "(WorkerDict pid=811) " + _SAVER.format(code=2) + "\n"
        "(WorkerDict pid=812) [rank1]:[E101 10:00:00.000000000 ProcessGroupNCCL.cpp:629] "
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLGATHER, NumelIn=8, NumelOut=16, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out.\n"
    )
    category, _, _ = _answer(tmp_path, mangle(text))
    assert category is Category.CUDA_OOM, how


# ---- 2. CPython's own fatal error -------------------------------------------------------
# Python/pylifecycle.c fatal_error: "Fatal Python error: " [func ": "] msg, "Python runtime
# state: …", the threads' tracebacks, then fatal_error_exit(-1): abort().
@pytest.mark.parametrize(
    "line",
    [
        "Fatal Python error: none_dealloc: deallocating None",
        "Fatal Python error: PyThreadState_Get: the function must be called with the GIL held",
        "Fatal Python error: deallocating None",  # before 3.9: no function name
    ],
)
def test_cpythons_fatal_error_is_an_abort(line: str) -> None:
    hit = match_process(line)
    assert hit is not None and hit.kind is EventKind.FATAL_SIGNAL
    fatal = hit.payload
    assert isinstance(fatal, FatalSignal)
    assert fatal.signal is SignalName.SIGABRT
    assert fatal.reported_by is FatalReport.PYTHON_FATAL_ERROR


def test_faulthandlers_header_keeps_its_signal() -> None:
    hit = match_process("Fatal Python error: Segmentation fault")
    assert hit is not None and isinstance(hit.payload, FatalSignal)
    assert hit.payload.signal is SignalName.SIGSEGV
    assert hit.payload.reported_by is FatalReport.PYTHON


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_fatal_python_error_before_the_agent_stops_the_others_is_a_death(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = (
        "Train:   4%|███         | 166/4634 [4:38:39<124:59:57, 100.72s/it]\n"
        "Fatal Python error: none_dealloc: deallocating None\n"
        "Python runtime state: initialized\n"
        "\n"
        "Thread 0x00007f1c920e2640 (most recent call first):\n"
        '  File "/opt/x/trainer.py", line 2237 in train\n'
        "W0908 08:36:53.275135 2716321 site-packages/torch/distributed/elastic/"
        "multiprocessing/api.py:900] Sending process 2716409 closing signal SIGTERM\n"
    )
    category, _, _ = _answer(tmp_path, mangle(text))
    assert category is Category.RANK_DEAD, how


# ---- 3. gloo's ibverbs work completions ---------------------------------------------------
# gloo/transport/ibverbs/pair.cc handleCompletion: GLOO_ENFORCE_EQ(wc->status,
# IBV_WC_SUCCESS, "Recv for slot ", slot, ": ", ibv_wc_status_str(wc->status)) and its
# "Send", "Memory region send/recv" siblings; GLOO_ENFORCE throws gloo::EnforceNotMet,
# "[enforce fail at <file>:<line>] <cond>. <a> vs <b>. <msg>". infiniband/verbs.h:
# IBV_WC_REM_ACCESS_ERR = 10 ("remote access error"), IBV_WC_RETRY_EXC_ERR = 12.
_GLOO_IB = (
    "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
    "  what():  [enforce fail at /src/third_party/gloo/gloo/transport/ibverbs/pair.cc:470] "
    "wc->status == IBV_WC_SUCCESS. {code} vs 0. {what} for slot 3: {status}\n"
)


@pytest.mark.parametrize(
    ("code", "what", "status"),
    [
        (10, "Recv", "remote access error"),
        (12, "Send", "transport retry counter exceeded"),
        (12, "Memory region recv", "transport retry counter exceeded"),
    ],
)
def test_an_ibverbs_completion_error_is_the_transports(code: int, what: str, status: str) -> None:
    line = _GLOO_IB.format(code=code, what=what, status=status).splitlines()[1]
    found = default_matcher().match(line)
    assert found is not None and found.row.meaning is not None
    assert found.row.meaning.kind == "nccl_transport_error"
    assert found.row.meaning.category == "nccl_network_or_transport_error"


# With the first line cut, the first abort's line is gone and the second pair's what()
# repeats the first one's words (one event for both): the abort left is still its own.
@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_the_abort_of_an_ibverbs_completion_error_is_no_crash_of_its_own(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = _GLOO_IB.format(code=10, what="Recv", status="remote access error") * 2
    category, rule, _ = _answer(tmp_path, mangle(text))
    assert category is Category.NCCL_NETWORK, how
    assert rule == "HD200", how


# ---- 4. the other ranks' side of a monitored barrier ------------------------------------
# torch/csrc/distributed/c10d/ProcessGroupGloo.cpp monitoredBarrier: "only enforce timeout
# on rank 0"; a rank other than 0 raises "Rank N successfully reached monitoredBarrier, but
# received errors while waiting for send/recv from rank 0. Please check rank 0 logs for
# faulty rank." when its send/recv to rank 0 fails; rank 0's own report names the ranks
# that did not arrive ("Rank 2 failed to pass monitoredBarrier in 30000 ms").
_PEER = (
    "RuntimeError: Rank {me} successfully reached monitoredBarrier, but received errors "
    "while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
)


def test_the_peers_side_alone_names_rank_0_as_dead(tmp_path: Path) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/x/train.py", line 9, in <module>\n'
        "    dist.monitored_barrier()\n" + _PEER.format(me=1)
    )
    category, rule, culprits = _answer(tmp_path, text)
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD037", (0,))


def test_rank_0s_own_report_still_names_the_ranks_that_did_not_arrive(tmp_path: Path) -> None:
    text = (
        _PEER.format(me=1) + "RuntimeError: [Rank 0]: Rank 2 failed to pass monitoredBarrier "
        "in 30000 ms\n"
    )
    category, rule, culprits = _answer(tmp_path, text)
    assert (category, rule, culprits) == (Category.RANK_DIVERGENCE, "HD037", (2,))


# ---- 5. CUDA's initialization error as an abort's what(): a forked child's CUDA ----------
# c10/cuda/CUDAException.cpp c10_cuda_check_implementation throws c10::Error "CUDA error:
# <cudaGetErrorString>"; uncaught in C++ (a destructor, a deleter, a thread), libstdc++
# prints "terminate called after throwing an instance of 'c10::Error'" then "  what():  …".
# cudaErrorInitializationError's string is "initialization error"; torch's notes on
# multiprocessing: the CUDA runtime does not support the fork start method.
_FORKED_ABORT = (
    "terminate called after throwing an instance of 'c10::Error'\n"
    "  what():  CUDA error: initialization error\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


def test_cudas_initialization_error_as_an_aborts_what_is_a_forked_childs(
    tmp_path: Path,
) -> None:
    category, rule, _ = _answer(tmp_path, _FORKED_ABORT)
    assert (category, rule) == (Category.DATALOADER, "HD109")
    assert all(f.rule != "HD301" for f in diagnose([tmp_path / "console.txt"]).findings)


def test_cudas_initialization_error_raised_in_python_stays_the_drivers(tmp_path: Path) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/x/train.py", line 3, in <module>\n'
        "    torch.zeros(1).cuda()\n"
        "RuntimeError: CUDA error: initialization error\n"
    )
    path = tmp_path / "console.txt"
    path.write_text(text, encoding="utf-8")
    assert all(f.rule != "HD109" for f in diagnose([path]).findings)


# ProcessGroupGloo's logAndThrow: error + "\n Original exception: \n" + e.what(); gloo's
# tcp/unbound_buffer.cc waitRecv: "Timed out waiting <ms>ms for recv operation to complete"
# (rank 0 alive and elsewhere past the group's timeout), tcp/pair.cc: "Connection closed by
# peer [<addr>]:<port>" (rank 0's process gone).
@pytest.mark.parametrize(
    ("original", "category"),
    [
        (
            "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
            "1800000ms for recv operation to complete",
            Category.RANK_DIVERGENCE,
        ),
        (
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
            "[10.0.0.1]:4523",
            Category.RANK_DEAD,
        ),
    ],
)
def test_the_peers_original_exception_says_whether_rank_0_was_alive(
    tmp_path: Path, original: str, category: Category
) -> None:
    text = _PEER.format(me=1) + " Original exception: \n" + original + "\n"
    assert _answer(tmp_path, text)[:2] == (category, "HD037")
