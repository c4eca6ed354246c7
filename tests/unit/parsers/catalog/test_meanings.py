"""meanings.toml: what it may say, and how families apply (first fit wins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.catalog.loader import MEANINGS_FILE, default_catalog
from hangdoc.analyzer.parsers.catalog.meanings import MeaningsError, load_meanings


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "meanings.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_meanings_load() -> None:
    meanings = load_meanings(MEANINGS_FILE)
    assert meanings.families
    assert meanings.value_types["rank"] == "int"


def test_an_unknown_kind_or_category_is_refused(tmp_path: Path) -> None:
    bad_kind = (
        '[[family]]\nname = "x"\nkind = "no_such_kind"\ncategory = "unknown"\nstrength = "weak"\n'
    )
    with pytest.raises(MeaningsError, match="no EventKind"):
        load_meanings(_write(tmp_path, bad_kind))
    bad_cat = (
        '[[family]]\nname = "x"\nkind = "nccl_warn"\ncategory = "made_up"\nstrength = "weak"\n'
    )
    with pytest.raises(MeaningsError, match="vocabulary"):
        load_meanings(_write(tmp_path, bad_cat))


def test_a_hang_meaning_needs_kind_and_category(tmp_path: Path) -> None:
    text = '[[family]]\nname = "x"\nkind = "nccl_warn"\nstrength = "strong"\n'
    with pytest.raises(MeaningsError, match="needs kind and category"):
        load_meanings(_write(tmp_path, text))


def test_first_family_that_fits_wins_and_says_how_it_was_given(tmp_path: Path) -> None:
    text = """
[[family]]
name = "by-message"
project = "nccl"
template = "Got completion"
kind = "nccl_transport_error"
category = "nccl_network_or_transport_error"
strength = "strong"

[[family]]
name = "by-area"
project = "nccl"
file = ["src/transport/net_ib*"]
kind = "nccl_warn"
category = "unknown"
strength = "weak"
"""
    meanings = load_meanings(_write(tmp_path, text))
    files = [("src/transport/net_ib.cc", "ncclIbTest")]
    meaning, how = meanings.meaning_of("nccl", "WARN", files, "NET/IB : Got completion", "id1")
    assert meaning is not None and meaning.family == "by-message" and how == "message"
    meaning, how = meanings.meaning_of("nccl", "WARN", files, "NET/IB : other", "id2")
    assert meaning is not None and meaning.family == "by-area" and how == "area"
    assert meanings.meaning_of("gloo", "WARN", files, "NET/IB : other", "id3") == (None, "")


def test_refinements_depend_on_the_matched_text() -> None:
    catalog = default_catalog()
    row = next(
        r for r in catalog.rows if r.project == "nccl" and r.template.startswith("Cuda failure '<")
    )
    assert row.meaning is not None
    assert row.meaning.for_text("Cuda failure 'out of memory'").category == "cuda_oom"
    assert (
        row.meaning.for_text("Cuda failure 'invalid argument'").category == "gpu_hardware_or_driver"
    )


def test_cuda_refusing_peer_access_in_a_p2p_warn_is_the_platform() -> None:
    """p2p.cc's "failed to open CUDA IPC handle : %d %s" carries cudaGetErrorString(err):
    217 (peer access unsupported) is the GPUs', any other error stays the set-up's."""
    catalog = default_catalog()
    row = next(
        r
        for r in catalog.rows
        if r.project == "nccl" and r.template.startswith("failed to open CUDA IPC handle")
    )
    assert row.meaning is not None
    refused = (
        "failed to open CUDA IPC handle : 217 peer access is not supported between these two "
        "devices"
    )
    assert row.meaning.for_text(refused).category == "gpu_hardware_or_driver"
    assert row.meaning.for_text(refused).kind == "cuda_error"
    other = row.meaning.for_text("failed to open CUDA IPC handle : 1 invalid argument")
    assert other.category == "nccl_init_or_bootstrap_hang"


def test_every_nccl_warn_row_of_2_18_to_2_27_has_a_meaning() -> None:
    catalog = default_catalog()
    rows = [r for r in catalog.rows if r.project == "nccl" and r.level == "WARN"]
    assert rows
    missing = [r.template for r in rows if r.generic_meaning]
    assert len(missing) <= len(rows) // 10, missing[:20]


def test_catalog_doc_is_fresh() -> None:
    """docs/catalog.md is generated from the data files and meanings.toml."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[4]
    done = subprocess.run(
        [sys.executable, str(root / "scripts" / "catalog" / "report.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
