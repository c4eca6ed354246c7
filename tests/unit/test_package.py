"""Packaging and CLI contracts: what a user installs and types."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hangdoc.analyzer.model import DOC_SECTIONS
from hangdoc.cli import main
from hangdoc.rules import all_rules

ROOT = Path(__file__).resolve().parents[2]


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys; from hangdoc.cli import main; "
        "rc = main(['--help']); assert 'torch' not in sys.modules, 'torch imported'; "
        "assert 'pandas' not in sys.modules, 'pandas imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "collect" in done.stdout and "analyze" in done.stdout


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "hangdoc 0." in capsys.readouterr().out


def test_every_rule_has_its_doc_sections() -> None:
    for rule in all_rules():
        docs = rule.docs()
        for section in DOC_SECTIONS:
            assert docs.get(section), f"{rule.id} lacks {section}"


def test_explain_prints_rule_docs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "HD001"]) == 0
    out = capsys.readouterr().out
    assert "HD001" in out and "How to fix" in out


def test_explain_unknown_rule_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "HD999"]) == 2  # bad usage (README: exit statuses)
    assert "no rule" in capsys.readouterr().err


def test_analyze_nonexistent_path_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["analyze", str(tmp_path / "nope")])
    out = capsys.readouterr()
    assert rc == 1  # inconclusive: nothing usable, every input listed with its reason
    said = " ".join((out.out + out.err).split())  # the terminal wraps long lines
    assert "nope" in said and "no such file or directory" in said


@pytest.mark.slow
def test_wheel_contains_only_the_hangdoc_package(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    wheel = next(tmp_path.glob("hangdoc-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"hangdoc"}
    for sub in (
        "analyzer/engine.py",
        "collectors/dumpformat.py",
        "rules/hd001_rank_outside_collective.py",
        "analyzer/render/templates",
        "scenarios/job.py",
        "demo_data/checkpoint/manifest.json",
        "analyzer/parsers/catalog/meanings.toml",
        "analyzer/parsers/catalog/data/nccl.json",
    ):
        assert any(n.startswith(f"hangdoc/{sub}") for n in names), sub


def test_rules_doc_is_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rules_doc.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_rules_independence_contract_is_fresh() -> None:
    # pyproject.toml's independence contract lists the registry's rules (a rule added to
    # rules/__init__.py and not to the contract could import another unnoticed)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rules_contract.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
