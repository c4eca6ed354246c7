"""The mismatch search's records seen, marked a byte per row of the bulk reader's tables
(``fr_mismatch._new_by_rows``), are the records a set of their ids finds
(``_new_by_ids``): the same records for each rank, in the same order, and the same
problems, also where the workers started afresh (several tables) and where a rank's
records were changed into a list (then every rank goes the ids' way)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.flight_recorder import bulk as fr_bulk
from hangdoc.analyzer.loading import loader
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, RecordRows
from hangdoc.analyzer.views import fr_mismatch
from hangdoc.analyzer.views.fr_matching import fr_ranks, match, scan_rank
from hangdoc.analyzer.views.fr_model import RankFR
from tests.unit.fr.frdata import WORKER_RANKS as RANKS
from tests.unit.fr.frdata import write_worker_job


@pytest.fixture(scope="module")
def fr_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_worker_job(tmp_path_factory.mktemp("fr"))


def _per_rank(ev: Evidence) -> dict[int, RankFR]:
    return {r: scan_rank(r, recs) for r, recs in sorted(fr_ranks(ev).items())}


def _found(found: object) -> list[tuple[int, list[int]]]:
    return [(rank, [id(r) for r in recs]) for rank, recs in found]  # type: ignore[attr-defined]


def _problems(ev: Evidence) -> list[tuple[object, ...]]:
    return [
        (p.kind, p.group, p.seq, p.op, p.waiting, p.blamed, p.tie) for p in match(ev, {}).problems
    ]


@pytest.mark.parametrize("cap", [fr_bulk._WORKER_CAP, 400])
def test_rows_find_what_ids_find(fr_dir: Path, cap: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fr_bulk, "_WORKER_CAP", cap)  # 400: workers start afresh, many tables
    ev = load_paths([fr_dir])
    per_rank = _per_rank(ev)
    assert all(isinstance(fr.records, RecordRows) for fr in per_rank.values())
    tables = {
        id(fr.records.table) for fr in per_rank.values() if isinstance(fr.records, RecordRows)
    }
    assert len(tables) >= (2 if cap == fr_bulk._WORKER_CAP else 4)
    by_rows = _found(fr_mismatch._new_by_rows(per_rank))
    assert by_rows == _found(fr_mismatch._new_by_ids(per_rank))
    assert _found(fr_mismatch._new_records(per_rank)) == by_rows
    assert sum(len(ids) for _, ids in by_rows) > RANKS  # (the test reads something)


def test_the_same_problems_as_a_serial_read(fr_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parallel = load_paths([fr_dir])
    real = fr_bulk.read_flight_recorders
    monkeypatch.setattr(loader, "read_flight_recorders", lambda f, jobs=None: real(f, jobs=1))
    serial = load_paths([fr_dir])  # records as lists: the ids' way
    assert not any(isinstance(p.collectives, RecordRows) for p in serial.processes)
    found = _problems(parallel)
    assert found == _problems(serial)
    assert {p[0] for p in found}  # the synthetic job's planted problems are found


def test_a_changed_rank_sends_every_rank_the_ids_way(
    fr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = load_paths([fr_dir])
    changed = ev.processes[3].collectives
    assert isinstance(changed, RecordRows)
    changed[0] = changed[0]  # now a list: its rows may no longer say what it holds
    assert changed.table is None
    per_rank = _per_rank(ev)
    called: list[str] = []

    def rows(per_rank: dict[int, RankFR]) -> object:
        called.append("rows")
        return iter(())

    monkeypatch.setattr(fr_mismatch, "_new_by_rows", rows)
    assert _found(fr_mismatch._new_records(per_rank)) == _found(fr_mismatch._new_by_ids(per_rank))
    assert called == []
