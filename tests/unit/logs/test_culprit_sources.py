"""Where a culprit's rank comes from when the failure's own lines do not say it: a process's
own lines joined to the reports naming its pid, the launcher's report of the one worker that
exited with an error of its own, and the one rank that did not abort.

Hand-written lines of documented formats: Ray's log prefix ``(RayTrainWorker pid=N,
ip=A)`` (python/ray/_private/log_monitor.py), Ray Train's ``Setting up process group for:
env://… [rank=R, world_size=W]`` (python/ray/train/torch/config.py) and the raylet's ``A
worker died or was killed while executing a task … Worker PID: N Worker exit type:
SYSTEM_ERROR`` (src/ray/raylet/node_manager.cc, as parsers/logs/process.py reads it);
vLLM V1's worker prefix ``(Worker_TP1 pid=N)`` (vllm/v1/executor/multiproc_executor.py
``setup_proc_title_and_log_prefix`` and vllm's ``decorate_logs``);
Slurm's ``srun: error: NODE: task N: Exited with exit code C`` and ``tasks 0-2:
Terminated`` (src/srun/, read by parsers/logs/process.py); torchelastic's ChildFailedError
table (torch/distributed/elastic/multiprocessing/errors/__init__.py ``format_msg``); a
Python traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.prefixes import peel
from hangdoc.analyzer.vocabulary import EventKind, RankFrom
from hangdoc.api import diagnose
from tests.unit.logs.helpers import events, parse

_RAY_DIED = (
    "2023-01-17 17:21:35,472\tWARNING worker.py:1829 -- A worker died or was killed while "
    "executing a task by an unexpected system error. To troubleshoot the problem, check the "
    "logs for the dead worker. RayTask ID: ffffffffffffffff686c4586a18aa58bf9747eb504000000 "
    "Worker ID: 0c62b78d30f3642bc1fc9a6f3cb257202e1230b03d988031722bc993 Node ID: "
    "38300cefdc3b42caebdba478cc1da1adbba154304cecb24fd8ba1a7e Worker IP address: 10.0.0.2 "
    "Worker port: 10016 Worker PID: {pid} Worker exit type: SYSTEM_ERROR Worker exit detail: "
    "Worker unexpectedly exits with a connection error code 2. End of file.\n"
)


def _setup(pid: int, ip: str, rank: int) -> str:
    return (
        f"(RayTrainWorker pid={pid}, ip={ip}) 2023-01-17 17:01:19,000\tINFO config.py:86 -- "
        f"Setting up process group for: env://10.0.0.1:29500 [rank={rank}, world_size=2]\n"
    )


def test_a_ray_workers_death_is_the_rank_its_own_lines_name(tmp_path: Path) -> None:
    # GIVEN two Ray Train workers whose set-up lines name their ranks, and the raylet's
    # report that the worker of pid 1942 died
    console = tmp_path / "console.txt"
    console.write_text(
        _setup(1941, "10.0.0.1", 1)
        + _setup(1942, "10.0.0.2", 0)
        + "(RayTrainWorker pid=1942, ip=10.0.0.2) Returning from train func!!\n"
        + _RAY_DIED.format(pid=1942),
        encoding="utf-8",
    )
    # WHEN it is read
    died = events(parse(console), EventKind.ACTOR_DIED)
    # THEN the death is rank 0's, by its pid
    assert [(rank, e.rank_from) for rank, e in died] == [(0, RankFrom.PID)]
    found = diagnose([console]).findings[0]
    assert (found.rule, found.culprit_ranks) == ("HD030", (0,))


def test_a_pid_whose_lines_name_two_ranks_gives_none(tmp_path: Path) -> None:
    # GIVEN one pid whose lines name rank 0 and rank 1 (two jobs' lines, or a peer's)
    console = tmp_path / "console.txt"
    console.write_text(
        _setup(1942, "10.0.0.2", 0) + _setup(1942, "10.0.0.2", 1) + _RAY_DIED.format(pid=1942),
        encoding="utf-8",
    )
    died = events(parse(console), EventKind.ACTOR_DIED)
    # THEN the death stays the job's: no rank is guessed
    assert [rank for rank, _ in died] == [None]


_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 50, in <module>\n'
    "    main()\n"
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
)
_SRUN = (
    "srun: error: gpu07: task 3: Exited with exit code 1\n"
    "srun: launch/slurm: _step_signal: Terminating StepId=1.0\n"
    "srun: error: gpu07: tasks 0-2: Terminated\n"
)


def test_an_unranked_failure_is_the_one_worker_the_launcher_saw_exit(tmp_path: Path) -> None:
    # GIVEN a traceback with no rank on its lines, and srun's report that task 3 exited
    # with an error while it terminated tasks 0-2 after it
    console = tmp_path / "console.txt"
    console.write_text(_TRACEBACK + _SRUN, encoding="utf-8")
    # WHEN it is diagnosed
    found = diagnose([console]).findings[0]
    # THEN the failure is rank 3's, and the finding says how that was read
    assert (found.rule, found.category, found.culprit_ranks) == (
        "HD030",
        "rank_dead_or_crashed",
        (3,),
    )
    assert "the launcher reports rank 3" in found.explanation


def test_the_same_failure_printed_twice_is_no_one_workers(tmp_path: Path) -> None:
    # GIVEN the same traceback printed by two workers (folded into one event that counts
    # the repeat): two processes failed, and the launcher names only the first to exit
    console = tmp_path / "console.txt"
    console.write_text(_TRACEBACK + _TRACEBACK + _SRUN, encoding="utf-8")
    found = diagnose([console]).findings[0]
    # THEN no rank is named
    assert (found.rule, found.culprit_ranks) == ("HD030", ())


def _entry(index: int, rank: int, code: int, when: str) -> str:
    signal = "  traceback : Signal 6 (SIGABRT) received by PID 200{rank}\n"
    plain = "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    return (
        f"[{index}]:\n"
        f"  time      : 2024-11-05_{when}\n"
        "  host      : node1\n"
        f"  rank      : {rank} (local_rank: {rank})\n"
        f"  exitcode  : {code} (pid: 200{rank})\n"
        "  error_file: <N/A>\n" + (signal.format(rank=rank) if code == -6 else plain)
    )


def _table(failures: list[str], root: str) -> str:
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        + "=" * 60
        + "\ntrain.py FAILED\n"
        + "-" * 60
        + "\nFailures:\n"
        + "".join(failures)
        + "-" * 60
        + "\nRoot Cause (first observed failure):\n"
        + root
        + "=" * 60
        + "\n"
    )


def test_of_workers_ended_for_no_stated_reason_the_one_that_did_not_abort(
    tmp_path: Path,
) -> None:
    # GIVEN torchrun's table: ranks 0 and 1 aborted (SIGABRT, the watchdog's teardown),
    # rank 2 exited with code 1
    table = tmp_path / "console.txt"
    table.write_text(
        _table(
            [_entry(1, 0, -6, "10:12:31"), _entry(2, 1, -6, "10:12:31")],
            _entry(0, 2, 1, "10:02:31"),
        ),
        encoding="utf-8",
    )
    found = diagnose([table]).findings[0]
    # THEN rank 2 is the culprit
    assert (found.rule, found.culprit_ranks) == ("HD030", (2,))
    # GIVEN two ranks that exited with code 1 beside the abort: which began it, nothing says
    table.write_text(
        _table(
            [_entry(1, 0, -6, "10:12:31"), _entry(2, 1, 1, "10:12:31")],
            _entry(0, 2, 1, "10:12:31"),
        ),
        encoding="utf-8",
    )
    found = diagnose([table]).findings[0]
    assert found.rule == "HD030" and found.culprit_ranks == (0, 1, 2)


@pytest.mark.parametrize(
    ("prefix", "rank"),
    [
        ("(Worker_TP1 pid=2004) ", 1),  # tensor parallel only: the TP rank is the rank
        ("(Worker_PP3 pid=2004) ", 3),  # one rank per stage
        ("(Worker_TP1_EP1 pid=2004) ", 1),  # the expert rank is another numbering
        ("(Worker_PP1_TP0 pid=2004) ", None),  # stage * tp_size + tp: the size is not given
        ("(Worker_DP1_TP0 pid=2004) ", None),  # a replica's world of its own
        ("(RayWorkerWrapper pid=2004, ip=10.0.0.2) ", None),  # Ray's prefix names no rank
    ],
)
def test_a_vllm_workers_prefix_names_its_rank_where_one_coordinate_places_it(
    prefix: str, rank: int | None
) -> None:
    """vLLM V1's worker prefix (vllm/v1/executor/multiproc_executor.py
    setup_proc_title_and_log_prefix, vllm's decorate_logs)."""
    tagged = peel(prefix + "ERROR 01-01 10:01:00 [multiproc_executor.py:470] WorkerProc hit")
    assert (tagged.rank, tagged.pid) == (rank, 2004)


def test_a_vllm_workers_crash_is_its_rank(tmp_path: Path) -> None:
    console = tmp_path / "console.txt"
    console.write_text(
        "(Worker_TP0 pid=2003) INFO 01-01 10:00:00 [parallel_state.py:1004] started\n"
        + "".join("(Worker_TP1 pid=2004) " + line + "\n" for line in _TRACEBACK.splitlines()),
        encoding="utf-8",
    )
    found = diagnose([console]).findings[0]
    assert (found.rule, found.culprit_ranks) == ("HD030", (1,))


def test_the_process_the_kernel_killed_is_the_rank_nccl_placed_at_its_pid(tmp_path: Path) -> None:
    """NCCL's init line (init.cc: "host:pid:tid [dev] NCCL INFO comm %p rank %d nranks %d
    … Init COMPLETE") gives each pid its rank; the kernel's OOM killer (mm/oom_kill.c
    ``__oom_kill_process``: "Out of memory: Killed process %d (%s) total-vm:…") names the
    pid it killed: that rank died."""
    console = tmp_path / "console.txt"
    console.write_text(
        "".join(
            f"node1:200{r}:200{r} [{r}] NCCL INFO comm 0x558{r} rank {r} nranks 4 cudaDev {r} "
            f"nvmlDev {r} busId {r}000 commId 0xabc - Init COMPLETE\n"
            for r in range(4)
        )
        + "[Tue Jan  2 10:00:00 2024] Out of memory: Killed process 2002 (python) "
        "total-vm:123456789kB, anon-rss:98765432kB, file-rss:0kB, shmem-rss:0kB, UID:1000 "
        "pgtables:200000kB oom_score_adj:0\n",
        encoding="utf-8",
    )
    killed = events(parse(console), EventKind.HOST_OOM_KILL)
    assert [(rank, e.rank_from) for rank, e in killed] == [(2, RankFrom.PID)]
    found = diagnose([console]).findings[0]
    assert (found.rule, found.culprit_ranks) == ("HD030", (2,))


@pytest.mark.parametrize("stamp", ["", "2024-05-01T10:00:00.271828123Z "])
def test_the_spawned_process_that_raised_keeps_its_index_under_a_stamp(
    tmp_path: Path, stamp: str
) -> None:
    """torch.multiprocessing's ProcessRaisedException (torch/multiprocessing/spawn.py:
    "\\n\\n-- Process %d terminated with the following error:\\n" and the child's trace),
    each line under a shipper's stamp (``kubectl logs --timestamps``' RFC 3339 time): the
    stamp's separator is not the message's first dash."""
    lines = [
        "torch.multiprocessing.spawn.ProcessRaisedException: ",
        "",
        "-- Process 1 terminated with the following error:",
        "Traceback (most recent call last):",
        '  File "/opt/fairseq/distributed_utils.py", line 177, in all_gather_list',
        "    result.append(pickle.loads(bytes(buffer)))",
        "_pickle.UnpicklingError: invalid load key, '\\xc3'.",
    ]
    console = tmp_path / "console.txt"
    console.write_text("".join(stamp + line + "\n" for line in lines), encoding="utf-8")
    found = diagnose([console]).findings[0]
    assert (found.rule, found.culprit_ranks) == ("HD030", (1,))


@pytest.mark.parametrize(
    ("launcher", "rank"),
    [
        # DeepSpeed's launcher (deepspeed/launcher/launch.py sigkill_handler): the command
        # of the worker that ended, with its --local_rank, "exits with return code = 1"
        (
            "[2024-01-01 10:05:00,000] [INFO] [launch.py:315:sigkill_handler] Killing "
            "subprocess 1001\n"
            "[2024-01-01 10:05:00,000] [ERROR] [launch.py:321:sigkill_handler] "
            "['/usr/bin/python', '-u', 'train.py', '--local_rank=2'] exits with return code = 1\n",
            2,
        ),
        # torch.multiprocessing (torch/multiprocessing/spawn.py ProcessExitedException)
        (
            "torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with "
            "exit code 1\n",
            3,
        ),
    ],
)
def test_each_launchers_report_of_the_worker_that_exited(
    tmp_path: Path, launcher: str, rank: int
) -> None:
    console = tmp_path / "console.txt"
    console.write_text(
        "Traceback (most recent call last):\n"
        '  File "train.py", line 50, in worker\n'
        "    loss = step(batch)\n"
        "ValueError: Expected input batch_size (16) to match target batch_size (12).\n" + launcher,
        encoding="utf-8",
    )
    found = diagnose([console]).findings[0]
    assert (found.rule, found.culprit_ranks) == ("HD030", (rank,))


_LIGHTNING = (
    "[rank: 3] Child process with PID 11479 terminated with code 1. Forcefully terminating "
    "all other processes to avoid zombies \U0001f9df\n"
)


def test_lightnings_report_of_its_child_names_a_local_rank(tmp_path: Path) -> None:
    """Lightning's _ChildProcessObserver (lightning/fabric/strategies/launchers/
    subprocess_script.py): rank_prefixed_message("Child process with PID {pid} terminated
    with code {code}. Forcefully terminating all other processes to avoid zombies 🧟",
    rank=i + 1), the child's local rank."""
    console = tmp_path / "console.txt"
    console.write_text(_LIGHTNING, encoding="utf-8")
    [(rank, report)] = events(parse(console), EventKind.WORKER_FAILED)
    # the local rank the report names (mapped as a [default3]: prefix is, then its pid),
    # not the "[rank: 3]" tag read as a global rank
    assert rank == 3 and report.rank_from in (RankFrom.LOCAL_RANK_SINGLE_NODE, RankFrom.PID)


def test_an_unranked_oom_is_the_worker_lightning_saw_exit(tmp_path: Path) -> None:
    console = tmp_path / "console.txt"
    console.write_text(
        "Traceback (most recent call last):\n"
        '  File "train.py", line 450, in main\n'
        "    trainer.fit(model)\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 128.00 GiB. GPU 3 "
        "has a total capacity of 79.22 GiB of which 24.22 GiB is free.\n" + _LIGHTNING,
        encoding="utf-8",
    )
    found = diagnose([console]).findings[0]
    assert (found.rule, found.category, found.culprit_ranks) == ("HD031", "cuda_oom", (3,))
    assert "the launcher reports rank 3" in found.explanation


def test_a_shells_killed_is_the_launchers_end_not_a_workers(tmp_path: Path) -> None:
    # bash's "line 1: 2504 Killed  python train.py" is about the command it ran (the
    # launcher Lightning killed after its child), not a worker's own failure
    console = tmp_path / "console.txt"
    console.write_text(
        _LIGHTNING + "/tmp/run.sh: line 1:  2504 Killed                  python train.py\n",
        encoding="utf-8",
    )
    found = diagnose([console]).findings[0]
    assert found.rule == "HD030" and found.culprit_ranks in ((), (3,))
    assert "the launcher reports rank 3 as the one worker" not in found.explanation
