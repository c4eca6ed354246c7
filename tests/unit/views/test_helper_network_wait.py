"""A main thread that waits on a Python primitive for a thread of its own blocked on the
network (analyzer/views/netwait.py ``helper_network_wait``), on recorded hangs of real gloo
jobs (fixtures/dumps, fixtures/record.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import ProcessEvidence
from hangdoc.analyzer.views.netwait import helper_network_wait, network_wait

DUMPS = Path(__file__).resolve().parents[3] / "fixtures" / "dumps"


def _rank(name: str, rank: int) -> ProcessEvidence:
    evidence = load_paths([DUMPS / name])
    return next(p for p in evidence.processes if p.rank == rank)


def test_the_thread_a_future_waits_for_is_found_blocked_on_its_socket() -> None:
    # GIVEN tracker-wedged: rank 3's main thread waits on a future's result; the pool's
    # thread that computes it sleeps in recvfrom on a socket to a service that never answers
    process = _rank("tracker-wedged", 3)
    # THEN the main thread itself is on no socket, and the thread it waits for is
    assert network_wait(process) is None
    found = helper_network_wait(process)
    assert found is not None
    frame, wait = found
    assert frame is not None and frame.function_leaf == "wait"  # Condition.wait
    assert wait.syscall == "recvfrom" and wait.peer() is not None
    assert wait.caller is not None and wait.caller.function_leaf == "_publish"
    assert not wait.track.is_main


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("thread-died", 3),  # main in queue.get, its prefetcher dead: no thread on a socket
        ("lock-deadlock", 3),  # main and a flusher wait on each other's locks
        ("tracker-wedged", 0),  # a rank in the all_reduce
        ("upload", 3),  # the main thread itself on the socket: network_wait's, not this
    ],
)
def test_no_helper_network_wait_where_no_other_thread_is_on_the_network(
    name: str, rank: int
) -> None:
    assert helper_network_wait(_rank(name, rank)) is None


def test_a_thread_that_accepts_clients_is_not_waited_for() -> None:
    # GIVEN fixtures/fr/missing_and_mismatch: rank 3's main thread waits on an event in its
    # checkpoint save, and a server thread of its own sleeps in socket.accept
    evidence = load_paths([DUMPS.parent / "fr" / "missing_and_mismatch" / "dump"])
    process = next(p for p in evidence.processes if p.rank == 3)
    # THEN a server waiting for clients is no server that does not answer
    assert helper_network_wait(process) is None
