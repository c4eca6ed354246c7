"""A traceback cut before its exception line is its thread's position, marked cut; a
traceback's source lines and exception give no rank to another block; torchrun's own
traceback is the launcher's (issue 21, items 1 and 4).

Recorded fixtures: fixtures/logs/interleaved (4 gloo ranks raising at once under torchrun,
fixtures/logs/record_interleaved.py), and graphstorm-276 (train split), whose second
rank's traceback another rank's output cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import (
    ProcessEvidence,
    StackSample,
    StackTextKind,
    TextStack,
    ThreadStack,
)
from hangdoc.analyzer.parsers.stacks import markers
from hangdoc.analyzer.parsers.stacks.parser import extract_stacks
from hangdoc.casebook import split_of

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "fixtures" / "logs" / "interleaved"
GRAPHSTORM = ROOT / "fixtures" / "cases" / "graphstorm-276-save-topk-gloo-barrier-timeout"


def _functions(stack: TextStack) -> list[str]:
    [thread] = stack.threads
    return [f.function for f in thread.frames]


def test_graphstorm_is_a_train_case() -> None:
    assert split_of("https://github.com/awslabs/graphstorm/issues/276") == "train"


def test_a_traceback_another_ranks_output_cut_is_that_ranks_position() -> None:
    # GIVEN two ranks' tracebacks interleaved, the second cut after its backward() frame
    procs = extract_stacks((GRAPHSTORM / "traceback.txt").read_text(), "traceback.txt")
    # THEN two processes: one timed out in the save's barrier, whole; one in backward(),
    # its traceback marked cut, with no exception and no death
    assert len(procs) == 2
    whole, cut = procs
    [timed_out] = whole.text_stacks
    assert not timed_out.cut and _functions(timed_out)[:3] == [
        "barrier",
        "save_model",
        "save_topk_models",
    ]
    [position] = cut.text_stacks
    assert position.cut and position.kinds == (StackTextKind.TRACEBACK,)
    assert _functions(position) == ["backward", "fit", "main", "<module>"]
    assert position.threads[0].exception is None and not cut.exited
    # AND it is a position as far as it goes, never the process's latest stack
    assert cut.cut_text_stacks() == [position]
    assert cut.latest_stacks() is None and not cut.has_stacks() and cut.stack_series() == []
    assert "cut before its end" in position.label()


def _without(text: str, line: str) -> str:
    lines = text.split("\n")
    lines.remove(line)
    return "\n".join(lines)


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("torch-*.log")))
def test_a_ranks_traceback_cut_before_its_exception_is_no_death(name: str) -> None:
    # GIVEN torch's prefixed tracebacks of four ranks, rank 1's exception line taken away
    text = _without((LOGS / name).read_text(), "[rank1]: KeyError: 'missing-key'")
    procs = {p.rank: p for p in extract_stacks(text, name)}
    # THEN rank 1's traceback is its position (innermost at its raise, line 36), marked
    # cut: no exception, not dead; the other ranks died of theirs as before
    rank1 = procs[1]
    [stack] = rank1.text_stacks
    assert stack.cut and stack.threads[0].exception is None
    assert stack.threads[0].frames[0].line == 36
    assert not rank1.exited
    assert all(procs[r].exited for r in (0, 2, 3))


def test_a_cut_traceback_never_stands_for_a_live_sample() -> None:
    # GIVEN a rank with a live sample and a traceback cut before its exception, the
    # process gone at collection
    live = StackSample(index=0, time=1.0, threads=(ThreadStack(frames=(), is_main=True),))
    cut = TextStack(
        index=0,
        threads=(ThreadStack(frames=(), is_main=True),),
        kinds=(StackTextKind.TRACEBACK,),
        cut=True,
    )
    proc = ProcessEvidence(rank=1, stack_samples=[live], text_stacks=[cut], exited=True)
    # THEN what it was last seen doing is the live sample: the cut text says nothing of
    # what it died in, and it is no sample to follow a thread through
    assert proc.latest_stacks() is live
    assert proc.stack_series() == [live]


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_torchruns_own_traceback_is_the_launchers(name: str) -> None:
    # GIVEN torchrun's ChildFailedError traceback under its "failed (exitcode: 1)
    # local_rank: N" line, after the workers' tracebacks ("rank 2: loss is nan")
    procs = extract_stacks((LOGS / name).read_text(), name)
    launcher = [
        p
        for p in procs
        for s in p.text_stacks
        for t in s.threads
        if (t.exception or "").split(":")[0].endswith("ChildFailedError")
    ]
    # THEN it is a process of its own, of no rank or local rank, with no worker's stack
    [proc] = launcher
    assert proc.rank is None and proc.local_rank is None and not proc.exited
    assert len(proc.text_stacks) == 1 and len(proc.text_stacks[0].threads) == 1


def test_a_format_spec_after_rank_is_no_rank() -> None:
    # the recorder's own source line, as CPython prints it under the frame
    assert markers.any_rank('    raise FileNotFoundError(f"/data/shard-{rank:05d}.bin")') is None
    assert markers.any_rank("rank:05d") is None
    assert markers.any_rank("[Rank 3] Watchdog caught collective operation timeout") == 3


def test_a_source_line_above_a_block_gives_it_no_rank() -> None:
    # GIVEN one rank's traceback (local rank 3's stream, cut at a source line that names a
    # rank: code, not output) right above an unprefixed traceback
    text = "\n".join(
        [
            "[default3]:Traceback (most recent call last):",
            '[default3]:  File "w.py", line 39, in save',
            '[default3]:    log.info("rank 5 saving shard")',
            "Traceback (most recent call last):",
            '  File "train.py", line 3, in <module>',
            "    main()",
            "ValueError: bad config",
        ]
    )
    procs = extract_stacks(text, "t")
    unprefixed = [p for p in procs if p.local_rank is None]
    # THEN the unprefixed traceback takes no rank from the other's source line
    [proc] = unprefixed
    assert proc.rank is None


def test_an_exception_in_another_stream_above_a_block_gives_it_no_rank() -> None:
    # GIVEN tee-0: "[default2]:RuntimeError: rank 2: loss is nan at step 12" right above
    # the launcher's report and an unprefixed traceback of a job (not the launcher's)
    text = "\n".join(
        [
            "[default2]:Traceback (most recent call last):",
            '[default2]:  File "w.py", line 38, in _descend',
            '[default2]:    raise RuntimeError(f"rank {rank}: loss is nan at step 12")',
            "[default2]:RuntimeError: rank 2: loss is nan at step 12",
            "Traceback (most recent call last):",
            '  File "train.py", line 3, in <module>',
            "    main()",
            "ValueError: bad config",
        ]
    )
    procs = extract_stacks(text, "t")
    [proc] = [p for p in procs if p.local_rank is None]
    # THEN the rank that exception names is its own stream's, not the next block's
    assert proc.rank is None


def test_a_source_line_that_looks_like_a_label_opens_no_section(tmp_path: Path) -> None:
    # GIVEN a console whose traceback's source line reads like a rank label ("rank = 0"),
    # then the job's own line
    from hangdoc.analyzer.parsers.logs.window import UNATTRIBUTED, read_window_columns

    log = tmp_path / "console.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in setup\n'
        "    rank = 0\n"
        "NameError: name 'x' is not defined\n"
        "epoch 3: 1250 batches\n"
    )
    # WHEN the log's window is read THEN the job's line is nobody's, not rank 0's
    columns = read_window_columns(log, None)
    assert 0 not in columns
    assert "epoch 3: 1250 batches" in columns[UNATTRIBUTED].texts
