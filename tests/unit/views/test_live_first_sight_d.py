"""The mechanisms built for the blind live hangs of live-2026-11-28d (issue 21): a field
whose own key names no count is not an amount of data; an error a rank lived through
explains a collective mismatch; a wait for a result of the rank's own multiprocessing
workers; ranks polling in a sleep loop are the ones outside the collective; every rank in
send and none in recv is a cycle whatever the peers."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Finding, Frame
from hangdoc.analyzer.views.activity import frame_tag
from hangdoc.analyzer.views.activity_table import TABLE, Activity
from hangdoc.analyzer.views.log_compare import DivergenceKind, compare_logs
from tests.unit.views.conftest import log_evidence

ROOT = Path(__file__).resolve().parents[3]
DUMPS = ROOT / "fixtures" / "dumps"


def _kinds(logs: dict[int, list[str]]) -> list[tuple[str, tuple[int, ...]]]:
    return [(d.kind, d.ranks) for d in compare_logs(log_evidence(logs)).divergences]


def test_a_field_whose_key_names_no_count_is_not_uneven_data() -> None:
    # GIVEN a progress line every rank prints, the same steps of the same total on every
    # rank, and a field "oom=" that differs on one
    logs = {r: [f"| epoch 001 | step 5/8 | oom={1 if r == 3 else 0}"] for r in range(4)}
    # THEN it is a field of its own, not an amount of data
    assert _kinds(logs) == [(DivergenceKind.FIELD, (3,))]


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("dataset ready: {n} samples, 5 batches per epoch", DivergenceKind.COUNTER),
        ("histogram: {n} bins", DivergenceKind.SIZE),
        ("num_batches={n}", DivergenceKind.COUNTER),
        ("epoch 1 retries={n}", DivergenceKind.FIELD),
    ],
)
def test_a_field_key_decides_only_where_no_unit_follows_the_number(
    line: str, kind: DivergenceKind
) -> None:
    logs = {r: [line.format(n=20 if r == 3 else 24)] for r in range(4)}
    assert _kinds(logs) == [(kind, (3,))]


def _primary(name: str) -> Finding:
    diagnosis = analyze(load_paths([DUMPS / name]))
    assert diagnosis.primary is not None
    return diagnosis.primary


def test_an_oom_a_rank_lived_through_is_why_its_collectives_differ() -> None:
    # GIVEN oom-skip: rank 3 caught an out-of-memory error, skipped the batch and its
    # all_reduce, and waits in the epoch-end barrier while ranks 0-2 wait in all_reduce
    diagnosis = analyze(load_paths([DUMPS / "oom-skip"]))
    by_rule = {f.rule: f for f in diagnosis.findings}
    # THEN the mismatch of collectives is the answer, with the error that explains it
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD002"
    assert diagnosis.primary.culprit_ranks == (3,)
    assert "lived through an error" in diagnosis.primary.explanation
    # AND neither uneven data nor the OOM as a death outranks it
    assert by_rule["HD106"].strength < diagnosis.primary.strength
    assert "lived through" in by_rule["HD106"].explanation
    assert by_rule["HD031"].severity.order > diagnosis.primary.severity.order


@pytest.mark.parametrize(
    ("function", "file", "tagged"),
    [
        ("ApplyResult.get", "/usr/lib/python3.11/multiprocessing/pool.py", True),
        ("Pool.map", "multiprocessing/pool.py", True),
        ("IMapIterator.next", "multiprocessing/pool.py", True),
        ("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py", True),
        ("Connection.recv", "multiprocessing/connection.py", True),
        ("BaseProxy._callmethod", "multiprocessing/managers.py", True),
        ("_chain_from_iterable_of_lists", "concurrent/futures/process.py", True),
        # waits for processes to end, not for a result: a launcher waits there for its ranks
        ("wait", "/usr/lib/python3.7/multiprocessing/connection.py", False),
        ("Pool.join", "multiprocessing/pool.py", False),
    ],
)
def test_the_stdlibs_waits_for_a_workers_result_are_known_by_their_frames(
    function: str, file: str, tagged: bool
) -> None:
    found = frame_tag(Frame(function=function, file=file, line=1))
    assert (found is not None and found[0] is Activity.WORKER_RESULT) is tagged
    assert TABLE[Activity.WORKER_RESULT].category is Category.DATALOADER


def test_a_rank_waiting_on_its_pool_for_a_result_is_a_worker_hang() -> None:
    # GIVEN pool-worker-killed: rank 3 in Pool.map after a worker was SIGKILLed
    primary = _primary("pool-worker-killed")
    # THEN the data-worker category, by the call the job made and its worker processes
    assert (primary.rule, primary.category, primary.culprit_ranks) == (
        "HD001",
        Category.DATALOADER,
        (3,),
    )
    assert "Pool.map" in primary.title and "worker processes: pid" in primary.title


def test_ranks_asleep_in_a_polling_loop_are_outside_the_collective() -> None:
    # GIVEN signal-file: ranks 1-3 poll for a file (time.sleep between checks), rank 0
    # waits in barrier; more ranks outside than in it, at one line of their own code
    primary = _primary("signal-file")
    # THEN the kernel's sleep says they poll: they are the culprits, not "no side"
    assert (primary.rule, primary.culprit_ranks) == ("HD001", (1, 2, 3))
    assert "polls" in primary.title and "clock_nanosleep" in primary.title


def test_every_rank_in_send_and_none_in_recv_is_a_cycle_whatever_the_peers() -> None:
    primary = _primary("ring-exchange")
    assert (primary.rule, primary.culprit_ranks) == ("HD105", ())
    assert "none in recv" in primary.title and "peers are not shown" in primary.title
    assert "batch_isend_irecv" in primary.fix
