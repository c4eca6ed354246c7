"""systemctl status of the node's services (parsers/logs/services.py, views/services.py)
and HD301's reading of a fabric manager shown down."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.services import match_service_status
from hangdoc.analyzer.payloads.host import ServiceStatus
from hangdoc.paste_mangling import COMBINED, MANGLINGS, WORD_WRAPS, Mangling
from tests.unit.logs.helpers import ROOT, diagnose, findings_of

PASTE = ROOT / "fixtures/cases/pytorch-129749-fabricmanager-not-running/systemctl_status.txt"


def _status(text: str) -> ServiceStatus | None:
    hit = match_service_status(text)
    return None if hit is None else hit.payload  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("line", "unit", "active", "sub"),
    [
        (
            "● nvidia-fabricmanager.service - NVIDIA fabric manager service",
            "nvidia-fabricmanager",
            None,
            None,
        ),
        (
            "× nvidia-persistenced.service - NVIDIA Persistence Daemon",
            "nvidia-persistenced",
            None,
            None,
        ),
        ("nvidia-dcgm.service - NVIDIA DCGM service", "nvidia-dcgm", None, None),
        (
            "   Loaded: loaded (/usr/lib/systemd/system/nvidia-fabricmanager.service; enabled)",
            "nvidia-fabricmanager",
            None,
            None,
        ),
        (
            "$ sudo systemctl status nvidia-fabricmanager.service",
            "nvidia-fabricmanager",
            None,
            None,
        ),
        (
            "Process: 1 ExecStart=/usr/bin/nv-fabricmanager -c x (code=exited, status=1/FAILURE)",
            "nv-fabricmanager",
            None,
            None,
        ),
        (
            "     Active: failed (Result: exit-code) since Mon 2024-07-01 14:43:57 UTC; 5s ago",
            None,
            "failed",
            "Result: exit-code",
        ),
        ("   Active: inactive (dead)", None, "inactive", "dead"),
        (
            "   Active: activating (auto-restart) (Result: exit-code) since Tue",
            None,
            "activating",
            "auto-restart",
        ),
    ],
)
def test_lines_of_systemctl_status(
    line: str, unit: str | None, active: str | None, sub: str | None
) -> None:
    status = _status(line)
    assert status is not None
    assert (status.unit, status.active, status.sub) == (unit, active, sub)


@pytest.mark.parametrize(
    "line",
    [
        "The pasted systemctl status shows the fabric manager service failed.",
        "Active: 3 workers",  # not an ActiveState
    ],
)
def test_prose_is_not_a_status_line(line: str) -> None:
    assert _status(line) is None


def _fabric(diagnosis_paths: list[Path]) -> list[str]:
    findings = findings_of(diagnose(*diagnosis_paths), "HD301")
    return [f.category for f in findings if "fabric manager" in f.title]


def test_failed_fabric_manager_is_the_nodes_gpu_platform() -> None:
    findings = findings_of(diagnose(PASTE), "HD301")
    assert [f.category for f in findings] == [Category.GPU_HARDWARE]
    assert findings[0].culprit_ranks == ()  # the node's state, no rank named
    assert "journalctl -u nvidia-fabricmanager" in findings[0].fix


@pytest.mark.parametrize("mangling", [*MANGLINGS, *WORD_WRAPS, *COMBINED], ids=lambda m: m.name)
def test_fabric_manager_down_survives_the_paste(mangling: Mangling, tmp_path: Path) -> None:
    mangled = tmp_path / "systemctl_status.txt"
    mangled.write_text(mangling.apply(PASTE.read_text()))
    assert _fabric([mangled]) == [Category.GPU_HARDWARE]


@pytest.mark.parametrize(
    "text",
    [
        # running
        "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
        "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled)\n"
        "     Active: active (running) since Mon 2024-07-01 14:43:57 UTC; 2 days ago\n",
        # another service failed, the fabric manager not shown
        "● nvidia-persistenced.service - NVIDIA Persistence Daemon\n"
        "     Active: failed (Result: exit-code) since Mon 2024-07-01 14:43:57 UTC; 5s ago\n",
        # a state far below the unit's name belongs to nothing
        "● nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
        + "other output\n" * 12
        + "     Active: failed (Result: exit-code)\n",
    ],
    ids=["running", "persistenced", "far"],
)
def test_fabric_manager_not_shown_down(text: str, tmp_path: Path) -> None:
    path = tmp_path / "status.txt"
    path.write_text(text)
    assert _fabric([path]) == []
