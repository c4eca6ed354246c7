"""A rank's death named with its culprit, as the first-sight batch 2026-11-28k showed it
named without one or unread (issue 21: ranks from anywhere), each read from the source
that prints it, and kept when the paste is mangled.

Every input here is hand-written in a documented format, cited at each test: DeepSpeed's
launcher (deepspeed/launcher/launch.py ``main.sigkill_handler``), torch's elastic agent
(torch/distributed/elastic/multiprocessing/errors/__init__.py ``ChildFailedError.format_msg``
and ``_FAILURE_FORMAT_TEMPLATE``; api.py's "Signal %d (%s) received by PID %d"), Open MPI's
mpirun (orte/tools/orterun/help-orterun.txt "orterun:proc-aborted-strsignal").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.paste_mangling import hard_wrap
from tests.unit.recognition_kit import MANGLINGS, Mangle
from tests.unit.recognition_kit import answer as _answer

# ---- 1. DeepSpeed's launcher: the worker's command, hard-wrapped -----------------------------
# launch.py main.sigkill_handler: logger.error(f"{cmd} exits with return code =
# {last_return_code}"), cmd the list it ran, "--local_rank=N" in it. A long command is
# hard-wrapped by the terminal or the paste: the local rank lands on one physical line and
# the exit code on a later one.
_ARGS = ", ".join(f"'--option_{i}', '{i * 7}'" for i in range(40))
_DS_EXIT = (
    "[2024-02-06 06:23:39,510] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', "
    "'-u', 'train.py', '--local_rank={local}', '--deepspeed', 'zero2.json', " + _ARGS + "] "
    "exits with return code = -9\n"
)


@pytest.mark.parametrize("width", [0, 80, 100, 120, 400, 1000])
@pytest.mark.parametrize("local", [3, 7])
def test_a_hard_wrapped_deepspeed_exit_names_the_local_rank_it_ran(
    tmp_path: Path, width: int, local: int
) -> None:
    text = _DS_EXIT.format(local=local)
    if width:
        text = hard_wrap(text, width)
        assert text.count("\n") > 1  # (the report is wrapped)
    category, rule, culprits = _answer(tmp_path, text)
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (local,))


def test_a_wrapped_deepspeed_report_joins_no_line_after_its_end(tmp_path: Path) -> None:
    """The rejoin stops at the report's end: the job's next line is read for itself."""
    text = hard_wrap(_DS_EXIT.format(local=2), 100) + "Traceback (most recent call last):\n"
    _, rule, culprits = _answer(tmp_path, text)
    assert (rule, culprits) == ("HD030", (2,))


# ---- 2. torchrun's failure table, its layout lost ------------------------------------------
# _FAILURE_FORMAT_TEMPLATE: "[${idx}]:\n  time      : ${time}\n  host      : ${hostname}\n
#   rank      : ${rank} (local_rank: ${local_rank})\n  exitcode  : ${exitcode} (pid: ${pid})\n
#   error_file: ${error_file}\n  traceback : ${message}"; api.py's message for a signal:
# "Signal 9 (SIGKILL) received by PID 36071". Retyped from a screenshot or copied from a
# rendered page, a field's name runs into its value and fields share a line.
_TABLE_HEAD = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    "train.py FAILED\n"
    "Failures:\n"
    "<NO_OTHER_FAILURES>\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
)
_FIELDS = {
    "as printed": (
        "  time      : 2023-09-14_01:45:50\n"
        "  host      : node-1\n"
        "  rank      : {rank} (local_rank: {local})\n"
        "  exitcode  : -9 (pid: 36071)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 36071\n"
    ),
    "fields run together": (
        "time\nhost\n2023-09-14 01:45:50\nnode-1\n"
        "rank{rank} (local rank: {local})exitcode: -9 (pid: 36071)error file: <N/A>\n"
        "traceback : signal 9 (SIGKILL) received by PID 36071\n"
    ),
    "one line": (
        "  time : 2023-09-14_01:45:50 host : node-1 rank : {rank} (local_rank: {local}) "
        "exitcode : -9 (pid: 36071) error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 36071\n"
    ),
}


@pytest.mark.parametrize("layout", sorted(_FIELDS))
@pytest.mark.parametrize(("how", "mangle"), MANGLINGS[:3])
def test_a_failure_tables_rank_is_read_whatever_its_layout(
    tmp_path: Path, layout: str, how: str, mangle: Mangle
) -> None:
    text = _TABLE_HEAD + _FIELDS[layout].format(rank=2, local=2)
    category, rule, culprits = _answer(tmp_path, mangle(text))
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (2,)), how


def test_a_run_together_rank_field_is_the_global_rank_not_the_local_one(
    tmp_path: Path,
) -> None:
    text = _TABLE_HEAD + _FIELDS["fields run together"].format(rank=10, local=2)
    assert _answer(tmp_path, text)[2] == (10,)


# ---- 3. mpirun's report of a rank killed, the machine's names blanked ------------------------
# help-orterun.txt "orterun:proc-aborted-strsignal": "%s noticed that process rank %lu with
# PID %lu on node %s exited on signal %d (%s)."; people blank the PID and the node out.
_MPI_KILLED = (
    "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
    "mpirun noticed that process rank {rank} with PID {pid} on node {node} exited on signal 9 "
    "(Killed).\n"
)


@pytest.mark.parametrize(
    ("pid", "node"),
    [("81234", "gpu-node-3"), ("xxxxxx", "xxxxxxxx"), ("XXXX", "gpu-node-3"), ("<pid>", "***")],
)
@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_mpiruns_killed_rank_is_named_with_its_pid_blanked(
    tmp_path: Path, pid: str, node: str, how: str, mangle: Mangle
) -> None:
    text = _MPI_KILLED.format(rank=1, pid=pid, node=node)
    category, rule, culprits = _answer(tmp_path, mangle(text))
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (1,)), how


def test_an_mpirun_line_with_a_word_for_its_pid_is_not_read(tmp_path: Path) -> None:
    """Only a placeholder stands for a blanked PID, not any word."""
    text = _MPI_KILLED.format(rank=1, pid="unknown", node="n1")
    assert _answer(tmp_path, text)[2] != (1,)


# ---- 4. gloo's pair reset by its peer --------------------------------------------------------
# gloo/transport/tcp/pair.cc Pair::read: GLOO_ERROR_MSG("Read error ", peer_.str(), ": ",
# strerror(errno)) when recv(2) fails (ECONNRESET: "Connection reset by peer"), and
# GLOO_ERROR_MSG("Connection closed by peer ", peer_.str()) at end-of-stream (the peer's
# orderly close: its process ended). torch raises the what() as a RuntimeError.
_GLOO_RESET = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
    "[10.1.2.3]:25266: Connection reset by peer\n"
)
_GLOO_CLOSED = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
    "peer [10.1.2.3]:25266\n"
)
_STEP = "2024-04-10 05:0{m}:07 | INFO | logs | Total loss at epoch 5, step at 58{m}00, loss=33.7\n"


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS[:3])
def test_a_gloo_reset_with_nothing_before_it_is_the_transports_failure(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = "".join(_STEP.format(m=m) for m in range(3)) + _GLOO_RESET
    category, rule, culprits = _answer(tmp_path, mangle(text))
    assert (category, rule, culprits) == (Category.NCCL_NETWORK, "HD200", ()), how


def test_a_gloo_close_is_no_transport_failure(tmp_path: Path) -> None:
    """An orderly close is the peer's end, not the network's."""
    assert _answer(tmp_path, _GLOO_CLOSED)[0] is not Category.NCCL_NETWORK


def test_a_gloo_reset_after_a_rank_was_killed_is_its_echo(tmp_path: Path) -> None:
    killed = _MPI_KILLED.format(rank=1, pid="812", node="n1")
    category, rule, culprits = _answer(tmp_path, killed + _GLOO_RESET)
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (1,))


def test_a_gloo_reset_after_a_gloo_timeout_is_its_echo(tmp_path: Path) -> None:
    timeout = (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
        "waiting 1800000ms for recv operation to complete\n"
    )
    assert _answer(tmp_path, timeout + _GLOO_RESET)[1] != "HD200"


def test_a_gloo_reset_before_the_launchers_report_of_a_kill_is_its_echo(tmp_path: Path) -> None:
    """A peer killed mid-transfer resets its pairs; torchrun reports the kill after them
    (api.py: "failed (exitcode: -9) local_rank: 1 (pid: 18960) of binary: …")."""
    agent = (
        "E1121 20:40:40.942000 18899 torch/distributed/elastic/multiprocessing/api.py:1002] "
        "failed (exitcode: -9) local_rank: 1 (pid: 18960) of binary: /usr/bin/python3\n"
    )
    category, rule, culprits = _answer(tmp_path, "[rank0]: " + _GLOO_RESET + agent)
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (1,))


# ---- 5. a rank's host memory climbing until it stops ---------------------------------------
# psutil's numbers as jobs print them: the process's resident set
# (psutil.Process().memory_info().rss, "RSS MEM USE: 5.11G" in a step line), DeepSpeed's
# see_memory_usage (deepspeed/runtime/utils.py: f'CPU Virtual Memory:  used = {used_GB}
# GB, percent = {vm_stats.percent}%'). A series that climbs steeply to its last reading,
# and nothing after it, is a process the OOM killer or the scheduler ends.
_RSS = (
    "2022-03-23 23:5{i}:28,855 DEBUG TRAIN Batch 0/18{i}100 loss 4.577 lr 0.00065741 "
    "rank {rank} RSS MEM USE: {gib}G\n"
)
_CLIMB = (5.1, 5.1, 5.1, 46.5, 105.6, 161.1, 212.0)
_STEADY = (5.1, 5.1, 5.2, 5.2, 5.3, 5.3, 5.4)


def _series(rank: int, values: tuple[float, ...]) -> list[str]:
    return [_RSS.format(i=i, rank=rank, gib=v) for i, v in enumerate(values)]


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_ranks_host_memory_climbing_to_its_last_reading_is_its_death(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    category, rule, culprits = _answer(tmp_path, mangle("".join(_series(0, _CLIMB))))
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (0,)), how


@pytest.mark.parametrize(
    "values",
    [_STEADY, (*_CLIMB, 150.0), (5.1, 21.0), (0.05, 0.1, 0.2, 0.4)],
    ids=["steady", "down after its peak", "two readings", "under a GiB"],
)
def test_host_memory_that_does_not_climb_to_its_end_is_no_death(
    tmp_path: Path, values: tuple[float, ...]
) -> None:
    assert _answer(tmp_path, "".join(_series(0, values)))[1] != "HD030"


def test_the_rank_whose_memory_climbs_is_named_among_others_in_one_file(tmp_path: Path) -> None:
    steady, climb = _series(0, _STEADY), _series(1, _CLIMB)
    text = "".join(line for pair in zip(steady, climb, strict=True) for line in pair)
    assert _answer(tmp_path, text)[1:] == ("HD030", (1,))


def test_a_prefixed_ranks_memory_climb_names_that_rank(tmp_path: Path) -> None:
    lines = [f"[rank3]:step {i} RSS: {v} GB\n" for i, v in enumerate(_CLIMB)]
    assert _answer(tmp_path, "".join(lines))[1:] == ("HD030", (3,))


def test_the_hosts_memory_nearly_all_in_use_is_a_climb(tmp_path: Path) -> None:
    lines = [
        f"[rank2]:CPU Virtual Memory:  used = {gib} GB, percent = {pct}%\n"
        for gib, pct in ((400.1, 80.2), (450.3, 90.1), (490.8, 98.4))
    ]
    assert _answer(tmp_path, "".join(lines))[1:] == ("HD030", (2,))


def test_the_gpus_memory_is_not_the_hosts(tmp_path: Path) -> None:
    lines = [f"[rank1]:step {i} GPU memory used: {v} GB\n" for i, v in enumerate(_CLIMB)]
    lines += [f"[rank1]:iter {i} max_mem: {int(v * 1024)}M\n" for i, v in enumerate(_CLIMB)]
    assert _answer(tmp_path, "".join(lines))[1] != "HD030"


def test_a_kill_shown_wins_over_a_memory_climb(tmp_path: Path) -> None:
    """The climb is where memory was going; a launcher's report of the kill is the death."""
    killed = _MPI_KILLED.format(rank=2, pid="812", node="n1")
    assert _answer(tmp_path, "".join(_series(0, _CLIMB)) + killed)[1:] == ("HD030", (2,))


@pytest.mark.parametrize("peer", ["127.0.1.1", "127.0.0.1", "::1"])
def test_a_gloo_reset_by_a_process_of_the_same_host_is_no_network_failure(
    tmp_path: Path, peer: str
) -> None:
    """No network lies between two processes of one host (the loopback address)."""
    text = _GLOO_RESET.replace("10.1.2.3", peer)
    assert _answer(tmp_path, text)[0] is not Category.NCCL_NETWORK
