"""fr_scan reads torch's own FR pickles without unpickling every entry. Whatever it
reads must be exactly what unpickling the whole file gives; whatever it is not sure
of it must refuse (ScanRefused), so the parser reads the file whole.

Inputs: the real dumps recorded from gloo jobs (fixtures/fr, torch 2.13) and dumps in
torch's exact byte format from ``scripts/fr_synth.py`` (its test checks the bytes
against the real ones), varied the ways other versions and jobs vary them.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest

from hangdoc.analyzer.parsers.base import ParsedFile
from hangdoc.analyzer.parsers.flight_recorder import (
    FlightRecorderParser,
    Reducer,
    decode_document,
    document_to_parsed,
)
from hangdoc.analyzer.parsers.fr_scan import Run, ScannedDump, ScanRefused, scan
from tests.unit.fr.frdata import REPO, Rank, load_synth, pg_config

synth = load_synth()
RECORDED = sorted((REPO / "fixtures" / "fr").glob("*/pickle/*"))


def _whole(data: bytes, reducer: Reducer | None = None) -> ParsedFile:
    return document_to_parsed(decode_document(data), 3, "f", reducer or Reducer())


def _scanned(data: bytes, reducer: Reducer | None = None) -> ParsedFile:
    return document_to_parsed(scan(data), 3, "f", reducer or Reducer())


def _same(a: ParsedFile, b: ParsedFile) -> None:
    assert a.error == b.error
    assert a.notes == b.notes
    assert a.process_groups == b.process_groups
    assert [p.collectives for p in a.processes] == [p.collectives for p in b.processes]
    assert [(p.rank, p.sources) for p in a.processes] == [(p.rank, p.sources) for p in b.processes]


def _job_doc(ranks: int = 16, entries: int = 300, rank: int = 5) -> dict[str, Any]:
    return synth.Job(ranks=ranks, entries=entries).dump(rank)  # type: ignore[no-any-return]


def _regular_share(dump: ScannedDump) -> float:
    """The share of entries the expression read (not the unpickler)."""
    runs = sum(len(p.heads) for p in dump.pieces if isinstance(p, Run))
    other = sum(len(p) for p in dump.pieces if not isinstance(p, Run))
    return runs / (runs + other)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_recorded_gloo_dumps_read_the_same(path: Path) -> None:
    data = path.read_bytes()
    _same(_scanned(data), _whole(data))


def test_a_job_reads_the_same_rank_by_rank_through_one_reducer() -> None:
    job = synth.Job(ranks=32, entries=400)
    shared = Reducer()
    for rank in range(32):
        data = synth.jit_dumps(job.dump(rank))
        dump = scan(data)
        assert _regular_share(dump) > 0.95
        _same(document_to_parsed(dump, 3, "f", shared), _whole(data))
    # the byte keys did the interning: far fewer records than entries
    assert 0 < len(shared.by_bytes) < 32 * 400 / 4


def test_frames_last_p2p_and_peers_read_the_same() -> None:
    """frdata's entries put frames last (the other layout) and hold send/recv."""
    rank = Rank()
    for _ in range(60):
        rank.op("all_reduce").send(1, src=0, group="1").recv(1, dst=0, group="1")
        rank.op("all_gather", group="2", desc="tp", sizes=((8,),), out=((16,),))
    doc = rank.dump(pg_config({"0": ("default_pg", [0, 1, 2, 3]), "1": ("pp", [4, 5])}))
    data = synth.jit_dumps(doc)
    dump = scan(data)
    assert _regular_share(dump) > 0.9
    scanned, whole = _scanned(data), _whole(data)
    _same(scanned, whole)
    peers = {r.peer for r in scanned.processes[0].collectives if r.is_p2p}
    assert peers == {5}


def _late_new_op(doc: dict[str, Any]) -> None:
    doc["entries"][250]["profiling_name"] = "nccl:broadcast"  # a string first seen mid-file


def _float_key(doc: dict[str, Any]) -> None:
    for i, entry in enumerate(doc["entries"]):
        entry["duration_ms"] = 0.25 * i if i % 3 else None


def _trailing_root_key(doc: dict[str, Any]) -> None:
    doc["nccl_comm_state"] = {"8e1f": {"status": "ok", "ranks": [0, 1]}}


def _many_stacks(doc: dict[str, Any]) -> None:
    """Memo ids past 255: LONG_BINGET references in every later entry."""
    for i, entry in enumerate(doc["entries"][:300]):
        entry["frames"] = [{"name": f"step_{i}", "filename": f"/job/m{i}.py", "line": i + 1}]


def _frames_in_the_middle(doc: dict[str, Any]) -> None:
    doc["entries"] = [
        {k: v for k, v in sorted(e.items(), key=lambda kv: kv[0] != "record_id")}
        for e in doc["entries"]
    ]


def _two_key_orders(doc: dict[str, Any]) -> None:
    entries = doc["entries"]
    for i in range(100, 140):
        entries[i] = dict(reversed(list(entries[i].items())))


def _unknown_string_key(doc: dict[str, Any]) -> None:
    for entry in doc["entries"]:
        entry["device"] = "cuda:3"


def _new_stack_mid_file(doc: dict[str, Any]) -> None:
    doc["entries"][200]["frames"] = [{"name": "late", "filename": "/job/late.py", "line": 9}]


def _odd_values(doc: dict[str, Any]) -> None:
    doc["entries"][120]["collective_seq_id"] = "seven"  # malformed: skipped by the reducer
    doc["entries"][121]["input_sizes"] = [[-1, 2**40]]
    doc["entries"][122]["state"] = None


VARIATIONS = [
    _late_new_op,
    _float_key,
    _trailing_root_key,
    _many_stacks,
    _frames_in_the_middle,
    _two_key_orders,
    _unknown_string_key,
    _new_stack_mid_file,
    _odd_values,
]


# Read whole instead: strings in fields the expression does not know; malformed entries
# (the reducer counts and skips those, which only the whole read does).
STEPS_ASIDE = (_unknown_string_key, _odd_values)


@pytest.mark.parametrize("vary", VARIATIONS, ids=lambda f: f.__name__.strip("_"))
def test_variations_read_the_same_or_step_aside(vary: Any) -> None:
    doc = _job_doc(entries=500)
    vary(doc)
    data = synth.jit_dumps(doc)
    scanned = FlightRecorderParser()._parse_scanned(data, 3, "f")
    if vary in STEPS_ASIDE:
        assert scanned is None
    else:
        assert scanned is not None, "stepped aside from a dump it should read"
        _same(scanned, _whole(data))


def test_unknown_string_fields_make_it_step_aside() -> None:
    doc = _job_doc()
    _unknown_string_key(doc)
    with pytest.raises(ScanRefused):
        scan(synth.jit_dumps(doc))


def _mutations(data: bytes, count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        pos = rng.randrange(len(data))
        kind = rng.randrange(4)
        if kind == 0:
            out.append(data[:pos] + bytes([rng.randrange(256)]) + data[pos + 1 :])
        elif kind == 1:
            out.append(data[:pos])
        elif kind == 2:
            out.append(data[:pos] + bytes(rng.randrange(256) for _ in range(3)) + data[pos:])
        else:
            out.append(data[:pos] + data[pos + rng.randrange(1, 40) :])
    return out


def test_corrupt_dumps_give_what_the_whole_read_gives() -> None:
    """Random damage anywhere: the scanner either steps aside or agrees with the whole read."""
    data = synth.jit_dumps(_job_doc(entries=300))
    parser = FlightRecorderParser()
    read_by_scanner = 0
    for damaged in _mutations(data, 400, seed=7):
        scanned = parser._parse_scanned(damaged, 3, "f")
        if scanned is None:
            continue
        read_by_scanner += 1
        try:
            whole = _whole(damaged)
        except Exception as exc:
            pytest.fail(f"scanner read a dump the whole read rejects: {exc!r}")
        _same(scanned, whole)
    assert read_by_scanner > 20  # damage to history it does not need: still read, the same


def test_a_global_anywhere_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    data = synth.jit_dumps(_job_doc(entries=300))
    marker = tmp_path / "ran"
    evil = (
        b"cos\nsystem\n(X"
        + len(f"touch {marker}").to_bytes(4, "little")
        + f"touch {marker}".encode()
    )
    # a last root key whose value calls os.system: after the entries, where the
    # unpickler (not the expression) reads
    damaged = data[:-3] + b"X\x04\x00\x00\x00evil" + evil + b"tRu."
    path = tmp_path / "comm_lib_trace_rank_3"
    path.write_bytes(damaged)
    parsed = FlightRecorderParser().parse(path, "f")
    assert parsed.error is not None and "os.system" in parsed.error
    assert not marker.exists()


def test_the_parser_scans_large_torch_dumps(tmp_path: Path) -> None:
    path = tmp_path / "comm_lib_trace_rank_3"
    path.write_bytes(synth.jit_dumps(_job_doc(entries=300)))
    parser = FlightRecorderParser()
    parsed = parser.parse(path, "f")
    assert parsed.error is None and len(parsed.processes[0].collectives) == 300
    assert parser.reducer.by_bytes  # it went through the byte keys


def test_json_and_python_pickles_are_not_scanned() -> None:
    doc = _job_doc()
    import json
    import pickle

    for data in (
        pickle.dumps(doc, protocol=4),
        json.dumps(copy.deepcopy(doc), default=list).encode(),
    ):
        with pytest.raises(ScanRefused):
            scan(data)


def test_files_whose_keys_have_other_memo_ids_still_share_records() -> None:
    """Key memo ids depend on how many strings came first (the first entry's stack):
    the byte keys must not, or equal history would not be shared across such files."""
    doc = _job_doc(entries=300)
    other = copy.deepcopy(doc)
    other["entries"][0]["frames"] = [
        {"name": f"extra_{i}", "filename": f"/job/extra_{i}.py", "line": i} for i in range(5)
    ] + other["entries"][0]["frames"]
    first, second = synth.jit_dumps(doc), synth.jit_dumps(other)
    dump_a, dump_b = scan(first), scan(second)
    run_a = next(p for p in dump_a.pieces if isinstance(p, Run))
    run_b = next(p for p in dump_b.pieces if isinstance(p, Run))
    assert run_a.layout is not run_b.layout  # the key references differ
    shared = Reducer()
    a = document_to_parsed(dump_a, 3, "a", shared).processes[0].collectives
    created = len(shared.by_bytes)
    b = document_to_parsed(dump_b, 3, "b", shared).processes[0].collectives
    assert len(shared.by_bytes) == created  # nothing new: every history record found
    assert a[150] is b[150]
