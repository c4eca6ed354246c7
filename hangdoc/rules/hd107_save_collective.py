"""A save issues a collective that only some ranks call

## What it means
Every rank is blocked in a collective, but on some ranks that collective is issued from
inside a save — gathering a sharded state dict (FSDP ``FULL_STATE_DICT``, DeepSpeed
ZeRO-3 consolidation, ``accelerator.get_state_dict``), an optimizer state or a metric to
write — while the other ranks never entered the save and wait in some other collective
(a final barrier, the next step). Typical code: ``if rank == 0: save_model(model)``
where the save gathers from every rank.

## Why it hangs
Gathering a sharded model is a collective: every rank must take part. Called on one rank
only, it waits for peers that are elsewhere, and they wait for it. This is the classic
"the final model save hangs" at the end of an otherwise fine training run.

## Evidence used
The main thread's stack of every rank at the last sample: the collective each is blocked
in, and whether a checkpoint frame of the catalog (torch.save, DCP, save_pretrained,
Trainer/Accelerate/DeepSpeed/Lightning saves, user functions named like a save) sits
above that collective. The smaller group is named as the odd one.

## How to confirm
Read the call site of the save: it is guarded by a rank check, and the function below it
(state_dict, consolidation, gather) issues a collective.

## How to fix
Gather on every rank, write on one: call the state-dict gathering (``model.state_dict()``
under FSDP's ``FULL_STATE_DICT`` type, ``engine.save_16bit_model``,
``accelerator.get_state_dict``) on all ranks and only the file write under ``if rank ==
0``; or save with ``torch.distributed.checkpoint`` from every rank.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Frame, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.activity import RankActivity, live_activities
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import nobody_moved, span_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted


def save_frame(activity: RankActivity) -> Frame | None:
    """The checkpoint frame above the collective the rank is blocked in, if any."""
    main, call = activity.main, activity.waiting_call
    if main is None or call is None:
        return None
    frames = main.thread.frames
    for tag, frame in main.tag_frames:
        if tag is Activity.CHECKPOINT_SAVE:
            index = next((i for i, f in enumerate(frames) if f is frame), -1)
            if index > call.frame_index:
                return frame
    return None


class SaveCollective(Rule):
    __doc__ = __doc__
    id = "HD107"
    name = "save-collective-some-ranks"
    summary = "a save issues a collective (state-dict gather) that only some ranks call"
    categories = (Category.CHECKPOINT_SAVE,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = live_activities(ctx.activities)
        if len(live) < 2 or not all(a.in_collective for a in live):
            return
        savers = [a for a in live if save_frame(a) is not None]
        others = [a for a in live if save_frame(a) is None]
        if not savers or not others or len(savers) > len(others):
            return
        moved = nobody_moved(ctx, (a.rank for a in live))
        if moved is False:
            return
        yield self._finding(ctx, savers, others, stuck=moved is True)

    def _finding(
        self,
        ctx: RuleContext,
        savers: list[RankActivity],
        others: list[RankActivity],
        *,
        stuck: bool,
    ) -> Finding:
        s_ranks = tuple(a.rank for a in savers)
        o_ranks = tuple(a.rank for a in others)
        first = savers[0]
        frame = save_frame(first)
        assert frame is not None and first.waiting_call is not None
        op = first.waiting_call.op
        other_ops = " / ".join(sorted({a.waiting_call.op for a in others if a.waiting_call}))
        title = (
            f"{plural_ranks(s_ranks)} {verb(s_ranks, 'waits', 'wait')} in {op} inside a save "
            f"({frame.label()}) that {plural_ranks(o_ranks)} never entered "
            f"({verb(o_ranks, 'it waits', 'they wait')} in {other_ops})"
        )
        explanation = (
            f"On {plural_ranks(s_ranks)} the save at {frame.label()} issues {op} "
            f"(rank {first.rank}: {first.description()}). {plural_ranks(o_ranks).capitalize()} "
            f"did not call the save and wait in {other_ops} (rank {others[0].rank}: "
            f"{others[0].description()}). Gathering a sharded state dict (or anything "
            "else the save collects) is a collective that every rank must join, so a save "
            "called on some ranks only waits forever."
        )
        if len(savers) == len(others):
            explanation += " Both groups have the same size, so which one is odd is a guess."
        explanation += (
            f" Nothing moved{span_text(ctx, s_ranks + o_ranks)}." if stuck else " One sample only."
        )
        # The stacks show the save and the collective, and nothing moved between samples.
        strength = Strength.CORROBORATED
        if not stuck:
            strength = shifted(strength, Shift.ONE_SAMPLE)
        if len(savers) == len(others):
            strength = shifted(strength, Shift.TIE)
        return Finding(
            rule=self.id,
            category=Category.CHECKPOINT_SAVE,
            severity=self.severity if stuck else Severity.ERROR,
            title=title,
            explanation=explanation,
            fix=(
                "Gather on every rank, write on one: call the state-dict gathering "
                "(model.state_dict() under FSDP FULL_STATE_DICT, DeepSpeed "
                "save_16bit_model/consolidation, accelerator.get_state_dict) on all ranks and "
                "put only the file write under `if rank == 0`; or save with "
                "torch.distributed.checkpoint from every rank."
            ),
            culprit_ranks=s_ranks,
            waiting_ranks=o_ranks,
            evidence=tuple(stack_refs(savers, limit=4) + stack_refs(others, limit=2)),
            strength=strength,
        )


RULE = SaveCollective
