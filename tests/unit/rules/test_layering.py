"""The import lines of docs/architecture.md that a plain test can hold without running
`lint-imports` (pyproject.toml's contracts hold them all, chains included): no rule
module imports another, views import no rule, parsers import no view or rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _imports(path: Path) -> set[str]:
    """Every hangdoc module a file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("hangdoc.")}


RULE_FILES = sorted((ROOT / "rules").glob("hd[0-9][0-9][0-9]_*.py"))


def test_there_are_rule_modules() -> None:
    assert len(RULE_FILES) > 40


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_no_rule_imports_another_rule(path: Path) -> None:
    others = {f"hangdoc.rules.{p.stem}" for p in RULE_FILES if p != path}
    assert not _imports(path) & others, "move what rules share into analyzer/views/"


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        (
            "analyzer/views",
            ("hangdoc.rules", "hangdoc.analyzer.parsers", "hangdoc.analyzer.loading"),
        ),
        ("analyzer/parsers", ("hangdoc.rules", "hangdoc.analyzer.views")),
        ("analyzer/render", ("hangdoc.rules",)),
    ],
)
def test_layer_imports_nothing_above_it(folder: str, forbidden: tuple[str, ...]) -> None:
    bad = {
        f"{path.relative_to(ROOT)} -> {name}"
        for path in (ROOT / folder).rglob("*.py")
        for name in _imports(path)
        if name.startswith(forbidden)
    }
    assert not bad


def test_the_vocabulary_imports_nothing_and_the_model_only_the_vocabulary() -> None:
    """The words of the evidence (vocabulary.py) and the typed payloads of log events
    (payloads/) sit under the model, which imports nothing else of hangdoc."""
    assert not _imports(ROOT / "analyzer" / "vocabulary.py")
    words = {"hangdoc.analyzer", "hangdoc.analyzer.vocabulary", "hangdoc.analyzer.payloads"}
    for path in (ROOT / "analyzer" / "payloads").glob("*.py"):
        assert {_module(n) for n in _imports(path)} <= words, path.name
    assert {_module(n) for n in _imports(ROOT / "analyzer" / "model.py")} <= words


def _module(name: str) -> str:
    """The package or module an imported name belongs to, to the depth the test needs."""
    parts = name.split(".")
    return ".".join(parts[:3])


def test_independence_contract_lists_every_rule_module() -> None:
    """A rule module left out of pyproject.toml's independence contract could import
    another rule without `lint-imports` noticing."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    listed = {
        module
        for contract in contracts
        if contract["type"] == "independence"
        for module in contract["modules"]
    }
    assert {f"hangdoc.rules.{p.stem}" for p in RULE_FILES} <= listed
