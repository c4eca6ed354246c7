"""torchrun's agent lines cut or garbled inside the worker's coordinates (issue: batch
2026-11-29p, stanford-alpaca-183): the agent's report of the first worker that ended is
``failed (exitcode: C) local_rank: L (pid: P) of binary: …`` in every release from 1.9
(torch/distributed/elastic/multiprocessing/api.py, SubprocessContext._poll; ``of fn: …
(start_method: …)`` in MultiprocessContext._poll). Its body ``failed (exitcode: C)`` says a
worker ended and how; a paste that loses what follows loses only whose it was. The agent's
``Sending process P closing signal SIG…`` (SubprocessContext._close) cut after ``closing``
is the same warning, its signal unknown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs.elastic import match_agent
from hangdoc.analyzer.payloads.launch import LauncherReport, SignalName
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import diagnose

_API = "ERROR:torch.distributed.elastic.multiprocessing.api:"


@pytest.mark.parametrize(
    ("line", "code", "signal", "local_rank", "pid"),
    [
        (
            f"{_API}failed (exitcode: -9) local_rank: 3 (pid: 812) of binary: /usr/bin/python",
            -9,
            SignalName.SIGKILL,
            3,
            812,
        ),
        # cut and glued to the next words inside the coordinates
        (
            f"{_API}failed (exitcode: -9) local_rankroot/anaconda3/envs/x/bin/python",
            -9,
            SignalName.SIGKILL,
            None,
            None,
        ),
        (f"{_API}failed (exitcode: -6) local_rank: 2 (pid:", -6, SignalName.SIGABRT, 2, None),
        (f"{_API}failed (exitcode: 1)", 1, None, None, None),
        (
            "failed (exitcode: -11) local_rank: 0 (pid: 9) of fn: main (start_method: spawn)",
            -11,
            SignalName.SIGSEGV,
            0,
            9,
        ),
    ],
)
def test_the_failed_body_is_read_whatever_follows(
    line: str, code: int, signal: SignalName | None, local_rank: int | None, pid: int | None
) -> None:
    hit = match_agent(line)
    assert hit is not None and hit.kind is EventKind.WORKER_FAILED
    assert isinstance(hit.payload, LauncherReport)
    assert (hit.payload.exit_code, hit.payload.signal) == (code, signal)
    assert (hit.named_local_rank, hit.named_pid) == (local_rank, pid)


def test_a_closing_line_cut_after_closing_is_the_agent_closing_a_worker() -> None:
    whole = match_agent("W1121 api.py:1028] Sending process 8569 closing signal SIGTERM")
    cut = match_agent(f"{_API.replace('ERROR', 'WARNING')}Sending process 53038 closing")
    assert whole is not None and cut is not None
    assert whole.kind is cut.kind is EventKind.AGENT_TERMINATING
    assert isinstance(whole.payload, LauncherReport) and isinstance(cut.payload, LauncherReport)
    assert whole.payload.signal is SignalName.SIGTERM and cut.payload.signal is None
    assert cut.named_pid == 53038


@pytest.mark.parametrize(
    "line",
    [
        "the job failed (exit code: 1)",  # not the agent's words
        "Sending process group to rank 3 closing the store",  # no pid before "closing"
        "failed (exitcode: abc)",
    ],
)
def test_other_words_are_not_the_agent(line: str) -> None:
    hit = match_agent(line)
    assert hit is None or hit.kind is not EventKind.WORKER_FAILED


def test_a_sigkilled_worker_whose_coordinates_were_cut_is_a_death_of_no_named_rank(
    tmp_path: Path,
) -> None:
    log = tmp_path / "console.txt"
    log.write_text(
        "Parameter Offload: Total persistent parameters: 414720 in 81 params\n"
        f"{_API.replace('ERROR', 'WARNING')}Sending process 101 closing\n"
        f"{_API.replace('ERROR', 'WARNING')}Sending process 102 closing\n"
        f"{_API}failed (exitcode: -9) local_rankroot/envs/x/bin/python\n"
    )
    primary = diagnose(log).primary
    assert primary is not None
    assert primary.category.value == "rank_dead_or_crashed"
    assert primary.culprit_ranks == ()
