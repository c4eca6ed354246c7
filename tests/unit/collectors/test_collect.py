"""run_collect end to end on live target processes."""

from __future__ import annotations

import json
import re
import socket
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hangdoc.collectors import extras, pyspy
from hangdoc.collectors.collect import CollectOptions, run_collect
from hangdoc.collectors.dumpformat import FORMAT, StepRecord
from hangdoc.collectors.extras import ExtraContext
from hangdoc.errors import CollectionError, UsageError

if TYPE_CHECKING:
    from conftest import Spawn, Target


@dataclass
class RecordingProgress:
    """A ProgressSink that remembers what it was told, and can act on a given advance."""

    total: int | None = None
    advances: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    on_advance: dict[int, object] = field(default_factory=dict)

    def start(self, total: int, description: str) -> None:
        self.total = total

    def advance(self, description: str) -> None:
        self.advances.append(description)
        action = self.on_advance.get(len(self.advances))
        if callable(action):
            action()

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def _steps(manifest: object, step: str) -> list[StepRecord]:
    assert isinstance(manifest, dict)
    return [s for s in manifest["steps"] if s["step"] == step]


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _frame_names(path: Path, pid: int | None = None) -> set[str]:
    threads = json.loads(path.read_bytes())
    return {f["name"] for t in threads if pid is None or t["pid"] == pid for f in t["frames"]}


def test_collect_two_samples_of_three_ranks(
    spawn: Spawn,
    pyspy_exe: Path,
    tmp_path: Path,
    fake_secrets: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN three blocked ranks, one with a dataloader-like worker, and two extra collectors
    ranks: list[Target] = [spawn("plain", rank=0), spawn("worker", rank=1), spawn("plain", rank=2)]
    calls: list[tuple[str, int | None]] = []

    def good(ctx: ExtraContext) -> list[StepRecord]:
        calls.append(("good", ctx.target.rank))
        assert ctx.rank_dir.is_dir() and ctx.dump_dir == tmp_path / "dump"
        return [
            {
                "step": "good",
                "status": "ok",
                "rank": ctx.target.rank,
                "pid": ctx.target.pid,
                "sample": None,
                "reason": None,
                "duration_s": 0.0,
            }
        ]

    def broken(ctx: ExtraContext) -> list[StepRecord]:
        calls.append(("broken", ctx.target.rank))
        raise RuntimeError("no flight recorder here")

    monkeypatch.setattr(extras, "EXTRA_COLLECTORS", [("good", good), ("broken", broken)])
    progress = RecordingProgress()
    # the dump is readable (manifest incomplete) while collection is still going on
    partial: list[dict[str, object]] = []
    progress.on_advance[1] = lambda: partial.append(
        json.loads((tmp_path / "dump" / "manifest.json").read_text())
    )
    opts = CollectOptions(
        pids=tuple(r.pid for r in reversed(ranks)),
        out=tmp_path / "dump",
        samples=2,
        interval_s=0.2,
        archive=True,
    )
    # WHEN collecting
    result = run_collect(opts, progress)
    # THEN the manifest describes a complete, successful collection
    out = result.out_dir
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest == result.manifest
    assert manifest["format"] == FORMAT and manifest["complete"] is True
    assert manifest["host"] == socket.gethostname()
    assert manifest["finished_at"] >= manifest["started_at"]
    assert [s["index"] for s in manifest["samples"]] == [0, 1]
    assert manifest["samples"][1]["time"] - manifest["samples"][0]["time"] >= 0.2
    assert [(r["rank"], r["pid"], r["dir"]) for r in manifest["ranks"]] == [
        (i, t.pid, f"rank{i}") for i, t in enumerate(ranks)
    ]
    assert manifest["py_spy"]["path"] == str(pyspy_exe)
    assert (manifest["py_spy"]["version"] or "").startswith("py-spy ")
    assert manifest["warnings"] == []
    assert partial and partial[0]["complete"] is False
    for step in ("proc", "pyspy"):
        assert all(s["status"] == "ok" for s in _steps(manifest, step)), _steps(manifest, step)
    assert len(_steps(manifest, "pyspy")) == 6
    assert all(s["duration_s"] is not None for s in _steps(manifest, "pyspy"))
    # each extra ran once per rank; the broken one is a failed step, not a crash
    assert sorted(calls) == sorted((n, i) for n in ("good", "broken") for i in range(3))
    assert len(_steps(manifest, "good")) == 3
    assert {(s["status"], s["reason"]) for s in _steps(manifest, "broken")} == {
        ("failed", "RuntimeError: no flight recorder here")
    }
    assert progress.total == 2 * 3 + 3 * 2 + 1 == len(progress.advances)
    # per rank: process.json with two /proc samples, and two py-spy dumps
    for i, target in enumerate(ranks):
        process = json.loads((out / f"rank{i}" / "process.json").read_text())
        assert (process["pid"], process["rank"], process["world_size"]) == (target.pid, i, 4)
        assert process["parent_pid"] is not None and process["start_time"] is not None
        assert process["env"]["RANK"] == str(i) and "HF_TOKEN" not in process["env"]
        assert process["env"]["TORCH_HUB_TOKEN"] == "<redacted>"
        assert process["cmdline"][-2:] == ["--hf-token", "<redacted>"]
        assert [s["alive"] for s in process["samples"]] == [True, True]
        for sample in range(2):
            assert "save_checkpoint" in _frame_names(
                out / f"rank{i}" / f"pyspy.{sample}.json", target.pid
            )
    # the worker's stacks come along in rank 1's dump, under its own pid
    [worker_step, _] = _steps(manifest, "pyspy-subprocess")
    assert worker_step["status"] == "ok" and worker_step["rank"] == 1
    assert "worker_loop" in _frame_names(out / "rank1" / "pyspy.1.json", worker_step["pid"])
    # no byte of the dump or of the archive carries a secret
    assert result.archive_path == tmp_path / "dump.tar.gz"
    with tarfile.open(result.archive_path) as tar:
        archived = b"".join(
            f.read() for m in tar.getmembers() if m.isfile() and (f := tar.extractfile(m))
        )
    for blob in (_all_bytes(out), archived):
        for secret in fake_secrets:
            assert secret.encode() not in blob


def test_a_rank_that_exits_between_samples(spawn: Spawn, pyspy_exe: Path, tmp_path: Path) -> None:
    # GIVEN two ranks, the second of which dies right after the first sample
    r0, r1 = spawn("plain", rank=0), spawn("plain", rank=1)

    def kill_r1() -> None:
        r1.proc.kill()
        r1.proc.wait()

    progress = RecordingProgress(on_advance={2: kill_r1})
    opts = CollectOptions(pids=(r0.pid, r1.pid), out=tmp_path / "d", samples=3, interval_s=0.05)
    result = run_collect(opts, progress)
    manifest = result.manifest
    # THEN the dump is complete, rank 1 is recorded as exited and skipped thereafter
    assert manifest["complete"] is True
    r1_pyspy = [
        (s["sample"], s["status"], s["reason"])
        for s in manifest["steps"]
        if s["step"] == "pyspy" and s["rank"] == 1
    ]
    assert r1_pyspy == [
        (0, "ok", None),
        (1, "skipped", "process exited"),
        (2, "skipped", "process exited"),
    ]
    r1_proc = [
        (s["sample"], s["status"])
        for s in manifest["steps"]
        if s["step"] == "proc" and s["rank"] == 1 and s["sample"] is not None
    ]
    assert r1_proc == [(0, "ok"), (1, "ok"), (2, "skipped")]
    # and every step says, typed, whether its process had exited (dumpformat StepRecord)
    exited = {
        (s["step"], s["sample"]): s.get("exited") for s in manifest["steps"] if s["rank"] == 1
    }
    assert exited[("pyspy", 0)] is False and exited[("proc", 0)] is False
    assert exited[("pyspy", 1)] is True and exited[("pyspy", 2)] is True
    assert exited[("proc", 2)] is True
    process = json.loads((result.out_dir / "rank1" / "process.json").read_text())
    assert [s["alive"] for s in process["samples"]] == [True, False]
    assert (result.out_dir / "rank1" / "pyspy.0.json").exists()
    assert not (result.out_dir / "rank1" / "pyspy.1.json").exists()
    assert any("rank 1" in w and "exited" in w for w in manifest["warnings"])
    assert progress.warnings == manifest["warnings"]
    # rank 0 is sampled all three times
    assert [s["status"] for s in manifest["steps"] if s["step"] == "pyspy" and s["rank"] == 0] == [
        "ok"
    ] * 3


def test_missing_pyspy_is_a_failed_step_with_the_remedy(
    spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN no py-spy on PATH nor beside the interpreter, and no --out
    target = spawn("plain", rank=0)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.chdir(tmp_path)
    result = run_collect(CollectOptions(pids=(target.pid,), samples=1, interval_s=0))
    # THEN /proc is still collected and py-spy's absence is explained
    manifest = result.manifest
    assert re.fullmatch(r"hangdoc-[A-Za-z0-9._-]+-\d{8}T\d{6}Z", result.out_dir.name)
    assert result.out_dir.parent == tmp_path
    assert manifest["complete"] is True
    assert manifest["py_spy"] == {"path": None, "version": None}
    [step] = _steps(manifest, "pyspy")
    assert step["status"] == "failed" and "pip install py-spy" in (step["reason"] or "")
    assert any("pip install py-spy" in w for w in manifest["warnings"])
    assert all(s["status"] == "ok" for s in _steps(manifest, "proc"))
    assert not (result.out_dir / "rank0" / "pyspy.0.json").exists()


def test_ptrace_denied_is_one_warning_and_a_failed_step_per_rank(
    spawn: Spawn, tmp_path: Path, unprivileged_pyspy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pyspy, "find_pyspy", lambda: unprivileged_pyspy)
    r0, r1 = spawn("plain", rank=0), spawn("plain", rank=1)
    result = run_collect(CollectOptions(pids=(r0.pid, r1.pid), out=tmp_path / "d", samples=1))
    steps = _steps(result.manifest, "pyspy")
    assert [s["status"] for s in steps] == ["failed", "failed"]
    assert all("SYS_PTRACE" in (s["reason"] or "") for s in steps)
    [warning] = result.manifest["warnings"]
    assert "ptrace_scope" in warning
    assert r0.proc.poll() is None and r1.proc.poll() is None


def test_two_processes_claiming_one_rank_are_both_kept(
    spawn: Spawn, pyspy_exe: Path, tmp_path: Path
) -> None:
    a, b = spawn("plain", rank=0), spawn("plain", rank=0)
    result = run_collect(CollectOptions(pids=(a.pid, b.pid), out=tmp_path / "d", samples=1))
    assert sorted(r["dir"] for r in result.manifest["ranks"]) == sorted(
        [f"pid{a.pid}", f"pid{b.pid}"]
    )
    assert (result.out_dir / f"pid{a.pid}" / "pyspy.0.json").exists()
    assert any("claimed by several processes" in w for w in result.manifest["warnings"])


def test_refuses_a_non_empty_output_directory(spawn: Spawn, tmp_path: Path) -> None:
    target = spawn("plain", rank=0)
    out = tmp_path / "old-dump"
    out.mkdir()
    (out / "old.txt").write_text("keep me")
    with pytest.raises(CollectionError, match="not empty") as err:
        run_collect(CollectOptions(pids=(target.pid,), out=out))
    assert "--out" in err.value.help_text
    assert [p.name for p in out.iterdir()] == ["old.txt"]


def test_bad_options_and_dead_pids_fail_before_writing(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--samples"):
        run_collect(CollectOptions(pids=(1,), samples=0, out=tmp_path / "a"))
    with pytest.raises(CollectionError, match="does not exist"):
        run_collect(CollectOptions(pids=(2**22 + 12345,), out=tmp_path / "b"))
    assert list(tmp_path.iterdir()) == []
