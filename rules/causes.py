"""What a rank's activity says about the cause: tag → category, and the advice for each.

Shared by the rules that name a culprit by what it is doing (HD001, HD002), so the same
activity always gets the same category and the same fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Category
from hangdoc.rules.activity import GENERIC_TAGS, RankActivity
from hangdoc.rules.catalog import Tag


@dataclass(frozen=True, slots=True)
class Cause:
    category: Category
    doing: str  # "is saving a checkpoint"
    fix: str


_CAUSES: dict[Tag, Cause] = {
    Tag.CHECKPOINT_SAVE: Cause(
        Category.CHECKPOINT_SAVE,
        "is saving a checkpoint",
        "Find why the save on the culprit rank does not finish (a stuck or full filesystem, "
        "an object store upload, a save that only some ranks enter). Make every rank reach "
        "the same collectives around the save: save from all ranks with "
        "torch.distributed.checkpoint, or guard a rank-0-only torch.save with a barrier that "
        "every rank enters after it; write to local disk and copy asynchronously; raise the "
        "process-group timeout if saves are legitimately long.",
    ),
    Tag.DATALOADER_TEARDOWN: Cause(
        Category.DATALOADER,
        "is shutting down its DataLoader workers",
        "A worker does not exit: look at the worker processes' stacks (hangdoc collect takes "
        "them with --subprocesses). Common causes: a worker blocked in I/O or on a lock "
        "inherited through fork, persistent_workers with an iterator abandoned mid-epoch, "
        "workers ignoring SIGTERM. Try num_workers=0 to confirm, use the 'spawn' or "
        "'forkserver' start method, and set DataLoader(timeout=...) so a stuck worker raises.",
    ),
    Tag.DATALOADER_FETCH: Cause(
        Category.DATALOADER,
        "is waiting for its next batch from the DataLoader",
        "The culprit's data pipeline is stuck or slow: check its DataLoader workers (dead, "
        "zombie, or blocked in I/O), the storage they read from, and whether this rank's "
        "sampler gives it more or slower batches. Set DataLoader(timeout=...) so a stuck "
        "worker raises instead of hanging the job.",
    ),
    Tag.DATALOADER_WORKER: Cause(
        Category.DATALOADER,
        "is inside a DataLoader worker",
        "Check the DataLoader worker processes for a blocked read or a deadlock after fork.",
    ),
    Tag.EVAL: Cause(
        Category.EVAL_SOME_RANKS,
        "is running evaluation",
        "Evaluation runs on some ranks only (or takes another path there) while the others "
        "already wait in the next collective. Run evaluation on every rank, or keep the "
        "rank-0-only part free of collectives and put a barrier that all ranks enter after it; "
        "gather metrics with a collective every rank calls.",
    ),
    Tag.CHECKPOINT_LOAD: Cause(
        Category.RANK_DIVERGENCE,
        "is loading a checkpoint",
        "The culprit is still loading a checkpoint while the others started training: check "
        "the storage it reads from, and load on every rank before the first collective.",
    ),
    Tag.COMPILE: Cause(
        Category.RANK_DIVERGENCE,
        "is compiling (torch.compile)",
        "One rank is (re)compiling while the others wait: warm up compilation on every rank "
        "before timing-sensitive collectives, check for recompilations caused by shapes that "
        "differ between ranks (TORCH_LOGS=recompiles), and raise the collective timeout.",
    ),
}

_GENERIC_FIX = (
    "The culprit rank took a code path the others did not: compare its stack with theirs and "
    "make every rank issue the same collectives in the same order (typical causes: a branch "
    "on rank or on data that differs between ranks, an early return or break, an exception "
    "swallowed on one rank). If it is merely slow, raise the process-group timeout."
)


def cause_of(activity: RankActivity) -> Cause:
    """The most specific cause the culprit's main thread shows, innermost frame first."""
    if activity.main is not None:
        for tag in activity.main.tags:
            cause = _CAUSES.get(tag)
            if cause is not None:
                return cause
    return Cause(Category.RANK_DIVERGENCE, "is outside any collective", _GENERIC_FIX)


def key_frame_text(activity: RankActivity) -> str:
    """The frame that gave the culprit's activity, plus its innermost user frame."""
    main = activity.main
    if main is None:
        return "no Python stack"
    parts: list[str] = []
    telling = [f for t, f in main.tag_frames if t not in GENERIC_TAGS] or [
        f for _, f in main.tag_frames
    ]
    if telling:
        parts.append(telling[0].label())
    if main.user_frame is not None and main.user_frame.label() not in parts:
        parts.append("user code " + main.user_frame.label())
    if not parts and main.thread.frames:
        parts.append(main.thread.frames[0].label())
    return "; ".join(parts)
