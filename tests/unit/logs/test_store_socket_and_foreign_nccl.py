# ruff: noqa: E501  (tables of real log lines read better unwrapped)
"""c10d store/socket errors and NCCL error strings inside other frameworks' exceptions.

Each line is a real paste (the public source named next to it) or is written from the
format string of the function that prints it (named next to it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs import recognise_line
from hangdoc.analyzer.parsers.logs.tb_stage import frame_stage
from hangdoc.analyzer.payloads.launch import CodeStage
from tests.unit.logs.helpers import fields

CASES: list[tuple[str, str | None, dict[str, object]]] = [
    # torch/csrc/distributed/c10d/socket.cpp SocketImpl::waitForInput:
    # C10D_WARNING("waitForInput: socket {} timed out after {}ms", *this, timeout.count()),
    # the socket formatted as SocketImpl(fd=…, addr=[h]:p, remote=[h]:p); documented format.
    (
        "[rank3]:[W1125 10:30:00.123456789 socket.cpp:487] [c10d] waitForInput: socket SocketImpl(fd=14, addr=[node3]:51872, remote=[node0]:29500) timed out after 1800000ms",
        "store_timeout",
        {"error": "store_read_timeout", "timeout_ms": 1800000, "peer": "node0", "port": 29500},
    ),
    # The same message as some pastes show it, with the socket printed empty.
    (
        "[rank7]:[W410 21:36:52.177160212 socket.cpp:485] [c10d] waitForInput: socket timed out after 300000ms",
        "store_timeout",
        {"error": "store_read_timeout", "timeout_ms": 300000},
    ),
    # torch 2.3-2.5's socket.cpp SocketImpl::waitForInput: poll() returning 0 fell through
    # to the errno check, C10D_WARNING("While waitForInput, poolFD failed with {}.", err)
    # with errno 0 (later releases warn "poll for socket … returned 0, likely a timeout"):
    # the store's reply did not come within the timeout. MedicalGPT #425's line.
    (
        "[rank3]:[W1001 13:40:02.778279096 socket.cpp:428] [c10d] While waitForInput, poolFD failed with (errno: 0 - Success).",
        "store_timeout",
        {"error": "store_read_timeout"},
    ),
    # Any other errno is poll() itself failing on the store's socket; documented format.
    (
        "[W socket.cpp:428] [c10d] While waitForInput, poolFD failed with (errno: 9 - Bad file descriptor).",
        "store_timeout",
        {"error": "store_connection", "message": "poll failed: Bad file descriptor"},
    ),
    # The warning before it is retried and not read.
    (
        "[rank7]:[W410 21:36:52.176066491 socket.cpp:460] [c10d] waitForInput: poll for socket SocketImpl(fd=5, addr=[localhost]:39284, remote=[localhost]:47115) returned 0, likely a timeout",
        None,
        {},
    ),
    # c10d/Utils.hpp tcputil::recvBytes "failed to recv, got 0 bytes", logged by TCPStore.cpp
    # as "recvValue failed on SocketImpl(…): …"; documented format.
    (
        "[W522 11:47:45.949247853 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=77, addr=[::ffff:127.0.0.1]:39732, remote=[::ffff:127.0.0.1]:29600): failed to recv, got 0 bytes",
        "store_timeout",
        {"error": "store_connection", "peer": "::ffff:127.0.0.1", "port": 29600},
    ),
    # torch >= 2.4 wording of the same, raised as DistNetworkError; documented format.
    (
        "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
        "store_timeout",
        {"error": "store_connection"},
    ),
    # Horovod horovod/common/ops/nccl_operations.cc NCCL_CHECK: op_name + " failed: " +
    # ncclGetErrorString(…); the TensorFlow form is quoted in horovod/horovod
    # docs/troubleshooting.md ("ncclCommInitRank failed: unhandled cuda error").
    (
        "UnknownError (see above for traceback): ncclCommInitRank failed: unhandled cuda error",
        "nccl_error",
        {
            "error_class": "ncclUnhandledCudaError",
            "where": "ncclCommInitRank",
            "foreign": "horovod",
        },
    ),
    # A collective's error: no "where" (not a setup call); documented format.
    (
        "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: remote process exited or there was a network error",
        "nccl_error",
        {"error_class": "ncclRemoteError", "call": "ncclAllReduce", "foreign": "horovod"},
    ),
    # cupy_backends/cuda/libs/nccl.pyx check_status: NcclError(status) prints
    # "NCCL_ERROR_<NAME>: <ncclGetErrorString>"; documented format.
    (
        "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_INVALID_USAGE: invalid usage (run with NCCL_DEBUG=WARN for details)",
        "nccl_error",
        {"error_class": "ncclInvalidUsage", "foreign": "cupy"},
    ),
    (
        "cupy.cuda.nccl.NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled cuda error",
        "nccl_error",
        {"error_class": "ncclUnhandledCudaError", "foreign": "cupy"},
    ),
    # XLA xla/service/gpu/nccl_utils.cc ToStatus: "%s:%d: NCCL operation %s failed: %s.
    # Last NCCL warning(error) log entry (may be unrelated) '%s'." (JAX); documented format.
    (
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error. Last NCCL warning(error) log entry (may be unrelated) 'socketStartConnect: Connect to 10.0.0.2<43517> failed : Connection refused'.",
        "nccl_error",
        {"error_class": "ncclSystemError", "where": "ncclCommInitRank", "foreign": "xla"},
    ),
    # tensorflow/core/nccl/nccl_manager.cc TranslateStatus, same words; documented format.
    (
        "tensorflow.python.framework.errors_impl.InternalError: tensorflow/core/nccl/nccl_manager.cc:612: NCCL operation ncclGroupEnd() failed: unhandled system error",
        "nccl_error",
        {"error_class": "ncclSystemError", "call": "ncclGroupEnd", "foreign": "xla"},
    ),
    # vLLM's ctypes binding (vllm/distributed/device_communicators/pynccl_wrapper.py
    # NCCL_CHECK) raises RuntimeError(f"NCCL error: {error_str}"); a caller logging the call
    # it made puts the call's name before it (vllm#18997, a worker's log).
    (
        "ERROR 05-30 22:22:26 [pynccl.py:153] ncclCommInitRank failed with error: NCCL error: internal error - please report this issue to the NCCL developers",
        "nccl_error",
        {"error_class": "ncclInternalError", "where": "ncclCommInitRank", "foreign": "binding"},
    ),
    (
        "ncclAllReduce failed with error: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "nccl_error",
        {"error_class": "ncclSystemError", "call": "ncclAllReduce", "foreign": "binding"},
    ),
    # A bare number is no NCCL error string: nothing to read (no class, no words).
    ("RuntimeError: ncclCommInitRank failed with error code 2", None, {}),
    # tensorpipe/common/socket.cc Socket::connect: TP_CREATE_ERROR(SystemError, "connect",
    # errno); SystemError::what() "<syscall>: <strerror>", Error::what() appends
    # " (this error originated at <file>:<line>)" (tensorpipe/common/error.cc).
    (
        "RuntimeError: connect: Connection refused (this error originated at tensorpipe/common/socket.cc:114)",
        "store_timeout",
        {"error": "rpc_connect", "backend": "tensorpipe"},
    ),
    # torch/csrc/distributed/rpc/tensorpipe_agent.cpp's pipeWrite callback: "RPC agent for
    # <name> encountered error when sending outgoing request #<id> to <remote>: " and
    # error.what(), the uv transport's UVError::what() "<uv_err_name>: <uv_strerror>"
    # (tensorpipe/transport/uv/error.cc): a connect refused or unreachable is the pipe's
    # connection failing, whether or not the "originated at" place follows.
    (
        "[W tensorpipe_agent.cpp:641] RPC agent for worker0 encountered error when sending outgoing request #0 to worker1: ECONNREFUSED: connection refused",
        "store_timeout",
        {"error": "rpc_connect", "backend": "tensorpipe"},
    ),
    (
        "[W tensorpipe_agent.cpp:687] RPC agent for trainer3 encountered error when sending outgoing request #12 to ps0: EHOSTUNREACH: host is unreachable (this error originated at tensorpipe/transport/uv/connection_impl.cc:132)",
        "store_timeout",
        {"error": "rpc_connect", "backend": "tensorpipe"},
    ),
    # A connection that was reset or closed later is no connect failure.
    (
        "[W tensorpipe_agent.cpp:641] RPC agent for worker0 encountered error when sending outgoing request #7 to worker1: ECONNRESET: connection reset by peer",
        None,
        {},
    ),
    (
        "[W tensorpipe_agent.cpp:641] RPC agent for worker0 encountered error when sending outgoing request #7 to worker1: EOF: end of file",
        None,
        {},
    ),
    # Another syscall's error is no connect failure.
    (
        "RuntimeError: accept: Too many open files (this error originated at tensorpipe/common/socket.cc:62)",
        None,
        {},
    ),
    # Not NCCL: a CUDA runtime call's error through Horovod's GPU context (cudaGetErrorString).
    (
        "horovod.common.exceptions.HorovodInternalError: cudaEventRecord failed: an illegal memory access was encountered",
        None,
        {},
    ),
]


@pytest.mark.parametrize(("line", "kind", "expected"), CASES)
def test_line(line: str, kind: str | None, expected: dict[str, object]) -> None:
    hit = recognise_line(line)
    if kind is None:
        assert hit is None or hit.kind.value not in ("store_timeout", "nccl_error"), hit
        return
    assert hit is not None, line
    assert hit.kind.value == kind
    got = fields(hit)
    for key, value in expected.items():
        assert got.get(key) == value, (key, got)


def test_collective_error_is_not_placed_at_setup() -> None:
    hit = recognise_line("RuntimeError: ncclAllReduce failed: unhandled system error")
    assert hit is not None and "where" not in fields(hit)


_TP = "connect: Resource temporarily unavailable (this error originated at tensorpipe/common/socket.cc:114)"
_RPC = "/opt/venv/lib/python3.10/site-packages/torch/distributed/rpc"


def test_a_tensorpipe_connect_failure_while_rpc_sets_up_is_set_up(tmp_path: Path) -> None:
    """init_rpc gathers the workers' names over RPC (rpc/api.py _all_gather, called from
    backend_registry.init_backend): a connect that fails then fails the set-up."""
    path = tmp_path / "worker.log"
    path.write_text(
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 40, in <module>\n'
        "    rpc.init_rpc(f'worker{rank}', rank=rank, world_size=world_size)\n"
        f'  File "{_RPC}/__init__.py", line 196, in init_rpc\n'
        f'  File "{_RPC}/backend_registry.py", line 101, in init_backend\n'
        f'  File "{_RPC}/api.py", line 222, in _all_gather\n'
        f"RuntimeError: {_TP}\n"
    )
    primary = analyze(load_paths([path])).primary
    assert primary.category.value == "nccl_init_or_bootstrap_hang"


def test_a_tensorpipe_connect_failure_after_collectives_ran_is_not_set_up(tmp_path: Path) -> None:
    """TensorPipe connects to a peer on its first message to it: once NCCL logged
    collectives running, a connect failure is not read as the set-up's."""
    path = tmp_path / "worker.log"
    path.write_text(
        "node1:8120:8131 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x55aa [nranks=2] stream 0x55bb\n"
        f"[W tensorpipe_agent.cpp:726] RPC agent for worker3 encountered an error: {_TP}\n"
    )
    findings = analyze(load_paths([path])).findings
    assert all(f.rule != "HD201" for f in findings)


def test_rpc_set_up_frames_name_the_set_up_stage() -> None:
    """torch.distributed.rpc's init_rpc (rpc/__init__.py, and _init_rpc_backend under it)
    sets up the agent; an exception raised under it is raised in set-up."""
    assert frame_stage(f'  File "{_RPC}/__init__.py", line 196, in init_rpc') is CodeStage.SETUP
    assert frame_stage(f'  File "{_RPC}/__init__.py", line 231, in _init_rpc_backend') is (
        CodeStage.SETUP
    )
    assert frame_stage(f'  File "{_RPC}/api.py", line 800, in rpc_sync') is None


def test_a_bindings_set_up_error_is_explained_as_the_bindings_not_torchs(tmp_path: Path) -> None:
    """HD206 names who raised the NCCL error string: vLLM's ctypes binding
    (pynccl_wrapper.py NCCL_CHECK), not torch's synchronous check, whose explanation it
    used to borrow."""
    path = tmp_path / "worker.log"
    path.write_text(
        "ERROR 05-30 22:22:26 [pynccl.py:153] ncclCommInitRank failed with error: NCCL error: "
        "internal error - please report this issue to the NCCL developers\n"
    )
    primary = analyze(load_paths([path])).primary
    assert primary.rule == "HD206"
    assert "raised by a framework's NCCL binding" in primary.explanation
    assert "in torch" not in primary.explanation
