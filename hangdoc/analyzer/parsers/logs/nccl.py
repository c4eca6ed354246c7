"""NCCL_DEBUG output (FORMATS.md §1): INFO/WARN/TRACE lines, COLL lines, init, RAS.

Every NCCL line starts ``<host>:<pid>:<tid> [<cudaDev>]``; old releases drop the word
``NCCL`` before INFO/WARN, new ones put a ``[time] `` before WARN lines (peeled by
prefix.py). Ranks are *communicator* ranks: only the init lines tie a host:pid to a
rank, which the scanner uses to attribute every other line of that process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoc.analyzer.parsers.catalog import default_matcher
from hangdoc.analyzer.parsers.logs.errors import cuda_build_lacks_device
from hangdoc.analyzer.parsers.logs.hit import Hit, as_int
from hangdoc.analyzer.payloads.nccl import (
    CollectiveMismatch,
    ConfigProblem,
    CudaFailure,
    Iface,
    LinkError,
    LinkFailure,
    MismatchError,
    MismatchSource,
    NcclColl,
    NcclConfigError,
    NcclInit,
    NcclInitState,
    NcclNetwork,
    NcclTransport,
    NcclTransportError,
    NcclVersion,
    NcclWarn,
    NetRole,
    RasComm,
    Transport,
    Via,
)
from hangdoc.analyzer.payloads.torch_pg import Backend, ConnectionLost, Direction, NcclResult
from hangdoc.analyzer.vocabulary import EventKind, parse_enum

_HEADER = re.compile(
    r"(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) (?:\[(?P<dev>\d+)\] )?(?P<rest>.*)"
)
_INFO = re.compile(r"(?:NCCL )?INFO (?P<msg>.*)")
_WARN = re.compile(r"(?P<where>[\w./\-]+:\d+)(?: \((?P<func>\w+)\))? (?:NCCL )?WARN (?P<msg>.*)")
_TRACE = re.compile(r"\d+(?:\.\d+)? [\w:~]+:\d+ NCCL TRACE (?P<msg>.*)")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda([\d.]+))?")
_INIT = re.compile(
    r"(?:(?P<api>ncclCommInit\w*|ncclCommSplit|ncclCommShrink)\s+)?comm (?P<comm>0x[0-9a-f]+) "
    r"rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)(?P<rest>.*)"
)
_INIT_TAIL = {
    "cudaDev": re.compile(r"cudaDev (\d+)"),
    "nvmlDev": re.compile(r"nvmlDev (\d+)"),
    "busId": re.compile(r"busId ([0-9a-fA-F]+)"),
    "commId": re.compile(r"commId (0x[0-9a-f]+)"),
}
_INIT_STATE = re.compile(r"- (Init START|Init COMPLETE|Abort COMPLETE|Destroy COMPLETE)")
_INIT_TIMINGS = re.compile(r"Init timings(?: - \w+)?: rank (\d+) nranks (\d+)")
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using (\w[\w.\-]*):([0-9A-Fa-f.:%\w]+?)<\d+>")
_NET_IFACE = re.compile(
    r"NET(?:/Socket)? : Using (?:interface )?\[?\d*\]?(\w[\w.\-]*):([0-9A-Fa-f.:%\w]+?)<\d+>"
)
_OOB = re.compile(r"OOB (\w[\w.\-]*):([0-9A-Fa-f.:%\w]+?)<\d+>")
# NCCL ≤ 2.11 lists every interface it found, numbered ("Bootstrap : Using [0]ens5:172.31.0.137<0>
# [1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>"; "NET/Socket : Using [0]… [1]…"):
# bootstrap.cc bootstrapNetInit and transport/net_socket.cc ncclSocketInit append
# " [%d]%s:%s" per interface. Bootstrap uses the first one only; the socket transport
# spreads its connections over all of them.
_IFACE_ITEM = re.compile(r"(?:\[(\d+)\])?(\w[\w.\-]*):([0-9A-Fa-f.:]+(?:%[\w.\-]+)?)<\d+>")
_USING_NETWORK = re.compile(r"Using network (\w+)")
_NO_IB = re.compile(r"NET/IB : No device found")
_VIA = re.compile(r" via ((?:P2P|SHM|NET|CollNet|NVLS)/[\w/]+|direct shared memory)")
_SERVICE_CLOSED = re.compile(r"\[Service thread\] Connection closed by localRank (\d+)")
_COLL = re.compile(
    r"(?P<op>AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|Gather|Scatter"
    r"|AllGatherV|ReduceScatterV|AlltoAllV?): opCount (?P<opcount>[0-9a-fA-F]+) sendbuff \S+ "
    r"recvbuff \S+ count (?P<count>\d+) datatype (?P<dtype>\d+) op (?P<redop>\d+) "
    r"root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-f]+)(?: \[nranks=(?P<nranks>\d+)\])?"
)
# A failing NCCL call's return code, logged by every caller up the chain
# ("misc/socket.cc:47 -> 3", "… -> 2 [Proxy Thread]"): the first one names the error.
# ("misc/socket.cc:47 -> 3", "… -> 2 [Proxy Thread]", "bootstrap.cc:868 -> 6 ncclSocketConnect()").
_RETURN = re.compile(r"(?P<where>[\w./\-]+:\d+) -> (?P<rc>\d{1,2})(?:\s|$)")
# A header that a paste cut or mangled: the host, the pid or the device may be missing
# (":1234:5678 [0] NCCL INFO …", "-232:1234:5678 [0] …" (a host cut inside: no host),
# "[0] NCCL WARN …", "NCCL WARN …", "114 NCCL WARN …": a cut inside the source location
# keeps its line number alone). Only what precedes the "NCCL INFO|WARN" word is parsed
# here, and it must be nothing but those pieces.
# Forks of NCCL (Alibaba's ACCL) bracket every piece: "[host][pid:tid][dev][init.cc:1815]".
_LOOSE_HEAD = re.compile(
    r"(?:(?:(?P<host>[A-Za-z0-9][\w.\-]{0,80}?)|[.\-][\w.\-]{0,80}?)? ?:?"
    r"(?P<pid>\d+):(?P<tid>\d+) ?"
    r"|(?P<host2>[A-Za-z0-9][\w.\-]{0,80}) (?=\[\d+\])"
    r"|(?:\[(?P<host3>[A-Za-z0-9][\w.\-]{0,80})\])?\[(?P<pid3>\d+):(?P<tid3>\d+)\])?"
    r"(?:\[(?P<dev>\d+)\] ?)?(?:\[(?P<where3>[\w./\-]+:\d+)\] ?)?"
    r"(?:(?P<where>[\w./\-]+:\d+)(?: \((?P<func>\w+)\))? ?|\d{1,6} ?)?"
)
_LOOSE_WORDS = ("NCCL WARN ", "NCCL INFO ")
# A block quote's markers left before the header where no layer of the paste was undone
# around them (a stamp added before the quote: "2024-05-01T10:00:00Z > host:1:2 [0] …").
_LEFT_QUOTE = re.compile(r"^(?:> ?)+")
# NCCL ≤ 2.3 printed no "NCCL" word ("host:pid:tid [dev] include/socket.h:194 WARN …"); with
# its header cut, what is left is the source location and WARN ("include/socket.h:344 WARN
# Socket creation failed : …", nccl issue 210). Taken only with an NCCL source file's path.
_OLD_BARE_WARN = re.compile(
    r"(?P<where>(?:include|misc|transport|graph|collectives|enqueue|init|bootstrap|proxy|net)"
    r"[\w./\-]*\.(?:cc|cu|h):\d+) WARN (?P<msg>.+)"
)
_LOOSE_MAX_HEAD = 160
_RAS_DEAD_PEER = re.compile(r"RAS declaring peer (\S+?)(?:<\d+>)? as DEAD")
# WARN families.
# net_ib.cc: "… with status=12 opcode=129 len=65536 vendor err 129 (Recv)" (≤ 2.2x), and the
# current "NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d) vendor_err=%u"
# (status=IBV_WC_RETRY_EXC_ERR(12)).
_IB_COMPLETION = re.compile(
    r"Got completion from peer (?P<peer>\S+?)(?:<(?P<port>\d+)>)? with "
    r"(?:status=(?:\w+\()?(?P<status>\d+)\)?|error (?P<err>\d+))"
    r".*?vendor[ _]err[ =]?(?P<vendor>\d+)"
    r"(?: \((?P<dir>Send|Recv)\))?"
)
_IB_COMPLETION_OLD = re.compile(
    r"Got completion with error (\d+), opcode \d+, len \d+, vendor err (\d+)"
)
_SOCKET_CLOSED = re.compile(r"Connection closed by remote peer (\S+?)<(\d+)>")
_SOCKET_CLOSED_BARE = re.compile(r"Connection closed by remote peer")
# misc/socket.cc "Net : Call to recv from %s failed : %s"; NCCL ≤ 2.8's include/socket.h
# socketProgressOpt names no peer: "Call to recv failed : %s" (strerror, e.g. "Connection
# reset by peer", horovod issue 210).
# A paste that wrapped or cut the line after the peer keeps "Call to recv from %s" only:
# the call is named only when it failed, so the failure is known, not its reason.
_RECV_FAILED = re.compile(
    r"Call to (?:recv|send)(?: (?:from|to) (\S+?)<(\d+)>)?(?: failed ?: ?(.*)|(?<=>)\s*$)"
)
# socket.h/socket.cc createListenSocket and connectAddress, every release: "Net : Socket
# creation failed : %s" (strerror: "Address family not supported by protocol" for an
# address of a family the host has disabled, "Too many open files"; nccl issue 224). The
# process could not open the socket its transport or bootstrap needs: a local failure.
_SOCKET_CREATE = re.compile(r"Socket creation failed ?: ?(.*)")
# transport/net_socket.cc (≥ 2.4) persistentSocketThread: WARN("NET/Socket : socket progress
# error") when a transfer on one of its sockets failed (after the socket's own WARN, which a
# paste may have lost; horovod issue 3611 has both).
_SOCKET_PROGRESS = re.compile(r"NET/Socket ?: ?socket progress error")
# NCCL 2.19–2.21 misc/socket.cc socketPollConnect, for a connect error other than refused or
# timed out (which it retries): WARN("socketPollConnect: Connect to %s returned %d(%s) errno
# %d(%s)", …) and ncclSystemError, e.g. "… returned 113(No route to host) errno 115(…)".
# 2.22 on, the same function's poll() of the connecting socket: WARN("socketPollConnect
# poll() returned %d%s", ret, … ", no POLLOUT events") with ncclSystemError, and "poll()
# failed with error %s": socketPollConnect only ever polls a connect in progress, so
# every WARN of it is a connection that could not be made.
_CONNECT = re.compile(
    r"(?:socketPollConnect|Call to connect|connect to|socketStartConnect|socketFinalizeConnect)"
    r".*?(?:(\S+?)<(\d+)>)?.*?(exceeded error retry count.*|timeout.*|failed.*|Connection "
    r"refused.*|returned \d+\(.*|(?<=poll\(\) )returned \d+.*)",
    re.IGNORECASE,
)
_IBV = re.compile(r"(?:Call to )?(ibv_\w+|mlx5\w*) failed(?: with error)? ?(.*)")
# The verbs NCCL's IB transport calls only while it sets a connection up: its wrappers
# (misc/ibvwrap.cc, "Call to ibv_create_qp failed") are called for them from
# transport/net_ib.cc ncclIbCreateQp (a queue pair), ncclIbRtrQp/ncclIbRtsQp (moving it to
# ready-to-receive/send) and the completion queue of a new connection (ncclIbInitVerbs,
# 2.7; ncclIbInitCommDevBase, 2.21), whose only callers are ncclIbConnect and ncclIbAccept
# (NVIDIA/nccl v2.7.8-1 and v2.21.5-1 src/transport/net_ib.cc). A failure of one of them
# is a connection that could not be set up, not a link that failed under traffic (a work
# completion's error, ibv_post_send, ibv_poll_cq).
_IBV_CONNECT_CALLS = frozenset({"ibv_create_qp", "ibv_modify_qp", "ibv_create_cq"})
# "NET/IB : Got async event : port error" (≤ 2.2x); "NET/IB : mlx5_0:1 async fatal event: local
# catastrophic error" and "… async fatal event on QP (…)" (current net_ib common.cc).
_IB_ASYNC = re.compile(r"NET/IB ?: (?:Got async event ?: ?(.*)|\S+ async fatal event\b(.*))")
# The first and last forms are a rank's own requests to a proxy thread failing (proxy.cc:
# ncclProxyCallBlocking's "Proxy Call to rank %d failed (%s)", 2.12-2.17, %s the request:
# Init, SharedInit, Setup, Connect, Register…; ncclPollProxyResponse's "Socket recv failed
# while polling for opId=%p", 2.18 on). Those requests are the transports' setup
# (init.cc, transport/{net,p2p,shm,coll_net}.cc), not the data of a running collective.
_PROXY = re.compile(
    r"(?:Proxy Call to rank (?P<rank>\d+) failed(?: \((?P<op3>\w+)\))?"
    r"|\[Proxy Service \d+\] Failed to execute operation "
    r"(?P<op>\w+) from rank (?P<rank2>\d+)|Error encountered progressing operation=(?P<op2>\w+)"
    r"|(?P<poll>Socket recv failed while polling))"
)
# "Cuda failure 'out of memory'", and ≥2.19 with the error number: "Cuda failure 2 'out of memory'".
_CUDA_FAILURE = re.compile(r"Cuda failure (?:\d+ )?'?(?P<what>[^']*)'?")
# The same message as a line of its own, with no header: torch prints NCCL's last WARN body
# on the line after "Last error:" (ProcessGroupNCCL's getNcclErrorDetailStr), and a paste
# may keep only that line. Taken only as the whole line, quotes included (checks.h's
# CUDACHECK "Cuda failure '%s'", cudawrap.h's CUCHECK "Cuda failure %d '%s'" from 2.19):
# the words inside another program's longer message are not NCCL's.
_CUDA_FAILURE_LINE = re.compile(r"Cuda failure (?:\d+ )?'[^'\n]{3,200}'")
# bootstrap.cc: two processes started with the same rank (a launcher or RANK mix-up).
_ROOT_DUPLICATE = re.compile(r"Bootstrap Root : rank (\d+) of (\d+) ranks has already checked in")
# misc/socket.cc at INFO: a connect that is refused and retried (the peer is not listening
# yet, or never will be: wrong address, firewall, the peer's process died).
# Current releases (os/linux.cc): "ncclOsSocketStartConnect: connect to 10.0.0.1<41234>
# returned Connection refused, retrying (3/34) after sleep for 100 msec".
_CONNECT_RETRY = re.compile(
    r"(?:Call to connect|connect to \S+) returned (?P<why>[^,]{1,80}), retrying"
)
_DUPLICATE_GPU = re.compile(
    r"Duplicate GPU detected ?: rank (\d+) and rank (\d+) both on CUDA device (\w+)"
)
_RANK_COUNT = re.compile(r"(?:mismatch in rank count|rank count mismatch)[^\d]*(\d+)\D+(\d+)")
# init.cc (2.4-2.7): WARN("Mismatched collective detected, please check your collective calls
# at and around rank %d. …"). The sentence's first words carry the meaning; a paste wrapped
# or cut before the rank keeps it without its rank.
_MISMATCHED_COLL = re.compile(r"Mismatched collective detected(?:.*?around rank (\d+))?")
# The receive side of a transfer got more bytes than the posted buffer holds: the two
# ranks disagree on the size of the same collective or send/recv. NCCL's net_socket.cc
# ``WARN("NET/Socket : peer %s message truncated : receiving %d bytes instead of %d. If you
# believe your socket network is in a healthy state, there may be a mismatch in collective
# sizes ...")`` (older releases: no peer, no advice) and net_ib.cc ``WARN("NET/IB : req
# %d/%d tag %x peer %s collective mismatch error, local size %d remote size %d")``.
_SIZE_MISMATCH = re.compile(
    r"(?:peer (?P<peer>\S+?)(?:<\d+>)? )?message truncated : receiving (?P<got>\d+) bytes "
    r"instead of (?P<want>\d+)"
    r"|(?:peer (?P<peer2>\S+?)(?:<\d+>)? )?collective mismatch error, local size (?P<local>\d+) "
    r"remote size (?P<remote>\d+)"
)
_BENIGN_WARN = re.compile(
    r"Failed to open libibverbs|NET/Plugin|Could not find real path|No plugin found|"
    r"Failed to find|libnccl-net|Ignoring|NCCL_\w+ set by environment",
)


# NCCL source files that run only while a communicator is created or connected
# (NVIDIA/nccl src/): a WARN or a return code from them is a setup failure
# (views/nccl_setup.py explains the three kinds of setup lines). The WARNs of the two
# library wrappers are setup's too: misc/nvmlwrap.cc's (misc/nvmlwrap.cu before 2.8: loading
# NVML, and the NVML calls
# that only graph/xml.cc, graph/paths.cc and init.cc make, 2.18 to 2.30) and
# misc/cudawrap.cc's own (loading libcuda and its symbols in initOnceFunc, run once by
# ncclCudaLibraryInit from ncclCommInitRank* in init.cc; the CUCHECK macros print the
# caller's file, not this one). transport/nvls.cc (2.17 on) creates, connects and binds
# the NVLink SHARP multicast group: ncclNvlsInit and ncclNvlsSetup, which init.cc calls
# while a communicator is created (nvlsGroupCreate/Connect/AddDevice/BindMem: cuMulticast*
# calls under CUCHECK, "transport/nvls.cc:157 NCCL WARN Cuda failure 1 'invalid argument'"
# then "nvls.cc:328 -> 1" in 2.20), and ncclNvlsBufferSetup on the first collective that
# uses NVLS (2.23 on); its buffer registration runs with collectives (enqueue.cc), which
# views/nccl_setup.py's guard (nothing running logged before the line) leaves out. Its
# teardown (ncclNvlsFree, from commFree) would read as setup's if a CUDA call there failed
# first: a known limit, not seen in the casebook.
_SETUP_SITE = re.compile(
    r"(?:^|/)(?:init\.cc|bootstrap\.cc|transport\.cc|channel\.cc|graph/\w+\.(?:cc|h)"
    r"|misc/(?:nvml|cuda)wrap\.(?:cc|cu)|transport/nvls\.cc)(?::\d+)?$"
)
# Setup messages recognised by their words (bootstrap.cc, transport/net_socket.cc,
# misc/socket.cc, init.cc, transport.cc of NCCL 2.x).
_SETUP_WORDS = re.compile(
    r"no socket interface found|NET/Socket : no interface found|No usable listening interface"
    r"|verify NCCL_(?:OOB_NET|SOCKET)_IFNAME|No interface found in the same subnet"
    r"|Could not find NET with id|Invalid NCCL_COMM_ID|No transport found for rank"
    r"|Mismatched NCCL version detected|Multiple Ranks are using the same GPU"
    r"|improper usage of ncclCommInitRank|Invalid rank requested|Failed to determine local ranks"
    r"|Detected mixed local (?:Coll)?Net device counts|Message truncated : received"
    # /dev/shm too small for the SHM transport's buffers (a container's --shm-size):
    # shmutils.cc / os/linux.cc "Error while creating shared memory segment …".
    r"|shared memory segment|failed to (?:create|extend) (?:shared memory|\S+ to \d+ bytes)"
    r"|Net : error encountered when getting address info",
    re.IGNORECASE,
)
# Setup-file WARNs that do not stop the communicator, or come from its teardown; and the
# runtime hang warning some NCCL releases print from init.cc ("Your program may be
# hanging, this may be caused by a collective mismatch around rank N"), which is about
# collectives already running, not about setting a communicator up.
_HARMLESS = re.compile(
    r"Cannot initialize CollNet|is being ignored|P2P is disabled between NVLINK|destroy|"
    r"commReclaim|Legacy IPC cleanup|Unsetting|defaulting to|falling back|"
    r"may be hanging|collective mismatch",
    re.IGNORECASE,
)


def warn_at_setup(where: str | None, message: str) -> bool:
    """A WARN of no known kind that stops a communicator's setup: printed from the setup
    code, or saying so, and none of the harmless ones."""
    return not _HARMLESS.search(message) and (
        setup_site(where) or bool(_SETUP_WORDS.search(message)) or _row_says_setup(message)
    )


def _row_says_setup(message: str) -> bool:
    """The catalog row of the message says it stops a communicator's setup where it comes
    (meanings.toml ``fields = { setup = true }``: enqueue.cc's "no algorithm/protocol
    available", a configuration no collective can run under); the stage guard of
    views/nccl_setup.py then keeps it only before anything ran."""
    found = default_matcher().match(message)
    meaning = found.row.meaning if found is not None else None
    return meaning is not None and ("setup", True) in meaning.fields


def harmless_warn(message: str) -> bool:
    """One of the set-up files' WARNs that stop nothing, or of teardown (``_HARMLESS``)."""
    return bool(_HARMLESS.search(message))


def setup_site(where: str | None) -> bool:
    """A source location (``init.cc:1523``) in NCCL's communicator-setup code."""
    where = (where or "").strip()
    file = where.rsplit(":", 1)[0] if where[-1:].isdigit() else where
    return bool(_SETUP_SITE.search(file))


@dataclass(frozen=True, slots=True)
class NcclHeader:
    """Who printed an NCCL line, from what its header kept: ``host:pid:tid [dev]`` and the
    WARN's ``file:line (func)``; ``partial`` when a paste cut or mangled it."""

    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    device: int | None = None
    where: str | None = None
    func: str | None = None
    partial: bool = False


def nccl_header(head: str) -> NcclHeader | None:
    """The NCCL header of the text before a message body (``host:1234:5678 [0]
    misc/socket.cc:71 NCCL WARN ``, or what a cut left of it), or None when that text is
    no NCCL header."""
    m = _header(head) or _HEADER_INSIDE.search(head)
    if m is not None:
        rest = m.group("rest")
        where = _HEAD_WHERE.match(rest)
        return NcclHeader(
            m.group("host"),
            int(m.group("pid")),
            int(m.group("tid")),
            as_int(m.group("dev")),
            where.group("where") if where else None,
            where.group("func") if where else None,
        )
    for word in ("NCCL WARN", "NCCL INFO"):
        pos = head.find(word, 0, _LOOSE_MAX_HEAD + len(word))
        if pos >= 0:
            break
    else:
        return None
    loose = _LOOSE_HEAD.fullmatch(head[:pos].rstrip())
    if loose is None:
        return None
    pid, tid = loose.group("pid") or loose.group("pid3"), loose.group("tid") or loose.group("tid3")
    return NcclHeader(
        loose.group("host") or loose.group("host2") or loose.group("host3") or None,
        as_int(pid),
        as_int(tid),
        as_int(loose.group("dev")),
        loose.group("where") or loose.group("where3"),
        loose.group("func"),
        partial=True,
    )


# A whole header after something no prefix reader peeled (a date without seconds); its
# host starts with a letter and its device is there, so that a clock is not taken for it.
_HEADER_INSIDE = re.compile(
    r"(?<![\w.\-])(?P<host>[A-Za-z][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?P<rest>.*)"
)
# The WARN's source location after the header ("misc/socket.cc:71 (func) NCCL WARN ").
_HEAD_WHERE = re.compile(r"(?P<where>[\w./\-]+:\d+)(?: \((?P<func>\w+)\))? (?:NCCL )?WARN")


def _header(text: str) -> re.Match[str] | None:
    if ":" not in text[:80] or "[" not in text:
        return None
    return _HEADER.match(text)


def match_version(text: str) -> Hit | None:
    if "NCCL version" not in text:
        return None
    m = _VERSION.search(text)
    if m is None:
        return None
    version = NcclVersion(version=m.group(1), cuda=m.group(2))
    return Hit(EventKind.NCCL_VERSION, payload=version, key=("version", m.group(1)))


def match_nccl(text: str) -> Hit | None:
    """Recognise one NCCL line (prefixes already peeled)."""
    m = _header(text)
    if m is None:
        return match_version(text) if text.startswith("NCCL version") else None
    host, pid, rest = m.group("host"), int(m.group("pid")), m.group("rest")
    dev = m.group("dev")
    if (w := _WARN.match(rest)) is not None:
        hit = _warn(w.group("msg"), w.group("where"), w.group("func"))
    elif (i := _INFO.match(rest)) is not None:
        hit = _info(i.group("msg"))
    elif (t := _TRACE.match(rest)) is not None:
        hit = _info(t.group("msg"))
    else:
        return None
    if hit is None:
        return None
    hit.host, hit.pid, hit.tid = host, pid, int(m.group("tid"))
    if dev is not None:
        hit.cuda_dev = int(dev)
    return hit


def read_body(
    level: str, body: str, where: str | None = None, func: str | None = None
) -> Hit | None:
    """What this module's readers make of an NCCL message body found without its header
    (a catalog row found it: the header was cut, wrapped away or mangled): ``level`` is
    ``WARN`` or ``INFO``, ``where`` the WARN's ``file:line`` when it survived."""
    if level == "WARN":
        return _warn(body, where or "", func)
    if level == "INFO":
        return _info(body)
    return None


def match_cuda_failure_line(text: str) -> Hit | None:
    """NCCL's ``Cuda failure …`` WARN body alone on its line (see ``_CUDA_FAILURE_LINE``)."""
    body = text.strip()
    if _CUDA_FAILURE_LINE.fullmatch(body) is None:
        return None
    hit = _warn(body, "", None)
    if hit is not None:
        hit.partial_header = True
    return hit


def match_nccl_loose(text: str) -> Hit | None:
    """An NCCL INFO/WARN line whose ``host:pid:tid [dev]`` header is cut or missing.

    Pastes lose the start of lines (a terminal's width, a selection that began mid-line,
    a log shipper that keeps only the message): what is left still says ``NCCL WARN``
    and the message, which are recognised as usual; the pid and device are kept when
    they survived, the host is unknown unless it did."""
    for word in _LOOSE_WORDS:
        pos = text.find(word, 0, _LOOSE_MAX_HEAD + len(word))
        if pos >= 0:
            break
    else:
        if (old := _OLD_BARE_WARN.match(text)) is None:
            return None
        bare = _warn(old.group("msg"), old.group("where"), None)
        if bare is not None:
            bare.partial_header = True
        return bare
    head = _LEFT_QUOTE.sub("", text[:pos].rstrip(), count=1)
    m = _LOOSE_HEAD.fullmatch(head)
    if m is None:
        return None
    msg = text[pos + len(word) :]
    where = m.group("where") or m.group("where3")
    warn = word.startswith("NCCL WARN")
    hit = _warn(msg, where or "", m.group("func")) if warn else _info(msg)
    if hit is None:
        return None
    pid, tid = m.group("pid") or m.group("pid3"), m.group("tid") or m.group("tid3")
    if pid is not None:
        hit.pid = int(pid)
    host = m.group("host") or m.group("host2") or m.group("host3")
    if host:
        hit.host = host
    if m.group("dev") is not None:
        hit.cuda_dev = int(m.group("dev"))
    if tid is not None:
        hit.tid = int(tid)
    hit.partial_header = True
    return hit


def _info(msg: str) -> Hit | None:
    head = msg[:40]
    if " -> " in msg and (r := _RETURN.match(msg)) is not None:
        rc = int(r.group("rc"))
        chain = NcclWarn(
            where=r.group("where"),
            rc=rc,
            rc_name=NcclResult.of_code(rc),
            setup=setup_site(r.group("where")),
        )
        return Hit(EventKind.NCCL_RETURN, payload=chain, key=("rc", rc))
    if "comm 0x" in msg and (" nranks " in msg or " nRanks " in msg) and "rank " in msg:
        m = _INIT.search(msg)
        if m is not None:
            return _init(m)
    if head.startswith("Init timings") and (t := _INIT_TIMINGS.match(msg)):
        rank, nranks = int(t.group(1)), int(t.group(2))
        timings = NcclInit(state=NcclInitState.COMPLETE, rank=rank, nranks=nranks)
        return Hit(EventKind.NCCL_INIT, payload=timings, key=("timings", rank, nranks))
    if " via " in msg:
        v = _VIA.search(msg)
        if v is not None:
            parts = v.group(1).split("/")
            if parts[0].startswith("direct"):  # "direct shared memory"
                via = Via(Transport.SHM, "direct")
            else:
                via = Via(parse_enum(Transport, parts[0]), parts[1] if len(parts) > 1 else None)
            return Hit(EventKind.NCCL_TRANSPORT, payload=NcclTransport(via=(via,)))
    if head.startswith(
        (
            "AllReduce",
            "AllGather",
            "ReduceScatter",
            "Broadcast",
            "Reduce",
            "Send",
            "Recv",
            "AllToAll",
            "AlltoAll",
            "Gather",
            "Scatter",
        )
    ):
        c = _COLL.match(msg)
        if c is not None:
            coll = NcclColl(
                op=c.group("op"),
                opcount=int(c.group("opcount"), 16),
                count=int(c.group("count")),
                datatype=int(c.group("dtype")),
                redop=int(c.group("redop")),
                root=int(c.group("root")),
                comm=c.group("comm"),
                nranks=as_int(c.group("nranks")),
            )
            return Hit(EventKind.NCCL_COLL, payload=coll)
    if "Bootstrap" in head and (b := _first_iface(msg)) is not None:
        return Hit(
            EventKind.NCCL_NETWORK,
            payload=_iface(NetRole.BOOTSTRAP, b[0], b[1], msg),
            key=("bootstrap", b[0]),
        )
    if head.startswith("NET"):
        if _NO_IB.search(msg):
            no_ib = NcclNetwork(role=NetRole.IB, iface="none")
            return Hit(EventKind.NCCL_NETWORK, payload=no_ib, key=("noib",))
        if (o := _OOB.search(msg)) is not None:
            oob = _iface(NetRole.OOB, o.group(1), o.group(2), "")
            return Hit(EventKind.NCCL_NETWORK, payload=oob, key=("oob", o.group(1)))
        if (n := _NET_IFACE.search(msg)) is not None:
            return Hit(
                EventKind.NCCL_NETWORK,
                payload=_iface(NetRole.SOCKET, n.group(1), n.group(2), msg),
                key=("socket", n.group(1)),
            )
    if head.startswith("Using network") and (u := _USING_NETWORK.match(msg)):
        network = NcclNetwork(role=NetRole.NETWORK, network=u.group(1))
        return Hit(EventKind.NCCL_NETWORK, payload=network, key=("network", u.group(1)))
    if "retrying" in msg and (cr := _CONNECT_RETRY.search(msg)) is not None:
        why = cr.group("why").strip()
        retry = NcclTransportError(
            error=LinkError(_reason(why), connect=True),
            message=msg.strip()[:200],
            retrying=True,
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=retry, key=("connect_retry", why))
    if "Service thread" in msg and (s := _SERVICE_CLOSED.search(msg)):
        lost = ConnectionLost(backend=Backend.NCCL, peer_local_rank=int(s.group(1)))
        return Hit(EventKind.CONNECTION_LOST, payload=lost, key=("svc", s.group(1)))
    if "RAS" in head and (r := _RAS_DEAD_PEER.search(msg)):
        dead = RasComm(peer=r.group(1))
        return Hit(EventKind.RAS_DEAD, payload=dead, key=("rasdead", r.group(1)))
    if "NCCL version" in msg:
        return match_version(msg)
    return None


def _first_iface(msg: str) -> tuple[str, str] | None:
    """(interface, address) of a ``Bootstrap : Using`` line, either format."""
    if (b := _BOOTSTRAP.search(msg)) is not None:
        return b.group(1), b.group(2)
    items = _IFACE_ITEM.findall(msg)
    return (items[0][1], items[0][2]) if items else None


# Interfaces other nodes cannot reach: loopback, container and VM bridges.
_LOCAL_IFACE = re.compile(
    r"^(?:lo|docker\d*|virbr\d*|veth\w*|cni\d*|flannel[\w.]*|br-\w+|podman\d*)$"
)


def _is_local(iface: Iface) -> bool:
    """An address other nodes cannot reach: loopback, a container or VM bridge, or an
    IPv6 link-local address (fe80::, valid on one link only)."""
    low = iface.address.lower()
    return bool(_LOCAL_IFACE.match(iface.name)) or low.startswith(("127.", "::1", "fe80:"))


def _iface(role: NetRole, iface: str, ip: str, msg: str) -> NcclNetwork:
    """The first interface and address, and (when NCCL listed several) all of them, and
    those other nodes cannot reach: the bootstrap uses its first interface only, the
    socket transport all that it lists (NCCL ≤ 2.11 prints them as ``[0]ens5:…<0>
    [1]veth…:fe80::…<0>``)."""
    items = _IFACE_ITEM.findall(msg) if "[1]" in msg else []
    ifaces = tuple(Iface(name, addr) for _, name, addr in items) if len(items) > 1 else ()
    first = Iface(iface, ip)
    used = ifaces if role is NetRole.SOCKET and ifaces else (first,)
    return NcclNetwork(
        role=role,
        iface=iface,
        ip=ip,
        ifaces=ifaces,
        unreachable=tuple(i for i in used if _is_local(i)),
        first_unreachable=_is_local(first),
    )


def _init(m: re.Match[str]) -> Hit:
    rest = m.group("rest")
    state = _INIT_STATE.search(rest)
    tail = {key: found.group(1) for key, p in _INIT_TAIL.items() if (found := p.search(rest))}
    word = state.group(1).split()[0].lower() if state else "start"
    if state is not None and state.group(1) == "Init COMPLETE":
        word = "complete"
    elif state is not None and state.group(1) == "Init START":
        word = "start"
    elif state is None and m.group("api") is None and "cudaDev" in rest and "nvmlDev" in rest:
        word = "start"  # ≤2.11 "comm … rank … nranks … cudaDev … nvmlDev … - Init COMPLETE" variant
    elif state is None and " nNodes " in rest:
        # ≥2.19 "comm 0x… rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0", logged
        # mid-init: it ties the process to its rank, and says nothing of init progress.
        word = "topology"
    init = NcclInit(
        comm=m.group("comm"),
        rank=int(m.group("rank")),
        nranks=int(m.group("nranks")),
        state=NcclInitState(word),
        api=m.group("api"),
        device=as_int(tail.get("cudaDev")),
        nvml_device=as_int(tail.get("nvmlDev")),
        bus_id=tail.get("busId"),
        comm_id=tail.get("commId"),
    )
    return Hit(EventKind.NCCL_INIT, payload=init, key=("init", init.comm, word))


def _warn(msg: str, where: str, func: str | None) -> Hit | None:
    base = {"where": where or None, "func": func, "message": msg.strip()}
    if (c := _IB_COMPLETION.search(msg)) is not None:
        status = c.group("status") or c.group("err")
        direction = c.group("dir")
        ib = NcclTransportError(
            **base,  # type: ignore[arg-type]
            error=LinkError(LinkFailure.IB_COMPLETION, ib_status=int(status)),
            peer=c.group("peer"),
            port=as_int(c.group("port")),
            vendor_err=int(c.group("vendor")),
            direction=Direction(direction.lower()) if direction else None,
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=ib, key=("ib", c.group("peer"), status))
    if (c2 := _IB_COMPLETION_OLD.search(msg)) is not None:
        ib = NcclTransportError(
            **base,  # type: ignore[arg-type]
            error=LinkError(LinkFailure.IB_COMPLETION, ib_status=int(c2.group(1))),
            vendor_err=int(c2.group(2)),
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=ib, key=("ib", None, c2.group(1)))
    if (s := _SOCKET_CLOSED.search(msg)) is not None:
        closed = NcclTransportError(
            **base,  # type: ignore[arg-type]
            error=LinkError(LinkFailure.SOCKET_CLOSED),
            peer=s.group(1),
            port=int(s.group(2)),
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=closed, key=("closed", s.group(1)))
    if _SOCKET_CLOSED_BARE.search(msg):
        closed = NcclTransportError(**base, error=LinkError(LinkFailure.SOCKET_CLOSED))  # type: ignore[arg-type]
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=closed, key=("closed", None))
    if (r := _RECV_FAILED.search(msg)) is not None:
        reason = (r.group(3) or "").strip()
        failed = NcclTransportError(
            **base,  # type: ignore[arg-type]
            error=LinkError(_reason(reason)),
            peer=r.group(1),
            port=as_int(r.group(2)),
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=failed, key=("recv", r.group(1), reason))
    if _SOCKET_PROGRESS.search(msg):
        progress = NcclTransportError(**base, error=LinkError(LinkFailure.SOCKET_PROGRESS))  # type: ignore[arg-type]
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=progress, key=("progress",))
    if (sc := _SOCKET_CREATE.search(msg)) is not None:
        # The reporting process's own failure, no peer involved.
        create = NcclTransportError(
            **base,  # type: ignore[arg-type]
            error=LinkError(LinkFailure.SOCKET_CREATION_FAILED),
            local=True,
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=create, key=("socket", sc.group(1)[:60]))
    if (d := _DUPLICATE_GPU.search(msg)) is not None:
        duplicate = NcclConfigError(
            **base,  # type: ignore[arg-type]
            problem=ConfigProblem.DUPLICATE_GPU,
            rank_a=int(d.group(1)),
            rank_b=int(d.group(2)),
            device=d.group(3),
        )
        return Hit(
            EventKind.NCCL_CONFIG_ERROR, payload=duplicate, key=("dup", d.group(1), d.group(2))
        )
    if (rd := _ROOT_DUPLICATE.search(msg)) is not None:
        twice = NcclConfigError(
            **base,  # type: ignore[arg-type]
            problem=ConfigProblem.DUPLICATE_RANK,
            rank_a=int(rd.group(1)),
            count_a=int(rd.group(2)),
        )
        return Hit(EventKind.NCCL_CONFIG_ERROR, payload=twice, key=("duprank", rd.group(1)))
    if (n := _RANK_COUNT.search(msg)) is not None:
        counts = NcclConfigError(
            **base,  # type: ignore[arg-type]
            problem=ConfigProblem.RANK_COUNT_MISMATCH,
            count_a=int(n.group(1)),
            count_b=int(n.group(2)),
        )
        return Hit(EventKind.NCCL_CONFIG_ERROR, payload=counts, key=("rankcount",))
    if (sz := _SIZE_MISMATCH.search(msg)) is not None:
        size = CollectiveMismatch(
            **base,  # type: ignore[arg-type]
            source=MismatchSource.NCCL,
            error=MismatchError.SIZE_MISMATCH,
            peer=sz.group("peer") or sz.group("peer2"),
            bytes_received=as_int(sz.group("got") or sz.group("local")),
            bytes_expected=as_int(sz.group("want") or sz.group("remote")),
        )
        return Hit(EventKind.COLLECTIVE_MISMATCH, payload=size, key=("ncclsize", size.peer))
    if (mc := _MISMATCHED_COLL.search(msg)) is not None:
        mismatched = CollectiveMismatch(
            **base,  # type: ignore[arg-type]
            source=MismatchSource.NCCL,
            error=MismatchError.MISMATCHED_COLLECTIVE,
            peer_rank=as_int(mc.group(1)),
        )
        return Hit(
            EventKind.COLLECTIVE_MISMATCH, payload=mismatched, key=("ncclmismatch", mc.group(1))
        )
    if (cu := _CUDA_FAILURE.search(msg)) is not None:
        what = cu.group("what").strip()
        kind = EventKind.CUDA_OOM if "out of memory" in what else EventKind.CUDA_ERROR
        # A CUDA call that failed in setup code (transport.cc's CUDACHECK while the SHM or
        # P2P buffers are set up) is that setup's failure (views/nccl_setup.py).
        # And one whose error CUDA documents as the build lacking code for this GPU (a
        # kernel image or device function not compiled for its architecture: the
        # catalog's cuda-build-lacks-device family), wherever NCCL checked it: NCCL's
        # kernels cannot launch on this machine, its install failing on first use, not
        # the GPU (NVIDIA/nccl#444: NCCL 2.7.8 without sm_35 kernels failing its first
        # launch, enqueue.cc, on every K40m). Not a device index the node does not have
        # (the rank's own configuration, views/death_kind.py's cuda-caller-request).
        setup = kind is EventKind.CUDA_ERROR and (
            warn_at_setup(where, msg.strip()) or cuda_build_lacks_device(what)
        )
        failure = CudaFailure(**base, error=what, setup=setup, by_nccl=True)  # type: ignore[arg-type]
        return Hit(kind, payload=failure, key=("cuda", what))
    if (ibv := _IBV.search(msg)) is not None or _IB_ASYNC.search(msg) is not None:
        connecting = ibv is not None and ibv.group(1) in _IBV_CONNECT_CALLS
        link = LinkError(LinkFailure.IB_VERBS, connect=connecting)
        verbs = NcclTransportError(**base, error=link)  # type: ignore[arg-type]
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=verbs, key=("ibv", msg[:60]))
    if (p := _PROXY.search(msg)) is not None:
        proxy = NcclTransportError(
            **base,  # type: ignore[arg-type]
            error=LinkError(
                LinkFailure.PROXY,
                proxy_request=bool(p.group("rank") or p.group("poll")),
                proxy_op=p.group("op") or p.group("op2") or p.group("op3"),
            ),
            peer_rank=as_int(p.group("rank") or p.group("rank2")),
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=proxy, key=("proxy", msg[:60]))
    if (cn := _CONNECT.search(msg)) is not None:
        connect = NcclTransportError(
            **base,  # type: ignore[arg-type]
            error=LinkError(_reason(cn.group(3)), connect=True),
            peer=cn.group(1),
        )
        return Hit(EventKind.NCCL_TRANSPORT_ERROR, payload=connect, key=("connect", cn.group(1)))
    if _BENIGN_WARN.search(msg):
        return None
    return Hit(
        EventKind.NCCL_WARN,
        payload=NcclWarn(**base, setup=warn_at_setup(where, msg.strip())),  # type: ignore[arg-type]
        key=("warn", msg[:80]),
    )


def _reason(reason: str) -> LinkFailure:
    low = reason.lower()
    for needle, failure in (
        ("reset by peer", LinkFailure.CONNECTION_RESET),
        ("broken pipe", LinkFailure.BROKEN_PIPE),
        ("refused", LinkFailure.CONNECTION_REFUSED),
        ("retry count", LinkFailure.RETRY_EXCEEDED),
        ("timed out", LinkFailure.TIMEOUT),
        ("timeout", LinkFailure.TIMEOUT),
        ("no route", LinkFailure.NO_ROUTE),
        ("unreachable", LinkFailure.UNREACHABLE),
    ):
        if needle in low:
            return failure
    return LinkFailure.FAILED
