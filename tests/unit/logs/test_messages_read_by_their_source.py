"""Messages given the meaning their source gives them, not the one their words suggest.

* CUDA's "invalid device ordinal" (cudaErrorInvalidDevice: "the device ordinal supplied by
  the user does not correspond to a valid CUDA device") is the rank's own request, not the
  GPU's or the driver's failure, nor communication's set-up where torch.cuda.set_device
  raises it; "CUDA driver version is insufficient" stays the driver's.
* The elastic agent's keep-alive heartbeat failing (dynamic_rendezvous.py _keep_alive) is
  sent only after the node joined the rendezvous: not a set-up that did not complete.
* A TCPStore connection reset by the store's end says the store was up and its host went
  away: set-up only where the traceback shows set-up.
* The agent's "Sending process P closing signal SIGHUP" alone: torch's agent forwards the
  signal it received (SimpleElasticAgent.run: ``self._shutdown(e.sigval)``); a worker's
  failure closes the others with the default SIGTERM.
* NCCL's "socketProgress: Connection closed by remote peer" on a running communicator
  (misc/socket.cc: recv(2) returned 0) is the peer's end closing: its process ended.

Paths, pids, hosts and times are made up; the formats are the sources' named above.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs.torch_pg import match_torch
from hangdoc.analyzer.payloads.torch_pg import StoreTimeout


def _findings(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    path = tmp_path / "worker.log"
    path.write_text(text, encoding="utf-8")
    return [(f.rule, str(f.category)) for f in analyze(load_paths([path])).findings]


def _primary(tmp_path: Path, text: str) -> tuple[str, str]:
    return _findings(tmp_path, text)[0]


# ---- CUDA's errors by cudaError_t's documentation ------------------------------------------
def _set_device(error: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 40, in <module>\n'
        "    torch.cuda.set_device(local_rank)\n"
        '  File "/env/lib/python3.11/site-packages/torch/cuda/__init__.py", line 399, in '
        "set_device\n"
        "    torch._C._cuda_setDevice(device)\n"
        f"RuntimeError: CUDA error: {error}\n"
    )


def test_an_invalid_device_ordinal_is_the_ranks_own_error(tmp_path: Path) -> None:
    found = _findings(tmp_path, _set_device("invalid device ordinal"))
    assert found[0] == ("HD030", "rank_dead_or_crashed")
    assert all(rule != "HD301" for rule, _ in found)


def test_a_driver_too_old_in_the_same_place_is_the_drivers(tmp_path: Path) -> None:
    text = _set_device("CUDA driver version is insufficient for CUDA runtime version")
    assert _primary(tmp_path, text) == ("HD301", "gpu_hardware_or_driver")


# ---- the rendezvous keep-alive and a store connection lost ----------------------------------
_KEEP_ALIVE = (
    "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node "
    "'node-a_3158_0' has failed to send a keep-alive heartbeat to the rendezvous "
    "'job-1' due to an error of type RendezvousConnectionError.\n"
)


def test_the_keep_alive_is_read_as_a_rendezvous_connection_sent_after_the_join() -> None:
    hit = match_torch(_KEEP_ALIVE.strip())
    assert hit is not None and isinstance(hit.payload, StoreTimeout)
    assert hit.payload.keep_alive
    joining = match_torch(
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection "
        "to the C10d store has failed. See inner exception for details."
    )
    assert joining is not None and isinstance(joining.payload, StoreTimeout)
    assert not joining.payload.keep_alive


def test_the_keep_alive_is_read_from_its_body_when_the_line_lost_its_start() -> None:
    # a paste's first line cut mid-way keeps the message's end, which says what it is
    cut = _KEEP_ALIVE.strip()[_KEEP_ALIVE.index("failed to s") + 11 :]
    hit = match_torch(cut)
    assert hit is not None and isinstance(hit.payload, StoreTimeout)
    assert hit.payload.keep_alive


def test_a_failed_keep_alive_is_no_set_up(tmp_path: Path) -> None:
    text = _KEEP_ALIVE * 3 + (
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 3463 closing "
        "signal SIGTERM\n"
    )
    assert all(rule != "HD201" for rule, _ in _findings(tmp_path, text))


def test_a_rendezvous_connection_error_while_joining_is_set_up(tmp_path: Path) -> None:
    text = (
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection "
        "to the C10d store has failed. See inner exception for details.\n"
    )
    assert ("HD201", "nccl_init_or_bootstrap_hang") in _findings(tmp_path, text)


_RESET = (
    "[rank6]:[W729 10:15:17.529361055 TCPStore.cpp:125] [c10d] recvValue failed on "
    "SocketImpl(fd=76, addr=[localhost]:60950, remote=[localhost]:29500): Connection reset "
    "by peer\n"
)


def test_a_store_connection_reset_alone_is_no_set_up(tmp_path: Path) -> None:
    assert all(rule != "HD201" for rule, _ in _findings(tmp_path, _RESET))


def test_a_store_connection_reset_under_init_process_group_is_set_up(tmp_path: Path) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 10, in <module>\n'
        "    dist.init_process_group('nccl')\n"
        '  File "/env/lib/python3.9/site-packages/torch/distributed/distributed_c10d.py", '
        "line 611, in init_process_group\n"
        "    default_pg = _new_process_group_helper(\n"
        "RuntimeError: Connection reset by peer\n"
    )
    assert _primary(tmp_path, text) == ("HD201", "nccl_init_or_bootstrap_hang")


# ---- the agent's closing signal --------------------------------------------------------------
def _closing(signal: str) -> str:
    return "".join(
        f"WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {pid} closing "
        f"signal {signal}\n"
        for pid in (102241, 102242)
    )


def test_closing_sighup_alone_is_the_launchers_own_sighup(tmp_path: Path) -> None:
    assert _primary(tmp_path, _closing("SIGHUP")) == ("HD050", "not_a_hang_slow_or_benign")


def test_closing_sigterm_alone_is_no_hang_up(tmp_path: Path) -> None:
    # the default a worker's failure or a restart closes the others with
    assert all(rule != "HD050" for rule, _ in _findings(tmp_path, _closing("SIGTERM")))


def test_closing_sighup_after_a_workers_failure_is_not_the_story(tmp_path: Path) -> None:
    # a worker that exited with an error first: the rank's death is the story
    text = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: "
        "0 (pid: 102241) of binary: /usr/bin/python3\n"
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 102242 closing "
        "signal SIGHUP\n"
    )
    found = _findings(tmp_path, text)
    assert found[0] == ("HD030", "rank_dead_or_crashed")
    assert all(rule != "HD050" for rule, _ in found)


# ---- NCCL's peer closing its end -------------------------------------------------------------
def _watchdog(last_error: str) -> str:
    return (
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread "
        "terminated with exception: NCCL error: remote process exited or there was a network "
        "error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.\n"
        "Last error:\n"
        f"{last_error}\n"
    )


def test_a_peer_closing_its_end_of_a_running_connection_is_its_end(tmp_path: Path) -> None:
    text = _watchdog("socketProgress: Connection closed by remote peer node-b.example<59116>")
    assert _primary(tmp_path, text) == ("HD200", "rank_dead_or_crashed")


def test_a_link_that_failed_stays_the_network(tmp_path: Path) -> None:
    text = _watchdog(
        "NET/IB : Got completion from peer 10.0.0.2<36130> with status=12 opcode=0 len=0 "
        "vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0"
    )
    assert _primary(tmp_path, text) == ("HD200", "nccl_network_or_transport_error")
