"""A real hung job whose logs hold stacks read from text: fixtures/dumps/thread-died
(fixtures/record.py, hangdoc/scenarios/job.py ``scenario_thread_died``).

Rank 3's shard prefetcher thread died of a FileNotFoundError (``threading.excepthook``
printed its traceback to stderr) and its main thread then blocked in ``Queue.get`` for a
batch that never comes, while ranks 0-2 wait in the gradient all_reduce. Every rank's own
stall detector then printed all its threads' stacks (faulthandler) to stderr. The main
threads did not move between the two py-spy samples; only text differs from them (a dead
thread, unqualified function names). Before stacks read from text were told apart from
live samples, this job was called "all 4 ranks made progress: slow, not hung".
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import StackTextKind, Verdict
from hangdoc.analyzer.summarize.write import write_node_summary

DUMP = Path(__file__).resolve().parents[3] / "fixtures" / "dumps" / "thread-died"


def test_a_hung_job_is_not_called_slow_because_of_text_in_its_logs() -> None:
    evidence = load_paths([DUMP])
    diagnosis = analyze(evidence)
    assert diagnosis.verdict is Verdict.HANG
    assert not any(f.says_not_hung or f.rule == "HD004" for f in diagnosis.findings)
    primary = diagnosis.primary
    assert primary is not None and primary.culprit_ranks == (3,)
    assert primary.category.value == "dataloader_deadlock_or_worker_hang"
    # The logs' stacks are text, beside the two live samples of each rank
    for proc in evidence.ranked().values():
        assert len(proc.stack_samples) == 2 and proc.text_stacks
        assert all(s.source.endswith(".err") for s in proc.text_stacks)


def test_the_dead_thread_is_evidence_about_that_thread() -> None:
    diagnosis = analyze(load_paths([DUMP]))
    rank3 = diagnosis.activities[3]
    # What rank 3 is doing is its live main thread, not the dead thread's traceback
    assert rank3.read_from_text is None and rank3.main is not None
    assert rank3.main.thread.name == "MainThread" and rank3.main.thread.os_thread_id is not None
    raised = [(t, text) for t, text in rank3.raised if t.name == "shard-prefetcher"]
    [(thread, text)] = raised
    assert not thread.is_main and thread.os_thread_id is None
    assert thread.exception is not None and thread.exception.startswith("FileNotFoundError")
    assert StackTextKind.TRACEBACK in text.kinds and text.line == 2


def test_the_node_summary_keeps_text_apart(tmp_path: Path) -> None:
    # GIVEN the dump with the summary `hangdoc collect` writes on the node, and no raw
    # rank files for hydration to fall back on (a summary-only transfer): the summary
    # alone must keep text as text, with the exception on the thread it ended
    dump = tmp_path / "thread-died"
    shutil.copytree(DUMP, dump)
    write_node_summary(dump)
    for rank in range(4):
        shutil.rmtree(dump / f"rank{rank}")
    evidence = load_paths([dump])
    rank3 = evidence.ranked()[3]
    assert len(rank3.stack_samples) == 2
    died = [t for s in rank3.text_stacks for t in s.threads if t.name == "shard-prefetcher"]
    assert died and died[0].exception is not None
    diagnosis = analyze(evidence)
    assert diagnosis.verdict is Verdict.HANG
    assert not any(f.says_not_hung for f in diagnosis.findings)
