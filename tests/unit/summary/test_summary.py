"""Node summaries (``summary.json``, hangdoc.summary/2): what they hold, that analysis from
them gives the diagnosis the raw files give on every recorded real hang, and that the
loader falls back to the raw files whenever a summary cannot be trusted."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import CollectiveRecord, FileMode, InputKind, OpState, ProcState
from hangdoc.analyzer.summarize.reduce import FR_COMPLETED_TAIL, fr_window
from hangdoc.analyzer.summarize.write import write_node_summary
from hangdoc.collectors.jobformat import SUMMARY_FORMAT, SUMMARY_NAME

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
DUMPS = sorted(p.parent for p in FIXTURES.rglob("manifest.json"))
IDS = [str(p.relative_to(FIXTURES)) for p in DUMPS]


def _copy(dump: Path, tmp_path: Path) -> Path:
    dest = tmp_path / dump.name
    shutil.copytree(dump, dest)
    return dest


def _key(d: Diagnosis) -> tuple[object, ...]:
    """Everything a person reads of a diagnosis, minus file paths."""
    findings = [
        (f.rule, f.category, f.severity, f.title, f.culprit_ranks, f.waiting_ranks,
         f.confidence, f.explanation)
        for f in d.findings
    ]  # fmt: skip
    return d.verdict, findings, d.seen_ranks, d.missing_ranks, d.expected_world_size


@pytest.mark.parametrize("dump", DUMPS, ids=IDS)
def test_summary_gives_the_raw_diagnosis(dump: Path, tmp_path: Path) -> None:
    # GIVEN a recorded dump of a real hang, and its node summary
    copy = _copy(dump, tmp_path)
    raw = analyze(load_paths([copy], summaries=False))
    write_node_summary(copy)
    # WHEN it is analyzed from the summary alone, and with the outliers' raw files
    alone = analyze(load_paths([copy], hydrate_budget=0))
    mixed = analyze(load_paths([copy]))
    # THEN both say exactly what the raw files say
    assert _key(alone) == _key(raw)
    assert _key(mixed) == _key(raw)
    assert any(i.kind is InputKind.SUMMARY for i in alone.evidence.inputs)


def test_summary_holds_stack_classes_with_rank_sets(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "dumps" / "checkpoint", tmp_path)
    path = write_node_summary(copy)
    summary = json.loads(path.read_text())
    assert summary["format"] == SUMMARY_FORMAT
    classes = {tuple(c["ranks"]): c["activity"] for c in summary["stack_classes"]}
    assert set(classes) == {(0, 1, 2), (3,)}
    assert classes[(0, 1, 2)].startswith("in all_gather")
    assert "checkpoint" in classes[(3,)]
    # Each frame is written once, and the three waiting ranks share one main-thread shape.
    rows = [tuple(r[:4]) for r in summary["frames"]]
    assert len(rows) == len(set(rows))
    mains = {r["rank"]: r["stacks"][-1]["threads"][0][0] for r in summary["ranks"] if r["stacks"]}
    assert mains[0] == mains[1] == mains[2] != mains[3]


def test_summary_keeps_flight_recorder_state_per_group(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "fr" / "missing_and_mismatch" / "dump", tmp_path)
    summary = json.loads(write_node_summary(copy).read_text())
    groups = {g["group"]: g for g in summary["fr_groups"]}
    assert groups, "no flight recorder state"
    for group in groups.values():
        ranks = sorted(r for s in group["states"] for r in s["ranks"])
        assert len(ranks) == len(set(ranks))
        for state in group["states"]:
            for brief in [state["last_completed"], *state["pending"]]:
                if brief is not None:
                    assert {"seq", "op", "input_sizes", "dtypes"} <= set(brief)
    assert any(s["pending"] for g in groups.values() for s in g["states"])


def test_hydrated_ranks_list_each_input_once(tmp_path: Path) -> None:
    """A rank read from its raw files as well as the summary: its files are listed once."""
    copy = _copy(FIXTURES / "fr" / "mismatched_op" / "dump", tmp_path)
    write_node_summary(copy)
    ev = load_paths([copy])
    assert any("were opened as well" in n for n in ev.notes)  # hydration did happen
    paths = [item.path for item in ev.inputs]
    assert len(paths) == len(set(paths)), sorted(p for p in paths if paths.count(p) > 1)


def _record(seq: int, state: str, group: str = "0", rid: int | None = None) -> CollectiveRecord:
    return CollectiveRecord(group=group, seq_id=seq, op="all_reduce", state=OpState(state),
                            record_id=seq if rid is None else rid)  # fmt: skip


def test_fr_window_keeps_the_frontier_and_the_first_record() -> None:
    records = [_record(i, "completed") for i in range(100)]
    records += [_record(100, "started"), _record(101, "scheduled")]
    kept = fr_window(records)
    seqs = [r.seq_id for r in kept]
    assert seqs[0] == 0  # whether the ring wrapped stays visible
    assert seqs[1:] == list(range(100 - FR_COMPLETED_TAIL, 102))
    assert fr_window(records[:5]) == records[:5]


def test_a_stale_summary_is_not_used(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "dumps" / "checkpoint", tmp_path)
    write_node_summary(copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["finished_at"] += 60.0  # the dump was written again after its summary
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2))
    evidence = load_paths([copy])
    assert not any(i.kind is InputKind.SUMMARY for i in evidence.inputs)
    assert any("does not match" in n for n in evidence.notes)
    assert analyze(evidence).findings[0].culprit_ranks == (3,)


@pytest.mark.parametrize(
    "damage",
    ["{not json", '{"format": "hangdoc.summary/1"}', '{"format": "hangdoc.summary/2"}', "[]"],
)
def test_a_damaged_summary_falls_back_to_the_raw_files(tmp_path: Path, damage: str) -> None:
    copy = _copy(FIXTURES / "dumps" / "checkpoint", tmp_path)
    write_node_summary(copy)
    (copy / SUMMARY_NAME).write_text(damage)
    evidence = load_paths([copy])
    assert any("raw files are read instead" in n for n in evidence.notes)
    assert analyze(evidence).findings[0].culprit_ranks == (3,)


def test_no_summaries_reads_raw_files(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "dumps" / "checkpoint", tmp_path)
    write_node_summary(copy)
    evidence = load_paths([copy], summaries=False)
    assert not any(i.kind is InputKind.SUMMARY for i in evidence.inputs)
    assert any(i.kind is InputKind.PYSPY_JSON for i in evidence.inputs)


def test_hydration_reads_only_the_outliers_raw_files(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "dumps" / "checkpoint", tmp_path)
    write_node_summary(copy)
    evidence = load_paths([copy])
    stack_files = {i.path for i in evidence.inputs if i.kind is InputKind.PYSPY_JSON}
    assert stack_files and all("/rank3/" in p for p in stack_files)
    assert any("raw files of rank 3 were opened" in n for n in evidence.notes)


def test_secrets_in_a_loose_file_merged_into_a_summary_rank_are_redacted(tmp_path: Path) -> None:
    # GIVEN a summary-read dump, and a loose rank-3 stack whose thread name holds a token
    copy = _copy(FIXTURES / "dumps" / "checkpoint", tmp_path)
    write_node_summary(copy)
    secret = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    trace = json.loads((copy / "rank3" / "pyspy.1.json").read_text())
    trace[0]["thread_name"] = f"uploader token={secret}"
    loose = tmp_path / "rank3.json"
    loose.write_text(json.dumps(trace))
    # WHEN both are analyzed (redaction on, the default)
    evidence = load_paths([copy, loose], hydrate_budget=0)
    # THEN the merged process is redacted like any other input
    names = [t.name or "" for p in evidence.processes for s in p.stack_samples for t in s.threads]
    assert names and not any(secret in n for n in names)


def test_a_summary_only_node_is_analyzed_without_its_raw_files(tmp_path: Path) -> None:
    # GIVEN what `collect --transfer summary` brings back: the manifest and the summary
    copy = _copy(FIXTURES / "dumps" / "checkpoint", tmp_path)
    write_node_summary(copy)
    for rank_dir in copy.glob("rank*"):
        shutil.rmtree(rank_dir)
    # WHEN it is analyzed
    evidence = load_paths([copy])
    # THEN the diagnosis comes from the summary, and a note says the raw files are absent
    assert analyze(evidence).findings[0].culprit_ranks == (3,)
    assert any("are not here (a summary-only collection?)" in n for n in evidence.notes)
    assert not any(i.error for i in evidence.inputs)


def test_the_codec_round_trips_model_records_and_relocates_paths() -> None:
    from hangdoc.analyzer.model import (
        ChildProcess,
        Frame,
        IoCounters,
        OpenFile,
        OutputSizes,
        ProcSample,
        ThreadState,
    )
    from hangdoc.analyzer.summaries.codec import DecodeContext, FrameTable, decode_frames
    from hangdoc.analyzer.summaries.codec import decoder as dec
    from hangdoc.analyzer.summaries.codec import encoder as enc

    sample = ProcSample(
        index=1, time=12.5, state=ProcState.DISK_SLEEP, wchan="nfs_wait", cpu_ticks=7,
        threads=(ThreadState(tid=5, name="pt_main", state=ProcState.DISK_SLEEP, wchan="rpc_wait"),),
        io=IoCounters(rchar=10, wchar=3), output_sizes=OutputSizes(stdout=99),
        open_files=(OpenFile(fd=4, path="/ckpt/x.pt", mode=FileMode.WRITE, pos=1 << 40,
                             fstype="nfs4"),),
        children=(ChildProcess(pid=9, state=ProcState.ZOMBIE, threads_in_d=1),),
    )  # fmt: skip
    table = FrameTable()
    frames = (Frame("all_gather", "c10d.py", 3), Frame("step", "t.py", 9))
    record = CollectiveRecord(
        group="0", seq_id=3, op="all_gather", state=OpState.STARTED, input_sizes=((4, 8),),
        dtypes=("Float",), source="@/rank1/fr.json", frames=frames,
    )  # fmt: skip
    raw = json.loads(
        json.dumps([enc(ProcSample)(sample, table), enc(CollectiveRecord)(record, table)])
    )
    ctx = DecodeContext(decode_frames(json.loads(json.dumps(table.rows))), "/data/job/node7")
    assert dec(ProcSample)(raw[0], ctx) == sample
    back = dec(CollectiveRecord)(raw[1], ctx)
    assert back == dataclasses.replace(record, source="/data/job/node7/rank1/fr.json")
    assert "peer" not in raw[1]  # defaults are left out
    assert raw[1]["frames"] == [0, 1]  # frames are indices into the table


def test_the_codec_reads_states_it_does_not_know_as_unknown() -> None:
    # GIVEN records as a newer (or damaged) summary writes them: a collective state and a
    # thread state this version has no member for
    from hangdoc.analyzer.model import ProcSample, ThreadState
    from hangdoc.analyzer.summaries.codec import DecodeContext
    from hangdoc.analyzer.summaries.codec import decoder as dec

    ctx = DecodeContext([], "node7")
    raw_record = {"group": "0", "seq_id": 3, "op": "all_gather", "state": "paused"}
    raw_sample = {"index": 0, "time": None, "state": "Q", "threads": [{"tid": 5, "state": 7}]}
    # WHEN they are decoded
    record = dec(CollectiveRecord)(raw_record, ctx)
    sample = dec(ProcSample)(raw_sample, ctx)
    # THEN the unknown values are UNKNOWN members, the rest as written
    assert record.state is OpState.UNKNOWN and record.seq_id == 3
    assert sample.state is ProcState.UNKNOWN
    assert sample.threads == (ThreadState(tid=5, state=ProcState.UNKNOWN),)
