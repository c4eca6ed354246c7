"""Which lines of a log are the job's own words (kept for the log comparison and for
HD061's "what was it doing before the timeout") and which are the library's.

Formats: Python logging's documented "%(asctime)s - %(name)s - %(levelname)s -
%(message)s" (the logging cookbook's example format; also what the casebook's ace-851
and torchtitan-style consoles print), a glog/c10 header naming a C++ source file
(FORMATS.md §2), and torch's own Python logger ("INFO:torch.distributed.…:").
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.parsers.logs.window import UNATTRIBUTED, read_line_window


def test_the_jobs_logger_lines_are_kept_and_the_librarys_are_not(tmp_path: Path) -> None:
    # GIVEN a console with the job's logger, torch's C++ and torch's Python logger
    log = tmp_path / "train.log"
    log.write_text(
        "2024-02-18 10:28:25,496 - root - INFO - Saving latest checkpoint to /ckpt/step_9\n"
        "[I218 10:28:26.001 ProcessGroupNCCL.cpp:1000] [Rank 0] ProcessGroupNCCL init\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group\n"
        "2024-02-18 10:28:27,100 - trainer.loop - WARNING - step 900 took 31.2 s\n",
        encoding="utf-8",
    )
    # WHEN its line window is read
    kept = [line.text for line in read_line_window(log, "train.log", None)[UNATTRIBUTED]]
    # THEN the job's two logger lines stay (without their headers), torch's go
    assert kept == ["Saving latest checkpoint to /ckpt/step_9", "step 900 took 31.2 s"]


def test_a_python_313_tracebacks_statement_lines_and_anchors_are_not_the_jobs(
    tmp_path: Path,
) -> None:
    # GIVEN a rank's console where CPython ≥3.13 prints a traceback under torch's "[rank1]:"
    # prefix: a statement spanning several lines, and the "~~~^^" anchors under each
    log = tmp_path / "console.txt"
    log.write_text(
        "[rank1]:[job] 2025-03-02 08:00:00,001 - root - INFO - evaluating at step 400\n"
        "[rank1]:Traceback (most recent call last):\n"
        '[rank1]:  File "/srv/job/run.py", line 12, in <module>\n'
        "[rank1]:    main()\n"
        "[rank1]:    ~~~~^^\n"
        '[rank1]:  File "/srv/job/run.py", line 9, in main\n'
        "[rank1]:    run_eval(\n"
        "[rank1]:    ~~~~~~~~^\n"
        "[rank1]:        model, loader, steps=(cfg.eval.steps or 100)\n"
        "[rank1]:        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "[rank1]:    )\n"
        "[rank1]:    ^\n"
        "[rank1]:RuntimeError: boom\n"
        "[rank1]:[job] 2025-03-02 08:00:05,000 - root - INFO - shutting down\n",
        encoding="utf-8",
    )
    # WHEN its line window is read
    kept = [line.text for line in read_line_window(log, "console.txt", None)[1]]
    # THEN only the job's own lines (and the exception's) stay
    assert "evaluating at step 400" in kept[0]
    assert not any("~" in t or "steps=" in t or t in ("^", ")") for t in kept)
    assert "shutting down" in kept[-1]
