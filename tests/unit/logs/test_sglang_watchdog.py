"""SGLang's scheduler watchdog (parsers/logs/sglang.py). The lines are written from its
format strings: ``logger.error(f"Watchdog timeout ({self.watchdog_timeout=})")`` of
python/sglang/srt/managers/scheduler.py (``Scheduler.watchdog_thread``, 2024-2025) and the
newer ``f"{name} watchdog timeout ({self.watchdog_timeout=}, {self.soft=})"`` of
python/sglang/srt/utils/watchdog.py, under SGLang's log prefix ``[time TPn]`` (or
``[time DPd TPn]``, sglang/srt/managers/scheduler.py ``run_scheduler_process``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.vocabulary import EventKind


@pytest.mark.parametrize(
    "message",
    [
        "Watchdog timeout (self.watchdog_timeout=300)",
        "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    ],
)
def test_each_tp_rank_that_stalled_is_a_stall_event_and_the_kill_after_it_no_crash(
    tmp_path: Path, message: str
) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "".join(f"[2025-03-09 00:57:15 TP{r}] {message}\n" for r in (1, 0, 3, 2))
        + "[2025-03-09 00:57:20] Received sigquit from a child process. It usually means the "
        "child failed.\nKilled\n",
        encoding="utf-8",
    )
    evidence = load_paths([log])
    stalled = {
        p.rank
        for p in evidence.processes
        for e in p.log_events
        if e.kind == EventKind.STALL_WATCHDOG
    }
    assert stalled == {0, 1, 2, 3}
    diagnosis = analyze(evidence)
    assert all(f.rule != "HD030" for f in diagnosis.findings)  # SGLang's own teardown


def test_a_line_that_only_names_the_setting_is_no_stall(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2025-03-09 00:50:00] server_args=ServerArgs(model_path='m', tp_size=4, "
        "watchdog_timeout=300, log_level='info')\n",
        encoding="utf-8",
    )
    evidence = load_paths([log])
    kinds = {e.kind for p in evidence.processes for e in p.log_events}
    kinds |= {e.kind for e in evidence.job_log_events}
    assert EventKind.STALL_WATCHDOG not in kinds
