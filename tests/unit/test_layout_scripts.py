"""scripts/relative_imports.py: which imports it rewrites, into what, and that a second
run changes nothing (docs/architecture.md, "The package and its folders")."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


relative_imports = _script("relative_imports")


@pytest.mark.parametrize(
    ("package", "target", "relative"),
    [
        (["hangdoc", "rules"], "hangdoc.analyzer.model", "..analyzer.model"),
        (["hangdoc", "rules"], "hangdoc.rules.base", ".base"),
        (["hangdoc", "analyzer", "views"], "hangdoc.analyzer.model", "..model"),
        (["hangdoc", "analyzer", "views"], "hangdoc.analyzer", ".."),
        (["hangdoc", "analyzer"], "hangdoc.rules", "..rules"),
        (
            ["hangdoc", "analyzer", "loading"],
            "hangdoc.collectors.dumpformat",
            "...collectors.dumpformat",
        ),
        # real files under hangdoc/: their absolute names already resolve by path
        (["hangdoc", "analyzer"], "hangdoc.common.redact", None),
        (["hangdoc", "collectors"], "hangdoc.errors", None),
        (["hangdoc", "rules"], "jinja2", None),
    ],
)
def test_relative_name(package: list[str], target: str, relative: str | None) -> None:
    assert relative_imports.relative_name(package, target) == relative


def test_a_second_run_changes_nothing() -> None:
    # GIVEN a rule module's imports, one inside a function, one of the bottom layer
    text = (
        "from hangdoc.analyzer.model import Finding\n"
        "from hangdoc.common.redact import redact_text\n"
        "from hangdoc.rules.base import Rule\n\n\n"
        "def f() -> None:\n"
        "    from hangdoc.analyzer.views.activity import RankActivity\n"
    )
    # WHEN rewritten THEN imports of the three folders are relative, the rest as it was
    once = relative_imports.rewrite_text(text, ["hangdoc", "rules"])
    assert once == (
        "from ..analyzer.model import Finding\n"
        "from hangdoc.common.redact import redact_text\n"
        "from .base import Rule\n\n\n"
        "def f() -> None:\n"
        "    from ..analyzer.views.activity import RankActivity\n"
    )
    # AND a second run finds nothing to do
    assert relative_imports.rewrite_text(once, ["hangdoc", "rules"]) is None
