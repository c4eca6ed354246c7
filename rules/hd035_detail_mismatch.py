"""TORCH_DISTRIBUTED_DEBUG=DETAIL found mismatched collectives

## What it means
With `TORCH_DISTRIBUTED_DEBUG=DETAIL`, every collective is first checked across ranks
(ProcessGroupWrapper): its sequence number, operation, tensor shapes and dtypes. The
check failed with "Detected mismatch between collectives on ranks. Rank A is running
collective: CollectiveFingerPrint(…), but Rank B is running collective: …". Old NCCL
releases print a similar "Mismatched collective detected … around rank N" warning.

## Why it hangs
Without the check the mismatched collectives would wait for each other until the
timeout (or exchange wrongly sized data). The check turns the hang into an error, and
its message says exactly which ranks disagree and how.

## Evidence used
The fingerprints of both sides of every mismatch message. Ranks are grouped by
fingerprint; the ranks holding the rarer fingerprint are named as culprits. The
category follows what differs: the operation (collective_type_mismatch), the shapes or
dtypes (collective_size_or_dtype_mismatch), or only the sequence number (one side
issued an extra collective: rank divergence).

## How to confirm
The message quotes the culprit's fingerprint; its traceback points at the call site.
Compare the call sites of the two sides.

## How to fix
Make the collective sequence identical on all ranks: same operations in the same
order, same shapes and dtypes (pad or all-gather sizes first), no collective under a
rank-dependent branch.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity
from hangdoc.analyzer.views.timeline import Placed, fint
from hangdoc.analyzer.vocabulary import F_PEER_RANK, EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_KEYS = ("op", "shape", "dtype", "seq")


def _fingerprints(events: list[Placed]) -> dict[int, dict[str, str]]:
    prints: dict[int, dict[str, str]] = {}
    for p in events:
        for side in ("a", "b"):
            rank = fint(p.event, f"rank_{side}")
            if rank is None:
                continue
            fp = {k: v for k in _KEYS if (v := p.get(f"{k}_{side}")) is not None}
            if fp:
                prints.setdefault(rank, fp)
    return prints


class DetailMismatch(Rule):
    __doc__ = __doc__
    id = "HD035"
    name = "detail-collective-mismatch"
    summary = "TORCH_DISTRIBUTED_DEBUG=DETAIL reported mismatched collectives"
    categories = (
        Category.COLLECTIVE_TYPE_MISMATCH,
        Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
        Category.RANK_DIVERGENCE,
    )
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        events = tl.of(EventKind.COLLECTIVE_MISMATCH)
        detail = [p for p in events if p.get("source") == "detail"]
        found = self._detail(detail) if detail else None
        if found is not None:
            yield found
        nccl = [p for p in events if p.get("source") != "detail"]
        if nccl:
            yield self._nccl(nccl)

    def _detail(self, events: list[Placed]) -> Finding | None:
        prints = _fingerprints(events)
        if not prints:
            return None  # mismatch lines with no rank: nothing to compare
        groups: dict[tuple[tuple[str, str], ...], list[int]] = {}
        for rank, fp in prints.items():
            groups.setdefault(tuple(sorted(fp.items())), []).append(rank)
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
        major_fp, major = dict(ordered[0][0]), sorted(ordered[0][1])
        if len(ordered) > 1:
            minor_fp, culprits = dict(ordered[1][0]), sorted(r for _, rs in ordered[1:] for r in rs)
        else:
            minor_fp, culprits = {}, []
        tie = len(ordered) == 2 and len(ordered[1][1]) == len(major)
        differ = [k for k in _KEYS if major_fp.get(k) != minor_fp.get(k) and minor_fp]
        category, what = _category(differ)
        lhs = _describe(minor_fp) if minor_fp else "a different collective"
        rhs = _describe(major_fp)
        title = (
            (
                f"collective mismatch ({what}): {ranks_text(culprits)} ran {lhs}, "
                f"{ranks_text(major)} ran {rhs}"
            )
            if culprits
            else f"collective mismatch: {rhs}"
        )
        return Finding(
            rule=self.id,
            category=category,
            severity=Severity.CRITICAL,
            title=title,
            explanation=(
                "TORCH_DISTRIBUTED_DEBUG=DETAIL compared the collectives of the ranks and they "
                f"differ in {', '.join(differ) or 'their fingerprint'}. "
                + (events[0].get("differ") or "")
                + (
                    " Each side has as many ranks as the other: either may be the one that "
                    "deviated."
                    if tie
                    else ""
                )
            ).strip(),
            fix=_fix(category),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(major),
            evidence=tuple(limited_refs(events, limit=6)),
            confidence=0.6 if tie else 0.9 if culprits else 0.7,
        )

    def _nccl(self, events: list[Placed]) -> Finding:
        around = sorted({v for p in events if (v := fint(p.event, F_PEER_RANK)) is not None})
        return Finding(
            rule=self.id,
            category=Category.COLLECTIVE_TYPE_MISMATCH,
            severity=Severity.ERROR,
            title=f"NCCL detected mismatched collectives around {ranks_text(around) or 'a rank'}",
            explanation=(
                "NCCL's own check found that ranks issued different collectives (operation, "
                "count or order) at the same point. It names the communicator rank it saw "
                "first, not necessarily the one that is wrong."
            ),
            fix=_fix(Category.COLLECTIVE_TYPE_MISMATCH),
            culprit_ranks=tuple(around),
            evidence=tuple(limited_refs(events, limit=6)),
            confidence=0.5,
        )


def _category(differ: list[str]) -> tuple[Category, str]:
    if "op" in differ:
        return Category.COLLECTIVE_TYPE_MISMATCH, "operation"
    if "shape" in differ or "dtype" in differ:
        return Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH, "/".join(d for d in differ if d != "seq")
    if "seq" in differ:
        return Category.RANK_DIVERGENCE, "sequence number"
    return Category.COLLECTIVE_TYPE_MISMATCH, "fingerprint"


def _describe(fp: dict[str, str]) -> str:
    parts = [fp.get("op", "?")]
    if "shape" in fp:
        parts.append(fp["shape"])
    if "dtype" in fp:
        parts.append(fp["dtype"])
    if "seq" in fp:
        parts.append(f"#{fp['seq']}")
    return " ".join(parts)


def _fix(category: Category) -> str:
    if category is Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH:
        return (
            "Make shapes and dtypes identical on every rank at this collective (pad to a "
            "common size, cast to one dtype, drop_last=True)."
        )
    if category is Category.RANK_DIVERGENCE:
        return (
            "One side issued an extra (or skipped a) collective: find the rank-dependent "
            "branch or early exit before this call."
        )
    return (
        "Make every rank call the same collective here; move rank-specific collectives out "
        "of the common path."
    )


RULE = DetailMismatch
