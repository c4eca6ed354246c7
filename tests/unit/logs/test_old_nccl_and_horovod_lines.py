# ruff: noqa: E501  (tables of real log lines read better unwrapped)
"""NCCL ≤ 2.8 socket WARN lines, Horovod's launcher tag, and Open MPI's CMA message.

Each line is a real paste (the public source named next to it) or is written from the
format string of the function that prints it (named next to it).
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs import recognise_line
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from tests.unit.logs.helpers import fields

CASES: list[tuple[str, str | None, dict[str, object]]] = [
    # NCCL ≤ 2.8 include/socket.h socketProgressOpt: WARN("Call to recv failed : %s",
    # strerror(errno)), no peer; horovod/horovod#210 (no "NCCL" word before WARN).
    (
        "ml-gpu-ser015:2123:2230 [3] include/socket.h:194 WARN Call to recv failed : Connection reset by peer",
        "nccl_transport_error",
        {"error.tag": "connection_reset", "where": "include/socket.h:194"},
    ),
    # Current misc/socket.cc: "Net : Call to recv from %s failed : %s"; horovod/horovod#3611.
    (
        "worker-23:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 100.96.188.199<41468> failed : Connection timed out",
        "nccl_transport_error",
        {"error.tag": "timeout", "peer": "100.96.188.199", "port": 41468},
    ),
    # socket.h createListenSocket / connectAddress, every release: WARN("Net : Socket
    # creation failed : %s", strerror(errno)); NVIDIA/nccl#224 under mpirun's tag.
    (
        "[1,4]<stdout>:gpu7:4105:4372 [0] include/socket.h:318 NCCL WARN Net : Socket creation failed : Address family not supported by protocol",
        "nccl_transport_error",
        {"error.tag": "socket_creation_failed", "local": True},
    ),
    # The same WARN of NCCL ≤ 2.3 with its header cut: NVIDIA/nccl#210.
    (
        "include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol",
        "nccl_transport_error",
        {"error.tag": "socket_creation_failed", "partial_header": True},
    ),
    # transport/net_socket.cc persistentSocketThread: WARN("NET/Socket : socket progress
    # error"); horovod/horovod#3611 (host cut to "23").
    (
        "23:83:2526 [0] transport/net_socket.cc:219 NCCL WARN NET/Socket : socket progress error",
        "nccl_transport_error",
        {"error.tag": "socket_progress"},
    ),
    # horovod/common/operations.cc SHUT_DOWN_ERROR as TensorFlow raises it: a peer's echo.
    (
        "tensorflow.python.framework.errors_impl.UnknownError:  Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an exception, you should see the exception in the log before the first shutdown message.",
        "connection_lost",
        {"backend": "horovod"},
    ),
    # A bare "file:line WARN" that is no NCCL source path stays unread.
    ("app/main.py:12 WARN disk almost full", None, {}),
]


@pytest.mark.parametrize(("line", "kind", "expected"), CASES)
def test_line(line: str, kind: str | None, expected: dict[str, object]) -> None:
    hit = recognise_line(line)
    if kind is None:
        assert hit is None or not hit.kind.value.startswith("nccl")
        return
    assert hit is not None and hit.kind.value == kind
    got = fields(hit)
    for key, value in expected.items():
        assert got.get(key) == value, key


@pytest.mark.parametrize(
    ("line", "rank", "rest"),
    [
        # horovod/runner/common/util/safe_shell_exec.py forward_stream:
        # '{time}[{rank}]<{prefix}>:{line}', time only with --timestamp-output.
        ("[3]<stderr>:host:1:2 [0] NCCL INFO x", 3, "host:1:2 [0] NCCL INFO x"),
        ("Mon Jul 20 10:00:00 2020[0]<stdout>:Epoch 1/24", 0, "Epoch 1/24"),
        # The same tag after Markdown ate "<stderr>" (horovod/horovod#3611).
        (
            "[15]worker-23:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : x",
            15,
            "worker-23:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : x",
        ),
        # Open MPI's own tag keeps working.
        ("[1,4]<stdout>:gpu7:4105:4372 [0] NCCL INFO x", 4, "gpu7:4105:4372 [0] NCCL INFO x"),
    ],
)
def test_horovod_launcher_tag(line: str, rank: int, rest: str) -> None:
    tag = peel_line(line)
    assert (tag.rank, tag.text) == (rank, rest)


def test_a_bare_number_before_other_text_is_no_horovod_tag() -> None:
    assert peel_line("[15]not a header").rank is None
