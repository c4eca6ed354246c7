# ruff: noqa: E501  (tables of log lines read better unwrapped)
"""Setup-time connect failures: the store's, gloo's full mesh's, NCCL's socket connects and
proxy requests.

Each line is written from the format string of the function that prints it (named next
to it): documented formats, with made-up hosts, ports and ranks.
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs import recognise_line
from tests.unit.logs.helpers import fields

CASES: list[tuple[str, str | None, dict[str, object]]] = [
    # torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::tryConnect: recordError("The
    # client socket has failed to connect to {} {}.", addr, err), a C10D_WARNING whose
    # std::error_code prints as "(errno: N - strerror)"; addr as "[host]:port".
    (
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [::ffff:192.0.2.7]:29400 (errno: 110 - Connection timed out).",
        "store_timeout",
        {"error": "store_unreachable", "peer": "::ffff:192.0.2.7", "port": 29400},
    ),
    (
        "[rank3]:[W1125 10:30:00.123456789 socket.cpp:752] [c10d] The client socket has failed to connect to [master-node]:23456 (errno: 113 - No route to host).",
        "store_timeout",
        {"error": "store_unreachable", "peer": "master-node", "port": 23456},
    ),
    # torch < 2.0 printed the address without brackets.
    (
        "[W socket.cpp:558] [c10d] The client socket has failed to connect to 198.51.100.4:29500 (errno: 101 - Network is unreachable).",
        "store_timeout",
        {"error": "store_unreachable", "peer": "198.51.100.4", "port": 29500},
    ),
    # The IPv6 try on a host without IPv6 (errno 97, 99) is followed by the IPv4 address
    # that answers: harmless, not read.
    (
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:12355 (errno: 97 - Address family not supported by protocol).",
        None,
        {},
    ),
    (
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [::ffff:127.0.0.1]:29500 (errno: 99 - Cannot assign requested address).",
        None,
        {},
    ),
    # The error c10d throws once every address failed stays what it was.
    (
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (node-a, 29500). The client socket has failed to connect to node-a:29500 (errno: 110 - Connection timed out).",
        "store_timeout",
        {"error": "store_connect", "peer": "node-a", "port": 29500},
    ),
    # NCCL 2.19-2.21 src/misc/socket.cc socketPollConnect: WARN("socketPollConnect: Connect
    # to %s returned %d(%s) errno %d(%s)", …) for a connect error it does not retry.
    (
        "gpu-a:1201:1201 [3] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 192.0.2.9<40211> returned 101(Network is unreachable) errno 115(Operation now in progress)",
        "nccl_transport_error",
        {"error.connect": True, "error.failure": "unreachable", "where": "misc/socket.cc:533"},
    ),
    # NCCL 2.22 on, the same function's poll() of the connecting socket (misc/socket.cc:
    # WARN("socketPollConnect poll() returned %d%s", ret, … ", no POLLOUT events"), and
    # WARN("socketPollConnect poll() failed with error %s", …)): socketPollConnect polls
    # only a connect in progress, so these are connects that failed too.
    (
        "gpu-a:1201:1201 [3] misc/socket.cc:583 NCCL WARN socketPollConnect poll() returned 1, no POLLOUT events",
        "nccl_transport_error",
        {"error.connect": True, "where": "misc/socket.cc:583"},
    ),
    (
        "gpu-a:1201:1201 [3] misc/socket.cc:580 NCCL WARN socketPollConnect poll() failed with error Interrupted system call",
        "nccl_transport_error",
        {"error.connect": True},
    ),
    # NVIDIA/nccl src/proxy.cc: a rank's own request to a proxy thread failed, i.e. setup
    # work (ncclProxyCallBlocking, 2.12-2.17: WARN("Proxy Call to rank %d failed (%s)", …,
    # ncclProxyMsgTypeStr[type]); ncclPollProxyResponse, 2.18 on: WARN("Socket recv failed
    # while polling for opId=%p", opId)) …
    (
        "gpu-a:1201:1290 [3] proxy.cc:1078 NCCL WARN Proxy Call to rank 2 failed (Setup)",
        "nccl_transport_error",
        {"error.failure": "proxy", "error.proxy_request": True, "error.proxy_op": "Setup"},
    ),
    (
        "gpu-a:1201:1290 [3] proxy.cc:1385 NCCL WARN Socket recv failed while polling for opId=0x7f5e2c001a40",
        "nccl_transport_error",
        {"error.failure": "proxy", "error.proxy_request": True},
    ),
    # … while the proxy service's own failure to serve a peer is not the rank's request
    # (proxy.cc: WARN("[Proxy Service %d] Failed to execute operation %s from rank %d,
    # retcode %d", …)).
    (
        "gpu-a:1201:1291 [3] proxy.cc:1518 NCCL WARN [Proxy Service 3] Failed to execute operation Connect from rank 2, retcode 3",
        "nccl_transport_error",
        {"error.failure": "proxy", "error.proxy_request": False, "error.proxy_op": "Connect"},
    ),
    # gloo/transport/tcp/helpers.h ConnectOperation: TimeoutError("timed out connecting: " +
    # SystemError("SO_ERROR", result, remote_).what()), SystemError::what() being
    # "<syscall>: <strerror>, remote=<addr>" (gloo/transport/tcp/error.cc), wrapped by
    # ProcessGroupGloo as "Gloo connectFullMesh failed with <what>".
    (
        "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:1012] timed out connecting: SO_ERROR: Connection refused, remote=[10.1.2.3]:47001",
        "store_timeout",
        {
            "error": "gloo_connect",
            "peer": "10.1.2.3",
            "port": 47001,
            "message": "Connection refused",
        },
    ),
    # The same, hard-wrapped by a paste before ", remote=": the error without its address.
    (
        "[rank5] timed out connecting: SO_ERROR: No route to host,",
        "store_timeout",
        {"error": "gloo_connect", "message": "No route to host"},
    ),
    # gloo's older pair.cc wording is read as before.
    (
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [10.1.2.3]:35807: Connection refused",
        "store_timeout",
        {"error": "gloo_connect", "peer": "10.1.2.3", "port": 35807},
    ),
]


@pytest.mark.parametrize(("line", "kind", "expected"), CASES)
def test_line(line: str, kind: str | None, expected: dict[str, object]) -> None:
    hit = recognise_line(line)
    if kind is None:
        assert hit is None or hit.kind.value != "store_timeout", hit
        return
    assert hit is not None, line
    assert hit.kind.value == kind
    got = fields(hit)
    for key, value in expected.items():
        assert got.get(key) == value, (key, got)
