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

from hangdoc.analyzer.parsers.logs.hit import Hit, put
from hangdoc.analyzer.vocabulary import (
    F_BACKEND,
    F_ERROR,
    F_GROUP_RANK,
    F_LAST_COMPLETED,
    F_LAST_ENQUEUED,
    F_MESSAGE,
    F_NUMEL_IN,
    F_NUMEL_OUT,
    F_OP,
    F_PEER,
    F_PEER_RANK,
    F_PG,
    F_PG_DESC,
    F_PHASE,
    F_RAN_MS,
    F_RANKS,
    F_SEQ,
    F_TIMEOUT_MS,
    EventKind,
)

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
# with its arguments ("ncclCommInitRank(&comm, nranks, id, rank)").
_NCCL_STRINGS = (
    r"(?:unhandled )?(?:cuda|system) error|internal error|invalid argument|invalid usage"
    r"|remote process exited or there was a network error|NCCL operation in progress"
)
_FOREIGN_NCCL = re.compile(
    r"(?P<xla>NCCL operation )?\b(?P<call>nccl[A-Z]\w*)(?:\(.*?\))? failed: "
    r"(?P<what>(?:" + _NCCL_STRINGS + r").*)"
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
    r"Ranks? (?P<ranks>\d+(?:\s*,\s*\d+)*) failed to pass monitoredBarrier in (?P<ms>\d+) ms"
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
# variant is the harmless one (a host without IPv6 addresses), so it is not read.
_STORE_RESOLVE = re.compile(
    r"The (?:IPv4 )?network addresses of \((?P<addr>[^,)]+), (?P<port>\d+)\) cannot be "
    r"retrieved \(gai error: (?P<why>[^)]*)\)"
)
# Gloo builds its full mesh of TCP pairs when the process group is created
# (ProcessGroupGloo: "Gloo connectFullMesh failed with …"; gloo/transport/tcp/pair.cc:
# "connect [10.1.2.3]:35807: Connection refused"): a peer that is not listening or not
# reachable on the interface gloo chose (GLOO_SOCKET_IFNAME).
_GLOO_CONNECT = re.compile(
    r"(?:Gloo connectFullMesh failed with|gloo/transport/tcp/pair\.cc:\d+\]) ?.*?"
    r"connect \[?(?P<addr>[^\]\s]+?)\]?:(?P<port>\d+): (?P<why>Connection refused|Connection "
    r"timed out|No route to host|Network is unreachable|Connection reset by peer)"
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
_RECV_ZERO = re.compile(r"[Ff]ailed to recv, got 0 bytes")
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
    "Socket Timeout",
    "SocketImpl",
    "socket has failed",
    "connect() timed out",
    "Address already in use",
    "network addresses of",
    "Gloo connectFullMesh",
    "gloo/transport/tcp/pair",
    "Connection reset by peer",
    "Timeout waiting for key",
    "Connection closed",
    "Read error",
    "Write error",
    "pair closure",
    "got 0 bytes",
)


def _pg_fields(text: str, fields: dict[str, str]) -> None:
    """Read the last process-group prefix of a line into fields (pg, desc, group rank)."""
    for m in _PG_PREFIX.finditer(text[:200]):
        if m.group("guid") is not None:
            fields[F_PG] = m.group("guid")
            fields["pg_id"] = m.group("id")
            put(fields, F_PG_DESC, m.group("desc"))
            fields[F_GROUP_RANK] = m.group("rank")
        elif m.group("id2") is not None:
            fields.setdefault(F_PG, m.group("id2"))
            fields["pg_id"] = m.group("id2")
            put(fields, F_PG_DESC, m.group("desc2"))
            fields[F_GROUP_RANK] = m.group("rank2")
        else:
            fields.setdefault(F_GROUP_RANK, m.group("rank3"))


def work_fields(text: str, fields: dict[str, str]) -> None:
    """Generic ``k=v`` parsing of ``WorkNCCL(SeqNum=…, OpType=…, …)`` (fields optional)."""
    m = _WORK.search(text)
    if m is None:
        return
    names = {
        "SeqNum": F_SEQ,
        "OpType": F_OP,
        "NumelIn": F_NUMEL_IN,
        "NumelOut": F_NUMEL_OUT,
        "Timeout(ms)": F_TIMEOUT_MS,
    }
    body = text[m.end() : m.end() + 400]
    for key, value in _WORK_KV.findall(body):
        if key in names:
            fields.setdefault(names[key], value)


def match_torch(text: str) -> Hit | None:
    """Recognise one torch.distributed message (prefixes already peeled)."""
    if not any(k in text for k in _KEYWORDS):
        return None
    fields: dict[str, str] = {}
    if _WATCHDOG.search(text):
        _pg_fields(text, fields)
        work_fields(text, fields)
        ran = _RAN_FOR.search(text)
        put(fields, F_RAN_MS, ran.group(1) if ran else None)
        fields[F_BACKEND] = "nccl"
        fields["source"] = "watchdog"
        return Hit(
            EventKind.COLLECTIVE_TIMEOUT,
            fields,
            key=("timeout", fields.get(F_PG), fields.get(F_SEQ)),
        )
    if (m := _STATUS_NEW.search(text) or _STATUS_OLD.search(text)) is not None:
        _pg_fields(text, fields)
        fields.update(
            {
                F_SEQ: m.group("seq"),
                F_LAST_ENQUEUED: m.group("enq"),
                F_LAST_COMPLETED: m.group("done"),
            }
        )
        return Hit(
            EventKind.WATCHDOG_STATUS, fields, key=("status", fields.get(F_PG), m.group("seq"))
        )
    if _BLOCKING.search(text):
        _pg_fields(text, fields)
        work_fields(text, fields)
        fields.update({F_BACKEND: "nccl", "source": "blocking_wait"})
        return Hit(
            EventKind.COLLECTIVE_TIMEOUT,
            fields,
            key=("timeout", fields.get(F_PG), fields.get(F_SEQ)),
        )
    if (d := _DUMP_RECEIVED.search(text)) is not None:
        _pg_fields(text, fields)
        put(fields, F_PEER_RANK, d.group("from"))
        fields["from"] = "peer" if d.group("from") else "self"
        put(fields, F_LAST_ENQUEUED, d.group("enq"))
        put(fields, F_LAST_COMPLETED, d.group("done"))
        return Hit(EventKind.DUMP_SIGNAL, fields, key=("dump", fields.get(F_PG)))
    if _DUMP_OTHER.search(text):
        _pg_fields(text, fields)
        fields["from"] = "self" if text.find("First PG") >= 0 else "peer"
        return Hit(EventKind.DUMP_SIGNAL, fields, key=("dump", fields.get(F_PG), fields["from"]))
    if (h := _HEARTBEAT.search(text)) is not None:
        _pg_fields(text, fields)
        put(fields, "seconds", h.group("secs"))
        return Hit(EventKind.HEARTBEAT_TIMEOUT, fields, key=("heartbeat", fields.get(F_PG)))
    if "was aborted" in text and (ab := _ABORTED.search(text)) is not None:
        _pg_fields(text, fields)
        fields.update({F_ERROR: "communicator_aborted", F_GROUP_RANK: ab.group("rank")})
        put(fields, F_MESSAGE, (ab.group("why") or "").strip()[:300])
        return Hit(EventKind.NCCL_ERROR, fields, key=("aborted", ab.group("rank")))
    if (a := _ASYNC.search(text)) is not None:
        _pg_fields(text, fields)
        work_fields(text, fields)
        return _nccl_error(a.group("what"), fields)
    if "NCCL timeout in" in text and (t := _NCCL_TIMEOUT_IN.search(text)) is not None:
        fields.update({"where": t.group("where"), "class": "ncclInProgress"})
        return _nccl_error((t.group("what") or "NCCL operation in progress").strip(), fields)
    if (e := _NCCL_ERROR_IN.search(text)) is not None:
        fields["where"] = e.group("where")
        put(fields, "nccl_version", e.group("ver"))
        return _nccl_error(e.group("what"), fields)
    if (f := _FOREIGN_NCCL.search(text)) is not None:
        return _foreign_nccl(f, fields)
    if (c := _NCCL_CLASS.search(text)) is not None and ("nccl" in text[: c.start() + 4]):
        fields["class"] = c.group("cls")
        return _nccl_error(c.group("cls") + " " + c.group("what"), fields)
    if _TEARDOWN.search(text):
        _pg_fields(text, fields)
        work_fields(text, fields)
        return Hit(EventKind.WATCHDOG_TEARDOWN, fields, key=("teardown", text[:60]))
    if _DETAIL.search(text):
        return _detail(text)
    if (mb := _MONITORED.search(text)) is not None:
        ranks = mb.group("ranks") or mb.group("self") or ""
        fields[F_RANKS] = ",".join(r.strip() for r in ranks.split(","))
        put(fields, F_TIMEOUT_MS, mb.group("ms"))
        fields["reporter"] = "self" if mb.group("self") else "rank0"
        return Hit(EventKind.MONITORED_BARRIER, fields, key=("mb", fields[F_RANKS]))
    if (peer := _MONITORED_PEER.search(text)) is not None:
        fields.update({F_RANKS: peer.group("root"), "reporter": "peer", F_BACKEND: "gloo"})
        if _JOIN_CONTEXT.search(text[: peer.start()]):
            fields["context"] = "join"  # a per-step join check: a rank ran out of data
        return Hit(
            EventKind.MONITORED_BARRIER,
            fields,
            rank=int(peer.group("self")),
            key=("mb_peer", peer.group("root"), fields.get("context")),
        )
    store = _store(text)
    if store is not None:
        return store
    if (g := _GLOO_TIMEOUT.search(text)) is not None:
        fields.update(
            {
                F_BACKEND: "gloo",
                F_TIMEOUT_MS: g.group("ms"),
                "direction": g.group("dir"),
                "source": "gloo",
            }
        )
        return Hit(EventKind.COLLECTIVE_TIMEOUT, fields, key=("gloo_timeout", g.group("dir")))
    if (
        (gc := _GLOO_CLOSED.search(text)) is not None and "gloo" in text
    ) or _GLOO_APP_TIMEOUT.search(text):
        if gc is not None:
            fields.update({F_PEER: gc.group("peer"), "port": gc.group("port")})
            fields[F_ERROR] = (
                "connection_reset" if "reset" in gc.group("rest") else "connection_closed"
            )
        else:
            fields[F_ERROR] = "app_timeout_pair_closure"
        fields[F_BACKEND] = "gloo"
        return Hit(EventKind.CONNECTION_LOST, fields, key=("gloo_closed", fields.get(F_PEER)))
    return None


def _nccl_error(what: str, fields: dict[str, str]) -> Hit:
    low = what.lower()
    cls = fields.get("class")
    if cls is None:
        for needle, name in (
            ("remote", "ncclRemoteError"),
            ("system error", "ncclSystemError"),
            ("cuda error", "ncclUnhandledCudaError"),
            ("internal error", "ncclInternalError"),
            ("invalid usage", "ncclInvalidUsage"),
            ("invalid argument", "ncclInvalidArgument"),
            ("timeout", "ncclTimeout"),
        ):
            if needle in low:
                cls = name
                break
    put(fields, "class", cls)
    fields[F_MESSAGE] = what.strip()[:300]
    return Hit(EventKind.NCCL_ERROR, fields, key=("ncclerr", cls, fields.get(F_SEQ)))


def _foreign_nccl(m: re.Match[str], fields: dict[str, str]) -> Hit:
    """An NCCL error string in another framework's exception (Horovod, XLA, cupy). The call
    that failed is kept as "where" only when it creates a communicator, so that
    views/nccl_setup reads it as a setup failure; a collective's error stays unplaced."""
    call = m.group("call")
    if call is not None:
        fields["foreign"] = "xla" if m.group("xla") else "horovod"
        fields["call"] = call
        if _NCCL_INIT_CALLS.fullmatch(call):
            fields["where"] = call
        return _nccl_error(m.group("what"), fields)
    fields["foreign"] = "cupy"
    put(fields, "class", _NCCL_CODES.get(m.group("code")))
    return _nccl_error(m.group("what2") or m.group("code").replace("_", " ").lower(), fields)


def _fingerprint(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, pattern in _FP_KEYS.items():
        m = pattern.search(text)
        if m is not None:
            out[key] = m.group(1)
    return out


def _detail(text: str) -> Hit:
    fields: dict[str, str] = {"source": "detail"}
    parts = _FP_SPLIT.split(text, maxsplit=1)
    first = _FP_SELF.search(parts[0])
    if first is not None:
        fields["rank_a"] = first.group(1)
        for key, value in _fingerprint(parts[0][first.end() :]).items():
            fields[f"{key}_a"] = value
    if len(parts) == 3:
        fields["rank_b"] = parts[1]
        second = parts[2].split("Collectives differ", 1)[0]
        fp = _fingerprint(second)
        if not fp and (bare := re.match(r"\s*([A-Z_]+)", second)):
            fp = {"op": bare.group(1)}
        for key, value in fp.items():
            fields[f"{key}_b"] = value
    differ = _DIFFER.search(text)
    put(fields, "differ", differ.group(1).strip()[:200] if differ else None)
    return Hit(
        EventKind.COLLECTIVE_MISMATCH,
        fields,
        key=("detail", fields.get("rank_a"), fields.get("rank_b"), fields.get("seq_a")),
    )


def _barrier_hit(m: re.Match[str], fields: dict[str, str], tag: str) -> Hit:
    """A store-based barrier that timed out or still waits: torch prints both with the
    same fields; the error tag tells them apart."""
    fields.update(
        {
            "joined": m.group("count"),
            "expected": m.group("world"),
            "keys": m.group("key"),
            "timeout": m.group("timeout"),
            F_ERROR: tag,
        }
    )
    return Hit(
        EventKind.STORE_TIMEOUT,
        fields,
        rank=int(m.group("rank")),
        key=("store", tag.removeprefix("store_"), m.group("key")),
    )


def _store(text: str) -> Hit | None:
    fields: dict[str, str] = {}
    if (m := _UNIQUE_ID.search(text)) is not None:
        fields.update({F_ERROR: "nccl_unique_id", "root": m.group("root"), "keys": m.group("key")})
        fields.update({F_MESSAGE: m.group("why").strip()[:200], F_GROUP_RANK: m.group("rank")})
        return Hit(EventKind.STORE_TIMEOUT, fields, key=("store", "uid", m.group("key")))
    if (m := _STORE_CLIENTS.search(text)) is not None:
        fields.update(
            {
                "joined": m.group("joined"),
                "expected": m.group("total"),
                "seconds": m.group("secs"),
                F_ERROR: "clients_missing",
            }
        )
    elif (m := _STORE_BARRIER.search(text)) is not None:
        return _barrier_hit(m, fields, "store_barrier")
    elif "store based barrier" in text and (m := _STORE_BARRIER_WAIT.search(text)) is not None:
        return _barrier_hit(m, fields, "store_barrier_wait")
    elif "store-based barrier" in text and (m := _STORE_BARRIER_DONE.search(text)) is not None:
        fields.update({F_PHASE: "init", "label": "store barrier completed", "keys": m.group("key")})
        return Hit(
            EventKind.PHASE, fields, rank=int(m.group("rank")), key=("barrier_done", m.group("key"))
        )
    elif (m := _STORE_WAIT.search(text)) is not None:
        keys = m.group("keys") or m.group("key2") or ""
        fields.update(
            {
                "keys": keys[:200],
                F_TIMEOUT_MS: m.group("ms") or m.group("ms2"),
                F_ERROR: "store_wait",
            }
        )
    elif (m := _STORE_CONNECT.search(text)) is not None:
        n = int(m.group("n"))
        fields.update(
            {
                F_PEER: m.group("addr"),
                "port": m.group("port"),
                F_TIMEOUT_MS: str(n * 1000 if m.group("unit") == "s" else n),
                F_ERROR: "store_connect",
            }
        )
    elif (m := _SOCKET_GAVE_UP.search(text)) is not None:
        if m.group("addr") or m.group("ms"):
            put(fields, F_PEER, m.group("addr"))
            put(fields, "port", m.group("port"))
            put(fields, F_TIMEOUT_MS, m.group("ms"))
            fields[F_ERROR] = "store_connect"
        else:
            fields[F_ERROR] = "store_listen"  # the port is taken, or no address to listen on
            put(fields, "bind", m.group("bind"))
        why = (m.group("rest") or m.group("rest2") or m.group("inuse") or "").strip(" .")
        put(fields, F_MESSAGE, why[:200] or None)
    elif (m := _STORE_RESOLVE.search(text)) is not None:
        fields.update({F_PEER: m.group("addr"), "port": m.group("port"), F_ERROR: "store_resolve"})
        fields[F_MESSAGE] = m.group("why").strip()[:200]
    elif (m := _GLOO_CONNECT.search(text)) is not None:
        fields.update({F_PEER: m.group("addr"), "port": m.group("port"), F_ERROR: "gloo_connect"})
        fields.update({F_MESSAGE: m.group("why"), F_BACKEND: "gloo"})
    elif (m := _SOCKET_READ_TIMEOUT.search(text)) is not None:
        fields.update({F_ERROR: "store_read_timeout", F_TIMEOUT_MS: m.group("ms")})
        _remote(m.group("sock") or "", fields)
        key = ("store", "read_timeout", fields.get(F_PEER))
        return Hit(EventKind.STORE_TIMEOUT, fields, key=key)
    elif _RECV_ZERO.search(text) and "Rendezvous" not in text:
        fields.update({F_ERROR: "store_connection", F_MESSAGE: "connection closed by the peer"})
        _remote(text, fields)
        return Hit(EventKind.STORE_TIMEOUT, fields, key=("store", "socket", "closed"))
    elif (m := _STORE_SOCKET.search(text)) is not None:
        why = m.group("why")
        fields.update({F_ERROR: "store_connection", F_MESSAGE: why})
        return Hit(EventKind.STORE_TIMEOUT, fields, key=("store", "socket", why))
    elif (m := _RENDEZVOUS.search(text)) is not None:
        if "RendezvousClosedError" in text:
            fields[F_ERROR] = "rendezvous_closed"
        elif "RendezvousConnectionError" in text:
            fields[F_ERROR] = "rendezvous_connection"  # the c10d rendezvous store unreachable
        else:
            fields[F_ERROR] = "rendezvous"
        put(fields, F_MESSAGE, m.group("store"))
    else:
        return None
    return Hit(EventKind.STORE_TIMEOUT, fields, key=("store", fields[F_ERROR]))


def _remote(text: str, fields: dict[str, str]) -> None:
    """The store server's end of a c10d socket ("remote=[host]:port" in SocketImpl(…))."""
    if (r := _REMOTE.search(text)) is not None:
        fields.update({F_PEER: r.group("host"), "port": r.group("port")})
