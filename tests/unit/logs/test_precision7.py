# ruff: noqa: E501  (log lines read better unwrapped)
"""Readings that named a cause their evidence does not claim (issue 21, precision at
first sight; branch precision7): each test pairs the evidence that misled a rule with the
sibling that must keep the reading.

Lines are written from the format strings of the code that prints them (named beside
each), with made-up hosts, paths and numbers.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Strength
from hangdoc.analyzer.parsers.logs.torch_pg import match_torch
from hangdoc.analyzer.payloads.torch_pg import MonitoredBarrier


def _diagnose(tmp_path: Path, text: str) -> Diagnosis:
    log = tmp_path / "console.txt"
    log.write_text(text)
    return analyze(load_paths([log]))


# ---- a monitored barrier's singular report names the first missing rank only ----------
# ProcessGroupGloo::monitoredBarrier: without waitAllRanks it throws "[Rank 0]: Rank N
# failed to pass monitoredBarrier in T ms" at the first rank whose recv failed; with it,
# "[Rank 0]: Ranks a, b failed to pass monitoredBarrier in T ms".
def test_singular_monitored_barrier_is_first_only() -> None:
    one = match_torch("RuntimeError: [Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms")
    every = match_torch(
        "RuntimeError: [Rank 0]: Ranks 3, 5 failed to pass monitoredBarrier in 30000 ms"
    )
    assert one is not None and every is not None
    first = one.payload
    listed = every.payload
    assert isinstance(first, MonitoredBarrier) and isinstance(listed, MonitoredBarrier)
    assert (first.ranks, first.first_only) == ((3,), True)
    assert (listed.ranks, listed.first_only) == ((3, 5), False)


def test_singular_report_is_a_signal_the_full_list_a_statement(tmp_path: Path) -> None:
    one = _diagnose(
        tmp_path, "RuntimeError: [Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms\n"
    )
    every = _diagnose(
        tmp_path, "RuntimeError: [Rank 0]: Ranks 3, 5 failed to pass monitoredBarrier in 30000 ms\n"
    )
    first = next(f for f in one.findings if f.rule == "HD037")
    listed = next(f for f in every.findings if f.rule == "HD037")
    assert first.culprit_ranks == (3,) and first.strength == Strength.SIGNAL
    assert "never" in first.explanation  # the ranks above it were never checked
    assert listed.culprit_ranks == (3, 5) and listed.strength == Strength.STATED


# ---- Horovod's stall check: who is missing, not why -----------------------------------
# horovod/common/stall_inspector.cc: the warning, then "Missing ranks:" and "R: [op, …]".
_STALL = (
    "[2023-06-26 07:23:58.477178: W /tmp/horovod/common/stall_inspector.cc:107] One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. \n"
    "Missing ranks:\n"
    "{body}"
)


def test_stall_check_alone_names_the_rank_not_a_cause(tmp_path: Path) -> None:
    diagnosis = _diagnose(tmp_path, _STALL.format(body="2: [allreduce.loss, allreduce.acc]\n"))
    primary = diagnosis.findings[0]
    assert primary.category is Category.UNKNOWN
    stall = next(f for f in diagnosis.findings if f.rule == "HD037")
    assert stall.category is Category.UNKNOWN and stall.culprit_ranks == (2,)


def test_stall_check_with_ranks_out_of_step_stays_a_divergence(tmp_path: Path) -> None:
    # Horovod's own names, one kind at different counts (GetOpName): out of step.
    body = "0: [broadcast.noname.3765, broadcast.noname.3873]\n1: [broadcast.noname.3873]\n2: [broadcast.noname.3765]\n3: [broadcast.noname.3765]\n"
    diagnosis = _diagnose(tmp_path, _STALL.format(body=body))
    stall = next(f for f in diagnosis.findings if f.rule == "HD037")
    assert stall.category is Category.RANK_DIVERGENCE


# ---- a peer that closed its connection, with no stage shown ----------------------------
# torch's C10D_NCCL_CHECK (NCCLUtils.hpp) then NCCL's last error (misc/socket.cc
# socketProgress: "Connection closed by remote peer %s").
_REMOTE = (
    "[rank3]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.20.5\n"
    "[rank3]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
    "[rank3]: Last error:\n"
    "[rank3]: socketProgress: Connection closed by remote peer node7<40484>\n"
)


def test_peer_closed_alone_is_no_network_finding(tmp_path: Path) -> None:
    finding = next(f for f in _diagnose(tmp_path, _REMOTE).findings if f.rule == "HD200")
    assert finding.category is Category.UNKNOWN


def test_peer_closed_after_training_ran_is_the_peers_end(tmp_path: Path) -> None:
    # HF Trainer's step report before it: the communicator had worked, and the peer closed
    # its end of a running connection (recv(2) returned 0): its process ended, not a link.
    steps = "{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.5}\n" * 2
    finding = next(f for f in _diagnose(tmp_path, steps + _REMOTE).findings if f.rule == "HD200")
    assert finding.category is Category.RANK_DEAD


def test_ib_completion_error_alone_stays_the_network(tmp_path: Path) -> None:
    # transport/net_ib.cc: "NET/IB : Got completion from peer %s with error %d, opcode %d,
    # len %d, vendor err %d": only a transfer on a connected queue pair completes so.
    line = "node1:123:456 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<51234> with error 12, opcode 0, len 0, vendor err 129 (Send)\n"
    finding = next(f for f in _diagnose(tmp_path, line).findings if f.rule == "HD200")
    assert finding.category is Category.NCCL_NETWORK
