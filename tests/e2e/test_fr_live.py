"""Live: real 4-rank gloo jobs hang as planted (fixtures/fr/scenario.py); ``hangdoc
collect`` fetches the flight recorder of every rank through the hook (or torch's worker
server) while they are blocked in a collective; ``hangdoc analyze`` names the culprit.

Readiness is signalled by marker files and the FR itself (no sleeps); every process is
killed on the way out, whatever happens (``record.launch`` is a context manager).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _record_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fr_record", REPO / "fixtures/fr/record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


record = _record_module()


def _hangdoc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hangdoc", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _steps(dump: Path, step: str) -> list[dict[str, Any]]:
    manifest = json.loads((dump / "manifest.json").read_text())
    return [s for s in manifest["steps"] if s["step"] == step]


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(record.EXPECTED))
def test_collect_gets_fr_from_every_live_rank_and_analyze_names_the_culprit(
    tmp_path: Path, case: str
) -> None:
    dump = tmp_path / "dump"
    with record.launch(case, log_dir=tmp_path) as job:
        pids = ",".join(str(p) for _, p in sorted(job.pids.items()))
        collected = _hangdoc(
            "collect", "--pid", pids, "--out", str(dump), "--samples", "2", "--interval", "0.5"
        )
        live_ranks = sorted(job.pids)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    hook_fr = [
        s
        for s in _steps(dump, "flight_recorder:hook")
        if s["status"] == "ok" and str(s["file"]).endswith("flight_recorder.hook.json")
    ]
    assert sorted(s["rank"] for s in hook_fr) == live_ranks
    out = tmp_path / "findings.json"
    analyzed = _hangdoc("analyze", str(dump), "--json", str(out))
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    findings = json.loads(out.read_text())
    expected = record.EXPECTED[case]
    primary = findings["findings"][0]
    assert findings["verdict"] == "hang"
    assert primary["category"] == expected["category"], findings["findings"]
    assert primary["culprit_ranks"] == expected["culprit_ranks"], findings["findings"]
    fr_inputs = [i for i in findings["inputs"] if i["kind"] == "flight_recorder"]
    assert all(i["error"] is None for i in fr_inputs)
    assert sorted({r for i in fr_inputs for r in i["ranks"]}) == live_ranks


def _collect_mismatched_op(
    tmp_path: Path, env: Callable[[int], dict[str, str]] | None = None
) -> Path:
    """Collect the hung mismatched_op job once (one sample); the dump's folder."""
    dump = tmp_path / "dump"
    with record.launch("mismatched_op", rank_env=env, log_dir=tmp_path) as job:
        pids = ",".join(str(p) for _, p in sorted(job.pids.items()))
        collected = _hangdoc("collect", "--pid", pids, "--out", str(dump), "--samples", "1")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    return dump


def _assert_rank_2_mismatched(tmp_path: Path, dump: Path) -> None:
    out = tmp_path / "findings.json"
    assert _hangdoc("analyze", str(dump), "--json", str(out)).returncode == 0
    primary = json.loads(out.read_text())["findings"][0]
    assert (primary["category"], primary["culprit_ranks"]) == ("collective_type_mismatch", [2])


@pytest.mark.e2e
def test_torch_worker_server_is_preferred_to_the_hook(tmp_path: Path) -> None:
    sockets = tmp_path / "ws"
    sockets.mkdir()
    dump = _collect_mismatched_op(
        tmp_path, lambda rank: {"TORCH_WORKER_SERVER_SOCKET": str(sockets / f"rank{rank}.sock")}
    )
    served = [s for s in _steps(dump, "flight_recorder:worker_server") if s["status"] == "ok"]
    assert sorted(s["rank"] for s in served) == [0, 1, 2, 3]
    written = sorted(p.parent.name for p in dump.glob("rank*/flight_recorder.worker_server.json"))
    assert written == ["rank0", "rank1", "rank2", "rank3"]
    # the hook still gives its stacks, but not a second copy of the FR
    assert not list(dump.glob("rank*/flight_recorder.hook.json"))
    _assert_rank_2_mismatched(tmp_path, dump)


@pytest.mark.e2e
def test_torch_debug_server_is_found_through_the_jobs_store(tmp_path: Path) -> None:
    """``torch.distributed.debug.start_debug_server()``: per-rank worker servers on TCP
    ports the ranks wrote into the job's store; collect asks the store, then each rank."""
    frontend = str(record.free_port())
    dump = _collect_mismatched_op(
        tmp_path, lambda rank: {"HANGDOC_SCENARIO_DEBUG_SERVER": frontend}
    )
    steps = _steps(dump, "flight_recorder:debug_server")
    served = [s for s in steps if s["status"] == "ok"]
    assert sorted(s["rank"] for s in served) == [0, 1, 2, 3], steps
    assert all(s["reason"].startswith("fr_trace_json from http://") for s in served)
    assert not list(dump.glob("rank*/flight_recorder.hook.json"))
    _assert_rank_2_mismatched(tmp_path, dump)


@pytest.mark.e2e
def test_a_job_without_debug_server_is_skipped_quickly(tmp_path: Path) -> None:
    steps = _steps(_collect_mismatched_op(tmp_path), "flight_recorder:debug_server")
    assert {s["status"] for s in steps} == {"skipped"}
    assert all(s["reason"] == "the job runs no torch.distributed.debug server" for s in steps)
    assert max(s["duration_s"] for s in steps) < 10
