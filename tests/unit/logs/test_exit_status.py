"""The numbers launchers print for a worker that ended, read by their printer's convention,
and what the deaths view makes of the signal they name.

Conventions, from the code that makes the numbers: CPython's multiprocessing
``Process.exitcode`` (Lib/multiprocessing/popen_fork.py ``_wait``: ``-os.WTERMSIG(sts)``
when signalled, else ``os.WEXITSTATUS(sts)``) and subprocess's ``Popen.returncode``
(Lib/subprocess.py ``_handle_exitstatus``); bash's ``$?`` (128 + N for a command killed by
signal N: bash(1), EXIT STATUS); the raw status of ``os.waitpid`` (POSIX wait(2): the
signal in the low 7 bits, 0x80 for a core dump, the exit status in the next byte).

Lines of documented formats, as the catalog holds them (parsers/catalog/data/): vLLM V0's
WorkerMonitor.run ``Worker <name> pid <pid> died, exit code: <process.exitcode>``
(vllm/executor/multiproc_worker_utils.py:120, 0.6.6.post1–0.8.5); V1's monitor_workers
``Worker proc <name> died unexpectedly (exit code: <proc.exitcode>), shutting down
executor.`` (vllm/v1/executor/multiproc_executor.py:380, 0.33.0); SGLang's SIGCHLD handler
``Child process unexpectedly failed with an exit code <exitcode>. pid=<pid>`` (python/
sglang/srt/entrypoints/engine.py:516, 0.4.6.post5: ``pid, exitcode = os.waitpid(0,
os.WNOHANG)``) and ``Scheduler or DataParallelController <proc.pid> terminated with
<proc.exitcode>`` (engine.py:851, 0.4.6.post5–0.5.3); torch's NCCL watchdog timeout
(torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp ``Watchdog caught collective operation
timeout: WorkNCCL(…) ran for N milliseconds before timing out.``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs.catalog_lines import catalog_hit
from hangdoc.analyzer.payloads.launch import (
    ExitConvention,
    ExitStatus,
    LauncherReport,
    SignalName,
    read_exit,
)
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.api import diagnose
from tests.unit.logs.helpers import events, parse


@pytest.mark.parametrize(
    ("number", "convention", "expected"),
    [
        (-6, ExitConvention.POPEN, ExitStatus(exit_code=-6, signal=SignalName.SIGABRT)),
        (-9, ExitConvention.POPEN, ExitStatus(exit_code=-9, signal=SignalName.SIGKILL)),
        (-11, ExitConvention.POPEN, ExitStatus(exit_code=-11, signal=SignalName.SIGSEGV)),
        (-7, ExitConvention.POPEN, ExitStatus(exit_code=-7, signal=SignalName.SIGBUS)),
        (1, ExitConvention.POPEN, ExitStatus(exit_code=1)),
        (137, ExitConvention.SHELL, ExitStatus(exit_code=137, signal=SignalName.SIGKILL)),
        (134, ExitConvention.SHELL, ExitStatus(exit_code=134, signal=SignalName.SIGABRT)),
        (1, ExitConvention.SHELL, ExitStatus(exit_code=1)),
        (256, ExitConvention.WAIT_STATUS, ExitStatus(exit_code=1)),
        (9, ExitConvention.WAIT_STATUS, ExitStatus(signal=SignalName.SIGKILL)),
        (134, ExitConvention.WAIT_STATUS, ExitStatus(signal=SignalName.SIGABRT, core_dumped=True)),
        (139, ExitConvention.WAIT_STATUS, ExitStatus(signal=SignalName.SIGSEGV, core_dumped=True)),
    ],
)
def test_a_number_is_read_by_its_printers_convention(
    number: int, convention: ExitConvention, expected: ExitStatus
) -> None:
    assert read_exit(number, convention) == expected


def test_a_number_no_signal_has_stays_an_exit_code() -> None:
    # a real-time signal (34 and up) has no name here: the number is kept as printed
    assert read_exit(-40, ExitConvention.POPEN) == ExitStatus(exit_code=-40)
    assert SignalName.of_number(0) is None


@pytest.mark.parametrize(
    ("line", "exit_code", "signal", "pid"),
    [
        ("Worker VllmWorkerProcess pid 198 died, exit code: -6", -6, SignalName.SIGABRT, 198),
        (
            "Worker proc VllmWorker-2 died unexpectedly (exit code: -9), shutting down executor.",
            -9,
            SignalName.SIGKILL,
            None,
        ),
        ("Child process unexpectedly failed with an exit code 256. pid=32885", 1, None, 32885),
        (
            "Child process unexpectedly failed with an exit code 9. pid=32885",
            None,
            SignalName.SIGKILL,
            32885,
        ),
        (
            "Scheduler or DataParallelController 1234 terminated with -11",
            -11,
            SignalName.SIGSEGV,
            1234,
        ),
    ],
)
def test_a_launchers_line_carries_the_end_it_prints(
    line: str, exit_code: int | None, signal: SignalName | None, pid: int | None
) -> None:
    hit = catalog_hit(line)
    assert hit is not None and hit.kind is EventKind.WORKER_FAILED
    report = hit.payload
    assert isinstance(report, LauncherReport)
    assert (report.exit_code, report.signal, hit.named_pid) == (exit_code, signal, pid)


_VLLM_READY = "INFO 10-30 11:40:01 multiproc_worker_utils.py:215] Worker ready; awaiting tasks\n"
_VLLM_DIED = (
    "ERROR 10-30 11:56:48 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 198 "
    "died, exit code: {code}\n"
    "INFO 10-30 11:56:48 multiproc_worker_utils.py:123] Killing local vLLM worker processes\n"
)
_WATCHDOG_TIMEOUT = (
    "[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
    "ran for 600011 milliseconds before timing out.\n"
)


def test_an_abort_where_a_watchdog_fired_is_the_watchdogs(tmp_path: Path) -> None:
    # GIVEN a watchdog timeout and then vLLM's report that a worker ended with -6 (SIGABRT)
    console = tmp_path / "console.txt"
    console.write_text(_VLLM_READY + _WATCHDOG_TIMEOUT + _VLLM_DIED.format(code=-6), "utf-8")
    # WHEN it is diagnosed
    rules = [f.rule for f in diagnose([console]).findings]
    # THEN the abort is the watchdog ending its process: no rank died first
    assert "HD030" not in rules


def test_an_abort_the_paste_puts_before_the_timeout_is_the_watchdogs(tmp_path: Path) -> None:
    # GIVEN the same lines pasted out of order (the launcher's line first)
    console = tmp_path / "console.txt"
    console.write_text(_VLLM_DIED.format(code=-6) + _WATCHDOG_TIMEOUT, "utf-8")
    rules = [f.rule for f in diagnose([console]).findings]
    # THEN it is still the watchdog's abort
    assert "HD030" not in rules


def test_a_kill_with_no_oom_line_is_a_kill_from_outside(tmp_path: Path) -> None:
    # GIVEN vLLM's report that a worker ended with -9 (SIGKILL), nothing else
    console = tmp_path / "console.txt"
    console.write_text(_VLLM_READY + _VLLM_DIED.format(code=-9), "utf-8")
    found = diagnose([console]).findings[0]
    # THEN a process was killed first; from outside, the OOM killer not claimed
    assert (found.rule, found.category, found.culprit_ranks) == (
        "HD030",
        "rank_dead_or_crashed",
        (),
    )
    assert "SIGKILL" in found.title
    assert "comes from outside the process" in found.explanation
    assert "hold no OOM-killer line" in found.explanation


def test_a_kill_is_the_oom_killers_where_the_logs_hold_its_line(tmp_path: Path) -> None:
    # GIVEN the same report and then the kernel's OOM killer line (mm/oom_kill.c
    # __oom_kill_process: "Out of memory: Killed process <pid> (<comm>) total-vm:…")
    console = tmp_path / "console.txt"
    console.write_text(
        _VLLM_READY
        + _VLLM_DIED.format(code=-9)
        + "[12345.678901] Out of memory: Killed process 198 (python) total-vm:123456kB, "
        "anon-rss:65432kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1234kB oom_score_adj:0\n",
        "utf-8",
    )
    found = diagnose([console]).findings[0]
    assert found.rule == "HD030"
    assert "OOM killer" in found.explanation and "no OOM-killer line" not in found.explanation


def test_a_segfault_is_a_crash_of_that_process(tmp_path: Path) -> None:
    # GIVEN vLLM's report that a worker ended with -11 (SIGSEGV)
    console = tmp_path / "console.txt"
    console.write_text(_VLLM_READY + _VLLM_DIED.format(code=-11), "utf-8")
    found = diagnose([console]).findings[0]
    assert (found.rule, found.category) == ("HD030", "rank_dead_or_crashed")
    assert "SIGSEGV" in found.title and "native crash" in found.explanation


def test_an_abort_with_no_watchdog_is_no_sure_cause(tmp_path: Path) -> None:
    # GIVEN only vLLM's report of a worker's abort (-6): no watchdog fired, no error shown
    console = tmp_path / "console.txt"
    console.write_text(_VLLM_READY + _VLLM_DIED.format(code=-6), "utf-8")
    found = diagnose([console]).findings[0]
    # THEN the process died first, stated weaker than a death with its reason
    assert (found.rule, found.category) == ("HD030", "rank_dead_or_crashed")
    assert found.severity != "critical"


# CPython's CalledProcessError (Lib/subprocess.py CalledProcessError.__str__), raised by
# accelerate's simple_launcher (accelerate/commands/launch.py: ``raise
# subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)``) and by
# torch.distributed.launch before torchrun (its command line carries ``--local_rank=N``).
_LAUNCHER_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/bin/accelerate", line 8, in <module>\n'
    "    sys.exit(main())\n"
    '  File "/usr/lib/python3/dist-packages/accelerate/commands/launch.py", line 704, in '
    "simple_launcher\n"
    "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
    "subprocess.CalledProcessError: Command {end}\n"
)


@pytest.mark.parametrize(
    ("end", "exit_code", "signal", "local_rank"),
    [
        ("'['/usr/bin/python', 'train.py']' died with <Signals.SIGKILL: 9>.", -9,
         SignalName.SIGKILL, None),
        ("'['/usr/bin/python', '-u', 'train.py', '--local_rank=3']' died with <Signals.SIGSEGV: "
         "11>.", -11, SignalName.SIGSEGV, 3),
        ("'['/usr/bin/python', 'train.py']' returned non-zero exit status 1.", 1, None, None),
        ("'['/usr/bin/python', 'train.py']' died with unknown signal 40.", -40, None, None),
    ],
)  # fmt: skip
def test_a_called_process_error_is_the_launchers_report_of_its_worker(
    tmp_path: Path, end: str, exit_code: int, signal: SignalName | None, local_rank: int | None
) -> None:
    console = tmp_path / "console.txt"
    console.write_text(_LAUNCHER_TRACEBACK.format(end=end), "utf-8")
    parsed = parse(console)
    # THEN the line is the launcher's report of a worker's end, not an exception of a rank
    assert events(parsed, EventKind.EXCEPTION) == []
    [(_, event)] = events(parsed, EventKind.WORKER_FAILED)
    report = event.payload
    assert isinstance(report, LauncherReport)
    assert (report.exit_code, report.signal, event.local_rank) == (exit_code, signal, local_rank)


def test_a_worker_killed_under_accelerate_is_a_kill(tmp_path: Path) -> None:
    console = tmp_path / "console.txt"
    console.write_text(
        _LAUNCHER_TRACEBACK.format(end="'['python', 'train.py']' died with <Signals.SIGKILL: 9>."),
        "utf-8",
    )
    found = diagnose([console]).findings[0]
    assert (found.rule, found.category) == ("HD030", "rank_dead_or_crashed")
    assert "SIGKILL" in found.title and "raised an exception" not in found.title


def test_a_v1_worker_is_named_by_the_rank_its_process_name_carries(tmp_path: Path) -> None:
    # GIVEN vLLM V1's report that worker process VllmWorker-2 ended with -9: V1 names each
    # worker process f"VllmWorker-{rank}" (vllm/v1/executor/multiproc_executor.py,
    # WorkerProc.make_worker_process)
    line = "Worker proc VllmWorker-2 died unexpectedly (exit code: -9), shutting down executor."
    hit = catalog_hit(line)
    assert hit is not None and hit.rank == 2
    console = tmp_path / "console.txt"
    console.write_text(f"ERROR 05-01 10:00:00 [multiproc_executor.py:380] {line}\n", "utf-8")
    found = diagnose([console]).findings[0]
    # THEN rank 2 was killed first (its dash is a separator, not a minus)
    assert (found.rule, found.culprit_ranks) == ("HD030", (2,))


def test_an_engine_cores_name_is_no_workers_rank() -> None:
    # "EngineCore_DP1" is a data-parallel index (vllm/v1/engine/core_client.py:564)
    hit = catalog_hit("Engine core proc EngineCore_DP1 died unexpectedly, shutting down client.")
    assert hit is not None and hit.rank is None
