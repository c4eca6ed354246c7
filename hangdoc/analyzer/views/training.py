"""Where a rank is in the training loop: in a step's gradient sync, or past the loop.

Uneven data shows in the stacks as two groups of ranks in different collectives: some
still in a training step's gradient all-reduce (a hand-written ``average_gradients``,
DDP's reducer inside ``backward``, FSDP's reduce-scatter), the others already past the
epoch loop — in evaluation, an end-of-epoch barrier, a save, the next epoch. Counters
(step, batch index, steps per epoch) in the frames' locals, when py-spy ran with
``--locals``, say which rank has more batches.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangdoc.analyzer.model import Frame, LogEvent
from hangdoc.analyzer.views.activity import RankActivity, is_user_frame
from hangdoc.analyzer.views.activity_table import Activity, phrase
from hangdoc.analyzer.views.catalog import GRADIENT_SYNC_HINT
from hangdoc.analyzer.vocabulary import EventKind

_SYNC_FAMILIES = frozenset({"all_reduce", "reduce_scatter"})
# Locals that count the loop's progress, by name.
_COUNTER = re.compile(
    r"(?i)^(global_)?(step|steps|it|iter|iteration|i|batch_idx|batch_index|batch_i|"
    r"batch_num|n_batches|num_batches|epoch|micro_step|steps_per_epoch|num_steps|"
    r"max_steps|total_steps|n_steps|updates|num_updates)$"
)
_INT = re.compile(r"^-?\d+$")


def in_gradient_sync(activity: RankActivity) -> bool:
    """Blocked in a collective that a training step issues to sync gradients."""
    call = activity.waiting_call
    main = activity.main
    if call is None or main is None or call.family not in _SYNC_FAMILIES:
        return False
    if call.api == "DDP backward":
        return True
    if main.has(Activity.EVAL) or main.has(Activity.CHECKPOINT_SAVE):
        return False
    frames = main.thread.frames[call.frame_index :]
    if any(GRADIENT_SYNC_HINT.search(f.function_leaf) for f in frames):
        return True
    return main.has(Activity.TRAIN_LOOP)


def past_the_loop(activity: RankActivity) -> str:
    """What a rank that left the epoch loop is doing, in words."""
    main = activity.main
    call = activity.waiting_call
    op = call.op if call is not None else "its own code"
    if main is None:
        return "somewhere unknown"
    where = f" at {main.user_frame.label()}" if main.user_frame else ""
    for telling in (Activity.EVAL, Activity.CHECKPOINT_SAVE, Activity.DATALOADER_FETCH):
        if main.has(telling):
            return f"{phrase(telling)} ({op}{where})"
    return f"in {op}{where}"


@dataclass(frozen=True, slots=True)
class Counter:
    name: str
    value: int
    frame: Frame


def counters(activity: RankActivity) -> dict[str, Counter]:
    """Integer loop counters in the user frames' locals (innermost frame wins)."""
    main = activity.main
    found: dict[str, Counter] = {}
    if main is None:
        return found
    for frame in main.thread.frames:
        if not is_user_frame(frame):
            continue
        for name, rep in frame.locals:
            if _COUNTER.match(name) and _INT.match(rep.strip()) and name not in found:
                found[name] = Counter(name, int(rep.strip()), frame)
    return found


def counter_differences(
    side_a: list[RankActivity], side_b: list[RankActivity]
) -> list[tuple[str, dict[int, int]]]:
    """Counters whose values differ between the two sides: (name, {rank: value})."""
    values: dict[str, dict[int, int]] = {}
    for activity in side_a + side_b:
        for name, counter in counters(activity).items():
            values.setdefault(name, {})[activity.rank] = counter.value
    a_ranks = {a.rank for a in side_a}
    out: list[tuple[str, dict[int, int]]] = []
    for name, by_rank in sorted(values.items()):
        a_vals = {v for r, v in by_rank.items() if r in a_ranks}
        b_vals = {v for r, v in by_rank.items() if r not in a_ranks}
        if a_vals and b_vals and a_vals != b_vals:
            out.append((name, by_rank))
    return out


# Appended for issue 21 (live-2026-11-28d, oom-skip): an error a rank lived through.
# Errors a training step raises and a handler may catch and go on from (fairseq's
# trainer catches an out-of-memory RuntimeError, logs "attempting to recover from OOM"
# and skips the batch; a user's try/except around the step does the same with any
# exception): not the collective failures and timeouts that come after a hang.
_SURVIVABLE = frozenset({EventKind.CUDA_OOM, EventKind.EXCEPTION, EventKind.HOST_MEMORY})


def survived_errors(activities: Sequence[RankActivity]) -> dict[int, LogEvent]:
    """Each rank of ``activities`` whose log holds an error of a step (out of memory, an
    exception) while its stacks show it alive and blocked in a collective after it: the
    error did not end the rank, so a handler caught it and the rank went on, past what
    the step would have done (its collectives). The first such error of each rank."""
    out: dict[int, LogEvent] = {}
    for activity in activities:
        if activity.process.exited or not activity.in_collective:
            continue
        found = next((e for e in activity.process.log_events if e.kind in _SURVIVABLE), None)
        if found is not None:
            out[activity.rank] = found
    return out
