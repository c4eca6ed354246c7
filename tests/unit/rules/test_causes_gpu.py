"""HD350/HD351 on nvidia-smi outputs in the formats of FORMATS.md §6 (fixtures/gpu/), read
the way ``hangdoc analyze`` reads them: inside a dump (``gpu/nvidia-smi.csv``, as the
collector writes it) or as a loose table a user attached."""

from __future__ import annotations

import shutil
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Severity
from hangdoc.analyzer.views.gpu_state import gpu_views
from tests.builders import C10D, TRAIN, RankSpec, main_trace, write_dump

GPU = Path(__file__).resolve().parents[3] / "fixtures" / "gpu"
PIDS = (4101, 4102, 4103, 4104)
IN_ALL_REDUCE = [("all_reduce", C10D, 3252), ("train_step", TRAIN, 42), ("<module>", TRAIN, 80)]
STUCK_ELSEWHERE = [("load_batch_from_cache", TRAIN, 77), ("<module>", TRAIN, 80)]


def _dump(tmp_path: Path, gpu_file: str, *, ranks: int = 4) -> Path:
    specs = [
        RankSpec(
            rank=r,
            pid=PIDS[r],
            samples=[[main_trace(PIDS[r], STUCK_ELSEWHERE if r == 3 else IN_ALL_REDUCE)]] * 2,
            local_rank=r,
            world_size=ranks,
            local_world_size=ranks,
        )
        for r in range(ranks)
    ]
    dump = write_dump(tmp_path / "dump", "node1", specs)
    (dump / "gpu").mkdir()
    shutil.copy(GPU / gpu_file, dump / "gpu" / "nvidia-smi.csv")
    return dump


def test_rows_are_matched_to_ranks_by_pid(tmp_path: Path) -> None:
    views = gpu_views(load_paths([_dump(tmp_path, "h100-one-full.csv")]))
    assert sorted(views) == [0, 1, 2, 3]
    assert views[3].index == 3
    assert views[3].util_pct == 0.0
    assert views[3].used_mib == 81208.0 and views[3].total_mib == 81559.0
    assert views[3].process_mib == 80646.0
    assert views[0].util_pct == 100.0


def test_idle_gpus_with_memory_held_corroborate(tmp_path: Path) -> None:
    diag = analyze(load_paths([_dump(tmp_path, "h100-all-idle.csv")]))
    finding = next(f for f in diag.findings if f.rule == "HD350")
    assert finding.severity is Severity.INFO
    assert finding.category is Category.UNKNOWN
    assert "idle with memory held" in finding.title
    assert diag.findings[0].rule != "HD350"  # corroboration never outranks a cause


def test_idle_gpu_among_spinning_ones_points_at_its_rank(tmp_path: Path) -> None:
    finding = next(
        f
        for f in analyze(load_paths([_dump(tmp_path, "h100-split.csv")])).findings
        if f.rule == "HD350"
    )
    assert finding.category is Category.RANK_DIVERGENCE
    assert finding.culprit_ranks == (3,)
    assert finding.waiting_ranks == (0, 1, 2)


def test_one_full_gpu_points_at_oom_and_the_stack_agrees(tmp_path: Path) -> None:
    finding = next(
        f
        for f in analyze(load_paths([_dump(tmp_path, "h100-one-full.csv")])).findings
        if f.rule == "HD351"
    )
    assert finding.category is Category.CUDA_OOM
    assert finding.culprit_ranks == (3,)
    assert finding.severity is Severity.ERROR  # rank 3 is outside the collective
    assert "81208 MiB of 81559 MiB" not in finding.explanation  # process memory is shown
    assert "GPU 3" in finding.explanation


def test_even_memory_does_not_fire(tmp_path: Path) -> None:
    diag = analyze(load_paths([_dump(tmp_path, "h100-all-idle.csv")]))
    assert all(f.rule != "HD351" for f in diag.findings)


def test_loose_nvidia_smi_table_works_too(tmp_path: Path) -> None:
    dump = _dump(tmp_path, "h100-all-idle.csv", ranks=2)
    (dump / "gpu" / "nvidia-smi.csv").unlink()
    table = tmp_path / "nvidia-smi.txt"
    shutil.copy(GPU / "a100-table-idle.txt", table)
    views = gpu_views(load_paths([dump, table]))
    assert views[0].util_pct == 0.0 and views[0].total_mib == 81920.0
    assert views[1].process_mib == 61288.0


def test_no_gpu_facts_no_findings(tmp_path: Path) -> None:
    dump = _dump(tmp_path, "h100-all-idle.csv")
    shutil.rmtree(dump / "gpu")
    diag = analyze(load_paths([dump]))
    assert all(f.rule not in ("HD350", "HD351") for f in diag.findings)
