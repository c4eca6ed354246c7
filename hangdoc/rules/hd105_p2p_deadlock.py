"""Pipeline ranks wait on each other in send/recv

## What it means
Ranks are blocked in point-to-point transfers (``send``/``recv``, pipeline helpers such
as ``send_forward``/``recv_backward``) that can never complete: two stages both send to
each other (or both receive), so each waits for a ``recv`` the other never posts — a
cycle —, a chain of stages waits on a rank that is not in any transfer at all, or a
stage sends to the next one while that one is blocked receiving from it, yet neither
transfer completes: they do not describe the same transfer. Nothing moved between
samples. A pipeline whose stages sit in different ops but keep moving is
healthy, and this rule stays silent on it (HD004 says "not hung").

## Why it hangs
A blocking send finishes only when the peer posts the matching receive. When the
schedules of two stages disagree (one runs 1F1B, the other all-forward-then-backward;
an extra or missing microbatch; a warm-up count computed differently) each stage blocks
in its own transfer forever, and every stage before or after it blocks behind it.
A send and a recv aimed at each other also hang when they disagree on which tensor
comes first: gloo pairs a send with a recv by its ``tag`` (a stage that sends the hidden
states with tag 0 and then the mask with tag 1, to a receiver that posts the mask's recv
first, waits in the first send forever), and NCCL pairs them by order and size.

## Evidence used
The main thread's stack of every rank at each sample: the c10d ``send``/``recv`` frame,
its ``dst``/``src`` arguments when py-spy ran with ``--locals``, otherwise the direction
named by the pipeline helper that called it together with the rank order, otherwise
(a bare ``dist.send``/``dist.recv``) the rank order alone: where the sending and the
receiving stages meet at neighbouring ranks one way only, that is the direction data
flows (assumptions the finding states); whether any rank moved between samples; for a
send and the recv it feeds, the processes' I/O counters (/proc/PID/io) read twice: no
byte moved through either, so the transfer is not in flight. Where every rank waits on
the same side and no peer is shown, the ranks' own logs: a line of a template that counts
data ("step 2: 8 samples") whose last print on a few ranks holds less than every earlier
print of it (views/short_last.py) names those ranks: with less data, a stage posts fewer
transfers than its neighbours expect (a short batch cut into fewer micro-batches).

## How to confirm
`py-spy dump --locals --pid PID` on the named ranks: the ``dst``/``src`` of each blocked
``send``/``recv`` point at each other (and, for a send and a recv, their ``tag`` and
tensor sizes differ). Log the schedule (microbatch, op, peer, tag) of each stage for
one step and compare neighbours.

## How to fix
Make neighbouring stages run the same schedule (same number of warm-up microbatches,
same order of forward/backward transfers, the same tags in the same order). Use
``batch_isend_irecv`` (or ``send_forward_recv_backward``-style combined ops) where two
stages exchange in both directions at once, so neither blocks on its send; use the
framework's schedule (torch.distributed.pipelining, Megatron, DeepSpeed) rather than
hand-written ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.catalog import P2PKind
from hangdoc.analyzer.views.p2p_stacks import (
    P2PDeadlock,
    P2POp,
    assign_rank_order_peers,
    bytes_still,
    find_deadlock,
    p2p_op,
)
from hangdoc.analyzer.views.short_last import short_last_lines
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import nobody_moved, span_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted

_ASSUMED = (
    " Peers were inferred from the direction of the pipeline helpers and the rank order "
    "(consecutive ranks as consecutive stages); collect with py-spy --locals to confirm."
)
_ASSUMED_ORDER = (
    " Peers were inferred from the rank order alone (consecutive ranks as consecutive "
    "stages, data flowing from the sending stages to the receiving ones where they meet); "
    "collect with py-spy --locals to confirm."
)
_FIX = (
    "Make neighbouring pipeline stages run the same schedule (same warm-up "
    "microbatches, same order of forward and backward transfers). Where two "
    "stages exchange in both directions, use batch_isend_irecv or a combined "
    "send/recv so that neither blocks on its send."
)
_PAIR_FIX = (
    "Make the receiver post its recvs in the order the sender sends, with the same "
    "tags (or send the tensors of one step together with batch_isend_irecv and "
    "matching tags, or as one packed tensor), so each send meets the recv it feeds."
)


class P2PPipelineDeadlock(Rule):
    __doc__ = __doc__
    id = "HD105"
    name = "p2p-pipeline-deadlock"
    summary = "ranks wait on each other in send/recv (a cycle, or a chain to a rank elsewhere)"
    categories = (Category.P2P_DEADLOCK,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = {r: a for r, a in ctx.activities.items() if not a.process.exited}
        world = ctx.evidence.expected_world_size()
        ops = {r: op for r, a in live.items() if (op := p2p_op(a, world)) is not None}
        ops = assign_rank_order_peers(ops, world)
        if not ops:
            return
        moved = nobody_moved(ctx, live)
        if moved is False:
            return  # a pipeline that moves is a pipeline at work
        still = {r for r in ops if bytes_still(live[r].process)}
        found = find_deadlock(ops, set(live), still if moved is True else set())
        if found is not None:
            yield self._finding(ctx, found, stuck=moved is True)
        elif len(ops) == len(live) and len(ops) >= 2:
            yield self._all_blocked(ctx, ops, stuck=moved is True)

    def _finding(self, ctx: RuleContext, found: P2PDeadlock, *, stuck: bool) -> Finding:
        culprits = found.culprits
        ops = found.ops
        waiting = tuple(sorted(set(ops) - set(culprits)))
        span = span_text(ctx, ops)
        if found.pairs:
            title, explanation = self._pair_text(found)
        elif found.cycle:
            members = "; ".join(f"rank {r}: {ops[r].text()}" for r in found.cycle)
            kinds = {ops[r].kind for r in found.cycle}
            kind = next(iter(kinds))
            shape = f"{kind}/{kind} cycle" if len(kinds) == 1 else "wait cycle"
            title = (
                f"{plural_ranks(culprits)} wait on each other in point-to-point transfers ({shape})"
            )
            explanation = (
                f"{members}. Each waits for a transfer the other never posts (a blocking "
                "send completes only when the peer posts the matching recv), so neither can "
                "go on."
            )
        else:
            end = found.chain_end
            assert end is not None
            chain = " → ".join(f"rank {r}" for r in [*found.chain, end])
            title = (
                f"{plural_ranks(found.chain)} {verb(found.chain, 'waits', 'wait')} in "
                f"send/recv on rank {end}, which is elsewhere"
            )
            explanation = (
                f"The waits form a chain {chain}: "
                + "; ".join(f"rank {r}: {ops[r].text()}" for r in found.chain)
                + f". Rank {end} is not in any transfer ({ctx.activities[end].description()}),"
                " so the chain cannot move until it posts the transfer its neighbour waits for."
            )
        if waiting:
            explanation += (
                f" {plural_ranks(waiting).capitalize()} wait behind them: "
                + "; ".join(f"rank {r}: {ops[r].text()}" for r in waiting[:4])
                + "."
            )
        explanation += f" Nothing moved{span}." if stuck else " Only one sample was taken."
        if found.assumed:
            helpers = all(op.direction is not None for op in ops.values() if op.assumed)
            explanation += _ASSUMED if helpers else _ASSUMED_ORDER
        strength = Strength.CONCLUSIVE  # each rank's transfer and its peer's, on record
        if not stuck:
            strength = shifted(strength, Shift.ONE_SAMPLE)
        if found.assumed:
            strength = shifted(strength, Shift.PEERS_ASSUMED)
        return Finding(
            rule=self.id,
            category=Category.P2P_DEADLOCK,
            severity=self.severity if stuck else Severity.ERROR,
            title=title,
            explanation=explanation,
            fix=_PAIR_FIX if found.pairs else _FIX,
            culprit_ranks=culprits,
            waiting_ranks=waiting,
            evidence=tuple(self._refs(ctx, ops, culprits)),
            strength=strength,
        )

    @staticmethod
    def _pair_text(found: P2PDeadlock) -> tuple[str, str]:
        ops = found.ops
        said = "; ".join(
            f"rank {s}: {ops[s].text()}; rank {r}: {ops[r].text()}" for s, r in found.pairs
        )
        heads = ", ".join(f"rank {s} sends to rank {r}" for s, r in found.pairs)
        title = f"{heads}, which waits to receive from it, yet neither transfer completes"
        explanation = (
            f"{said}. A send and the recv aimed back at it are both posted and both stay "
            "blocked, so they are not the same transfer: gloo pairs a send with a recv by "
            "its tag (and NCCL by order and size), and the receiver waits for a tensor the "
            "sender has not reached while the sender waits for a recv the receiver has not "
            "posted yet, i.e. the two stages send and receive their tensors in a different "
            "order."
        )
        return title, explanation

    def _all_blocked(self, ctx: RuleContext, ops: Mapping[int, P2POp], *, stuck: bool) -> Finding:
        ranks = tuple(sorted(ops))
        kinds = {op.kind for op in ops.values()}
        title = f"{plural_ranks(ranks)} are all blocked in send/recv; the peers are unknown"
        moved = " and nothing moved" if stuck else ""
        said = (
            f"Every collected rank waits in a point-to-point transfer{moved}, which is a "
            "pipeline deadlock, but the stacks do not say which peer each waits for, so the "
            "culprit is unknown."
        )
        fix = (
            "Collect again with py-spy --locals (the dst/src of each send/recv), or log "
            "each stage's schedule, and look for two stages that send (or receive) to "
            "each other at the same time."
        )
        world = ctx.evidence.expected_world_size()
        if len(kinds) == 1 and world is not None and set(ranks) == set(range(world)):
            # Every rank of the job is on the same side of a transfer: whichever rank each
            # aims at, that rank waits on the same side too, so none can pair up.
            kind = next(iter(kinds))
            other = P2PKind.RECV if kind is P2PKind.SEND else P2PKind.SEND
            title = (
                f"{plural_ranks(ranks)} all wait in {kind} and none in {other}: every "
                f"transfer waits for a {other} that no rank can post (a cycle of {kind}s; "
                "the peers are not shown)"
            )
            said = (
                f"Every collected rank waits in {kind}, none in {other}: a point-to-point "
                f"transfer completes only when its peer posts the matching {other}, and each "
                f"rank's peer is one of these ranks, also waiting in {kind}, so no transfer "
                f"can complete: the ranks {kind} to each other in a cycle (a ring or halo "
                f"exchange written {kind}-then-{other} on every rank). Which rank each aims "
                "at the stacks do not say (no locals), and no rank is the culprit: the order "
                "is." + (" Nothing moved." if stuck else "")
            )
            fix = (
                f"Do not {kind} first on every rank: post both sides at once "
                "(dist.batch_isend_irecv, or isend/irecv and wait on both), or order them by "
                "rank parity (even ranks send then receive, odd ranks receive then send)."
            )
        culprits: tuple[int, ...] = ()
        short = {r: s for r, s in short_last_lines(ctx.evidence).items() if r in ops}
        if short and 2 * len(short) < len(ranks):
            # Issue 21 (live-2026-11-29g, pipeline-short-batch): the peers are not shown,
            # but a few ranks' own logs say their last step had less data than every step
            # before it: they cut it into fewer transfers than their neighbours expect.
            culprits = tuple(sorted(short))
            first = short[culprits[0]]
            title = (
                f"{plural_ranks(ranks)} are all blocked in send/recv, and "
                f"{plural_ranks(culprits)} ran short: the last step had less data "
                f"({first.line.text.strip()!r} against {first.earlier.text.strip()!r})"
            )
            said = (
                f"Every collected rank waits in a point-to-point transfer{moved}. "
                f"The logs say why: {first.detail()}. With less data, a stage posts "
                "fewer transfers (a "
                "short batch cut into fewer micro-batches) than the stages it exchanges with "
                "expect, so they wait for a transfer it never posts while it waits for one "
                "of theirs: the odd stage is the one whose amount differs. Which rank each "
                "transfer aims at the stacks do not say (no locals)."
            )
            fix = (
                "Give every stage the same number of micro-batches in every step: drop the "
                "short last batch (drop_last=True), pad it to the configured size, or pass "
                "its micro-batch count to every stage before the step."
            )
        return Finding(
            rule=self.id,
            category=Category.P2P_DEADLOCK,
            severity=Severity.ERROR,
            title=title,
            explanation="; ".join(f"rank {r}: {ops[r].text()}" for r in ranks[:6]) + ". " + said,
            fix=fix,
            culprit_ranks=culprits,
            waiting_ranks=tuple(r for r in ranks if r not in culprits),
            evidence=tuple(self._refs(ctx, ops, culprits)),
            strength=Strength.SIGNAL if stuck else shifted(Strength.SIGNAL, Shift.ONE_SAMPLE),
        )

    @staticmethod
    def _refs(
        ctx: RuleContext, ops: Mapping[int, P2POp], culprits: tuple[int, ...]
    ) -> list[EvidenceRef]:
        ordered = [*culprits, *(r for r in sorted(ops) if r not in culprits)]
        refs = [
            EvidenceRef(
                source=ctx.activities[r].process.primary_source(),
                detail=f"rank {r}: {ops[r].text()}"
                + (" (peer inferred)" if ops[r].assumed else ""),
                rank=r,
            )
            for r in ordered[:8]
            if r in ops
        ]
        others = [ctx.activities[r] for r in culprits if r not in ops]
        refs.extend(stack_refs(others, limit=2))
        return refs


RULE = P2PPipelineDeadlock
