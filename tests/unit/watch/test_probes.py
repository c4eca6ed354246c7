"""The slower signals: GPU state (the CSV collectors/gpu.py writes, FORMATS.md §6, as in
fixtures/gpu/) and the flight recorder (a JSON dump of torch's, fixtures/fr/torch_samples)."""

from __future__ import annotations

from pathlib import Path

from hangdoc.collectors.watch.probes import fr_fingerprint, gpu_changes, parse_gpu_csv

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "fixtures" / "gpu"
FR = ROOT / "fixtures" / "fr" / "torch_samples" / "fr_json" / "comm_lib_trace_rank_0.json"


def test_a_flat_gpu_is_not_movement_a_changing_one_is() -> None:
    split, apps = parse_gpu_csv((GPU / "h100-split.csv").read_text())
    full, _ = parse_gpu_csv((GPU / "h100-one-full.csv").read_text())
    assert len(split) == 4 and apps[4104].startswith("GPU-0b1c")
    assert gpu_changes(split, split, set()) == []  # 100 % stays 100 %, 0 % stays 0 %
    ours = set(apps.values())
    changes = gpu_changes(split, full, ours)
    assert changes[0] == "GPU 0 memory 71214 → 52310 MiB", changes
    assert len(changes) == 4
    # a GPU that runs none of the watched ranks does not count
    assert gpu_changes(split, full, {apps[4104]}) == ["GPU 3 memory 70954 → 81208 MiB"]


def test_the_flight_recorder_fingerprint_is_its_newest_entry() -> None:
    assert fr_fingerprint(FR.read_bytes()) == (7, 6, "scheduled")
    assert fr_fingerprint(b'{"entries": []}') is None
    assert fr_fingerprint(b"garbage") is None
