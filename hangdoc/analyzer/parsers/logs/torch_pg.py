"""torch.distributed messages (FORMATS.md §2): ProcessGroupNCCL watchdog and heartbeat
across torch 1.13 → 2.13, NCCL errors surfaced in Python, TORCH_DISTRIBUTED_DEBUG=DETAIL
fingerprint mismatches, monitored barriers, store/rendezvous timeouts, gloo errors.

Messages are matched on their stable cores (``Watchdog caught collective operation
timeout``, ``WorkNCCL(``, ``last enqueued``) with ``search``, never on whole lines: the
header and process-group prefix changed shape in almost every release, and interleaved
consoles splice lines together.
"""

from __future__ import annotations

import re
from dataclasses import replace

from hangdoc.analyzer.parsers.logs.hit import Hit, as_int
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.nccl import CollectiveMismatch, MismatchSource, NcclError
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import (
    Backend,
    CollectiveTimeout,
    ConnectionLost,
    Direction,
    DumpSignal,
    Fingerprint,
    Foreign,
    HeartbeatTimeout,
    MonitoredBarrier,
    NcclResult,
    PeerLoss,
    Reporter,
    StoreError,
    StoreTimeout,
    TimeoutSource,
    WatchdogStatus,
    WatchdogTeardown,
)
from hangdoc.analyzer.vocabulary import GAI_NAME_ERROR, EventKind, Phase

_PG_PREFIX = re.compile(
    r"\[PG ID (?P<id>\d+) PG GUID (?P<guid>[^\s(\]]+)(?:\((?P<desc>[^)]*)\))? Rank (?P<rank>\d+)\]"
    r"|\[PG (?P<id2>\d+)(?: \((?P<desc2>[^)]*)\))? Rank (?P<rank2>\d+)\]"
    r"|\[Rank (?P<rank3>\d+)\]"
)
_WORK_KV = re.compile(r"(\w+(?:\(ms\))?)=([^,)\s]+)")
_WORK = re.compile(r"Work\w*\(")
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout")
_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_BLOCKING = re.compile(r"Work (?:Work\w*\(.*?\)|\S+) timed out in blocking wait")
_STATUS_OLD = re.compile(
    r"(?:Exception \(either an error or timeout\) detected by watchdog at work|Timeout at NCCL "
    r"work)"
    r": (?P<seq>-?\d+), last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: "
    r"(?P<done>-?\d+)"
)
_STATUS_NEW = re.compile(
    r"failure detected by watchdog at work sequence id: (?P<seq>-?\d+) PG status: "
    r"last enqueued work: (?P<enq>-?\d+), last completed work: (?P<done>-?\d+)"
)
_DUMP_RECEIVED = re.compile(
    r"Received a dump signal due to a collective timeout from (?:this local rank|\s*rank "
    r"(?P<from>\d+))"
    r"(?:.*?Last enqueued NCCL work: (?P<enq>-?\d+), last completed NCCL work: (?P<done>-?\d+))?"
)
_DUMP_OTHER = re.compile(
    r"First PG on this rank to signal dumping|Observed flight recorder dump signal from another "
    r"rank"
)
_HEARTBEAT = re.compile(r"Heartbeat monitor timed out|watchdog got stuck for (?P<secs>\d+) seconds")
_TEARDOWN = re.compile(
    r"Some NCCL operations have failed or timed out|To avoid data inconsistency, we are taking"
    r"|watchdog thread terminated with exception|Terminating the process after attempting to dump"
    r"|ProcessGroupNCCL preparing to dump debug info"
)
_ASYNC = re.compile(r"raised the following async exception: (?:NCCL error: )?(?P<what>.*)")
# NCCLUtils: a communicator aborted by the watchdog (after a timeout or an error on this or
# another rank); "rank" is the communicator's (group) rank, the reason is the first error.
_ABORTED = re.compile(
    r"NCCL communicator was aborted on rank (?P<rank>\d+)\.?"
    r"(?:\s+Original reason for failure was: (?P<why>.*))?"
)
_NCCL_ERROR_IN = re.compile(
    r"NCCL error in: (?P<where>[\w./\-]+:\d+), (?P<what>.*?)(?:, NCCL version (?P<ver>[\d.]+\S*))?$"
)
# c10d/NCCLUtils.hpp C10D_NCCL_CHECK_TIMEOUT*: a non-blocking NCCL call (communicator
# init, split, the group end that connects it) still ncclInProgress after
# TORCH_NCCL_NONBLOCKING_TIMEOUT: "NCCL timeout in: …NCCLUtils.hpp:N[, NCCL operation in progress]".
_NCCL_TIMEOUT_IN = re.compile(r"NCCL timeout in: (?P<where>[\w./\-]+:\d+)(?:, (?P<what>.*))?")
_NCCL_CLASS = re.compile(
    r"\b(?P<cls>ncclSystemError|ncclInternalError|ncclRemoteError|ncclUnhandledCudaError|"
    r"ncclInvalidUsage|ncclInvalidArgument|ncclInProgress|ncclTimeout)\b:? ?(?P<what>.*)"
)
# NCCL's own error strings (ncclGetErrorString, NVIDIA/nccl src/init.cc; older releases
# said "system error") inside other frameworks' exceptions. Horovod's NCCL_CHECK
# (horovod/common/ops/nccl_operations.cc) reports "<op_name> failed: <string>"
# ("ncclCommInitRank failed: unhandled cuda error", raised as TensorFlow's UnknownError or
# Python's HorovodInternalError); cupy's check_status (cupy_backends/cuda/libs/nccl.pyx)
# raises "NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled cuda error" (cupy < 8:
# cupy.cuda.nccl.NcclError), which Ray collective, vLLM < 0.4 and alpa surface; XLA (JAX)
# and TensorFlow's NCCL wrappers (xla/service/gpu/nccl_utils.cc ToStatus,
# tensorflow/core/nccl/nccl_manager.cc TranslateStatus) say "<file>:<line>: NCCL operation
# <expr> failed: <string>[. Last NCCL warning(error) log entry …]", the expr being the call
# with its arguments ("ncclCommInitRank(&comm, nranks, id, rank)"). vLLM's and SGLang's
# ctypes bindings (vllm/distributed/device_communicators/pynccl_wrapper.py NCCL_CHECK)
# raise RuntimeError(f"NCCL error: {error_str}") with the same string, which a caller that
# logs the call it made prints after it: "ncclCommInitRank failed with error: NCCL error:
# internal error - please report this issue to the NCCL developers" (vllm#18997).
_NCCL_STRINGS = (
    r"(?:unhandled )?(?:cuda|system) error|internal error|invalid argument|invalid usage"
    r"|remote process exited or there was a network error|NCCL operation in progress"
)
_FOREIGN_NCCL = re.compile(
    r"(?P<xla>NCCL operation )?\b(?P<call>nccl[A-Z]\w*)(?:\(.*?\))? failed(?: with error)?: "
    r"(?P<binding>NCCL error: )?(?P<what>(?:" + _NCCL_STRINGS + r").*)"
    r"|\bNcclError: NCCL_ERROR_(?P<code>[A-Z_]+)(?::\s*(?P<what2>.*))?"
)
# ncclResult_t names of cupy's NCCL_ERROR_* codes.
_NCCL_CODES = {
    "UNHANDLED_CUDA_ERROR": "ncclUnhandledCudaError",
    "SYSTEM_ERROR": "ncclSystemError",
    "INTERNAL_ERROR": "ncclInternalError",
    "INVALID_ARGUMENT": "ncclInvalidArgument",
    "INVALID_USAGE": "ncclInvalidUsage",
    "REMOTE_ERROR": "ncclRemoteError",
    "IN_PROGRESS": "ncclInProgress",
    "TIMEOUT": "ncclTimeout",
}
# NCCL calls that create a communicator: an error they return is a setup failure.
_NCCL_INIT_CALLS = re.compile(r"ncclCommInit\w*|ncclCommSplit|ncclGetUniqueId")
_DETAIL = re.compile(r"Detected mismatch between collectives on ranks")
_FP_SPLIT = re.compile(r",?\s*but Rank (\d+) is running collective:\s*")
_FP_SELF = re.compile(r"Rank (\d+) is running (?:inconsistent )?collective:\s*")
_FP_KEYS = {
    "seq": re.compile(r"SequenceNumber=(\d+)"),
    "op": re.compile(r"OpType=([A-Z_]+)"),
    "shape": re.compile(r"TensorShape=(\[[^\]]*\])"),
    "dtype": re.compile(r"TensorDtypes=(\w+)"),
    "device": re.compile(r"device=(\w+)"),
}
_DIFFER = re.compile(r"Collectives differ in the following aspects:\s*(.*)")
_MONITORED = re.compile(
    r"Rank(?P<all>s)? (?P<ranks>\d+(?:\s*,\s*\d+)*) failed to pass monitoredBarrier in "
    r"(?P<ms>\d+) ms"
    r"|Rank (?P<self>\d+) timed out in monitoredBarrier"
)
# ProcessGroupGloo::monitoredBarrier on a rank other than 0: it sent to rank 0 and never
# heard back, so it names rank 0 ("Please check rank 0 logs for faulty rank"): rank 0
# had not reached the barrier, or it reported another rank. The reporter is not a culprit.
# Seen in xtuner #944 (RuntimeError of rank 2) and CosyVoice #1727 ([rank1]:[E
# ProcessGroupGloo.cpp:144] …).
_MONITORED_PEER = re.compile(
    r"Rank (?P<self>\d+) successfully reached monitoredBarrier, but received errors while "
    r"waiting for send/recv from rank (?P<root>\d+)"
)
# Trainers that use a monitored barrier as a per-step join check print its error inside
# their own message: wenet's wenet_join "Detected uneven workload distribution: <error>",
# CosyVoice's "model.join() exit failed, some ranks may have exited early: <error>".
_JOIN_CONTEXT = re.compile(r"uneven workload|\bjoin\(\)|exited early|exhausted")
_STORE_CLIENTS = re.compile(
    r"Timed out after (?P<secs>\d+) seconds waiting for clients\. (?P<joined>\d+)/(?P<total>\d+) "
    r"clients joined"
)
_STORE_WAIT = re.compile(
    r"wait timeout after (?P<ms>\d+)ms, keys: (?P<keys>.*)"
    r"|Timeout waiting for key: (?P<key2>\S+) after (?P<ms2>\d+) ms"
)
_STORE_CONNECT = re.compile(
    r"client socket has timed out after (?P<n>\d+)(?P<unit>ms|s) while trying to connect to "
    r"\((?P<addr>[^,)]+), (?P<port>\d+)\)"
)
# c10d's socket layer (torch/csrc/distributed/c10d/socket.cpp, SocketConnectOp/SocketListenOp),
# used by TCPStore and the c10d rendezvous: the errors it throws once it gives up. Its
# per-address warnings ("failed to connect to [h]:p (errno: 99 …)", "IPv6 network
# addresses … cannot be retrieved", "No socket on (h, p) is listening yet, will retry") are
# retried and are normal while the server starts, so they are not read. torch ≤ 1.11
# (c10d/socket.cpp of that time, tcputils) said "connect() timed out. Original timeout was
# N ms." and threw a bare "Address already in use".
_SOCKET_GAVE_UP = re.compile(
    r"The client socket has failed to connect to any network address of "
    r"\((?P<addr>[^,)]+), (?P<port>\d+)\)\.?(?P<rest>.*)"
    r"|The server socket has failed to (?:listen on any local network address|bind to "
    r"(?P<bind>\S+))(?P<rest2>.*)"
    r"|connect\(\) timed out\. Original timeout was (?P<ms>\d+) ms"
    r"|(?:RuntimeError|DistNetworkError|SocketError|DistStoreError): (?:\[[^\]]*\] ?)?"
    r"(?P<inuse>Address already in use)"
)
# The address of the store's host could not be resolved (getaddrinfo failed). The IPv6-only
# variant is the harmless one (a host without IPv6 addresses: SocketConnectOp::run tries
# AF_INET6, then AF_INET), so it is not read, unless the host it names cannot be a host
# name at all (a file path, an unexpanded "$MASTER_ADDR", a URL: see
# _cannot_resolve): then no family resolves it and the IPv4 try fails the same way. Before
# c10d/socket.cpp, torch's tcputil::connect (torch/lib/c10d/Utils.cpp, which only the
# TCPStore client, also the c10d rendezvous's store, calls) threw std::invalid_argument("host not
# found: " + gai_strerror(err)) without the address, which pybind11 raises as ValueError;
# the words are read only with a glibc gai_strerror text after them.
_STORE_RESOLVE = re.compile(
    r"The (?:IPv4 |(?P<v6>IPv6 ))?network addresses of \((?P<addr>[^,)]+), (?P<port>\d+)\) "
    r"cannot be retrieved \(gai error: (?P<why>[^)]*)\)"
    rf"|\bhost not found: (?P<why2>{GAI_NAME_ERROR})"
)
# What getaddrinfo can resolve: a DNS name (letters, digits, hyphens, underscores and dots:
# RFC 1123 §2.1, with the underscores resolvers let through), an IPv4 address, an IPv6
# address (hex digits and colons, a "%zone" suffix, brackets). A host with any other
# character (a "/" of a path, "$" or braces of an unexpanded variable, a URL's "://") is
# no address of any family: no name service holds such a name (glibc's DNS resolver
# checks a name with res_hnok before it asks), so every family's lookup fails.
_HOST_NAME = re.compile(r"\[?[A-Za-z0-9._:%-]+\]?")


def _cannot_resolve(m: re.Match[str]) -> bool:
    """A resolve failure that says the store's address is unreachable: every family's, and
    the IPv6 try's only where the host is no host name (then IPv4 fails the same way)."""
    return m.group("v6") is None or _HOST_NAME.fullmatch(m.group("addr").strip()) is None


# One address of the store that c10d's client could not reach: SocketConnectOp::tryConnect
# (torch/csrc/distributed/c10d/socket.cpp, torch 1.12 to today) retries a refused, reset or
# aborted connect ("not yet listening", the server has not started) and records every other
# error with recordError("The client socket has failed to connect to {} {}.", addr, err),
# a warning ("[W socket.cpp:663] [c10d] … to [::ffff:10.0.0.1]:29500 (errno: 110 -
# Connection timed out).") that the final "failed to connect to any network address"
# collects. A connect that timed out or found no route says the address is unreachable from
# this node (a wrong MASTER_ADDR, a firewall, the wrong interface); errno 97/99 (an IPv6
# address on a host without IPv6) is the harmless try before IPv4 and is not read.
_STORE_UNREACHABLE = re.compile(
    r"The client socket has failed to connect to (?P<addr>\[[^\]\s]+\]|[^\s:]+):(?P<port>\d+) "
    r"\(errno: (?P<errno>110|113|101) - (?P<why>[^)]*)\)"
)
# Gloo builds its full mesh of TCP pairs when the process group is created
# (ProcessGroupGloo: "Gloo connectFullMesh failed with …"; gloo/transport/tcp/pair.cc:
# "connect [10.1.2.3]:35807: Connection refused"): a peer that is not listening or not
# reachable on the interface gloo chose (GLOO_SOCKET_IFNAME). Gloo since 2023 connects
# through its loop (gloo/transport/tcp/helpers.h ConnectOperation) and, once its retries
# run out, fails with TimeoutError("timed out connecting: " + SystemError("SO_ERROR", …)
# .what()), which reads "timed out connecting: SO_ERROR: Connection refused,
# remote=[127.0.0.1]:14215" (gloo/transport/tcp/error.cc SystemError::what); a paste
# hard-wrapped before ", remote=" keeps the error without the address. Between those
# (facebookincubator/gloo 31b1f02, 2023-05, to 5ca057d "gloo: fix error what", 2025-02)
# the connect callback took its error by value (Pair::connectCallback(…, Error error)),
# which sliced the SystemError/TimeoutError to the base class, whose what() is "no error"
# (gloo/transport/tcp/error.cc): a pair's connect that failed during connectFullMesh then
# prints "[…/gloo/transport/tcp/pair.cc:144] no error", its reason lost (torch 2.1–2.6
# pin gloo commits of that span).
_GLOO_CONNECT = re.compile(
    r"(?:Gloo connectFullMesh failed with|gloo/transport/tcp/pair\.cc:\d+\]) ?.*?"
    r"connect \[?(?P<addr>[^\]\s]+?)\]?:(?P<port>\d+): (?P<why>Connection refused|Connection "
    r"timed out|No route to host|Network is unreachable|Connection reset by peer)"
    r"|timed out connecting: SO_ERROR: (?P<why2>[^,]+?),?(?: remote=\[?(?P<addr2>[^\]\s]+?)"
    r"\]?:(?P<port2>\d+)|\s*$)"
    r"|\[[^\]\s]*gloo/transport/tcp/pair\.cc:\d+\] (?P<sliced>no error)\s*$"
)
# What gloo's sliced connect error stands for (above): the connect failed, its errno lost.
GLOO_SLICED_CONNECT = "the connect failed; gloo printed its reason as 'no error'"
# torch.distributed.rpc's TensorPipe agent (tensorpipe/common/socket.cc Socket::connect:
# TP_CREATE_ERROR(SystemError, "connect", errno), the shm transport's socket.cc the same)
# says what a connect to a peer's listener got: SystemError::what() is "<syscall>:
# <strerror>" and Error::what() appends " (this error originated at <file>:<line>)"
# (tensorpipe/common/error.cc), raised through the agent as a RuntimeError
# (pytorch#85607: "connect: Resource temporarily unavailable (this error originated at
# tensorpipe/common/socket.cc:114)" while init_rpc's workers gathered their names).
_TENSORPIPE_CONNECT = re.compile(
    r"\bconnect: (?P<why>[^()]{1,120}?) \(this error originated at "
    r"(?P<where>tensorpipe/[\w/.]+:\d+)\)"
)
# The TensorPipe agent's warning that a request could not be sent (torch/csrc/distributed/
# rpc/tensorpipe_agent.cpp, the pipeWrite callback: "RPC agent for <name> encountered error
# when sending outgoing request #<id> to <remote>: " << error.what()), where what() is the
# uv transport's failed connect: UVError::what() is uv_err_name ": " uv_strerror
# (tensorpipe/transport/uv/error.cc), "ECONNREFUSED: connection refused"; a connect's
# refusals and unreachable addresses only (libuv's names of ECONNREFUSED, EHOSTUNREACH,
# ENETUNREACH), not a connection that was reset or closed later (ECONNRESET, EOF). The
# pipe to a peer connects on the agent's first message to it, so the failure is that
# connection's set-up (read as the other TensorPipe connect failures are: set-up before
# anything ran).
_TENSORPIPE_SEND = re.compile(
    r"RPC agent for (?P<me>\S+) encountered error when sending outgoing request #\d+ to "
    r"(?P<to>\S+): (?P<why>(?:ECONNREFUSED|EHOSTUNREACH|ENETUNREACH): [\w ]{1,60}?)"
    r"(?: \(this error originated at (?P<where>tensorpipe/[\w/.]+:\d+)\)|\s*$)"
)
# torch < 2.1 init_process_group: every rank increments a store counter and waits for
# world_size of them; "rank" is the global rank of the waiter, worker_count how many came.
_STORE_BARRIER = re.compile(
    r"Timed out initializing process group in store based barrier on rank:? (?P<rank>\d+), "
    r"for key: (?P<key>\S+) \(world_size=(?P<world>\d+), worker_count=(?P<count>\d+), "
    r"timeout=(?P<timeout>[\d:.]+)\)"  # str(timedelta): "0:30:00", "0:00:00.001000"
)
# Logged every 10 s while a rank waits in that barrier, and once when it completes: a log
# that ends waiting is a barrier that never completed.
_STORE_BARRIER_WAIT = re.compile(
    r"Waiting in store based barrier to initialize process group for rank: (?P<rank>\d+), "
    r"key: (?P<key>\S+) \(world_size=(?P<world>\d+), worker_count=(?P<count>\d+), "
    r"timeout=(?P<timeout>[\d:.]+)\)"
)
_STORE_BARRIER_DONE = re.compile(
    r"Rank (?P<rank>\d+): Completed store-based barrier for key:(?P<key>\S+) with (?P<n>\d+) nodes"
)
# The same barrier's first line (distributed_c10d._store_based_barrier: store.add(key, 1),
# then logger.info("Added key: {} to store for rank: {}")): the rank entered the barrier.
# Every release that prints it then logs "Waiting in store based barrier …" at the same
# level every 10 s while it waits.
# A paste wrapped at a word boundary may leave the key, or "rank: R", on the next line:
# the line's own part still says the rank entered the barrier (key "" when cut off).
_STORE_BARRIER_ADDED = re.compile(
    r"Added key:(?: (?P<key>\S+) to store(?: for(?: rank: (?P<rank>\d+))?)?|\s*$)"
)
# The store's TCP connection failed after it was set up: the server side (rank 0's
# process, or the agent) went away, or the network dropped it. DistNetworkError is the
# store's own error class (torch ≥ 2.2); older releases raise RuntimeError with the bare
# socket message, and TCPStore.cpp logs "recvValue failed on SocketImpl(...)".
_STORE_SOCKET = re.compile(
    r"(?:DistNetworkError|DistStoreError|(?:recv|send)\w{0,12} failed on SocketImpl\([^)]{0,300}\)"
    r"|RuntimeError"
    r"|flag on TCPStore, \(maybe TCPStore server has shut down too early\), with error)"
    r":? (?P<why>Connection reset by peer|Broken pipe|Connection refused|Socket Timeout"
    r"|Connection timed out)"
)
# ProcessGroupNCCL's heartbeat monitor, polling the store for another rank's dump signal
# (ProcessGroupNCCL.cpp heartbeatMonitor, later HeartbeatMonitor::runLoop: LOG(WARNING)
# "Failed to check the \"should dump\" flag on TCPStore, (maybe TCPStore server has shut
# down too early), with error: " << e.what(), whatever the store raised): the thread of a
# group already constructed, so the store failure it reports came after set-up.
_MONITOR_POLL = re.compile(r"maybe TCPStore server has shut down too early")
# c10d's socket layer once a connected store socket stops answering
# (torch/csrc/distributed/c10d/socket.cpp, SocketImpl::waitForInput: "waitForInput: socket
# {} timed out after {}ms", the socket printed as "SocketImpl(fd=…, addr=[h]:p,
# remote=[h]:p)"; the "poll for socket … returned 0, likely a timeout" warning before it is
# not read), and the peer that closed it (c10d/Utils.hpp, tcputil::recvBytes: "failed to
# recv, got 0 bytes", torch ≥ 2.4 "Failed to recv, got 0 bytes. Connection was likely
# closed. Did the remote server shutdown or crash?"; TCPStore.cpp logs it as "recvValue
# failed on SocketImpl(…): …").
_SOCKET_READ_TIMEOUT = re.compile(
    r"waitForInput: socket (?:SocketImpl\((?P<sock>[^)]{0,300})\) )?timed out after (?P<ms>\d+) ?ms"
)
# The same wait as torch 2.3-2.5 printed it (socket.cpp, SocketImpl::waitForInput, "[W
# socket.cpp:428] [c10d] While waitForInput, poolFD failed with (errno: 0 - Success)."):
# there, poll() returning 0 (no answer within the timeout) fell through to the errno check
# and was warned as a failure with errno 0; later releases split that case out as "poll
# for socket … returned 0, likely a timeout" (socket.cpp at 056b6f3, the commit the
# catalog read). So errno 0 is the store's reply not coming within the timeout (a read
# timeout: the client gives up, DistStoreError "wait timeout after …" follows); any other
# errno is poll() itself failing on the store's socket.
_POLL_FD_FAILED = re.compile(
    r"While waitForInput, poolFD failed with \(errno: (?P<errno>\d+)(?: - (?P<why>[^)]{0,120}))?\)"
)
_RECV_ZERO = re.compile(r"[Ff]ailed to recv, got 0 bytes")
# strerror(ECONNRESET) and strerror(EPIPE): an established connection's other end went
# away (StoreTimeout.lost); a refused connect or a timeout is not a loss.
_LOST_CONNECTION = frozenset({"Connection reset by peer", "Broken pipe"})
_REMOTE = re.compile(r"remote=\[?(?P<host>[^\]\s,)]+)\]?:(?P<port>\d+)")
_UNIQUE_ID = re.compile(
    r"\[(?P<rank>\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from "
    r"\[(?P<root>\d+)\] via c10d key-value store by key '(?P<key>[^']*)', "
    r"but store->get\('[^']*'\) got (?:error|exception): (?P<why>.*)"
)
_RENDEZVOUS = re.compile(
    r"RendezvousTimeoutError|Rendezvous timed out|RendezvousClosedError|RendezvousConnectionError"
    r"|DistStoreError: "
    r"(?P<store>.*)"
)
# The elastic agent's keep-alive heartbeat failing (dynamic_rendezvous.py
# DynamicRendezvousHandler._keep_alive's warning, every release since torch 1.9): sent only
# once this node joined the rendezvous (StoreTimeout.keep_alive). Anchored on the
# message's body ("The node '…' has failed to send a keep-alive heartbeat to the rendezvous
# '…' due to an error of type …"): a paste whose first line lost its start keeps it.
_KEEP_ALIVE_FAILED = "keep-alive heartbeat to the rendezvous"
# c10d's FileStore (the file:// init method, and the store NCCL's unique id goes through)
# could not open its file: FileStore.cpp's File constructor retries open(2) on ENOENT until
# the store's timeout, then throws ``std::system_error(errno, …, "open(" + path + ")")``,
# whose what() is "open(<path>): <strerror>" (a RuntimeError in Python). The store failed,
# as with DistStoreError; its path is the store file's, not a checkpoint's.
_FILE_STORE_OPEN = re.compile(
    r"(?:RuntimeError|DistStoreError|system_error): open\((?P<path>[^()\s]{1,300})\): "
    r"(?P<why>[A-Z][\w ,'/-]{2,80})"
)
_GLOO_TIMEOUT = re.compile(
    r"Timed out waiting (?P<ms>\d+)ms for (?P<dir>recv|send) operation to complete"
)
_GLOO_CLOSED = re.compile(
    r"(?:Connection closed by peer|Read error|Write error) \[(?P<peer>[^\]]+)\]:(?P<port>\d+)"
    r"(?P<rest>.*)"
)
_GLOO_APP_TIMEOUT = re.compile(r"Application timeout caused pair closure")
_KEYWORDS = (
    "Watchdog",
    "watchdog",
    "WorkNCCL",
    "Work",
    "NCCL",
    "nccl",
    "dump",
    "Heartbeat",
    "mismatch",
    "monitoredBarrier",
    "Timed out",
    "timed out",
    "timeout",
    "Rendezvous",
    "DistStoreError",
    "DistNetworkError",
    "store based barrier",
    "store-based barrier",
    "Added key:",
    "Socket Timeout",
    "SocketImpl",
    "socket has failed",
    "connect() timed out",
    "Address already in use",
    "network addresses of",
    "host not found: ",
    "Gloo connectFullMesh",
    "gloo/transport/tcp/pair",
    "Connection reset by peer",
    # the other reasons _STORE_SOCKET takes after c10d's bare RuntimeError (torch ≤ 1.x's
    # SYSCHECK threw std::system_error, whose what() is strerror: "RuntimeError: Broken
    # pipe" from TCPStore's tcputil send/recv), which this gate must admit to be read
    "Broken pipe",
    "Connection refused",
    "Connection timed out",
    "Timeout waiting for key",
    "Connection closed",
    "Read error",
    "Write error",
    "pair closure",
    "got 0 bytes",
    ": open(",
    "originated at tensorpipe/",
    "encountered error when sending outgoing request",
    "poolFD failed",
)
# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(_KEYWORDS)  # one search, not a test per word (34 words: 1.2 µs a line)


def pg_prefix(text: str) -> dict[str, object]:
    """The last process-group prefix of a line: pg, its id and description, group rank."""
    found: dict[str, object] = {}
    for m in _PG_PREFIX.finditer(text[:200]):
        if m.group("guid") is not None:
            found["pg"] = m.group("guid")
            found["pg_id"] = int(m.group("id"))
            if m.group("desc"):
                found["pg_desc"] = m.group("desc")
            found["group_rank"] = int(m.group("rank"))
        elif m.group("id2") is not None:
            found.setdefault("pg", m.group("id2"))
            found["pg_id"] = int(m.group("id2"))
            if m.group("desc2"):
                found["pg_desc"] = m.group("desc2")
            found["group_rank"] = int(m.group("rank2"))
        else:
            found.setdefault("group_rank", int(m.group("rank3")))
    return found


_WORK_NAMES = {
    "SeqNum": "seq",
    "OpType": "op",
    "NumelIn": "numel_in",
    "NumelOut": "numel_out",
    "Timeout(ms)": "timeout_ms",
}


def _work(text: str) -> dict[str, object]:
    """``k=v`` of ``WorkNCCL(SeqNum=…, OpType=…, …)`` (each optional; the first wins)."""
    m = _WORK.search(text)
    if m is None:
        return {}
    found: dict[str, object] = {}
    for key, value in _WORK_KV.findall(text[m.end() : m.end() + 400]):
        name = _WORK_NAMES.get(key)
        if name is None or name in found:
            continue
        if name == "op":
            found[name] = value
        elif (number := as_int(value)) is not None:
            found[name] = number
    return found


def match_torch(text: str) -> Hit | None:
    """Recognise one torch.distributed message (prefixes already peeled)."""
    if not NEED.admits(text):
        return None
    if _WATCHDOG.search(text):
        ran = _RAN_FOR.search(text)
        payload = CollectiveTimeout(
            **pg_prefix(text),  # type: ignore[arg-type]
            **_work(text),  # type: ignore[arg-type]
            ran_ms=int(ran.group(1)) if ran else None,
            backend=Backend.NCCL,
            detector=TimeoutSource.WATCHDOG,
        )
        return Hit(
            EventKind.COLLECTIVE_TIMEOUT,
            payload=payload,
            key=("timeout", payload.pg, payload.seq),
        )
    if (m := _STATUS_NEW.search(text) or _STATUS_OLD.search(text)) is not None:
        status = WatchdogStatus(
            **pg_prefix(text),  # type: ignore[arg-type]
            seq=int(m.group("seq")),
            last_enqueued=int(m.group("enq")),
            last_completed=int(m.group("done")),
        )
        return Hit(EventKind.WATCHDOG_STATUS, payload=status, key=("status", status.pg, status.seq))
    if _BLOCKING.search(text):
        payload = CollectiveTimeout(
            **pg_prefix(text),  # type: ignore[arg-type]
            **_work(text),  # type: ignore[arg-type]
            backend=Backend.NCCL,
            detector=TimeoutSource.BLOCKING_WAIT,
        )
        return Hit(
            EventKind.COLLECTIVE_TIMEOUT,
            payload=payload,
            key=("timeout", payload.pg, payload.seq),
        )
    if (d := _DUMP_RECEIVED.search(text)) is not None:
        dump = DumpSignal(
            **pg_prefix(text),  # type: ignore[arg-type]
            peer_rank=as_int(d.group("from")),
            reporter=Reporter.PEER if d.group("from") else Reporter.SELF,
            last_enqueued=as_int(d.group("enq")),
            last_completed=as_int(d.group("done")),
        )
        return Hit(EventKind.DUMP_SIGNAL, payload=dump, key=("dump", dump.pg))
    if _DUMP_OTHER.search(text):
        reporter = Reporter.SELF if text.find("First PG") >= 0 else Reporter.PEER
        dump = DumpSignal(**pg_prefix(text), reporter=reporter)  # type: ignore[arg-type]
        return Hit(EventKind.DUMP_SIGNAL, payload=dump, key=("dump", dump.pg, reporter))
    if (h := _HEARTBEAT.search(text)) is not None:
        beat = HeartbeatTimeout(**pg_prefix(text), stuck_s=as_int(h.group("secs")))  # type: ignore[arg-type]
        return Hit(EventKind.HEARTBEAT_TIMEOUT, payload=beat, key=("heartbeat", beat.pg))
    if "was aborted" in text and (ab := _ABORTED.search(text)) is not None:
        group = {**pg_prefix(text), "group_rank": int(ab.group("rank"))}
        why = (ab.group("why") or "").strip()[:300]
        aborted = NcclError(**group, aborted=True, message=why or None)  # type: ignore[arg-type]
        return Hit(EventKind.NCCL_ERROR, payload=aborted, key=("aborted", aborted.group_rank))
    if (a := _ASYNC.search(text)) is not None:
        return _nccl_error(a.group("what"), {**pg_prefix(text), **_work(text)}, text)
    if "NCCL timeout in" in text and (t := _NCCL_TIMEOUT_IN.search(text)) is not None:
        found: dict[str, object] = {
            "where": t.group("where"),
            "error_class": NcclResult.IN_PROGRESS,
        }
        return _nccl_error((t.group("what") or "NCCL operation in progress").strip(), found, text)
    if (e := _NCCL_ERROR_IN.search(text)) is not None:
        found = {"where": e.group("where"), "nccl_version": e.group("ver")}
        return _nccl_error(e.group("what"), found, text)
    if (f := _FOREIGN_NCCL.search(text)) is not None:
        return _foreign_nccl(f, text)
    if (c := _NCCL_CLASS.search(text)) is not None and ("nccl" in text[: c.start() + 4]):
        found = {"error_class": NcclResult(c.group("cls"))}
        return _nccl_error(c.group("cls") + " " + c.group("what"), found, text)
    if _TEARDOWN.search(text):
        teardown = WatchdogTeardown(**pg_prefix(text), **_work(text))  # type: ignore[arg-type]
        return Hit(EventKind.WATCHDOG_TEARDOWN, payload=teardown, key=("teardown", text[:60]))
    if _DETAIL.search(text):
        return _detail(text)
    if (mb := _MONITORED.search(text)) is not None:
        said = mb.group("ranks") or mb.group("self") or ""
        ranks = tuple(int(r) for r in said.split(",") if r.strip())
        barrier = MonitoredBarrier(
            ranks=ranks,
            timeout_ms=as_int(mb.group("ms")),
            reporter=Reporter.SELF if mb.group("self") else Reporter.RANK0,
            first_only=mb.group("ranks") is not None and mb.group("all") is None,
        )
        return Hit(EventKind.MONITORED_BARRIER, payload=barrier, key=("mb", ranks))
    if (peer := _MONITORED_PEER.search(text)) is not None:
        # A per-step join check: a rank ran out of data.
        join = bool(_JOIN_CONTEXT.search(text[: peer.start()]))
        barrier = MonitoredBarrier(
            ranks=(int(peer.group("root")),),
            reporter=Reporter.PEER,
            backend=Backend.GLOO,
            join=join,
        )
        return Hit(
            EventKind.MONITORED_BARRIER,
            payload=barrier,
            rank=int(peer.group("self")),
            key=("mb_peer", peer.group("root"), join),
        )
    store = _store(text)
    if store is not None:
        if isinstance(store.payload, StoreTimeout) and _MONITOR_POLL.search(text):
            store.payload = replace(store.payload, by_monitor=True)
        return store
    if (g := _GLOO_TIMEOUT.search(text)) is not None:
        gloo = CollectiveTimeout(
            backend=Backend.GLOO,
            timeout_ms=int(g.group("ms")),
            direction=Direction(g.group("dir")),
            detector=TimeoutSource.GLOO,
        )
        return Hit(EventKind.COLLECTIVE_TIMEOUT, payload=gloo, key=("gloo_timeout", g.group("dir")))
    if (
        (gc := _GLOO_CLOSED.search(text)) is not None and "gloo" in text
    ) or _GLOO_APP_TIMEOUT.search(text):
        if gc is not None:
            lost = ConnectionLost(
                backend=Backend.GLOO,
                peer=gc.group("peer"),
                port=int(gc.group("port")),
                failure=_gloo_loss(gc),
            )
        else:
            lost = ConnectionLost(backend=Backend.GLOO, failure=PeerLoss.APP_TIMEOUT_PAIR_CLOSURE)
        return Hit(EventKind.CONNECTION_LOST, payload=lost, key=("gloo_closed", lost.peer))
    return None


# The failure reason ~ProcessGroupNCCL passes to ncclCommAbort, which C10D_NCCL_CHECK prints
# on the line after its "NCCL error in: …" (scanner.py reads it there); a paste whose lines
# were joined (a word-wrap undone) carries it at the end of the error's own message.
_DESTROYED_REASON = re.compile(r"\bProcess Group destroyed on rank \d+\s*$")


def _gloo_loss(m: re.Match[str]) -> PeerLoss:
    """How gloo lost the pair (gloo/transport/tcp/pair.cc Pair::read): "Connection closed
    by peer" is recv(2) returning 0, the peer's orderly close of its end (its process
    ended, or it closed the pair); "Read error <peer>: <strerror>" is recv failing, a
    reset (ECONNRESET) or another errno, which says less about the peer."""
    if m.group(0).startswith("Connection closed by peer"):
        return PeerLoss.CONNECTION_CLOSED
    return PeerLoss.CONNECTION_RESET if "reset" in m.group("rest") else PeerLoss.UNKNOWN


_CLASS_WORDS = (
    ("remote", NcclResult.REMOTE_ERROR),
    ("system error", NcclResult.SYSTEM_ERROR),
    ("cuda error", NcclResult.UNHANDLED_CUDA_ERROR),
    ("internal error", NcclResult.INTERNAL_ERROR),
    ("invalid usage", NcclResult.INVALID_USAGE),
    ("invalid argument", NcclResult.INVALID_ARGUMENT),
    ("timeout", NcclResult.TIMEOUT),
)


def _nccl_error(what: str, found: dict[str, object], text: str) -> Hit:
    """An NCCL error in torch: its class (named, else read from the words of NCCL's error
    string), its message, whether the watchdog thread reported it."""
    cls = found.get("error_class")
    if cls is None:
        low = what.lower()
        cls = next((name for needle, name in _CLASS_WORDS if needle in low), None)
    found = {**found, "error_class": cls, "in_watchdog": "watchdog" in text.lower()}
    if _DESTROYED_REASON.search(what):
        found["destroying"] = True  # the abort reason joined onto the check's own line
    payload = NcclError(message=what.strip()[:300], **found)  # type: ignore[arg-type]
    return Hit(EventKind.NCCL_ERROR, payload=payload, key=("ncclerr", cls, payload.seq))


def _foreign_nccl(m: re.Match[str], text: str) -> Hit:
    """An NCCL error string in another framework's exception (Horovod, XLA, cupy). The call
    that failed is kept as "where" only when it creates a communicator, so that
    views/nccl_setup reads it as a setup failure; a collective's error stays unplaced."""
    call = m.group("call")
    if call is not None:
        found: dict[str, object] = {
            "foreign": Foreign.XLA
            if m.group("xla")
            else Foreign.BINDING
            if m.group("binding")
            else Foreign.HOROVOD,
            "call": call,
        }
        if _NCCL_INIT_CALLS.fullmatch(call):
            found["where"] = call
        return _nccl_error(m.group("what"), found, text)
    code = _NCCL_CODES.get(m.group("code"))
    found = {"foreign": Foreign.CUPY, "error_class": NcclResult(code) if code else None}
    what = m.group("what2") or m.group("code").replace("_", " ").lower()
    return _nccl_error(what, found, text)


def _fingerprint(text: str, rank: int | None) -> Fingerprint | None:
    found: dict[str, str] = {}
    for key, pattern in _FP_KEYS.items():
        m = pattern.search(text)
        if m is not None:
            found[key] = m.group(1)
    if not found:
        return None
    return Fingerprint(
        rank=rank,
        seq=as_int(found.get("seq")),
        op=found.get("op"),
        shape=found.get("shape"),
        dtype=found.get("dtype"),
        device=found.get("device"),
    )


def _detail(text: str) -> Hit:
    parts = _FP_SPLIT.split(text, maxsplit=1)
    first = _FP_SELF.search(parts[0])
    side_a: Fingerprint | None = None
    if first is not None:
        rank_a = int(first.group(1))
        side_a = _fingerprint(parts[0][first.end() :], rank_a) or Fingerprint(rank=rank_a)
    side_b: Fingerprint | None = None
    if len(parts) == 3:
        rank_b = int(parts[1])
        second = parts[2].split("Collectives differ", 1)[0]
        side_b = _fingerprint(second, rank_b)
        if side_b is None and (bare := re.match(r"\s*([A-Z_]+)", second)):
            side_b = Fingerprint(rank=rank_b, op=bare.group(1))
        side_b = side_b or Fingerprint(rank=rank_b)
    differ = _DIFFER.search(text)
    payload = CollectiveMismatch(
        source=MismatchSource.DETAIL,
        side_a=side_a,
        side_b=side_b,
        differ=(differ.group(1).strip()[:200] or None) if differ else None,
    )
    key = (
        "detail",
        side_a.rank if side_a else None,
        side_b.rank if side_b else None,
        side_a.seq if side_a else None,
    )
    return Hit(EventKind.COLLECTIVE_MISMATCH, payload=payload, key=key)


def _timedelta_ms(value: str) -> int | None:
    """A ``str(timedelta)`` ("0:30:00", "0:00:00.001000") in milliseconds."""
    try:
        h, m, sec = value.split(":")
        return round((int(h) * 3600 + int(m) * 60 + float(sec)) * 1000)
    except ValueError:
        return None


# A tqdm meter's state at the start of a line (tqdm/std.py format_meter: "{desc}: {n_fmt}/
# {total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]", with no total "{desc}: {n_fmt}
# {unit} [{elapsed}, {rate_fmt}{postfix}]"; tqdm writes it after a "\r"), what was written
# next glued after its "]" (a logging prefix, then the message): its count, elapsed time
# and a rate ("4.53it/s", inverted "1.23s/it"; "?it/s" before the first rate is none).
_GLUED_METER = re.compile(
    r"\s*(?:[^\[\]\n|]{0,80}?:\s*)?(?:\d{1,3}%(?:\|[^|\n]{0,200}\|)?\s*)?"
    r"(?P<n>[\d.]+[kMG]?(?:/[\d.]+[kMG]?)?)[A-Za-z]{0,12}\s*"
    r"\[(?P<elapsed>\d{1,3}(?::\d{2}){1,2})(?:<[\d:?]+)?,\s*\d[\d.]*[kMG]?"
    r"(?:[A-Za-z ]{0,20}/s|s/[A-Za-z ]{0,20})[^\]\n]{0,120}\]"
)


def _glued_meter(before: str) -> tuple[str, int] | None:
    """The tqdm meter (its count, its elapsed seconds) whose live state begins the text
    before a line's match, when it shows a rate."""
    g = _GLUED_METER.match(before) if "]" in before else None
    if g is None or len(before) - g.end() > 200:
        return None
    seconds = 0
    for part in g.group("elapsed").split(":"):
        seconds = seconds * 60 + int(part)
    return g.group("n"), seconds


def _barrier_hit(m: re.Match[str], error: StoreError) -> Hit:
    """A store-based barrier that timed out or still waits: torch prints both with the
    same fields; the error tells them apart. A wait logged right after a tqdm meter's live
    state on the same line keeps the meter (``StoreTimeout.meter``)."""
    glued = _glued_meter(m.string[: m.start()]) if error == StoreError.STORE_BARRIER_WAIT else None
    payload = StoreTimeout(
        error=error,
        joined=int(m.group("count")),
        expected=int(m.group("world")),
        keys=m.group("key"),
        barrier_timeout_ms=_timedelta_ms(m.group("timeout")),
        meter=glued[0] if glued else None,
        meter_elapsed_s=glued[1] if glued else None,
    )
    return Hit(
        EventKind.STORE_TIMEOUT,
        payload=payload,
        rank=int(m.group("rank")),
        # a wait glued to a bar is kept apart from the same key's plain waits (the first of
        # a run of equal lines is the one kept)
        key=("store", error.value.removeprefix("store_"), m.group("key"), bool(glued)),
    )


def _store(text: str) -> Hit | None:
    payload: StoreTimeout
    if (m := _UNIQUE_ID.search(text)) is not None:
        payload = StoreTimeout(
            error=StoreError.NCCL_UNIQUE_ID,
            root=int(m.group("root")),
            keys=m.group("key"),
            message=m.group("why").strip()[:200],
            group_rank=int(m.group("rank")),
        )
        return Hit(EventKind.STORE_TIMEOUT, payload=payload, key=("store", "uid", m.group("key")))
    if (m := _STORE_CLIENTS.search(text)) is not None:
        payload = StoreTimeout(
            error=StoreError.CLIENTS_MISSING,
            joined=int(m.group("joined")),
            expected=int(m.group("total")),
            waited_s=int(m.group("secs")),
        )
    elif (m := _STORE_BARRIER.search(text)) is not None:
        return _barrier_hit(m, StoreError.STORE_BARRIER)
    elif "store based barrier" in text and (m := _STORE_BARRIER_WAIT.search(text)) is not None:
        return _barrier_hit(m, StoreError.STORE_BARRIER_WAIT)
    elif "store-based barrier" in text and (m := _STORE_BARRIER_DONE.search(text)) is not None:
        marker = PhaseMarker(
            phase=Phase.INIT, label="store barrier completed", store_key=m.group("key")
        )
        return Hit(
            EventKind.PHASE,
            payload=marker,
            rank=int(m.group("rank")),
            key=("barrier_done", m.group("key")),
        )
    elif "Added key:" in text and (m := _STORE_BARRIER_ADDED.search(text)) is not None:
        key = m.group("key") or ""
        marker = PhaseMarker(phase=Phase.INIT, label="store barrier entered", store_key_added=key)
        return Hit(
            EventKind.PHASE,
            payload=marker,
            rank=int(m.group("rank")) if m.group("rank") else None,
            key=("barrier_added", key, m.group("rank")),
        )
    elif (m := _STORE_WAIT.search(text)) is not None:
        keys = m.group("keys") or m.group("key2") or ""
        payload = StoreTimeout(
            error=StoreError.STORE_WAIT,
            keys=keys[:200],
            timeout_ms=int(m.group("ms") or m.group("ms2")),
        )
    elif (m := _STORE_CONNECT.search(text)) is not None:
        n = int(m.group("n"))
        payload = StoreTimeout(
            error=StoreError.STORE_CONNECT,
            peer=m.group("addr"),
            port=int(m.group("port")),
            timeout_ms=n * 1000 if m.group("unit") == "s" else n,
        )
    elif (m := _SOCKET_GAVE_UP.search(text)) is not None:
        why = (m.group("rest") or m.group("rest2") or m.group("inuse") or "").strip(" .")
        if m.group("addr") or m.group("ms"):
            payload = StoreTimeout(
                error=StoreError.STORE_CONNECT,
                peer=m.group("addr"),
                port=as_int(m.group("port")),
                timeout_ms=as_int(m.group("ms")),
                message=why[:200] or None,
            )
        else:  # the port is taken, or no address to listen on
            payload = StoreTimeout(
                error=StoreError.STORE_LISTEN, bind=m.group("bind"), message=why[:200] or None
            )
    elif (m := _STORE_RESOLVE.search(text)) is not None and _cannot_resolve(m):
        payload = StoreTimeout(
            error=StoreError.STORE_RESOLVE,
            peer=m.group("addr"),
            port=as_int(m.group("port")),
            message=(m.group("why") or m.group("why2")).strip()[:200],
        )
    elif (m := _STORE_UNREACHABLE.search(text)) is not None:
        payload = StoreTimeout(
            error=StoreError.STORE_UNREACHABLE,
            peer=m.group("addr").strip("[]"),
            port=int(m.group("port")),
            message=f"errno {m.group('errno')}: {m.group('why').strip()}"[:200],
        )
    elif (m := _GLOO_CONNECT.search(text)) is not None:
        payload = StoreTimeout(
            error=StoreError.GLOO_CONNECT,
            peer=m.group("addr") or m.group("addr2"),
            port=as_int(m.group("port") or m.group("port2")),
            message=(
                GLOO_SLICED_CONNECT
                if m.group("sliced")
                else (m.group("why") or m.group("why2") or "")
            ).strip(),
            backend=Backend.GLOO,
        )
    elif (m := _TENSORPIPE_CONNECT.search(text)) is not None:
        payload = StoreTimeout(
            error=StoreError.RPC_CONNECT,
            message=f"connect: {m.group('why').strip()} ({m.group('where')})",
            backend=Backend.TENSORPIPE,
        )
    elif (m := _TENSORPIPE_SEND.search(text)) is not None:
        where = f" ({m.group('where')})" if m.group("where") else ""
        payload = StoreTimeout(  # (the peer is a worker's name, not a host: in the words)
            error=StoreError.RPC_CONNECT,
            message=f"request to {m.group('to')}: {m.group('why').strip()}{where}",
            backend=Backend.TENSORPIPE,
        )
    elif (m := _SOCKET_READ_TIMEOUT.search(text)) is not None:
        peer, port = _remote(m.group("sock") or "")
        payload = StoreTimeout(
            error=StoreError.STORE_READ_TIMEOUT,
            timeout_ms=int(m.group("ms")),
            peer=peer,
            port=port,
        )
        return Hit(
            EventKind.STORE_TIMEOUT, payload=payload, key=("store", "read_timeout", payload.peer)
        )
    elif (m := _POLL_FD_FAILED.search(text)) is not None:
        if m.group("errno") == "0":  # poll() returned 0: no answer within the timeout
            payload = StoreTimeout(error=StoreError.STORE_READ_TIMEOUT)
            return Hit(
                EventKind.STORE_TIMEOUT, payload=payload, key=("store", "read_timeout", None)
            )
        why = (m.group("why") or f"errno {m.group('errno')}").strip()
        payload = StoreTimeout(error=StoreError.STORE_CONNECTION, message=f"poll failed: {why}")
        return Hit(EventKind.STORE_TIMEOUT, payload=payload, key=("store", "socket", why))
    elif _RECV_ZERO.search(text) and "Rendezvous" not in text:
        peer, port = _remote(text)
        payload = StoreTimeout(
            error=StoreError.STORE_CONNECTION,
            message="connection closed by the peer",
            peer=peer,
            port=port,
            lost=True,
        )
        return Hit(EventKind.STORE_TIMEOUT, payload=payload, key=("store", "socket", "closed"))
    elif (m := _STORE_SOCKET.search(text)) is not None:
        why = m.group("why")
        payload = StoreTimeout(
            error=StoreError.STORE_CONNECTION, message=why, lost=why in _LOST_CONNECTION
        )
        return Hit(EventKind.STORE_TIMEOUT, payload=payload, key=("store", "socket", why))
    elif "open(" in text and (m := _FILE_STORE_OPEN.search(text)) is not None:
        payload = StoreTimeout(error=StoreError.STORE_FILE, message=m.group("why").strip())
    elif (m := _RENDEZVOUS.search(text)) is not None:
        if "RendezvousClosedError" in text:
            error = StoreError.RENDEZVOUS_CLOSED
        elif "RendezvousConnectionError" in text:
            error = StoreError.RENDEZVOUS_CONNECTION  # the c10d rendezvous store unreachable
        else:
            error = StoreError.RENDEZVOUS
        payload = StoreTimeout(
            error=error,
            message=m.group("store") or None,
            keep_alive=_KEEP_ALIVE_FAILED in text,
        )
    else:
        return None
    assert payload.error is not None
    return Hit(EventKind.STORE_TIMEOUT, payload=payload, key=("store", payload.error.value))


def _remote(text: str) -> tuple[str | None, int | None]:
    """The store server's end of a c10d socket ("remote=[host]:port" in SocketImpl(…))."""
    if (r := _REMOTE.search(text)) is not None:
        return r.group("host"), int(r.group("port"))
    return None, None
