"""Horovod's stall check: the ranks that never submitted a collective.

Horovod's coordinator (rank 0) warns when some ranks have submitted a tensor for a
collective and others have not for longer than HOROVOD_STALL_CHECK_TIME_SECONDS (60 s):
"One or more tensors were submitted to be reduced, gathered or broadcasted by subset of
ranks and are waiting for remainder of ranks for more than 60 seconds. … Stalled ops:"
then one line per tensor, ``<tensor name> [missing ranks: 1, 3]`` (horovod/common/
operations.cc, CheckForStalledTensors; horovod issue 1012 shows it under mpirun's
``[1,0]<stderr>:`` prefix). The ranks named are the ones the others wait for.

Before mid-2018 (horovod/common/operations.cc up to commit 67708e27, 2018-06-27) the same
warning listed, on its one line, the ranks that *had* submitted each op: "Stalled ops: <op>
[ready ranks: 3], <op> [ready ranks: 2, 0, 1], …" (horovod issues 215, 312, 336). Those do
not state the missing ranks (the job's size is not printed); the ops and their ready ranks
are kept (``StalledOp``), so that ranks ready in different ops show.

Also Horovod's shut-down error (SHUT_DOWN_ERROR, below): the echo of another rank's failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.torch_pg import Backend, ConnectionLost, MissingRanks, StalledOp
from hangdoc.analyzer.vocabulary import EventKind

_MISSING = re.compile(r"(?P<op>[\w./:\-]{1,200}) \[missing ranks: ?(?P<ranks>\d+(?:, ?\d+)*)\]")
# One op of the old one-line report; the last one may be cut (no closing bracket).
_READY = re.compile(r"(?P<op>[\w./:\-]{1,200}) \[ready ranks: ?(?P<ranks>\d+(?:, ?\d+)*)")
_OP_LIMIT = 120  # characters of an op's name kept (TensorFlow's names run long)
# The name Horovod gives an op its caller left unnamed: its kind and the process's own
# running count of ops (horovod/torch/mpi_ops_v2.cc GetOpName: prefix + ".noname." + handle;
# horovod/mxnet/mpi_ops.cc the same with its op count). Two ranks' auto-named ops of one
# kind differ only in how many ops each process had issued before.
_AUTO_NAMED = re.compile(r"(?:^|[./])(?P<kind>[a-z_]+)\.noname\.(?P<handle>\d+)$")


def _stalled_op(op: str, ranks: tuple[int, ...], *, ready: bool = False) -> StalledOp:
    """One op of a stall report, with the kind and count of an auto-named op."""
    m = _AUTO_NAMED.search(op)
    if m is None:
        return StalledOp(op=op, ranks=ranks, ready=ready)
    kind, handle = m.group("kind"), int(m.group("handle"))
    return StalledOp(op=op, ranks=ranks, ready=ready, kind=kind, handle=handle)


# horovod/common/operations.cc SHUT_DOWN_ERROR, raised on every rank whose background thread
# stopped: "Horovod has been shut down. This was caused by an exception on one of the ranks
# or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished
# execution. …" (as TensorFlow's UnknownError/AbortedError, torch's HorovodInternalError).
# The rank that prints it lost its peers; the cause is another rank's (an echo, not a crash).
_SHUT_DOWN = re.compile(r"Horovod has been shut down\. This was caused by an exception on one")


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
# ("ready ranks": the one-line report of Horovod before mid-2018, which main's 0c80395
# reads.)
NEED = Need.words(("Horovod has been shut down", "missing ranks", "ready ranks"))


def match_horovod(text: str) -> Hit | None:
    """One stalled op of Horovod's stall warning, with the ranks that did not submit it;
    Horovod's shut-down error (a peer failed or finished)."""
    if not NEED.admits(text):
        return None
    if "Horovod has been shut down" in text and _SHUT_DOWN.search(text):
        lost = ConnectionLost(backend=Backend.HOROVOD, message="Horovod has been shut down")
        return Hit(EventKind.CONNECTION_LOST, payload=lost, key=("horovod_shutdown",))
    if "ready ranks" in text:
        return _ready_report(text)
    if "missing ranks" not in text:
        return None
    m = _MISSING.search(text)
    if m is None:
        return None
    ranks = tuple(int(r) for r in m.group("ranks").split(","))
    op = m.group("op")[-_OP_LIMIT:]
    missing = MissingRanks(
        ranks=ranks,
        op=op,
        library=Backend.HOROVOD,
        stalled=(_stalled_op(op, ranks),),
    )
    # One event per set of missing ranks: a stall lists every stalled tensor.
    return Hit(EventKind.MISSING_RANKS, payload=missing, key=("missing_ranks", ranks))


def _ready_report(text: str) -> Hit | None:
    """The old one-line report: every op with the ranks that had submitted it."""
    stalled = tuple(
        _stalled_op(
            m.group("op")[-_OP_LIMIT:],
            tuple(int(r) for r in m.group("ranks").split(",")),
            ready=True,
        )
        for m in _READY.finditer(text)
    )
    if not stalled:
        return None
    report = MissingRanks(op=stalled[0].op, library=Backend.HOROVOD, stalled=stalled)
    return Hit(EventKind.MISSING_RANKS, payload=report, key=("stalled_ready", stalled))


# Horovod ≥ 0.20's StallInspector (horovod/common/stall_inspector.cc,
# CheckForStalledTensors): the same warning, then "Stalled ranks:" and one line per rank
# that has not submitted, "6: [horovod_allreduce.0, horovod_allreduce.1, … ...]" ("6!:"
# when that rank is past the shut-down time). Under mpirun each line carries
# "[1,0]<stderr>:"; pasted bare, "6: " looks like an srun label, so the scanner passes the
# rank it peeled from there.
STALLED_HEADER = re.compile(r"(?:Stalled|Missing) ranks:\s*$")
_STALLED_LINE = re.compile(r"^\s*(?:(?P<rank>\d+)(?P<gone>!?): )?\[(?P<ops>[^\]]*)\]?\s*$")


@dataclass(slots=True)
class HorovodStallBlock:
    """The "Stalled ranks:" list of Horovod's stall inspector: the ranks the others wait for."""

    ranks: list[int] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    # Each listed rank's ops (" ..." marks a list Horovod cut after six).
    ops_of: dict[int, list[str]] = field(default_factory=dict)

    @staticmethod
    def start(text: str) -> HorovodStallBlock | None:
        return HorovodStallBlock() if STALLED_HEADER.search(text) else None

    def feed_tagged(self, text: str, peeled_rank: int | None) -> bool:
        """One line of the list (False ends it). ``peeled_rank``: the rank the prefix
        peeler took from a bare "6: " at the line's start."""
        m = _STALLED_LINE.match(text)
        if m is None:
            return False
        rank = m.group("rank")
        if rank is not None:
            listed = int(rank)
        elif peeled_rank is not None:
            listed = peeled_rank
        else:
            return False
        self.ranks.append(listed)
        ops = [op.strip().removesuffix("...").strip() for op in m.group("ops").split(",")]
        self.ops.append(ops[0])
        self.ops_of.setdefault(listed, []).extend(op[-_OP_LIMIT:] for op in ops if op)
        return True

    def finish(self) -> Hit | None:
        if not self.ranks:
            return None
        ranks = tuple(sorted(set(self.ranks)))
        missing_from: dict[str, set[int]] = {}
        for rank, ops in self.ops_of.items():
            for op in ops:
                missing_from.setdefault(op, set()).add(rank)
        stalled = tuple(_stalled_op(op, tuple(sorted(who))) for op, who in missing_from.items())
        missing = MissingRanks(
            ranks=ranks, op=self.ops[0][-_OP_LIMIT:], library=Backend.HOROVOD, stalled=stalled
        )
        return Hit(EventKind.MISSING_RANKS, payload=missing, key=("missing_ranks", ranks))
