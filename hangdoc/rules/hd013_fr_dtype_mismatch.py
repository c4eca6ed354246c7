"""The flight recorder shows one collective with different dtypes on different ranks

## What it means
At one sequence number of one process group every rank issued the same op with the
same sizes, but not the same element type: ranks 0-6 all_reduce Float, rank 7 Half or
BFloat16.

## Why it hangs
The same element count is a different byte count: the backends exchange bytes, so the
ranks wait for data that never comes (or mix fp16 bits into fp32 sums). Typical causes:
mixed precision (autocast, a grad scaler) enabled on some ranks only, a model cast on
one rank, a buffer created with a default dtype that differs between ranks.

## Evidence used
Every rank's flight recorder dump: input and output dtypes of each entry, compared
across the ranks that recorded the same collective_seq_id (the majority is taken as
intended).

## How to confirm
Print the dtype of the tensor passed to the collective on the odd rank and on another;
check that the precision settings (autocast, model.half(), torch.set_default_dtype) are
the same on every rank.

## How to fix
Use the same precision settings on every rank, and cast explicitly before the collective
(`tensor.float()`) where ranks may legitimately hold different dtypes.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.fr_matching import Kind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import mismatch_finding

FIX = (
    "Give the collective tensors of the same dtype on every rank: align the precision "
    "settings (autocast, .half()/.bfloat16(), default dtype) or cast before the call."
)


class FrDtypeMismatch(Rule):
    __doc__ = __doc__
    id = "HD013"
    name = "fr-dtype-mismatch"
    summary = "flight recorder: one collective with different dtypes on different ranks"
    categories = (Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        for problem in result.of_kind(Kind.DTYPE):
            yield mismatch_finding(
                self.id,
                Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
                problem,
                result,
                ctx,
                FIX,
                Strength.CONCLUSIVE,
            )


RULE = FrDtypeMismatch
