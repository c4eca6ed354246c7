"""End-to-end tests run real multi-process gloo jobs that hang, and need torch and py-spy
with the right to read other processes (root, or kernel.yama.ptrace_scope=0)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest


def _why_not_live() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install -e '.[torch]')"
    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        return "py-spy is not installed"
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    if os.geteuid() != 0 and scope.exists() and scope.read_text().strip() != "0":
        return "py-spy needs root or kernel.yama.ptrace_scope=0"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = _why_not_live()
    if reason is None:
        return
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))
