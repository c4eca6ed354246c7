# ruff: noqa: E501  (tables of log lines read better unwrapped)
"""Readings that named a cause the evidence does not show (issue 21, precision): each test
pairs the line that misled a rule with the evidence that tells the readings apart, so a
rule that reads too much fails here and one that reads too little fails on the sibling.

Each line is written from the format string of the code that prints it (named beside
it), with made-up hosts, paths and numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs import recognise_line
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.nccl import NcclError
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import ConnectionLost, PeerLoss
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.meaning import meaning_of, tokens
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import events, parse


def _primary(tmp_path: Path, text: str) -> tuple[str | None, Category]:
    log = tmp_path / "console.txt"
    log.write_text(text)
    diagnosis = analyze(load_paths([log]))
    primary = diagnosis.primary
    if primary is None or diagnosis.verdict.value == "inconclusive":
        return None, Category.UNKNOWN
    return primary.rule, primary.category


# ---- an NCCL error of the abort at the process group's destruction -------------------
# torch's C10D_NCCL_CHECK (NCCLUtils.hpp): "NCCL error in: <__FILE__>:<__LINE__>, <error>,
# NCCL version <v>" then, on the next line, getNcclErrorDetailStr's failure reason;
# ~ProcessGroupNCCL passes "Process Group destroyed on rank <rank_>" to ncclCommAbort.
_CHECK = "  what():  NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181, unhandled cuda error, NCCL version 2.10.3\n"
_DESTROYED = "Process Group destroyed on rank 3\n"
_ABORT_FRAME = "Exception raised from ncclCommAbort at ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181 (most recent call first):\n"


def test_an_nccl_error_of_the_abort_at_teardown_is_no_set_up_failure(tmp_path: Path) -> None:
    log = tmp_path / "rank3.log"
    log.write_text(_CHECK + _DESTROYED + _ABORT_FRAME)
    parsed = parse(log)
    errors = [e.payload for _, e in events(parsed, "nccl_error")]
    assert len(errors) == 1 and isinstance(errors[0], NcclError) and errors[0].destroying
    # the reason itself is read as the teardown it reports, not as a rank's failed check
    assert [e.kind for _, e in events(parsed, "watchdog_teardown")] == [EventKind.WATCHDOG_TEARDOWN]
    assert _primary(tmp_path, _CHECK + _DESTROYED + _ABORT_FRAME) == (None, Category.UNKNOWN)


def test_the_same_error_with_no_teardown_reason_is_still_set_up(tmp_path: Path) -> None:
    """The sibling: torch's synchronous check after NCCL's own set-up lines of the same
    process (bootstrap.cc's interface line, printed while ncclCommInitRank runs) and with
    no reason of destruction stays HD206's. Alone, torch 2.x's check shows no stage (its
    C10D_NCCL_CHECK wraps a collective's launch as well as the communicator's creation)."""
    check = "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled cuda error, NCCL version 2.10.3\n"
    init = "node2:2231:2231 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>\n"
    assert _primary(tmp_path, init + check) == ("HD206", Category.NCCL_INIT)
    assert _primary(tmp_path, check) == (None, Category.UNKNOWN)


def test_the_teardown_reason_alone_names_no_crash(tmp_path: Path) -> None:
    """A paste cut inside the check's first words keeps only the reason: teardown."""
    cut = _CHECK[12:]
    assert _primary(tmp_path, cut + _DESTROYED + _ABORT_FRAME) == (None, Category.UNKNOWN)


# ---- gloo's pair: the peer's orderly close against a read error -----------------------
# gloo/transport/tcp/pair.cc Pair::read: recv(2) == 0 -> GLOO_ERROR_MSG("Connection closed
# by peer ", peer_.str()); recv(2) == -1 -> GLOO_ERROR_MSG("Read error ", peer_.str(), ": ",
# strerror(errno)).
@pytest.mark.parametrize(
    ("line", "loss"),
    [
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.7]:30872",
            PeerLoss.CONNECTION_CLOSED,
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:525] Read error [10.0.0.7]:42417: Connection reset by peer",
            PeerLoss.CONNECTION_RESET,
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:525] Read error [10.0.0.7]:42417: No route to host",
            PeerLoss.UNKNOWN,
        ),
    ],
)
def test_gloo_tells_the_peers_close_from_a_read_error(line: str, loss: PeerLoss) -> None:
    hit = recognise_line(line)
    assert hit is not None and hit.kind is EventKind.CONNECTION_LOST
    assert isinstance(hit.payload, ConnectionLost) and hit.payload.failure is loss


_RECV_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/work/job.py", line 20, in main_worker\n'
    "    dist.recv(buf, 0)\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 1002, in recv\n'
    "    pg.recv([tensor], src, tag).wait()\n"
)


@pytest.mark.parametrize(
    ("error", "p2p"),
    [
        # the peer closed its end (its process ended): no transfer left waiting
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.7]:30872\n",
            False,
        ),
        # a reset says less about the peer: the stack in recv still counts
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:525] Read error [10.0.0.7]:42417: Connection reset by peer\n",
            True,
        ),
    ],
)
def test_a_recv_that_met_its_peers_close_is_no_p2p_deadlock(
    tmp_path: Path, error: str, p2p: bool
) -> None:
    rule, category = _primary(tmp_path, _RECV_TRACEBACK + error)
    assert (category is Category.P2P_DEADLOCK) is p2p
    if p2p:
        assert rule == "HD048"


# ---- a checkpoint read back is no save ------------------------------------------------
@pytest.mark.parametrize(
    ("line", "meaning"),
    [
        # vLLM / SGLang weight_utils.safetensors_weights_iterator's tqdm desc
        (
            "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
            Activity.CHECKPOINT_LOAD,
        ),
        # transformers modeling_utils (from_pretrained)
        ("Loading checkpoint shards: 100%|##########| 2/2", Activity.CHECKPOINT_LOAD),
        ("resume_from_checkpoint", Activity.CHECKPOINT_LOAD),
        ("Saving checkpoint to /ckpt/step_100", Activity.CHECKPOINT_SAVE),
        ("saving the checkpoint loaded at start", Activity.CHECKPOINT_SAVE),
        ("persist", Activity.CHECKPOINT_SAVE),
    ],
)
def test_checkpoint_words_beside_a_load_mean_a_load(line: str, meaning: Activity) -> None:
    assert meaning_of(tokens(line)) is meaning


def test_a_timeout_after_loading_shards_is_no_save(tmp_path: Path) -> None:
    text = (
        "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]\n"
        # ProcessGroupNCCL.cpp's watchdog timeout (WorkNCCL::checkTimeout)
        "[rank3]:[E506 14:16:14.487575902 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600066 milliseconds before timing out.\n"
    )
    _, category = _primary(tmp_path, text)
    assert category is not Category.CHECKPOINT_SAVE


# ---- torch's store-based barrier entered, with no wait shown --------------------------
# distributed_c10d._store_based_barrier: logger.info("Added key: {} to store for rank: {}")
# then, every 10 s while it waits, logger.info("Waiting in store based barrier to
# initialize process group for rank: {}, key: {} (world_size={}, worker_count={},
# timeout={})").
_INIT = (
    "initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4\n"
    "initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/4\n"
)
_ADDED = "[2022-02-08 19:04:25,632][torch.distributed.distributed_c10d][INFO] - Added key: store_based_barrier_key:1 to store for rank: 1\n"
_WAITING = "[2022-02-08 19:04:35,640][torch.distributed.distributed_c10d][INFO] - Waiting in store based barrier to initialize process group for rank: 1, key: store_based_barrier_key:1 (world_size=4, worker_count=2, timeout=0:30:00)\n"


def test_the_barriers_entry_is_a_typed_marker() -> None:
    hit = recognise_line(_ADDED)
    assert hit is not None and hit.kind is EventKind.PHASE and hit.rank == 1
    assert isinstance(hit.payload, PhaseMarker) and hit.payload.store_key_added


@pytest.mark.parametrize(
    ("text", "init"),
    [
        (_INIT, True),  # the log's silence after the markers: the weak reading stays
        (_INIT + _ADDED, False),  # entered, no wait logged: the text ends within seconds
        (_INIT + _ADDED + _WAITING, True),  # the wait itself is shown
    ],
)
def test_a_barrier_entered_with_no_wait_logged_is_no_stuck_set_up(
    tmp_path: Path, text: str, init: bool
) -> None:
    rule, category = _primary(tmp_path, text)
    assert (category is Category.NCCL_INIT) is init, rule


# ---- the raylet's report of a lost worker ---------------------------------------------
# Ray src/ray/raylet/node_manager.cc: "A worker died or was killed while executing a task
# by an unexpected system error. …"; a caller's error on a dead actor: "The actor is dead
# because its worker process has died." (ActorDiedError).
_RAYLET = "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffff0a93627c01000000 Worker ID: 5a99 Node ID: 1537 Worker IP address: 10.0.0.18 Worker port: 42283 Worker PID: 909447 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.\n"
_CALLER = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR\n"


def test_the_raylets_report_is_signed_as_its_own() -> None:
    raylet, caller = recognise_line(_RAYLET), recognise_line(_CALLER)
    assert raylet is not None and Sign.RAYLET_WORKER_LOST in raylet.payload.signs
    assert caller is not None and Sign.RAYLET_WORKER_LOST not in caller.payload.signs


@pytest.mark.parametrize(
    ("text", "dead"),
    [
        (_RAYLET, False),  # any worker of the cluster: nothing shows the job waited on it
        (_CALLER, True),  # a caller met the dead actor
        (_RAYLET + _CALLER, True),
    ],
)
def test_a_lost_worker_alone_names_no_crash(tmp_path: Path, text: str, dead: bool) -> None:
    _, category = _primary(tmp_path, text)
    assert (category is Category.RANK_DEAD) is dead


@pytest.mark.parametrize(
    "wrapped",
    [
        # a paste wrapped at a word boundary (80, 120 columns): the key, or "rank: R", on
        # the next line, which the unmangler leaves apart ("rank: 1" reads as a record)
        _ADDED.replace(" store_based_barrier_key:1", "\nstore_based_barrier_key:1"),
        _ADDED.replace(" rank: 1", "\nrank: 1"),
    ],
)
def test_a_wrapped_barrier_entry_still_stops_the_silence_reading(
    tmp_path: Path, wrapped: str
) -> None:
    _, category = _primary(tmp_path, _INIT + wrapped)
    assert category is not Category.NCCL_INIT


def test_the_teardown_reason_joined_onto_the_error_is_read(tmp_path: Path) -> None:
    """A word wrap undone joins the reason onto the check's line: still teardown."""
    joined = _CHECK.rstrip("\n") + " " + _DESTROYED
    assert _primary(tmp_path, joined + _ABORT_FRAME) == (None, Category.UNKNOWN)
