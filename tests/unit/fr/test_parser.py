"""Every FR form and version (FORMATS.md §5) becomes the same records."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from hangdoc.analyzer.model import CollectiveRecord, InputKind
from hangdoc.analyzer.parsers import PARSERS
from hangdoc.analyzer.parsers.flight_recorder import (
    FlightRecorderParser,
    Reducer,
    document_to_parsed,
    normalize_state,
    parse_rank_list,
    split_profiling_name,
)
from tests.unit.fr.frdata import Rank, pg_config

SAMPLES = Path(__file__).resolve().parents[3] / "fixtures" / "fr" / "torch_samples"


def _records(path: Path) -> list[CollectiveRecord]:
    parsed = FlightRecorderParser().parse(path, str(path))
    assert parsed.error is None, parsed.error
    return parsed.processes[0].collectives


def _core(rec: CollectiveRecord) -> tuple[object, ...]:
    return (
        rec.group,
        rec.group_desc,
        rec.seq_id,
        rec.op,
        rec.input_sizes,
        rec.output_sizes,
        rec.dtypes,
        rec.record_id,
        rec.backend,
    )


def test_real_pickle_and_json_of_one_run_give_the_same_records() -> None:
    for rank in (0, 1):
        from_pickle = _records(SAMPLES / "fr_pickle" / f"comm_lib_trace_rank_{rank}")
        from_json = _records(SAMPLES / "fr_json" / f"comm_lib_trace_rank_{rank}.json")
        assert [_core(r) for r in from_pickle] == [_core(r) for r in from_json]
        # rank 1's pickle was dumped just before its last barrier retired, the JSON after
        states = [r.state for r in from_pickle]
        assert states == ["completed"] * 6 + (["completed"] if rank == 0 else ["scheduled"])
        assert [r.state for r in from_json] == ["completed"] * 7
        assert [r.op for r in from_pickle] == [
            "all_reduce",
            "all_reduce",
            "all_reduce",
            "barrier",
            "all_gather",
            "broadcast",
            "barrier",
        ]


def test_gloo_quirks_dummy_pg_config_and_scheduled_state() -> None:
    parsed = FlightRecorderParser().parse(
        SAMPLES / "fr_mismatch" / "comm_lib_trace_rank_0", "fr_mismatch/comm_lib_trace_rank_0"
    )
    assert parsed.processes[0].rank == 0
    groups = {g.name: g for g in parsed.process_groups}
    assert set(groups) == {"0", "1"}  # the dummy '' group is dropped
    assert groups["1"].desc == "my_subgroup" and groups["1"].ranks == ()
    records = parsed.processes[0].collectives
    # gloo: state stays "scheduled"; retired says done; the extra fp16 op is in flight
    assert [r.state for r in records[:-1]] == ["completed"] * 6
    last = records[-1]
    assert (last.seq_id, last.state, last.dtypes, last.input_sizes) == (
        6,
        "scheduled",
        ("Half",),
        ((8,),),
    )
    assert last.source == "fr_mismatch/comm_lib_trace_rank_0"
    assert last.frames and last.frames[0].function == "all_reduce"


def test_pg_config_ranks_string_is_parsed() -> None:
    parsed = FlightRecorderParser().parse(
        SAMPLES / "fr_mismatch_patched" / "comm_lib_trace_rank_1", "p/comm_lib_trace_rank_1"
    )
    groups = {g.name: g for g in parsed.process_groups}
    assert groups["0"].ranks == (0, 1) and groups["0"].desc == "default_pg"


def test_history_is_interned_and_only_the_frontier_keeps_details() -> None:
    reducer = Reducer()
    docs = [Rank().ops(5).op(group="1", desc="tp").dump() for _ in range(2)]
    a = document_to_parsed(docs[0], 0, "a", reducer).processes[0].collectives
    b = document_to_parsed(docs[1], 1, "b", reducer).processes[0].collectives
    assert all(x is y for x, y in zip(a[:4], b[:4], strict=True))  # shared history
    assert a[4] is not b[4] and a[4].source == "a" and b[4].source == "b"  # group 0's last
    assert a[4].time_created_ns is not None and a[4].frames
    assert a[0].source == "" and a[0].time_created_ns is None and not a[0].frames


@pytest.mark.parametrize("form", ["bare_list", "no_version", "v2_3", "v2_6", "json_strings"])
def test_every_version_form(form: str, tmp_path: Path) -> None:
    rank = Rank().ops(3).op(state="scheduled")
    entries: list[dict[str, Any]] = rank.entries
    doc: object
    if form == "bare_list":  # early 2024: the entries themselves, seq_id, no process_group
        for e in entries:
            e["seq_id"] = e.pop("collective_seq_id")
            del e["process_group"], e["is_p2p"], e["p2p_seq_id"]
        doc = entries
    elif form == "no_version":
        doc = {"entries": entries}
    elif form == "v2_3":
        doc = {
            "version": "2.3",
            "pg_config": pg_config({"0": ("default_pg", [0, 1])}),
            "pg_status": {"0": {"last_enqueued_collective": 4}},
            "entries": entries,
        }
    elif form == "v2_6":
        doc = {"version": "2.6", "nccl_version": "2.21.5", "pg_config": {}, "entries": entries}
    else:  # JSON: pg_status values are strings, process_group a list, no frames
        for e in entries:
            e["process_group"] = list(e["process_group"])
            del e["frames"]
        doc = {
            "version": "2.10",
            "pg_status": {"0": {"last_enqueued_collective": "4"}},
            "entries": entries,
            "nccl_comm_state": {},
        }
    path = tmp_path / f"trace_rank_{form}_5"
    if form == "json_strings":
        path.write_text(json.dumps(doc))
    else:
        path.write_bytes(pickle.dumps(doc, protocol=2))
    parser = FlightRecorderParser()
    assert parser.sniff(path.read_bytes()[:65536])
    parsed = parser.parse(path, path.name)
    assert parsed.error is None and parsed.processes[0].rank == 5
    records = parsed.processes[0].collectives
    assert [r.seq_id for r in records] == [1, 2, 3, 4]
    assert [r.state for r in records] == ["completed"] * 3 + ["scheduled"]
    assert {r.group for r in records} == {"0"}


def test_malformed_entries_are_skipped_with_a_note() -> None:
    doc = Rank().ops(2).dump()
    doc["entries"] += [{"record_id": 9}, "junk", {"profiling_name": 3}]
    parsed = document_to_parsed(doc, 0, "x", Reducer())
    assert len(parsed.processes[0].collectives) == 2
    assert any("skipped 3 malformed" in n for n in parsed.notes)


def test_not_a_dump() -> None:
    parsed = document_to_parsed("nope", 0, "x", Reducer())
    assert parsed.error is not None and "not a flight recorder dump" in parsed.error


def test_sniff_is_by_content() -> None:
    parser = FlightRecorderParser()
    for path in (SAMPLES / "fr_pickle").iterdir():
        assert parser.sniff(path.read_bytes()[:65536])
    for path in (SAMPLES / "fr_json").iterdir():
        assert parser.sniff(path.read_bytes()[:65536])
    assert not parser.sniff(b'[{"pid": 1, "frames": []}]')
    assert not parser.sniff(b'{"format": "hangdoc.process/1"}')
    assert not parser.sniff(pickle.dumps({"a": 1}))
    assert any(isinstance(p, FlightRecorderParser) for p in PARSERS)


def test_empty_json_dump_omits_entries(tmp_path: Path) -> None:
    path = tmp_path / "rank3" / "flight_recorder.hook.json"
    path.parent.mkdir()
    path.write_text(
        '{"comm_lib_version":"","nccl_comm_state":{},"pg_config":{},'
        '"pg_status":{},"version":"2.10"}'
    )
    parser = FlightRecorderParser()
    assert parser.sniff(path.read_bytes())
    parsed = parser.parse(path, "d/rank3/flight_recorder.hook.json")
    assert parsed.kind is InputKind.FLIGHT_RECORDER and parsed.error is None
    assert parsed.processes[0].rank == 3 and parsed.processes[0].collectives == []


def test_profiling_names_and_states() -> None:
    assert split_profiling_name("nccl:send 0->1").src == 0
    recv = split_profiling_name("nccl:recv 1<-0")
    assert (recv.backend, recv.op, recv.src, recv.dst) == ("nccl", "recv", 0, 1)
    assert split_profiling_name("gloo:all_reduce").op == "all_reduce"
    assert normalize_state("scheduled", True, "gloo") == "completed"
    assert normalize_state("scheduled", True, "nccl") == "timed_out"
    assert normalize_state("completed", True, "nccl") == "completed"
    assert normalize_state("started", False, "nccl") == "started"
    assert normalize_state(None, None, None) == "unknown"
    assert parse_rank_list("[0, 1, 2]") == (0, 1, 2)
    assert parse_rank_list("[]") == () and parse_rank_list([3, 4]) == (3, 4)


def test_p2p_peers_are_global_ranks() -> None:
    # group "3" = global ranks [4, 6]; local "0->1" from rank 4 is a send to global 6
    cfg = pg_config({"0": ("default_pg", range(8)), "3": ("pp", [4, 6])})
    doc = Rank().send(1, src=0, group="3").dump(cfg)
    rec = document_to_parsed(doc, 4, "x", Reducer()).processes[0].collectives[0]
    assert (rec.op, rec.is_p2p, rec.peer, rec.p2p_seq_id) == ("send", True, 6, 1)
