"""Ranks of many hosts in one Evidence: global rank, host and local rank kept together;
duplicate and conflicting ranks reported; host clocks noted; failed nodes of a whole-job
collection explained (analyzer/loading/job_merge.py, analyzer/loading/merge.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.summarize.write import write_node_summary
from hangdoc.collectors.dumpformat import FORMAT, PROCESS_FORMAT
from hangdoc.collectors.jobformat import JOB_FORMAT

SITE = "/opt/venv/lib/python3.11/site-packages"


def _frame(name: str, filename: str, line: int) -> dict[str, object]:
    return {"name": name, "filename": filename, "line": line, "locals": None}


def _trace(pid: int, culprit: bool) -> list[dict[str, object]]:
    user = [
        _frame("train_step", "/srv/job/train.py", 88),
        _frame("<module>", "/srv/job/train.py", 150),
    ]
    inner = (
        [_frame("_save", f"{SITE}/torch/serialization.py", 1259),
         _frame("save_checkpoint", "/srv/job/train.py", 72)]
        if culprit
        else [_frame("all_gather", f"{SITE}/torch/distributed/distributed_c10d.py", 4287)]
    )  # fmt: skip
    return [{"pid": pid, "thread_id": pid * 10, "thread_name": "MainThread",
             "os_thread_id": pid, "active": False, "owns_gil": False,
             "frames": inner + user}]  # fmt: skip


def make_node(
    root: Path, host: str, ranks: list[int], *, world: int, locals_: list[int] | None = None,
    culprit: int | None = None, t0: float = 1000.0, pid0: int = 100,
) -> Path:  # fmt: skip
    """One node's dump in the real format, two samples per rank."""
    dump = root / host
    dump.mkdir(parents=True)
    records = []
    for i, rank in enumerate(ranks):
        pid = pid0 + i
        local = locals_[i] if locals_ is not None else i
        rdir = dump / f"rank{rank}"
        rdir.mkdir()
        for sample in range(2):
            (rdir / f"pyspy.{sample}.json").write_text(json.dumps(_trace(pid, rank == culprit)))
        samples = [{"index": s, "time": t0 + s, "alive": True, "state": "S", "wchan": "futex",
                    "cpu_ticks": 5, "threads": [{"tid": pid, "name": "python", "state": "S",
                    "wchan": "futex", "cpu_ticks": 5, "voluntary_ctxt_switches": 1,
                    "nonvoluntary_ctxt_switches": 0}], "io": {"rchar": 1}, "output": {}}
                   for s in range(2)]  # fmt: skip
        process = {"format": PROCESS_FORMAT, "pid": pid, "rank": rank, "local_rank": local,
                   "world_size": world, "local_world_size": len(ranks), "group_rank": None,
                   "host": host, "cmdline": ["python", "train.py"], "start_time": 900.0,
                   "parent_pid": 1, "env": {"RANK": str(rank)}, "samples": samples}  # fmt: skip
        (rdir / "process.json").write_text(json.dumps(process))
        records.append({"rank": rank, "pid": pid, "local_rank": local, "world_size": world,
                        "local_world_size": len(ranks), "group_rank": None,
                        "dir": rdir.name, "how_found": "env-scan"})  # fmt: skip
    manifest = {"format": FORMAT, "hangdoc_version": "test", "host": host, "started_at": t0,
                "finished_at": t0 + 2, "complete": True,
                "options": {"samples": 2, "interval_s": 1.0, "native": False,
                            "subprocesses": False, "nonblocking": False, "pids_requested": [],
                            "all": True, "step_timeout_s": 20.0},
                "samples": [{"index": 0, "time": t0}, {"index": 1, "time": t0 + 1}],
                "ranks": records, "steps": [], "py_spy": {}, "warnings": []}  # fmt: skip
    (dump / "manifest.json").write_text(json.dumps(manifest))
    return dump


@pytest.mark.parametrize("summaries", [False, True])
def test_ranks_of_many_hosts_merge_into_one_evidence(tmp_path: Path, summaries: bool) -> None:
    # GIVEN two nodes of a 4-rank job, rank 3 stuck saving on the second
    for host, ranks in (("node-a", [0, 1]), ("node-b", [2, 3])):
        dump = make_node(tmp_path, host, ranks, world=4, culprit=3)
        if summaries:
            write_node_summary(dump)
    # WHEN they are analyzed together
    evidence = load_paths([tmp_path])
    # THEN each rank is one process with its global rank, host and local rank
    where = {p.rank: (p.host, p.local_rank) for p in evidence.processes}
    assert where == {0: ("node-a", 0), 1: ("node-a", 1), 2: ("node-b", 0), 3: ("node-b", 1)}
    assert set(evidence.hosts) == {"node-a", "node-b"}
    diagnosis = analyze(evidence)
    assert diagnosis.findings[0].culprit_ranks == (3,)
    assert diagnosis.findings[0].waiting_ranks == (0, 1, 2)


def test_a_rank_claimed_on_two_hosts_is_kept_once_and_reported(tmp_path: Path) -> None:
    make_node(tmp_path, "node-a", [0, 1], world=4)
    make_node(tmp_path, "node-b", [1, 2], world=4, pid0=200)  # rank 1 again
    for dump in tmp_path.iterdir():
        write_node_summary(dump)
    evidence = load_paths([tmp_path])
    assert [p.rank for p in evidence.processes].count(1) == 1
    assert evidence.ranked()[1].host == "node-a"
    note = next(n for n in evidence.notes if n.startswith("rank 1 is claimed by"))
    assert "node-a" in note and "node-b" in note


def test_a_local_rank_held_twice_on_one_host_is_reported(tmp_path: Path) -> None:
    make_node(tmp_path, "node-a", [0, 1, 4, 5], world=8, locals_=[0, 1, 0, 1])
    evidence = load_paths([tmp_path])
    assert any("host node-a: local rank(s) 0-1 are held by more than one" in n
               for n in evidence.notes)  # fmt: skip
    assert any("do not form one block" in n for n in evidence.notes)


def test_disagreeing_world_sizes_are_reported(tmp_path: Path) -> None:
    make_node(tmp_path, "node-a", [0, 1], world=4)
    make_node(tmp_path, "node-b", [2, 3], world=8)
    evidence = load_paths([tmp_path])
    assert any("disagree on WORLD_SIZE: 4 (2 ranks), 8 (2 ranks)" in n for n in evidence.notes)


def test_the_spread_of_host_clocks_is_noted(tmp_path: Path) -> None:
    make_node(tmp_path, "node-a", [0, 1], world=4, t0=1000.0)
    make_node(tmp_path, "node-b", [2, 3], world=4, t0=1042.5)
    evidence = load_paths([tmp_path])
    note = next(n for n in evidence.notes if "first samples of the 2 hosts" in n)
    assert "42.5 s" in note and "node-a earliest" in note


def test_failed_nodes_of_a_job_manifest_are_explained(tmp_path: Path) -> None:
    # GIVEN a whole-job collection in which one of three nodes timed out
    make_node(tmp_path, "node-a", [0, 1], world=6)
    make_node(tmp_path, "node-b", [2, 3], world=6)
    nodes = [
        {"host": h, "status": s, "reason": r, "clock_offset_s": o}
        for h, s, r, o in (("node-a", "ok", None, 0.0), ("node-b", "ok", None, 3.5),
                           ("node-c", "timeout", "no result within 300s", None))
    ]  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps(
        {"format": JOB_FORMAT, "launcher": "slurm", "job_id": "77", "complete": True,
         "nodes": nodes}))  # fmt: skip
    # WHEN the collection is analyzed
    evidence = load_paths([tmp_path])
    # THEN the job manifest is an input, the timeout is explained, and the skew noted
    assert any(i.kind is InputKind.JOB_MANIFEST and i.error is None for i in evidence.inputs)
    note = next(n for n in evidence.notes if "were not fully collected" in n)
    assert "node-c (timeout: no result within 300s)" in note and "job 77" in note
    assert any("host clocks differ by up to 3.5 s" in n for n in evidence.notes)
    assert not any("job.json: not a format" in n for n in evidence.notes)
    missing = next(f for f in analyze(evidence).findings if f.rule == "HD003")
    assert "not collected" in missing.title
