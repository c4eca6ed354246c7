"""HD106 (ranks ran different numbers of batches/steps) and HD107 (a save's collective on
some ranks only), next to HD002, which sees the same stacks as a generic mismatch."""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, Severity

from . import causes_stacks as C
from . import stacks as S

DDP_BACKWARD = [
    C.f("_engine_run_backward", C.AUTOGRAD, 979),
    C.f("backward", f"{S.SITE}/torch/autograd/__init__.py", 395),
    C.f("Tensor.backward", f"{S.SITE}/torch/_tensor.py", 623),
    C.f("train_one_epoch", line=483),
    C.f("main", line=600),
]
END_OF_EPOCH = [*S.c10d("barrier", 5356), C.f("main", line=493)]


def _avg_grads(step: int, steps_per_epoch: int) -> list[C.Frame]:
    return [
        *S.c10d("all_reduce", 3252),
        C.f("average_gradients", line=581),
        C.f("train", line=598, step=str(step), steps_per_epoch=str(steps_per_epoch)),
    ]


def _barrier_after_epoch(step: int, steps_per_epoch: int) -> list[C.Frame]:
    return [
        *S.c10d("barrier", 5356),
        C.f("train", line=602, step=str(step), steps_per_epoch=str(steps_per_epoch)),
    ]


def test_rank_that_left_the_epoch_is_the_culprit_under_ddp() -> None:
    ev = C.evidence(*C.victims(frames=DDP_BACKWARD), C.waiting(3, END_OF_EPOCH))
    diag = analyze(ev, calibrate=False)
    primary = diag.findings[0]
    assert primary.rule == "HD106"
    assert primary.category is Category.UNEVEN_DATA
    assert primary.culprit_ranks == (3,)
    assert primary.waiting_ranks == (0, 1, 2)
    assert "different numbers of batches" in primary.title
    assert "DDP backward" in primary.explanation
    assert "drop_last" in primary.fix and "join" in primary.fix
    hd002 = next(f for f in diag.findings if f.rule == "HD002")
    assert hd002.strength < primary.strength


def test_rank_with_more_steps_is_the_culprit_and_counters_show_it() -> None:
    # Story (e): rank 3 computed 16 steps per epoch, the others 4.
    ev = C.evidence(
        *(C.waiting(r, _barrier_after_epoch(3, 4)) for r in range(3)),
        C.waiting(3, _avg_grads(4, 16)),
    )
    primary = analyze(ev, calibrate=False).findings[0]
    assert primary.rule == "HD106"
    assert primary.culprit_ranks == (3,)
    assert "still in a training step" in primary.title
    assert "steps_per_epoch: rank 0=4, rank 1=4, rank 2=4, rank 3=16" in primary.explanation


def test_evaluation_gather_against_a_barrier_is_not_uneven_data() -> None:
    ev = C.evidence(*C.victims(frames=S.IN_BARRIER), C.waiting(3, S.EVAL_GATHER))
    diag = analyze(ev, calibrate=False)
    assert all(f.rule != "HD106" for f in diag.findings)
    assert diag.findings[0].category is Category.EVAL_SOME_RANKS


def test_even_split_is_flagged_as_a_guess() -> None:
    ev = C.evidence(
        C.waiting(0, DDP_BACKWARD), C.waiting(1, DDP_BACKWARD),
        C.waiting(2, END_OF_EPOCH), C.waiting(3, END_OF_EPOCH),
    )  # fmt: skip
    finding = next(f for f in analyze(ev, calibrate=False).findings if f.rule == "HD106")
    assert "guess" in finding.explanation
    # AND its evidence is weaker than that of the same stacks split 3 to 1
    three_to_one = C.evidence(
        C.waiting(0, DDP_BACKWARD), C.waiting(1, DDP_BACKWARD),
        C.waiting(2, DDP_BACKWARD), C.waiting(3, END_OF_EPOCH),
    )  # fmt: skip
    clear = next(f for f in analyze(three_to_one).findings if f.rule == "HD106")
    assert finding.strength < clear.strength


def test_one_sample_lowers_severity() -> None:
    ev = C.evidence(
        *(C.waiting(r, DDP_BACKWARD, samples=1) for r in range(3)),
        C.waiting(3, END_OF_EPOCH, samples=1),
    )
    finding = next(f for f in analyze(ev, calibrate=False).findings if f.rule == "HD106")
    assert finding.severity is Severity.ERROR


SAVE_GATHER = [
    *S.c10d("all_gather"),
    C.f("consolidate_state_dict", line=555),
    C.f("save_final_model", line=561),
    C.f("main", line=575),
]


def test_save_that_gathers_on_one_rank_only() -> None:
    ev = C.evidence(*C.victims(frames=S.IN_BARRIER), C.waiting(3, SAVE_GATHER))
    diag = analyze(ev, calibrate=False)
    primary = diag.findings[0]
    assert primary.rule == "HD107"
    assert primary.category is Category.CHECKPOINT_SAVE
    assert primary.culprit_ranks == (3,)
    assert "save_final_model (train.py:561)" in primary.title
    assert "if rank == 0" in primary.fix


def test_save_collective_on_every_rank_is_not_flagged() -> None:
    ev = C.evidence(*(C.waiting(r, SAVE_GATHER) for r in range(4)))
    assert all(f.rule != "HD107" for f in analyze(ev, calibrate=False).findings)
