"""TORCH_DISTRIBUTED_DEBUG=DETAIL found mismatched collectives

## What it means
With `TORCH_DISTRIBUTED_DEBUG=DETAIL`, every collective is first checked across ranks
(ProcessGroupWrapper): its sequence number, operation, tensor shapes and dtypes. The
check failed with "Detected mismatch between collectives on ranks. Rank A is running
collective: CollectiveFingerPrint(…), but Rank B is running collective: …". Old NCCL
releases print a similar "Mismatched collective detected … around rank N" warning, when a
peer has moved past the operation a rank still waits in for data: by NCCL's source, a
size mismatch.

## Why it hangs
Without the check the mismatched collectives would wait for each other until the
timeout (or exchange wrongly sized data). The check turns the hang into an error, and
its message says exactly which ranks disagree and how.

## Evidence used
The fingerprints of both sides of every mismatch message. Ranks are grouped by
fingerprint; the ranks holding the rarer fingerprint are named as culprits. The
category follows what differs: the operation (collective_type_mismatch), the shapes or
dtypes (collective_size_or_dtype_mismatch), or only the sequence number (one side
issued an extra collective: rank divergence). torch before 1.13 prints one side only
("Rank N is running inconsistent collective: …", often pretty-printed over several
lines): several such messages are compared with each other; a single one of a gather
(ALLGATHER, _ALLGATHER_BASE, GATHER, ALLTOALL), whose shape is the rank's own data, is
read as a presumed shape mismatch at low confidence, unless it gathers one integer per rank
(TensorShape=[1], Long or Int: a count or a size, the same shape on every rank that makes
the call), which is read as the other ranks running another collective, also at low
confidence.

Without a mismatch message, the last "[Rank N] Running collective:
CollectiveFingerPrint(…)" line that ProcessGroupWrapper logs per rank before each
collective: a rank whose last sequence number is behind the others' never issued the
collective they wait in (rank divergence, low confidence: a log cut in the middle can
show the same); the same number with a different operation or shape is a mismatch.

NCCL's transport check "message truncated : receiving N bytes instead of M"
(net_socket.cc) or "collective mismatch error, local size N remote size M" (net_ib.cc):
the two ends of one transfer disagree on its size (collective_size_or_dtype_mismatch,
moderate confidence: NCCL adds that differing NCCL_PROTO/NCCL_ALGO do the same). gloo's
"[enforce fail at …/tcp/pair.cc:N] op.preamble.length <= op.nbytes. N vs M" is the same
check (lower confidence: different collectives of different widths trip it too).

FSDP's check of the first iteration's forward order ("Forward order differs across ranks:
rank 0 is all-gathering 1 parameters while rank 1 is all-gathering 0 parameters", or the
same with the parameters' names; torch/distributed/fsdp/_exec_order_utils.py): the ranks
all-gathered, at a module's pre-forward hook, which parameters each is about to
all-gather, and they differ: the ranks run different modules at the same point of the
forward (rank divergence; the pair of ranks it names is not told apart).

DDP's check at construction that every rank holds the same parameters (torch/csrc/
distributed/c10d/reducer.cpp ``verify_params_across_processes``, from
``_verify_param_shape_across_processes`` in ``DistributedDataParallel.__init__``): "DDP
expects same model across all ranks, but Rank R has N params, while rank I has
inconsistent M params." (each rank all-gathers the counts and names the first rank whose
count differs from its own) and "[R]: params[p] in this process with sizes S appears not to
match sizes of the same param in process 0." (each rank compares its sizes and strides
with rank 0's). The ranks' models differ: collective_size_or_dtype_mismatch, stated by
torch's own check. The culprit is the rank the count messages name most often (one line:
the rank it calls inconsistent), or the ranks that raised the shape check (rank 0 when
every other rank raised it). A count of 0 or a nonsensical one can also mean that rank was
not in the same call; the finding says so.

DeepSpeed ZeRO's cross-rank check (deepspeed/runtime/zero/utils.py
``assert_ints_same_as_other_ranks``, called before ZeRO-3's parameter all-gathers, its
gradient bucket's reduce-scatter and when it records the module trace): "disagreement
between rank0 and rank<N>: rank0: […], rank<N>: […]" (0.6-0.17; "Detected a disagreement
on list contents|length between rank0 and rank<N>:" from 0.18). The ranks are about to run
collectives over different parameters, of different sizes: collective_size_or_dtype_mismatch,
stated by DeepSpeed's own check; no culprit (the pair is not told apart).

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

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.nccl import CollectiveMismatch, MismatchError, MismatchSource
from hangdoc.analyzer.payloads.torch_pg import CollectiveIssued, Fingerprint
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted

_KEYS = ("op", "shape", "dtype", "seq")
# The sources this rule reads each in a branch of its own; the rest are NCCL's checks.
_OWN_SOURCES = frozenset(
    {
        MismatchSource.DETAIL,
        MismatchSource.FSDP_ORDER,
        MismatchSource.DDP_PARAMS,
        MismatchSource.ZERO_IDS,
    }
)


def _said(fingerprint: Fingerprint | None, keys: tuple[str, ...] = _KEYS) -> dict[str, object]:
    """The parts of a fingerprint the line gave, by name."""
    if fingerprint is None:
        return {}
    return {k: v for k in keys if (v := getattr(fingerprint, k)) is not None}


def _mismatch(p: Placed) -> CollectiveMismatch:
    found = p.event.payload_as(CollectiveMismatch)
    return found if found is not None else CollectiveMismatch()


def _fingerprints(events: list[Placed]) -> dict[int, dict[str, object]]:
    prints: dict[int, dict[str, object]] = {}
    for p in events:
        mismatch = _mismatch(p)
        for side in (mismatch.side_a, mismatch.side_b):
            if side is None or side.rank is None:
                continue
            fp = _said(side)
            if fp:
                prints.setdefault(side.rank, fp)
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
        detail = [p for p in events if _mismatch(p).source == MismatchSource.DETAIL]
        found = self._detail(detail) if detail else None
        if found is not None:
            yield found
        else:
            issued = self._issued(tl.of(EventKind.COLLECTIVE_ISSUED))
            if issued is not None:
                yield issued
        order = [p for p in events if _mismatch(p).source == MismatchSource.FSDP_ORDER]
        if order:
            yield self._fsdp_order(order)
        ddp = [p for p in events if _mismatch(p).source == MismatchSource.DDP_PARAMS]
        if ddp:
            yield self._ddp_params(ddp, ctx.evidence.expected_world_size())
        zero = [p for p in events if _mismatch(p).source == MismatchSource.ZERO_IDS]
        if zero:
            yield self._zero_ids(zero)
        nccl = [p for p in events if _mismatch(p).source not in _OWN_SOURCES]
        sizes = [p for p in nccl if _mismatch(p).error == MismatchError.SIZE_MISMATCH]
        if sizes:
            yield self._nccl_size(sizes)
        nccl = [p for p in nccl if _mismatch(p).error != MismatchError.SIZE_MISMATCH]
        if nccl:
            yield self._nccl(nccl)

    def _issued(self, events: list[Placed]) -> Finding | None:
        """ProcessGroupWrapper's "[Rank N] Running collective: CollectiveFingerPrint(…)"
        lines (analyzer/parsers/logs/pg_wrapper.py), the last one per rank. Each rank logs
        the line and then waits in a monitored barrier for the whole group, so a rank whose
        last fingerprint is behind the others' has not issued the collective they wait in.
        The lines of a log cut in its middle can be behind by chance: low confidence."""
        last: dict[int, Fingerprint] = {}
        placed: dict[int, Placed] = {}
        for p in events:
            issued = p.event.payload_as(CollectiveIssued)
            if p.rank is not None and issued is not None and issued.fingerprint.seq is not None:
                last[p.rank], placed[p.rank] = issued.fingerprint, p
        if len(last) < 2:
            return None
        seqs = {r: fp.seq or 0 for r, fp in last.items()}
        top = max(seqs.values())
        behind = sorted(r for r, s in seqs.items() if s < top)
        ahead = sorted(r for r, s in seqs.items() if s == top)
        evidence = tuple(limited_refs([placed[r] for r in sorted(placed)], limit=6))
        if behind:
            culprits, others = (behind, ahead) if len(behind) <= len(ahead) else (ahead, behind)
            low = min(seqs[r] for r in behind)
            return Finding(
                rule=self.id,
                category=Category.RANK_DIVERGENCE,
                severity=Severity.ERROR,
                title=(
                    f"{ranks_text(behind)} last ran collective #{low}, {ranks_text(ahead)} "
                    f"already issued #{top}"
                ),
                explanation=(
                    "TORCH_DISTRIBUTED_DEBUG=DETAIL logs every collective's fingerprint "
                    "before the ranks meet in it. The last fingerprints differ in their "
                    f"sequence number: {ranks_text(ahead)} wait in collective #{top}, which "
                    f"{ranks_text(behind)} never issued (they are elsewhere, or issue a "
                    "different collective). If the log was cut in its middle, the "
                    "difference may be only where the cut fell."
                ),
                fix=_fix(Category.RANK_DIVERGENCE),
                culprit_ranks=tuple(culprits),
                waiting_ranks=tuple(others),
                evidence=evidence,
                strength=Strength.HINT,  # a log cut in its middle can be behind by chance
            )
        prints = {r: _said(fp, ("op", "shape", "dtype")) for r, fp in last.items()}
        groups: dict[tuple[tuple[str, object], ...], list[int]] = {}
        for rank, fp in prints.items():
            groups.setdefault(tuple(sorted(fp.items())), []).append(rank)
        if len(groups) < 2:
            return None
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
        major_fp, minor_fp = dict(ordered[0][0]), dict(ordered[1][0])
        culprits = sorted(r for _, rs in ordered[1:] for r in rs)
        differ = [k for k in ("op", "shape", "dtype") if major_fp.get(k) != minor_fp.get(k)]
        category, what = _category(differ)
        return Finding(
            rule=self.id,
            category=category,
            severity=Severity.ERROR,
            title=(
                f"collective #{top} differs ({what}): {ranks_text(culprits)} ran "
                f"{_describe(minor_fp)}, {ranks_text(ordered[0][1])} ran {_describe(major_fp)}"
            ),
            explanation=(
                "TORCH_DISTRIBUTED_DEBUG=DETAIL logged the fingerprint of the same collective "
                f"(#{top}) on every rank, and they differ in {', '.join(differ)}."
            ),
            fix=_fix(category),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(sorted(ordered[0][1])),
            evidence=evidence,
            strength=Strength.SIGNAL,
        )

    def _nccl_size(self, events: list[Placed]) -> Finding:
        """The transport found a message larger than the buffer the receiver posted: NCCL
        (net_socket.cc "message truncated : receiving N bytes instead of M", net_ib.cc
        "collective mismatch error, local size N remote size M") or gloo (tcp/pair.cc
        "op.preamble.length <= op.nbytes. N vs M"): the two ends disagree on the size of
        one transfer. NCCL names a size mismatch between ranks as the likely cause "if the
        network is healthy" (moderate confidence); gloo's check also fires when the ranks
        run different collectives of different widths (lower confidence)."""
        first = _mismatch(events[0])
        gloo = all(_mismatch(p).source == MismatchSource.GLOO for p in events)
        library = "gloo" if gloo else "NCCL"
        got, want = first.bytes_received, first.bytes_expected
        peers = sorted({v for p in events if (v := _mismatch(p).peer) is not None})
        sizes = f" ({got} bytes arrived for a {want}-byte buffer)" if got and want else ""
        ranks = sorted({p.rank for p in events if p.rank is not None})
        return Finding(
            rule=self.id,
            category=Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
            severity=Severity.ERROR,
            title=f"{library} received a message larger than the posted buffer" + sizes,
            explanation=(
                "The receiving side of a transfer got more bytes than the buffer it posted"
                + (f" from peer {', '.join(peers[:3])}" if peers else "")
                + ": the ranks disagree on the size of the same collective or send/recv "
                "(a shape that differs between ranks, pipeline stages whose send and recv "
                "shapes differ)"
                + (
                    ", or run different collectives of different widths at this point."
                    if gloo
                    else ". NCCL notes that different NCCL_PROTO/NCCL_ALGO settings between "
                    "ranks can do the same."
                )
            ),
            fix=(
                "Compare the shapes and dtypes of the collective or send/recv at this point "
                "on every rank (TORCH_DISTRIBUTED_DEBUG=DETAIL checks them), and make sure "
                "NCCL_PROTO/NCCL_ALGO are set the same on every node."
            ),
            culprit_ranks=(),  # which side got the size wrong is not in the line
            waiting_ranks=tuple(ranks),
            evidence=tuple(limited_refs(events, limit=6)),
            strength=shifted(Strength.SIGNAL, Shift.OTHER_READINGS) if gloo else Strength.SIGNAL,
        )

    def _detail(self, events: list[Placed]) -> Finding | None:
        prints = _fingerprints(events)
        if not prints:
            return None  # mismatch lines with no rank: nothing to compare
        groups: dict[tuple[tuple[str, object], ...], list[int]] = {}
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
        one_sided = not minor_fp and _gathers(major_fp)
        one_number = one_sided and _one_element(major_fp)
        if one_number:
            # A gather of one element per rank has the same shape on every rank: the
            # other side ran another collective.
            one_sided = False
            category, what = Category.COLLECTIVE_TYPE_MISMATCH, "operation (presumed)"
        # torch states the mismatch; both sides' fingerprints agree with it.
        strength = shifted(Strength.STATED, Shift.AGREES) if culprits else Strength.STATED
        if tie:
            strength = shifted(strength, Shift.TIE)
        elif one_sided:
            strength = Strength.HINT  # a shape mismatch presumed from one gather's side
        elif one_number:
            strength = Strength.HINT  # a different operation presumed from one count's side
        if one_sided:
            category, what = Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH, "shape (presumed)"
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
                + (_mismatch(events[0]).differ or "")
                + (
                    " Each side has as many ranks as the other: either may be the one that "
                    "deviated."
                    if tie
                    else ""
                )
                + (
                    " Only the reporting rank's fingerprint is in the paste (torch before 1.13 "
                    "prints no other side): a gather of per-rank data whose shape differs "
                    "between ranks is the usual cause, but the other ranks may also run a "
                    "different operation."
                    if one_sided
                    else ""
                )
                + (
                    " Only the reporting rank's fingerprint is in the paste, a gather of one "
                    "integer per rank: such a gather exchanges a count or a size (as "
                    "all_gather_object and DDP's parameter check do first) and has the same "
                    "shape on every rank, so the other ranks were presumably running a "
                    "different collective."
                    if one_number
                    else ""
                )
            ).strip(),
            fix=_fix(category),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(major),
            evidence=tuple(limited_refs(events, limit=6)),
            strength=strength,
        )

    def _fsdp_order(self, events: list[Placed]) -> Finding:
        """FSDP's check of the first iteration's forward order (torch/distributed/fsdp/
        _exec_order_utils.py, ``_ExecOrderData._check_order``): at each pre-forward hook
        every rank all-gathers how many (then which) parameters it is about to all-gather,
        and they differ. The ranks are running different modules at the same point of the
        forward: their code paths parted (a rank-dependent branch, a module skipped on
        some ranks, inputs that route differently). The message names a pair of ranks, not
        which of them took the other path."""
        return Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title="FSDP: the ranks' forward passes run different modules (forward order differs)",
            explanation=(
                "FSDP checks in the first iteration that every rank all-gathers the same "
                "parameters at each module's pre-forward hook, and found ranks about to "
                "all-gather different ones: they are executing different modules at the same "
                "point of the forward. Without the check their all-gathers would not match and "
                "the job would hang. Which rank took the other path the message does not say."
            ),
            fix=(
                "Make every rank run the same FSDP-wrapped modules in the same order: look for "
                "a module called under a rank- or data-dependent condition (a branch on the "
                "input, an early exit, a module used only on some ranks) before the first "
                "backward, and run it on every rank (or keep it out of FSDP's wrapping)."
            ),
            evidence=tuple(limited_refs(events, limit=4)),
            strength=Strength.SIGNAL,  # FSDP's own check says so; the culprit is not named
        )

    def _zero_ids(self, events: list[Placed]) -> Finding:
        """DeepSpeed ZeRO's cross-rank check (deepspeed/runtime/zero/utils.py
        ``assert_ints_same_as_other_ranks``): rank 0 broadcasts its list (the ids or sizes
        of the parameters about to be all-gathered or reduce-scattered, or the recorded
        module trace) and a rank whose own list differs raises. The ranks are about to run
        collectives over different parameters, of different sizes ("otherwise could mix
        data between tensors", the source says). Before 0.18 a list of another length was
        broadcast into a buffer of the rank's own length, so rank 0's list printed as
        unrelated large numbers is that size mismatch itself. Which of the two ranks holds
        the odd list, the message does not say."""
        return Finding(
            rule=self.id,
            category=Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
            severity=Severity.CRITICAL,
            title="DeepSpeed ZeRO: a rank disagrees with rank 0 on the parameters it is "
            "about to gather or reduce",
            explanation=(
                "DeepSpeed ZeRO checks, before its parameter all-gathers and gradient "
                "reduce-scatters (and when it records the module trace), that every rank "
                "holds the same list of parameter ids or sizes as rank 0, and one rank's "
                "differs: the ranks would run these collectives over different parameters, "
                "of different sizes, and mix or wait for data that never matches. Which of "
                "the two ranks is the odd one the message does not say."
            ),
            fix=(
                "Make every rank build and run the same model: the same parameters in the "
                "same order (no rank- or data-dependent modules, the same frozen "
                "parameters everywhere), and the same forward path before the backward "
                "(ZeRO-3 records the module order of the first step)."
            ),
            evidence=tuple(limited_refs(events, limit=4)),
            strength=Strength.SIGNAL,  # DeepSpeed's own check says so; no culprit named
        )

    def _ddp_params(self, events: list[Placed], world: int | None) -> Finding:
        """DDP's check at construction that every rank holds the same parameters
        (torch/csrc/distributed/c10d/reducer.cpp ``verify_params_across_processes``,
        parsers/logs/size_checks.py). The count check raises on each rank that finds
        another rank's count differing from its own, naming the first such rank: the
        rank the reporters name is the odd one (the one most of them name). The shape
        check compares every rank's sizes with rank 0's and raises on a rank whose
        parameter differs: the reporting ranks are the odd ones, unless every rank but 0
        reports (then rank 0 is)."""
        counts = [p for p in events if _mismatch(p).error == MismatchError.PARAM_COUNT]
        named: dict[int, int] = {}
        for p in counts:
            other = _mismatch(p).side_b
            if other is not None and other.rank is not None:
                named[other.rank] = named.get(other.rank, 0) + 1
        reporters = sorted({r for p in events if (r := _reporter(p)) is not None})
        # A line the catalog's row alone read (a wrapped or cut message) says neither
        # which check raised it nor which ranks it compared: it names no culprit.
        shape_reporters = sorted(
            {
                r
                for p in events
                if _mismatch(p).error == MismatchError.PARAM_SHAPE
                and (r := _reporter(p)) is not None
            }
        )
        if named:
            most = max(named.values())
            culprits = sorted(r for r, n in named.items() if n == most)
            what = "number of parameters"
        elif (
            world is not None
            and len(shape_reporters) >= 2
            and set(shape_reporters) == set(range(1, world))
        ):
            culprits, what = [0], "parameter shapes"
        elif shape_reporters:
            culprits, what = shape_reporters, "parameter shapes"
        else:
            culprits, what = [], "parameters"
        first = _mismatch(events[0])
        said = (first.message or events[0].event.text).strip()[:200]
        tie = len(culprits) > 1 and bool(named)
        return Finding(
            rule=self.id,
            category=Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
            severity=Severity.CRITICAL,
            title=f"DDP found the ranks' models differ ({what})"
            + (f": {ranks_text(culprits)} differs from the others" if culprits else ""),
            explanation=(
                "DistributedDataParallel checks, as it is constructed, that every rank holds "
                f"the same parameters before it broadcasts rank 0's, and found the {what} "
                f"differing: {said!r}. "
                + (
                    "The rank the check names holds a count the others do not; a count of 0 or "
                    "a nonsensical one can also mean that rank was not in the same call (a rank "
                    "late or elsewhere: the gathered value is then not its model's)."
                    if named
                    else "The reporting rank's parameter does not match rank 0's."
                )
                + (
                    " Several ranks are named as often: which one is wrong is a guess."
                    if tie
                    else ""
                )
            ),
            fix=(
                "Build the same model on every rank before wrapping it in DDP: the same "
                "architecture and config, no rank-dependent layers or parameters, the same "
                "checkpoint loaded everywhere (or loaded after wrapping); a rank whose count is "
                "0 or absurd may not have reached DDP's construction with the others (look at "
                "what it was doing)."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(sorted((set(reporters) | set(named)) - set(culprits))),
            evidence=tuple(limited_refs(events, limit=6)),
            # DDP's own check states the ranks differ; which one is odd is read from it.
            strength=shifted(Strength.STATED, Shift.TIE) if tie else Strength.STATED,
        )

    def _nccl(self, events: list[Placed]) -> Finding:
        around = sorted({v for p in events if (v := _mismatch(p).peer_rank) is not None})
        # NCCL ≤ 2.5's device check (collectives/device/primitives.h, checkMismatch): a
        # peer's op count moved past the op this rank still waits in for data or credits,
        # "so there must be a size mismatch" (its comment): the ranks moved different
        # amounts of data in the same operation, whichever calls made them differ.
        return Finding(
            rule=self.id,
            category=Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
            severity=Severity.ERROR,
            title=f"NCCL detected mismatched collectives around {ranks_text(around) or 'a rank'}",
            explanation=(
                "NCCL's own check found a peer already past the operation this rank still "
                "waited in for data: the ranks moved different amounts of data in the same "
                "collective (different sizes, or calls in a different order). It names the "
                "communicator rank it saw first, not necessarily the one that is wrong."
            ),
            fix=_fix(Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH),
            culprit_ranks=tuple(around),
            evidence=tuple(limited_refs(events, limit=6)),
            strength=Strength.SIGNAL,  # a mismatch NCCL saw; the rank it names is a guess
        )


def _reporter(p: Placed) -> int | None:
    """The rank that raised a DDP check: the rank its words name, else the line's."""
    side = _mismatch(p).side_a
    return side.rank if side is not None and side.rank is not None else p.rank


def _category(differ: list[str]) -> tuple[Category, str]:
    if "op" in differ:
        return Category.COLLECTIVE_TYPE_MISMATCH, "operation"
    if "shape" in differ or "dtype" in differ:
        return Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH, "/".join(d for d in differ if d != "seq")
    if "seq" in differ:
        return Category.RANK_DIVERGENCE, "sequence number"
    return Category.COLLECTIVE_TYPE_MISMATCH, "fingerprint"


# Collectives that concatenate per-rank tensors: their input shape is the rank's own data
# (a batch, logits of variable length), so when only the reporting rank's fingerprint is
# known, the shape is what most often differs. jotr-4 (ALLGATHER [41,…] vs [40,…], old
# one-sided format), phi3vision-41 (_ALLGATHER_BASE [256] vs [2048]) and the one-sided
# ALLGATHER of transformers-20366 (train cases).
_GATHER_OPS = frozenset(
    {
        "ALLGATHER",
        "_ALLGATHER_BASE",
        "ALLGATHER_COALESCED",
        "ALLGATHER_INTO_TENSOR_COALESCED",
        "GATHER",
        "ALLTOALL",
        "ALLTOALL_BASE",
    }
)


def _gathers(fp: dict[str, object]) -> bool:
    return fp.get("op") in _GATHER_OPS and "shape" in fp


_INTEGER_DTYPES = frozenset({"Long", "Int"})  # c10's ScalarType names, as fingerprints print them


def _one_element(fp: dict[str, object]) -> bool:
    """A fingerprint's integer tensor of one element (``TensorShape=[1],
    TensorDtypes=Long``): one count per rank (a float one may be a per-sample value of a
    batch that happens to hold one sample).

    torch's own one-number gathers come first in their calls (torch/distributed/
    distributed_c10d.py all_gather_object: ``local_size = torch.tensor([numel],
    dtype=torch.long)``; torch/csrc/distributed/c10d/reducer.cpp
    verify_params_across_processes: an allgather of the parameter count, a [1] Long
    tensor), so they are identical on every rank that makes the same call."""
    if fp.get("dtype") not in _INTEGER_DTYPES:
        return False
    dims = str(fp.get("shape", "")).strip("[]").replace(" ", "").split(",")
    return all(d.isdigit() for d in dims) and dims != [""] and all(int(d) == 1 for d in dims)


def _describe(fp: dict[str, object]) -> str:
    parts = [str(fp.get("op", "?"))]
    if "shape" in fp:
        parts.append(str(fp["shape"]))
    if "dtype" in fp:
        parts.append(str(fp["dtype"]))
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
