"""A dead rank whose own evidence shows why it died is named by that cause, not as a crash.

Three readings and one ordering, each from the source that prints what is read:

* DDP's check of the parameters across ranks at construction (torch/csrc/distributed/c10d/
  reducer.cpp ``verify_params_across_processes``): its count and shape messages are a
  collective mismatch (size_checks.match_ddp_check), not a crash; HD035 names the odd rank.
* A rank's exception raised in CPython's multiprocessing start path (popen_*.py
  ``_launch``, process.py ``start``): a worker that could not start (tb_stage
  CodeStage.WORKER_START); torch.multiprocessing starting the ranks, a Pool's or an
  executor's workers are no DataLoader worker's (tb_stage.frame_starter).
* A CUDA failure NCCL WARNed about from its set-up code before anything ran is the set-up
  failing (deaths view), also when a proxy's failed Connect sits beside it.
* HD030 yields to a more specific failure (Death.specific) that came before its death.

Inputs: the recorded scenarios of fixtures/logs/record.py (ddp_param_count,
ddp_model_mismatch, worker_unpicklable, pool_unpicklable: torch 2.13's own output) and
lines in the formats the sources above print.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs.size_checks import match_ddp_check, match_size_check
from hangdoc.analyzer.parsers.logs.tb_stage import Starter, frame_stage, frame_starter
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from hangdoc.analyzer.payloads.nccl import CollectiveMismatch, MismatchError, MismatchSource
from hangdoc.analyzer.views.deaths import first_deaths
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import RECORDED, events, findings_of, parse

_MP = "/usr/lib/python3.11/multiprocessing"


def diagnose(path: Path) -> Diagnosis:
    """What ``hangdoc analyze`` answers for one file (every registered rule)."""
    return analyze(load_paths([path]))


def _mismatch(text: str) -> CollectiveMismatch:
    hit = match_size_check(text)
    assert hit is not None and hit.kind is EventKind.COLLECTIVE_MISMATCH
    assert isinstance(hit.payload, CollectiveMismatch)
    assert hit.payload.source is MismatchSource.DDP_PARAMS
    return hit.payload


def test_ddp_count_check_names_both_ranks() -> None:
    said = _mismatch(
        "RuntimeError: DDP expects same model across all ranks, but Rank 5 has 128 params, "
        "while rank 0 has inconsistent 1506656875 params."
    )
    assert said.error is MismatchError.PARAM_COUNT
    assert said.side_a is not None and said.side_a.rank == 5
    assert said.side_b is not None and said.side_b.rank == 0


@pytest.mark.parametrize(
    ("text", "rank"),
    [
        (
            "RuntimeError: [3]: params[7] in this process with sizes [1024, 64] appears not "
            "to match sizes of the same param in process 0.",
            3,
        ),
        # torch before 1.11: the replica's index, no rank
        (
            "RuntimeError: replicas[0][2] in this process with sizes [8] appears not to "
            "match sizes of the same param in process 0.",
            None,
        ),
        (
            "params[0] in this process with sizes [4, 4] appears not to match strides of the "
            "same param in process 0.",
            None,
        ),
    ],
)
def test_ddp_shape_check(text: str, rank: int | None) -> None:
    said = _mismatch(text)
    assert said.error is MismatchError.PARAM_SHAPE
    assert said.side_a is not None and said.side_a.rank == rank
    assert said.side_b is not None and said.side_b.rank == 0


def test_other_lines_are_no_ddp_check() -> None:
    assert match_ddp_check("RuntimeError: DDP expects same model, but got something") is None
    assert match_ddp_check("params[0] in this process with sizes [4] is fine") is None


def test_ddp_count_check_recorded_culprit_is_the_rank_most_name() -> None:
    diagnosis = diagnose(RECORDED / "ddp_param_count.log")
    (found,) = [f for f in findings_of(diagnosis, "HD035") if f.culprit_ranks]
    assert diagnosis.findings[0] is found
    assert found.category.value == "collective_size_or_dtype_mismatch"
    assert found.culprit_ranks == (2,)
    assert not findings_of(diagnosis, "HD030")


def test_ddp_check_cut_is_read_by_the_catalog_row(tmp_path: Path) -> None:
    # the count message cut before its second rank: the catalog's row for the check's
    # literal (meanings.toml family torch-ddp-param-check) still reads it as the check's
    log = tmp_path / "console.log"
    log.write_text(
        "RuntimeError: DDP expects same model across all ranks, but Rank 5 has 128 "
        "params, while rank 0 has inconsi\n"
    )
    found = diagnose(log).findings[0]
    assert found.rule == "HD035" and found.category.value == "collective_size_or_dtype_mismatch"
    assert found.culprit_ranks == ()  # the cut took the rank it names
    assert found.title == "DDP found the ranks' models differ (parameters)"


@pytest.mark.parametrize(
    ("line", "stage"),
    [
        (f'  File "{_MP}/popen_fork.py", line 19, in __init__', CodeStage.WORKER_START),
        (f'  File "{_MP}/popen_spawn_posix.py", line 58, in _launch', CodeStage.WORKER_START),
        (f'  File "{_MP}/popen_forkserver.py", line 35, in _launch', CodeStage.WORKER_START),
        (f'  File "{_MP}/util.py", line 429, in spawnv_passfds', CodeStage.WORKER_START),
        (f'  File "{_MP}/process.py", line 121, in start', CodeStage.WORKER_START),
        (f'  File "{_MP}/context.py", line 288, in _Popen', CodeStage.WORKER_START),
        # the child's own start-up: a rank torch.multiprocessing started, or a worker whose
        # parent died while it started; no worker's start failing in its parent
        (f'  File "{_MP}/spawn.py", line 116, in spawn_main', None),
        (f'  File "{_MP}/popen_fork.py", line 28, in poll', None),  # waiting for a child
        (f'  File "{_MP}/process.py", line 314, in _bootstrap', None),
    ],
)
def test_worker_start_frames(line: str, stage: CodeStage | None) -> None:
    assert frame_stage(line) == stage


def test_starters() -> None:
    assert (
        frame_starter('  File "/t/torch/utils/data/dataloader.py", line 1176, in __init__')
        is Starter.DATALOADER
    )
    spawn = "/t/torch/multiprocessing/spawn.py"
    assert frame_starter(f'  File "{spawn}", line 280, in start_processes') is Starter.OTHER
    assert frame_starter(f'  File "{spawn}", line 275, in start_process') is Starter.OTHER
    assert frame_starter(f'  File "{spawn}", line 90, in _wrap') is None  # a rank's own work
    assert frame_starter(f'  File "{_MP}/pool.py", line 329, in _repopulate_pool') is (
        Starter.OTHER
    )
    assert frame_starter('  File "/job/train.py", line 1, in main') is None


def _raised(scenario: str) -> dict[int | None, ExceptionRaised]:
    found = {}
    for rank, event in events(parse(RECORDED / f"{scenario}.log"), "exception"):
        assert isinstance(event.payload, ExceptionRaised)
        found[rank] = event.payload
    return found


def test_recorded_worker_start_read() -> None:
    worker = _raised("worker_unpicklable")[1]
    assert worker.stage is CodeStage.WORKER_START and worker.by_dataloader
    pool = _raised("pool_unpicklable")[1]
    assert pool.stage is None and not pool.by_dataloader  # a Pool's workers: no DataLoader's


def test_worker_start_is_hd109s_not_a_crash() -> None:
    diagnosis = diagnose(RECORDED / "worker_unpicklable.log")
    top = diagnosis.findings[0]
    assert top.rule == "HD109" and top.culprit_ranks == (1,)
    assert not findings_of(diagnosis, "HD030")
    pooled = diagnose(RECORDED / "pool_unpicklable.log")
    assert pooled.findings[0].rule == "HD030" and pooled.findings[0].culprit_ranks == (1,)
    assert not findings_of(pooled, "HD109")


def _console(tmp_path: Path, text: str) -> Timeline:
    path = tmp_path / "console.log"
    path.write_text(text)
    return Timeline(load_paths([path]))


def test_cuda_failure_in_nccl_setup_beside_a_proxy_connect_is_no_death(tmp_path: Path) -> None:
    # NCCL's WARN format (src/include/debug.h: "host:pid:tid [dev] file:line NCCL WARN …");
    # transport.cc runs only while a communicator's connections are set up.
    tl = _console(
        tmp_path,
        "node1:11:21 [0] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'\n"
        "node1:11:22 [0] proxy.cc:1519 NCCL WARN [Proxy Service 0] Failed to execute "
        "operation Connect from rank 0, retcode 3\n",
    )
    assert not first_deaths(tl)


def test_crash_after_an_oom_yields_to_it(tmp_path: Path) -> None:
    # torch's OOM message (c10/cuda/CUDACachingAllocator.cpp), then the launcher's report
    # of the rank's exit and a shell's "Killed" as Lightning stops the others.
    log = tmp_path / "console.log"
    # The OOM's own lines name no rank: the launcher's report of rank 3 names it (one_exit).
    log.write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 3 has a total capacity of 79.1 GiB of which 1.2 GiB is free.\n"
        "[rank: 3] Child process with PID 11479 terminated with code 1. Forcefully "
        "terminating all other processes to avoid zombies\n"
        "Killed\n"
    )
    diagnosis = diagnose(log)
    assert diagnosis.findings[0].rule == "HD031"
    assert diagnosis.findings[0].culprit_ranks == (3,)
    assert not findings_of(diagnosis, "HD030")
    # the other order: a crash first, then an OOM: the crash is the cause
    log.write_text(
        "[rank1]: ValueError: bad batch shape at step 2\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    first = diagnose(log).findings[0]
    assert first.rule == "HD030" and first.culprit_ranks == (1,)
