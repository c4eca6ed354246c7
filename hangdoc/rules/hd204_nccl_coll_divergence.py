"""NCCL COLL logs show ranks that stopped launching collectives, or launched different ones

## What it means
With `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL`, NCCL logs every collective a rank
launches, with a per-communicator `opCount`. Comparing the last logged operation of
each rank of one communicator shows ranks whose last `opCount` is lower (they stopped
launching: they are elsewhere) or ranks that launched a different operation, count or
datatype at the same `opCount`.

## Why it hangs
NCCL pairs operations by their order on each communicator. A rank that launched fewer
operations leaves the others waiting in the next one; different operations or sizes at
the same position never complete.

## Evidence used
COLL lines (`AllReduce: opCount 1a sendbuff … count N datatype D op O root R comm 0x…
[nranks=N]`), the last one per process and communicator, joined to the communicator's
`commId` through the init lines (the `comm 0x…` pointer differs per process). NCCL ≥
2.27 logs `opCount 0` for single-node communicators; then only the operation is compared.

## How to confirm
`grep opCount` per rank and diff the sequences (as in gh:NVIDIA/nccl/issues/296): the
first differing line is the divergence.

## How to fix
Make every rank launch the same collectives in the same order with the same sizes and
dtypes; find what the lagging ranks were doing instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.nccl import NcclColl, NcclInit
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_DTYPES = {
    0: "int8",
    1: "uint8",
    2: "int32",
    3: "uint32",
    4: "int64",
    5: "uint64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "bfloat16",
}


def _coll(p: Placed) -> NcclColl:
    found = p.event.payload_as(NcclColl)
    return found if found is not None else NcclColl()


_SIZED = frozenset({"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter"})


class NcclCollDivergence(Rule):
    __doc__ = __doc__
    id = "HD204"
    name = "nccl-coll-divergence"
    summary = "NCCL COLL lines: ranks stopped at a lower opCount or launched different ops"
    categories = (
        Category.RANK_DIVERGENCE,
        Category.COLLECTIVE_TYPE_MISMATCH,
        Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
    )
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        colls = tl.of(EventKind.NCCL_COLL)
        if not colls:
            return
        comm_info: dict[tuple[str | None, int | None, str | None], tuple[str, int | None]] = {}
        for p in tl.of(EventKind.NCCL_INIT):
            init = p.event.payload_as(NcclInit) or NcclInit()
            key = (p.event.host, p.event.pid, init.comm)
            comm_info[key] = (init.comm_id or f"nranks {init.nranks}", init.rank)
        groups: dict[str, dict[int, Placed]] = {}
        for p in colls:
            coll = _coll(p)
            ident, comm_rank = comm_info.get((p.event.host, p.event.pid, coll.comm), (None, None))
            if ident is None:
                ident = f"nranks {coll.nranks if coll.nranks is not None else '?'}"
            member = comm_rank if comm_rank is not None else p.rank
            if member is None:
                continue
            groups.setdefault(ident, {})[member] = p
        for ident, members in sorted(groups.items()):
            if len(members) < 2:
                continue
            finding = self._compare(ident, members)
            if finding is not None:
                yield finding

    def _compare(self, ident: str, members: dict[int, Placed]) -> Finding | None:
        counts = {r: _coll(p).opcount or 0 for r, p in members.items()}
        top = max(counts.values())
        if top > 0:
            behind = sorted(r for r, c in counts.items() if c < top)
            if behind and len(behind) < len(members):
                ahead = sorted(set(members) - set(behind))
                return self._finding(
                    Category.RANK_DIVERGENCE,
                    Severity.ERROR,
                    f"comm {ranks_text(behind)} stopped launching NCCL collectives at opCount "
                    f"{min(counts[r] for r in behind)} while comm {ranks_text(ahead)} reached "
                    f"{top} ({ident})",
                    behind,
                    ahead,
                    members,
                )
        at_top = {r: p for r, p in members.items() if counts[r] == top}
        for field, category, what in (
            ("op", Category.COLLECTIVE_TYPE_MISMATCH, "operation"),
            ("count", Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH, "element count"),
            ("datatype", Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH, "datatype"),
        ):
            if field != "op" and not all(_coll(p).op in _SIZED for p in at_top.values()):
                continue
            values: dict[str, list[int]] = {}
            for r, p in at_top.items():
                values.setdefault(_show(field, getattr(_coll(p), field)), []).append(r)
            if len(values) > 1 and len({_coll(p).op for p in at_top.values()}) <= (
                1 if field != "op" else 99
            ):
                ordered = sorted(values.items(), key=lambda kv: (-len(kv[1]), kv[0]))
                culprits = sorted(r for _, rs in ordered[1:] for r in rs)
                major = sorted(ordered[0][1])
                return self._finding(
                    category,
                    Severity.CRITICAL,
                    f"NCCL {what} differs at opCount {top} ({ident}): "
                    + "; ".join(f"{v}: comm {ranks_text(rs)}" for v, rs in ordered),
                    culprits,
                    major,
                    members,
                )
        return None

    def _finding(
        self,
        category: Category,
        severity: Severity,
        title: str,
        culprits: list[int],
        waiting: list[int],
        members: dict[int, Placed],
    ) -> Finding:
        refs = [members[r] for r in culprits[:4]] + [members[r] for r in waiting[:2]]
        return Finding(
            rule=self.id,
            category=category,
            severity=severity,
            title=title,
            explanation=(
                "The last COLL line of each rank of this communicator disagrees; "
                "communicator ranks equal global ranks for the default process group."
            ),
            fix=(
                "Make every rank launch the same collectives, in the same order, with the same "
                "sizes and dtypes; find what the diverging ranks were doing."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs(refs, limit=6)),
            strength=Strength.SIGNAL,  # the last COLL lines: a log cut can differ too
        )


def _show(field: str, value: str | int | None) -> str:
    if value is None:
        return "?"
    if field == "datatype" and isinstance(value, int):
        return _DTYPES.get(value, str(value))
    return str(value)


RULE = NcclCollDivergence
