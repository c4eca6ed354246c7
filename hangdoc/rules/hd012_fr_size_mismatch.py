"""The flight recorder shows one collective with different sizes on different ranks

## What it means
At one sequence number of one process group every rank issued the same op, but not
with the same tensor sizes (ranks 0-6 all_reduce 4,096 elements, rank 7 all_reduces
8,192), or a rank's all_gather / reduce_scatter sizes do not fit the group size
(all_gather must output its input times the number of ranks; reduce_scatter the
reverse). For point-to-point ops, a send and its matching recv differ in size.

## Why it hangs
Backends move exactly the bytes each rank announces: the rank with the larger buffer
waits for data that never comes (gloo), or NCCL reads past the smaller buffers and
hangs or corrupts memory. Typical causes: a per-rank batch or bucket of another size
(uneven data, drop_last=False), a model that differs between ranks (a layer built on
one rank only, a different config), or padding computed per rank.

## Evidence used
Every rank's flight recorder dump: input/output sizes of each entry, compared across the
ranks that recorded the same collective_seq_id (the majority is taken as intended), and
the all_gather / reduce_scatter size rules against the group's membership (pg_config,
or the ranks that used the group).

## How to confirm
Print the shapes passed to the collective on the odd rank and on one other rank; check
that every rank builds the same model and buckets, and that the data loader gives every
rank batches of the same shape.

## How to fix
Make the shapes agree on every rank: pad or drop the last uneven batch (drop_last=True,
a DistributedSampler with even splits), build the model identically everywhere, and for
all_gather of per-rank sizes use all_gather_object or gather the sizes first.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.fr_matching import Kind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import mismatch_finding

FIX = (
    "Make every rank pass tensors of the same shape to this collective: find why the odd "
    "ranks' tensor differs (uneven last batch, model or bucket built differently, per-rank "
    "padding) and pad, drop or rebuild it so that all ranks agree."
)


class FrSizeMismatch(Rule):
    __doc__ = __doc__
    id = "HD012"
    name = "fr-size-mismatch"
    summary = "flight recorder: one collective with different sizes on different ranks"
    categories = (Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        for problem in result.of_kind(Kind.SIZE):
            yield mismatch_finding(
                self.id,
                Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
                problem,
                result,
                ctx,
                FIX,
                Strength.CONCLUSIVE,
            )


RULE = FrSizeMismatch
