"""``hangdoc analyze`` reads many flight recorder files through the worker pool, in rank
order, and gets the same Evidence as reading them one by one."""

from __future__ import annotations

import multiprocessing
import tarfile
from multiprocessing import forkserver
from pathlib import Path

import pytest

from hangdoc.analyzer.flight_recorder import bulk as fr_bulk
from hangdoc.analyzer.loading import loader
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, InputKind
from tests.unit.fr.frdata import WORKER_RANKS as RANKS
from tests.unit.fr.frdata import write_worker_job


@pytest.fixture(scope="module")
def fr_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_worker_job(tmp_path_factory.mktemp("fr"))


def _by_rank(ev: Evidence) -> dict[int | None, list[object]]:
    return {p.rank: list(p.collectives) for p in ev.processes}


def test_many_files_go_through_workers_and_match_the_serial_read(
    fr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int | None] = []
    real = fr_bulk.read_flight_recorders

    def spy(files: list[tuple[Path, str]], *, jobs: int | None = None):  # type: ignore[no-untyped-def]
        calls.append(jobs)
        return real(files, jobs=jobs)

    monkeypatch.setattr(loader, "read_flight_recorders", spy)
    parallel = load_paths([fr_dir])
    assert calls == [None]  # the loader let read_flight_recorders pick its workers
    monkeypatch.setattr(loader, "read_flight_recorders", lambda f, jobs=None: real(f, jobs=1))
    serial = load_paths([fr_dir])
    assert _by_rank(parallel) == _by_rank(serial)
    assert sorted(r for r in _by_rank(parallel) if r is not None) == list(range(RANKS))
    fr_inputs = [i for i in parallel.inputs if i.kind is InputKind.FLIGHT_RECORDER]
    assert [i.ranks for i in fr_inputs] == [(r,) for r in range(RANKS)]  # rank order
    assert all(i.error is None for i in fr_inputs)


def test_a_failing_pool_falls_back_to_one_by_one(
    fr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = fr_bulk.read_flight_recorders

    def broken(files: list[tuple[Path, str]], *, jobs: int | None = None):  # type: ignore[no-untyped-def]
        if jobs == 1:
            yield from real(files, jobs=1)
            return
        yield from real(files[:5], jobs=1)
        raise OSError("worker died")

    monkeypatch.setattr(loader, "read_flight_recorders", broken)
    ev = load_paths([fr_dir])
    assert sorted(r for r in _by_rank(ev) if r is not None) == list(range(RANKS))
    assert any("flight recorder workers failed" in n and "67 files" in n for n in ev.notes)


def test_flight_recorders_in_an_archive_are_read_before_it_is_cleaned_up(
    fr_dir: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "fr.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(fr_dir, arcname="fr")
    ev = load_paths([archive])
    assert sorted(r for r in _by_rank(ev) if r is not None) == list(range(RANKS))
    assert all(i.error is None for i in ev.inputs if i.kind is InputKind.FLIGHT_RECORDER)


def test_a_bad_file_among_many_is_an_input_with_its_reason(fr_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    for path in sorted(fr_dir.iterdir())[:70]:
        (folder / path.name).write_bytes(path.read_bytes())
    good = (folder / "comm_lib_trace_rank_0").read_bytes()
    (folder / "comm_lib_trace_rank_999").write_bytes(good[: len(good) // 2])  # truncated
    ev = load_paths([folder])
    bad = [i for i in ev.inputs if i.path.endswith("rank_999")]
    assert len(bad) == 1 and bad[0].kind is InputKind.FLIGHT_RECORDER
    assert bad[0].error and "truncated" in bad[0].error
    assert len([p for p in ev.processes if p.collectives]) == 70


def test_workers_that_start_afresh_mid_run_send_the_same_records(
    fr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny cap makes each worker drop its tables every few files (the 16,384-rank case):
    sibling copies sent as (row, group) must still resolve to the right records."""
    monkeypatch.setattr(fr_bulk, "_WORKER_CAP", 150)  # passed to the workers as they start
    files = sorted(((p, p.name) for p in fr_dir.iterdir()), key=lambda f: f[1])
    serial = [p.processes[0].collectives for p in fr_bulk.read_flight_recorders(files, jobs=1)]
    parallel = [p.processes[0].collectives for p in fr_bulk.read_flight_recorders(files, jobs=2)]
    assert parallel == serial


def test_sibling_copies_cross_as_row_and_group(fr_dir: Path) -> None:
    state = fr_bulk._WorkerState()
    files = sorted(fr_dir.iterdir(), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    replies = [state.reply(str(p), p.name) for p in files[:16]]
    compact = [row for reply in replies for row in reply.new_rows if len(row) == 2]
    assert len(compact) > 20  # tp group 2 (ranks 8-15) copied tp group 1's records


def test_the_workers_hold_none_of_the_callers_heap(
    fr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked from the loader the workers would hold its heap (the text phase's Evidence),
    and each page the loader writes meanwhile would be counted twice: they start from a
    fork server instead. A change made here after import therefore does not reach them
    (a forked worker would parse nothing), and no server or worker outlives the read."""
    files = sorted(((p, p.name) for p in fr_dir.iterdir()), key=lambda f: f[1])

    def broken(*args: object) -> object:
        raise AssertionError("the caller's heap reached a worker")

    monkeypatch.setattr(fr_bulk, "_parse_one", broken)
    server = getattr(forkserver._forkserver, "_forkserver_pid", None)  # another pool's, if any
    parsed = list(fr_bulk.read_flight_recorders(files, jobs=2))
    assert len(parsed) == len(files) and all(p.error is None for p in parsed)
    assert all(p.processes[0].collectives for p in parsed)
    assert not multiprocessing.active_children()
    assert getattr(forkserver._forkserver, "_forkserver_pid", None) == server
