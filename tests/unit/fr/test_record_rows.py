"""A rank's flight recorder records as row numbers into a shared table (``RecordRows``):
it reads as the list of its records in every way the views read it, it becomes that list
when changed, and the bulk reader shares row numbers between ranks only where they are
the same but for a few places."""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import pytest

from hangdoc.analyzer.flight_recorder import bulk as fr_bulk
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import CollectiveRecord, OpState, RecordRows
from tests.unit.fr.frdata import write_worker_job


def _table(count: int) -> list[CollectiveRecord]:
    return [
        CollectiveRecord(group=str(i % 3), seq_id=i, op="allreduce", state=OpState.COMPLETED)
        for i in range(count)
    ]


def _cases(seed: int) -> list[tuple[RecordRows, list[CollectiveRecord]]]:
    rng = random.Random(seed)
    rows = _table(50)
    out = []
    for length in (0, 1, 2, 7, 40):
        ids = array("i", (rng.randrange(len(rows)) for _ in range(length)))
        own = {i: rng.randrange(len(rows)) for i in rng.sample(range(length), min(3, length))}
        for given in (None, own):
            expected = [rows[(given or {}).get(i, row)] for i, row in enumerate(ids)]
            out.append((RecordRows(rows, ids, _own(given)), expected))
        # from a start on, running past the shared numbers' end (those places its own)
        for start in range(min(3, length + 1)):
            count = length - start + 2
            tail = {i: rng.randrange(len(rows)) for i in range(length - start, count)}
            given = {**{i: r for i, r in own.items() if i < length - start}, **tail}
            shared = [*ids[start:], 0, 0]
            expected = [rows[given.get(i, row)] for i, row in enumerate(shared)]
            out.append((RecordRows(rows, ids, _own(given), start, count), expected))
    return out


def _own(given: dict[int, int] | None) -> tuple[array[int], array[int]] | None:
    if given is None:
        return None
    at = sorted(given)
    return array("H", at), array("i", map(given.__getitem__, at))


@pytest.mark.parametrize("seed", range(5))
def test_it_reads_as_the_list_of_its_records(seed: int) -> None:
    for seq, expected in _cases(seed):
        assert len(seq) == len(expected)
        assert bool(seq) == bool(expected)
        assert list(seq) == expected
        assert list(reversed(seq)) == expected[::-1]
        assert seq == expected and seq == RecordRows(*_rebuilt(seq))
        for index in range(-len(expected), len(expected)):
            assert seq[index] is expected[index]
        for index in (len(expected), -len(expected) - 1):
            with pytest.raises(IndexError):
                seq[index]
        for cut in (slice(None), slice(1, None), slice(None, -1), slice(None, None, -2)):
            assert seq[cut] == expected[cut]
        assert list(map(id, seq.row_numbers())) is not None  # the numbers are readable
        assert [seq._rows[i] for i in seq.row_numbers()] == expected


def _rebuilt(seq: RecordRows) -> tuple[list[CollectiveRecord], array[int]]:
    return seq._rows, seq.row_numbers()


def test_changing_it_makes_it_its_list_once() -> None:
    for seq, expected in _cases(7):
        extra = CollectiveRecord(group="x", seq_id=-1, op="barrier", state=OpState.SCHEDULED)
        seq.append(extra)
        expected.append(extra)
        assert list(seq) == expected and seq[-1] is extra and len(seq) == len(expected)
        seq.extend([extra])
        del seq[0]
        expected = [*expected[1:], extra]
        assert list(seq) == expected
        assert list(reversed(seq)) == expected[::-1]


def test_shared_numbers_change_no_record_of_another_rank() -> None:
    rows = _table(10)
    base = array("i", range(10))
    first = RecordRows(rows, base)
    second = RecordRows(rows, base, _own({9: 0}))
    assert second[9] is rows[0] and first[9] is rows[9]
    assert list(second)[-1] is rows[0] and list(first)[-1] is rows[9]
    assert list(base) == list(range(10))  # reading the second copied, not patched, them


@pytest.fixture(scope="module")
def fr_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_worker_job(tmp_path_factory.mktemp("fr"), entries=300)


def test_the_bulk_reader_shares_a_peer_s_numbers_and_reads_as_one_by_one(
    fr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted(fr_dir.iterdir(), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    pairs = [(p, p.name) for p in files]
    serial = [
        list(p.processes[0].collectives) for p in fr_bulk.read_flight_recorders(pairs, jobs=1)
    ]
    parallel = [p.processes[0].collectives for p in fr_bulk.read_flight_recorders(pairs, jobs=2)]
    assert all(isinstance(seq, RecordRows) for seq in parallel)
    assert [list(seq) for seq in parallel] == serial
    shared = [seq for seq in parallel if seq._own is not None or seq._start]
    assert shared, "tensor-parallel peers record the same rows: their numbers are shared"
    assert all(len(seq._own[0]) <= len(seq) * fr_bulk._OWN_SHARE for seq in shared if seq._own)
    # with nothing allowed to differ, no rank whose rows differ shares another's numbers
    monkeypatch.setattr(fr_bulk, "_OWN_SHARE", 0.0)
    strict = [p.processes[0].collectives for p in fr_bulk.read_flight_recorders(pairs, jobs=2)]
    assert [list(seq) for seq in strict] == serial
    assert all(not seq._own for seq in strict if isinstance(seq, RecordRows))


def test_a_loaded_rank_keeps_its_rows_compact(fr_dir: Path) -> None:
    ev = load_paths([fr_dir])
    ranked = [p for p in ev.processes if p.rank is not None]
    assert len(ranked) == 72
    assert all(isinstance(p.collectives, RecordRows) for p in ranked)
