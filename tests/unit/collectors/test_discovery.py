"""Finding the ranks: explicit pids, torchrun agents, and the --all environment scan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hangdoc.collectors import discovery, procfs
from hangdoc.collectors.discovery import discover, looks_like_launcher, parse_pid_args
from hangdoc.errors import CollectionError, UsageError

if TYPE_CHECKING:
    from conftest import Spawn


def test_parse_pid_args_accepts_repeats_and_comma_lists() -> None:
    assert parse_pid_args(["12", "13,14", " 15 , 12", "16,"]) == [12, 13, 14, 15, 16]


@pytest.mark.parametrize("bad", ["abc", "0", "-5", "12,x", "1.5", "", ","])
def test_parse_pid_args_rejects_what_is_not_a_pid(bad: str) -> None:
    with pytest.raises(UsageError, match="--pid"):
        parse_pid_args(["7", bad])


def test_explicit_pids_read_ranks_from_the_environment(spawn: Spawn) -> None:
    r2 = spawn("plain", rank=2)
    r0 = spawn("plain", rank=0)
    found = discover([r2.pid, r0.pid])
    assert [(r.target.rank, r.target.pid, r.how_found) for r in found.ranks] == [
        (0, r0.pid, "pid"),
        (2, r2.pid, "pid"),
    ]
    first = found.ranks[0]
    assert first.target.local_rank == 0
    assert first.target.world_size == 4
    assert first.local_world_size == 4
    assert first.target.host
    stat = procfs.read_stat(r0.pid)
    assert stat is not None and first.start_ticks == stat.start_ticks
    assert first.note is None


def test_a_pid_that_does_not_exist_is_a_clear_error() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(CollectionError, match=f"process {gone.pid} does not exist") as err:
        discover([gone.pid])
    assert f"ps -p {gone.pid}" in err.value.help_text


def test_nothing_to_inspect_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no process"):
        discover([])


def test_unreadable_environment_gives_an_unknown_rank_with_the_reason(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = spawn("plain", rank=1)

    def denied(pid: int) -> dict[str, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(procfs, "read_environ", denied)
    [rank] = discover([target.pid]).ranks
    assert rank.target.rank is None
    assert rank.note is not None and "Permission denied" in rank.note


def test_a_process_without_rank_environment_is_kept_with_a_note(spawn: Spawn) -> None:
    [rank] = discover([spawn("plain").pid]).ranks
    assert rank.target.rank is None
    assert rank.note == "no RANK or LOCAL_RANK in the process environment"


def test_torchrun_agent_pid_expands_to_its_worker_children(spawn: Spawn) -> None:
    agent = spawn(launcher_ranks=3)
    children = [int(p) for p in agent.ready_line.split()[1:]]
    assert looks_like_launcher(procfs.read_cmdline(agent.pid) or [])
    found = discover([agent.pid])
    assert [(r.target.rank, r.target.pid) for r in found.ranks] == list(enumerate(children))
    assert {r.how_found for r in found.ranks} == {discovery.HOW_AGENT_CHILD}
    assert {r.group_rank for r in found.ranks} == {0}


def test_a_parent_whose_children_are_workers_is_not_an_agent(spawn: Spawn) -> None:
    # a rank's forked worker inherits the rank's own RANK: the rank stays the target
    rank = spawn("worker", rank=5)
    [found] = discover([rank.pid]).ranks
    assert (found.target.pid, found.target.rank, found.how_found) == (rank.pid, 5, "pid")


def test_scan_all_finds_exactly_the_ranks(spawn: Spawn) -> None:
    # GIVEN two ranks (one with a dataloader-like worker), a process with no rank,
    # and an agent that itself carries RANK (as in a Kubernetes PyTorchJob)
    r0 = spawn("worker", rank=0)
    r1 = spawn("plain", rank=1)
    spawn("plain")
    agent = spawn(env={"RANK": "0", "WORLD_SIZE": "2"}, launcher_ranks=2)
    agent_children = [int(p) for p in agent.ready_line.split()[1:]]
    # WHEN scanning the node
    found = discover(scan_all=True)
    # THEN within this test's process tree, only the real ranks are found (the node
    # may run other people's jobs, which the scan rightly finds too)
    mine = set(procfs.descendants(procfs.process_table(), os.getpid()))
    got = {r.target.pid: r for r in found.ranks if r.target.pid in mine}
    assert set(got) == {r0.pid, r1.pid, *agent_children}
    assert {r.how_found for r in got.values()} == {discovery.HOW_ENV_SCAN}
    assert any(f"skipped pid {agent.pid}" in note for note in found.notes)
    assert os.getpid() not in {r.target.pid for r in found.ranks}


def test_scan_all_skips_hangdoc_itself_and_its_ancestors(tmp_path: Path) -> None:
    # GIVEN hangdoc running with RANK in its own environment (started from a rank's shell)
    script = (
        "import json, os\n"
        "from hangdoc.collectors.discovery import discover\n"
        "try:\n"
        "    pids = [r.target.pid for r in discover(scan_all=True).ranks]\n"
        "except Exception as exc:\n"
        "    pids = [str(exc)]\n"
        "print(json.dumps({'me': os.getpid(), 'parent': os.getppid(), 'pids': pids}))\n"
    )
    wrapper = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {script!r}])"
    env = dict(os.environ, RANK="0", LOCAL_RANK="0")
    out = subprocess.run(
        [sys.executable, "-c", wrapper], env=env, capture_output=True, text=True, timeout=60
    )
    seen = json.loads(out.stdout)
    assert seen["me"] not in seen["pids"]
    assert seen["parent"] not in seen["pids"]
