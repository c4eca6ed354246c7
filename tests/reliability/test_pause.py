"""collect pauses a rank only while py-spy reads it, and briefly: measured by the rank.

Runs ``scripts/measure_pyspy_pause.py`` (a target that logs every stall of its own
millisecond ticker) with a few dumps per mode; RELIABILITY.md has the full figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hangdoc.collectors import pyspy
from tests.reliability.stats import count

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(pyspy.find_pyspy() is None, reason="py-spy is not installed")
def test_pyspy_pauses_a_rank_for_milliseconds_and_never_kills_it() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "measure_pyspy_pause.py"), "--dumps", "5",
         "--json"], capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0 and "ptrace" in done.stderr.lower():
        pytest.skip("py-spy has no ptrace rights here")
    assert done.returncode == 0, done.stderr[-2000:]
    for report in json.loads(done.stdout):
        count("pause: py-spy dumps measured", 2 * report["dumps_per_mode"])
        assert report["target_died"] is False
        for mode in ("blocking", "nonblocking"):
            # far below a collective timeout (minutes) or the step timeout (20 s)
            assert report[mode]["pause_ms_max"] < 1000, report
