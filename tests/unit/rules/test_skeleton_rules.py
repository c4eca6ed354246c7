"""Positive and negative cases of HD000-HD005 on hand-built Evidence.

Frame shapes are those py-spy 0.4 prints for torch 2.13 / Python 3.11 (FORMATS.md §4);
recorded real dumps are exercised in test_rule_cases.py.
"""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, Severity, Strength, Verdict
from hangdoc.analyzer.views.activity import classify_thread

from . import stacks as S


def test_checkpoint_rank_is_culprit_of_all_gather_wait() -> None:
    # GIVEN ranks 0-2 in all_gather and rank 3 inside torch.save, unchanged over 2 samples
    ev = S.evidence(
        *(S.process(r, S.IN_ALL_GATHER, S.IN_ALL_GATHER) for r in range(3)),
        S.process(3, S.SAVING, S.SAVING),
    )
    # WHEN analyzed
    diag = analyze(ev)
    # THEN the primary finding blames rank 3's checkpoint
    primary = diag.findings[0]
    assert diag.verdict is Verdict.HANG
    assert primary.rule == "HD001"
    assert primary.category is Category.CHECKPOINT_SAVE
    assert primary.culprit_ranks == (3,)
    assert primary.waiting_ranks == (0, 1, 2)
    assert primary.title == "rank 3 is saving a checkpoint while ranks 0-2 wait in all_gather"
    assert "save_checkpoint" in primary.explanation or "StuckFile.write" in primary.explanation
    assert primary.strength is Strength.CORROBORATED  # the stacks, and nothing moved


def test_dataloader_teardown_category() -> None:
    ev = S.evidence(*(S.process(r, S.IN_ALL_REDUCE) for r in range(3)), S.process(3, S.TEARDOWN))
    primary = analyze(ev).findings[0]
    assert primary.category is Category.DATALOADER
    assert primary.culprit_ranks == (3,)


def test_generic_divergence_when_culprit_does_nothing_known() -> None:
    ev = S.evidence(*(S.process(r, S.IN_BARRIER) for r in range(3)), S.process(3, S.SLEEPING_USER))
    primary = analyze(ev).findings[0]
    assert primary.category is Category.RANK_DIVERGENCE
    assert "compute (train.py:179)" in primary.explanation


def test_no_divergence_when_all_ranks_outside_collectives() -> None:
    ev = S.evidence(*(S.process(r, S.SLEEPING_USER) for r in range(4)))
    diag = analyze(ev)
    assert all(f.rule != "HD001" for f in diag.findings)
    assert diag.verdict is Verdict.INCONCLUSIVE
    assert diag.findings[0].category is Category.UNKNOWN


def test_type_mismatch_eval_gather_vs_barrier() -> None:
    ev = S.evidence(*(S.process(r, S.IN_BARRIER) for r in range(3)), S.process(3, S.EVAL_GATHER))
    diag = analyze(ev)
    primary = diag.findings[0]
    assert primary.rule == "HD002"
    assert primary.category is Category.EVAL_SOME_RANKS
    assert primary.culprit_ranks == (3,)
    assert primary.title == "rank 3 waits in all_gather while ranks 0-2 wait in barrier"


def test_type_mismatch_plain() -> None:
    ev = S.evidence(
        *(S.process(r, S.IN_ALL_REDUCE) for r in range(3)),
        S.process(3, S.c10d("broadcast", 2800) + S.user("sync", "main")),
    )
    findings = analyze(ev).findings
    mismatch = [f for f in findings if f.rule == "HD002"]
    assert [f.category for f in mismatch] == [Category.COLLECTIVE_TYPE_MISMATCH]
    # One sample: the generic split is no surer than its specific reading (rank 3 left the
    # training steps the others are in), which comes first, as it would with two samples.
    assert findings[0].category is Category.UNEVEN_DATA
    assert findings[0].culprit_ranks == (3,)


def test_type_mismatch_two_unmoved_samples() -> None:
    ev = S.evidence(
        *(S.process(r, S.IN_ALL_REDUCE, S.IN_ALL_REDUCE) for r in range(3)),
        S.process(3, S.IN_BARRIER, S.IN_BARRIER),
    )
    mismatch = next(f for f in analyze(ev, calibrate=False).findings if f.rule == "HD002")
    assert mismatch.severity is Severity.CRITICAL and mismatch.strength is Strength.STATED


def test_same_family_is_not_a_mismatch() -> None:
    obj_gather = [*S.c10d("all_gather"), S.Frame("all_gather_object", S.C10D, 3513), *S.user("m")]
    ev = S.evidence(*(S.process(r, S.IN_ALL_GATHER) for r in range(3)), S.process(3, obj_gather))
    assert all(f.rule != "HD002" for f in analyze(ev).findings)


def test_missing_rank_on_collected_host_is_dead() -> None:
    ev = S.evidence(*(S.process(r, S.IN_ALL_REDUCE, S.IN_ALL_REDUCE) for r in range(3)))
    diag = analyze(ev)
    primary = diag.findings[0]
    assert primary.rule == "HD003"
    assert primary.category is Category.RANK_DEAD
    assert primary.culprit_ranks == (3,)
    assert diag.missing_ranks == [3]
    assert diag.verdict is Verdict.HANG


def test_missing_ranks_on_other_nodes_are_not_called_dead() -> None:
    # node1 holds ranks 0-3 of an 8-rank job (LOCAL_WORLD_SIZE=4): 4-7 live elsewhere
    procs = []
    for r in range(4):
        p = S.process(r, S.IN_ALL_REDUCE, world=8)
        p.local_world_size = 4
        procs.append(p)
    diag = analyze(S.evidence(*procs))
    dead = [f for f in diag.findings if f.category is Category.RANK_DEAD]
    assert dead == []
    assert any("4-7" in f.title and "not collected" in f.title for f in diag.findings)


def test_exited_rank_is_dead() -> None:
    ev = S.evidence(
        *(S.process(r, S.IN_ALL_REDUCE) for r in range(3)),
        S.process(3, S.IN_ALL_REDUCE, exited=True),
    )
    primary = analyze(ev).findings[0]
    assert primary.category is Category.RANK_DEAD and primary.culprit_ranks == (3,)


def test_progress_means_not_hung() -> None:
    # Same stack in both samples (both land in a sleep), but stdout grew and I/O moved.
    procs = []
    for r in range(3):
        pid = 1000 + r
        samples = [
            S.proc_sample(0, pid, rchar=100, cpu=5, switches=10, stdout=50),
            S.proc_sample(1, pid, rchar=900, cpu=9, switches=30, stdout=120),
        ]
        procs.append(S.process(r, S.SLEEPING_USER, S.SLEEPING_USER, world=3, proc_samples=samples))
    diag = analyze(S.evidence(*procs))
    assert diag.verdict is Verdict.NOT_HUNG
    assert diag.findings[0].category is Category.NOT_A_HANG


def test_background_io_alone_is_not_progress() -> None:
    # A chattering thread moves rchar, but the main thread neither ran nor moved.
    procs = []
    for r in range(3):
        pid = 1000 + r
        samples = [
            S.proc_sample(0, pid, rchar=100, cpu=5, switches=10),
            S.proc_sample(1, pid, rchar=900, cpu=5, switches=10),
        ]
        frames = S.IN_ALL_REDUCE if r < 2 else S.SAVING
        procs.append(S.process(r, frames, frames, world=3, proc_samples=samples))
    diag = analyze(S.evidence(*procs))
    assert diag.verdict is Verdict.HANG
    assert diag.findings[0].category is Category.CHECKPOINT_SAVE


def test_all_in_same_collective_without_progress_is_unknown_hang() -> None:
    procs = []
    for r in range(4):
        pid = 1000 + r
        samples = [S.proc_sample(0, pid), S.proc_sample(1, pid)]
        procs.append(S.process(r, S.IN_ALL_REDUCE, S.IN_ALL_REDUCE, proc_samples=samples))
    diag = analyze(S.evidence(*procs))
    assert diag.verdict is Verdict.HANG
    assert diag.findings[0].rule == "HD005"
    assert diag.findings[0].category is Category.UNKNOWN


def test_empty_evidence_is_inconclusive_unknown() -> None:
    diag = analyze(S.evidence())
    assert diag.verdict is Verdict.INCONCLUSIVE
    assert diag.findings[0].rule == "HD000"
    doc = diag.to_json()
    assert doc["schema"] == "hangdoc.findings/1"
    assert doc["findings"][0]["category"] == "unknown"  # type: ignore[index]


def test_text_dump_short_filenames_still_classify() -> None:
    frames = (S.Frame("all_gather", "distributed_c10d.py", 4287), S.Frame("main", "train.py", 3))
    act = classify_thread(S.ThreadStack(frames=frames, is_main=True))
    assert act.collective is not None and act.collective.op == "all_gather"
    assert act.user_frame is not None and act.user_frame.function == "main"


def test_framework_wrappers_name_the_api() -> None:
    frames = (
        S.Frame("all_gather", S.C10D, 1),
        S.Frame("_gpu_gather_one", f"{S.SITE}/accelerate/utils/operations.py", 2),
        S.Frame("gather", f"{S.SITE}/accelerate/utils/operations.py", 3),
        S.Frame("gather_for_metrics", f"{S.SITE}/accelerate/accelerator.py", 4),
        S.Frame("eval_loop", "/srv/job/train.py", 5),
    )
    act = classify_thread(S.ThreadStack(frames=frames, is_main=True))
    assert act.collective is not None
    assert act.collective.op == "all_gather"
    assert act.collective.api == "Accelerate gather_for_metrics"
