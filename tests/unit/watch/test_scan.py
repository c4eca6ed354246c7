"""Which processes watch follows: a launcher's ranks at any depth, also those it starts
after watch did; a rank given itself; roots that end."""

from __future__ import annotations

import subprocess
import sys

from hangdoc.collectors.discovery import scan_for_watch
from tests.unit.watch.conftest import BLOCKER, LAUNCHER, Start, wait_for


def test_a_launcher_stands_for_the_ranks_it_starts_later(start: Start) -> None:
    # GIVEN a launcher (a Python program of the job's own, no rank identity) that starts
    # two ranks through a shell 1 s after it started
    launcher = start(LAUNCHER, "1.0", "2")
    # WHEN scanned before THEN it is alive and watched itself (mp.spawn programs look
    # like this), rank unknown
    early = scan_for_watch([launcher.pid])
    assert early.live_roots == [launcher.pid]
    assert [(r.target.pid, r.target.rank) for r in early.ranks] == [(launcher.pid, None)]
    # AND after, its ranks, found below the shell
    wait_for(lambda: len(scan_for_watch([launcher.pid]).ranks) == 2)
    late = scan_for_watch([launcher.pid]).ranks
    assert [r.target.rank for r in late] == [0, 1]
    assert all(r.how_found == "torchrun-agent-child" for r in late)


def test_torchrun_is_never_taken_for_a_rank(start: Start) -> None:
    agent = start(BLOCKER, "-m", "torch.distributed.run")  # its command line names it
    assert scan_for_watch([agent.pid]).ranks == []


def test_a_rank_given_itself_is_watched_and_a_gone_root_is_not_alive(start: Start) -> None:
    rank = start(BLOCKER, env={"RANK": "5"})
    found = scan_for_watch([rank.pid])
    assert [(r.target.pid, r.target.rank, r.how_found) for r in found.ranks] == [
        (rank.pid, 5, "pid")
    ]
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert scan_for_watch([gone.pid]) == scan_for_watch([])
