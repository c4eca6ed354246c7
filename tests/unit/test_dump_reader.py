"""The dump directory reader, on dumps built with tests/builders.py (dumpformat TypedDicts)."""

from __future__ import annotations

import json
from pathlib import Path

from hangdoc.analyzer.loading.dump_reader import is_dump_dir, read_dump
from hangdoc.analyzer.model import InputKind, OutputSizes, ProcState, StepStatus
from hangdoc.collectors.dumpformat import MANIFEST_NAME
from tests.builders import (
    ALLREDUCE_WAIT,
    T0,
    RankSpec,
    main_trace,
    pyspy_trace,
    step_record,
    write_dump,
)


def _two_rank_dump(root: Path) -> Path:
    ranks = [
        RankSpec(
            rank=r,
            pid=100 + r,
            local_rank=r,
            world_size=4,
            local_world_size=2,
            env={"RANK": str(r), "WORLD_SIZE": "4"},
            samples=[[main_trace(100 + r)], [main_trace(100 + r)]],
        )
        for r in (0, 1)
    ]
    return write_dump(root, "node1", ranks)


def test_reads_host_processes_samples_and_steps(tmp_path: Path) -> None:
    # GIVEN a complete 2-rank, 2-sample dump
    dump = _two_rank_dump(tmp_path / "node1")
    assert is_dump_dir(dump)
    # WHEN it is read
    got = read_dump(dump, "node1")
    # THEN the host, both ranks with their /proc and stack samples, and the steps
    assert got.host is not None and got.host.host == "node1"
    assert got.host.sample_times == (T0, T0 + 5.0) and got.host.interval_s == 5.0
    assert got.host.pids_requested == (100, 101) and got.host.local_world_size == 2
    assert got.host.manifest == "node1/manifest.json"
    assert got.host.collected_at is not None and got.host.collected_at.startswith("20")
    assert [p.rank for p in got.processes] == [0, 1]
    proc = got.processes[1]
    assert (proc.host, proc.pid, proc.local_rank, proc.world_size) == ("node1", 101, 1, 4)
    assert proc.local_world_size == 2 and proc.group_rank == 0
    assert proc.cmdline == "/opt/venv/bin/python train.py"
    assert proc.env == {"RANK": "1", "WORLD_SIZE": "4"} and proc.start_time == T0 - 3600
    assert [(s.index, s.time) for s in proc.stack_samples] == [(0, T0), (1, T0 + 5.0)]
    assert proc.stack_samples[0].source == "node1/rank1/pyspy.0.json"
    main = proc.stack_samples[0].main_thread()
    assert main is not None and main.is_main
    assert [f.function for f in main.frames] == [f for f, _, _ in ALLREDUCE_WAIT]
    ps0, ps1 = proc.proc_samples
    assert ps1.index == 1 and ps1.time == T0 + 5.0
    assert (ps0.index, ps0.time, ps0.alive, ps0.state) == (0, T0, True, "S")
    assert ps0.threads[0].tid == 101 and ps0.threads[0].wchan == "futex_wait_queue"
    assert ps0.io.wchar == 20 and ps0.output_sizes == OutputSizes(stderr=4096)
    assert not proc.exited
    assert {s.step for s in got.steps} == {"discover", "pyspy"}
    assert all(s.host == "node1" for s in got.steps)
    # every file is an input with its kind, no errors
    kinds = {i.path: i.kind for i in got.inputs}
    assert kinds["node1/manifest.json"] is InputKind.MANIFEST
    assert kinds["node1/rank0/process.json"] is InputKind.PROCESS
    assert kinds["node1/rank1/pyspy.1.json"] is InputKind.PYSPY_JSON
    assert len(got.inputs) == 1 + 2 * (1 + 2)
    assert all(i.error is None for i in got.inputs) and got.notes == []


def test_exited_rank_from_proc_samples_and_skipped_steps(tmp_path: Path) -> None:
    spec = RankSpec(rank=3, pid=300, samples=[[main_trace(300)]], alive=[True, False])
    got = read_dump(write_dump(tmp_path / "d", "n", [spec], n_samples=2), "d")
    [proc] = got.processes
    assert proc.exited
    assert [s.alive for s in proc.proc_samples] == [True, False]
    assert any("process exited" in n for n in got.notes)
    assert [s.status for s in got.steps if s.step == "pyspy"] == ["ok", "skipped"]


def test_skipped_step_alone_marks_exited(tmp_path: Path) -> None:
    spec = RankSpec(rank=0, pid=1, samples=[[main_trace(1)]], write_process=False)
    skipped = step_record("proc", "skipped", 0, 1, 0, "process exited")
    got = read_dump(write_dump(tmp_path / "d", "n", [spec], extra_steps=[skipped]), "d")
    assert got.processes[0].exited


def test_typed_exited_key_decides_over_the_wording(tmp_path: Path) -> None:
    # GIVEN steps with the typed "exited" key (hangdoc collect writes it on every step)
    specs = [
        RankSpec(rank=r, pid=10 + r, samples=[[main_trace(10 + r)]], write_process=False)
        for r in range(3)
    ]
    said = step_record("pyspy", "skipped", 0, 10, 0, "py-spy could not attach")
    said["exited"] = True  # an exit in other words than the regex knows
    denied = step_record("pyspy", "failed", 1, 11, 0, "the process exited the group")
    denied["exited"] = False  # worded like an exit, typed as not one
    old = step_record("proc", "skipped", 2, 12, 0, "process exited")  # no key: an older dump
    got = read_dump(write_dump(tmp_path / "d", "n", specs, extra_steps=[said, denied, old]), "d")
    # THEN the key decides where it is present, the wording only where it is absent
    assert [p.exited for p in got.processes] == [True, False, True]
    assert {s.pid: s.exited for s in got.steps if s.reason} == {10: True, 11: False, 12: None}


def test_partial_dump_missing_and_truncated_files(tmp_path: Path) -> None:
    # GIVEN a dump whose collector was killed: manifest complete=false, rank 0's sample 1
    # cut mid-write, rank 1's process.json never written, a sample that py-spy failed
    ranks = [
        RankSpec(rank=0, pid=10, samples=[[main_trace(10)], [main_trace(10)]]),
        RankSpec(rank=1, pid=11, samples=[[main_trace(11)]], write_process=False),
    ]
    dump = write_dump(tmp_path / "d", "n", ranks, n_samples=2, complete=False)
    cut = dump / "rank0" / "pyspy.1.json"
    cut.write_text(cut.read_text()[:200])
    # WHEN read
    got = read_dump(dump, "d")
    # THEN what is there is loaded and every problem is an input error plus a note
    by_rank = {p.rank: p for p in got.processes}
    assert [s.index for s in by_rank[0].stack_samples] == [0]
    assert by_rank[1].pid == 11 and by_rank[1].host == "n"  # from the manifest record
    assert len(by_rank[1].stack_samples) == 1 and by_rank[1].proc_samples == []
    errors = {i.path: i.error for i in got.inputs if i.error}
    assert "truncated JSON" in (errors["d/rank0/pyspy.1.json"] or "")
    assert errors["d/rank1/process.json"] == "missing"
    assert any("partial dump" in n for n in got.notes)
    assert any(s.status == "failed" and s.rank == 1 for s in got.steps)


def test_file_the_manifest_promised_is_missing(tmp_path: Path) -> None:
    spec = RankSpec(rank=0, pid=10, samples=[[main_trace(10)], [main_trace(10)]])
    dump = write_dump(tmp_path / "d", "n", [spec])
    (dump / "rank0" / "pyspy.1.json").unlink()
    got = read_dump(dump, "d")
    missing = [i for i in got.inputs if i.path == "d/rank0/pyspy.1.json"]
    assert missing and missing[0].error is not None and "missing" in missing[0].error


def test_subprocess_traces_in_a_sample_become_children(tmp_path: Path) -> None:
    # The collector merges dataloader workers' traces into the rank's file (pid kept)
    workers = [
        pyspy_trace(900 + i, 900 + i, "MainThread", [("_worker_loop", "/w.py", 1)])
        for i in range(3)
    ]
    spec = RankSpec(rank=0, pid=50, samples=[[main_trace(50), *workers]])
    got = read_dump(write_dump(tmp_path / "d", "n", [spec]), "d")
    sample = got.processes[0].stack_samples[0]
    assert len(sample.threads) == 1 and sample.threads[0].is_main
    assert [c.pid for c in sample.children] == [900, 901, 902]


def test_other_files_are_handed_back_with_their_rank(tmp_path: Path) -> None:
    spec = RankSpec(
        rank=2, pid=20, samples=[[main_trace(20)]],
        extra_files={"fr_trace.json": "{}", "logs/stderr.log": "hello\n"},
    )  # fmt: skip
    dump = write_dump(tmp_path / "d", "n", [spec])
    (dump / "nvidia-smi.csv").write_text("index, name\n0, H100\n")
    got = read_dump(dump, "d")
    others = {o.display: o.context for o in got.other_files}
    assert others["d/rank2/fr_trace.json"].rank == 2
    assert others["d/rank2/logs/stderr.log"].pid == 20
    assert others["d/nvidia-smi.csv"].rank is None and others["d/nvidia-smi.csv"].host == "n"


def test_unlisted_rank_folder_and_broken_manifest(tmp_path: Path) -> None:
    # GIVEN a manifest cut mid-rewrite, next to complete rank folders
    dump = _two_rank_dump(tmp_path / "d")
    manifest = dump / MANIFEST_NAME
    manifest.write_text(manifest.read_text()[:100])
    # THEN it is still a dump, and the rank folders are read from their process.json
    assert is_dump_dir(dump)
    got = read_dump(dump, "d")
    assert sorted(p.rank for p in got.processes if p.rank is not None) == [0, 1]
    assert got.host is None
    assert next(i for i in got.inputs if i.kind is InputKind.MANIFEST).error is not None
    assert any("does not list" in n for n in got.notes)


def test_not_a_dump(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"format": "something-else/1"}))
    assert not is_dump_dir(tmp_path)
    assert not is_dump_dir(tmp_path / "absent")


def test_states_and_statuses_this_version_does_not_know_load_as_unknown(tmp_path: Path) -> None:
    # GIVEN a dump whose writer (a newer hangdoc, or a damaged file) used a step status,
    # a process state and a thread state letter this version has no member for
    dump = _two_rank_dump(tmp_path / "node1")
    manifest = json.loads((dump / MANIFEST_NAME).read_text())
    manifest["steps"][1]["status"] = "postponed"
    (dump / MANIFEST_NAME).write_text(json.dumps(manifest))
    process = json.loads((dump / "rank0" / "process.json").read_text())
    process["samples"][0]["state"] = "Q"
    process["samples"][0]["threads"][0]["state"] = "zz"
    (dump / "rank0" / "process.json").write_text(json.dumps(process))
    # WHEN it is read
    got = read_dump(dump, "node1")
    # THEN each unknown value is the UNKNOWN member, and the rest of the dump is there
    assert StepStatus.UNKNOWN in {s.status for s in got.steps}
    assert StepStatus.OK in {s.status for s in got.steps}
    sample = got.processes[0].proc_samples[0]
    assert sample.state is ProcState.UNKNOWN
    assert sample.threads[0].state is ProcState.UNKNOWN
    assert got.processes[1].proc_samples[0].state is ProcState.SLEEPING
