"""NCCL reported a network or transport failure

## What it means
NCCL's proxy or bootstrap thread lost a connection: an InfiniBand/RoCE completion
error (`Got completion from peer … with status=12 … vendor err 129`: retry counter
exceeded, the link or the remote port went away), a socket closed or reset by the
remote peer, a connection that could not be made (`socketPollConnect … exceeded error
retry count`, connection refused/timed out), a failing `ibv_*` call, or a proxy
operation that failed. Torch then surfaces `ncclRemoteError`/`ncclSystemError`
(`NCCL error: remote process exited or there was a network error`).

## Why it hangs
Collectives move data over these connections; when one breaks, the collective on every
rank of the communicator can no longer complete, and the ranks wait until the
watchdog times out.

## Evidence used
NCCL WARN lines (new and old formats, `NET/IB`, `NET/IBext`, `NET/Socket`, proxy; NCCL ≤ 2.8's
`include/socket.h` `Call to recv failed : Connection reset by peer` with no peer, and
`Net : Socket creation failed : …`, a failure of the reporting process's own socket whose
culprit is that process) and the
`Last error:` text that torch prints after an NCCL error, with the peer address. Peer
IPs are mapped to hosts through the NCCL bootstrap/OOB interface lines and hosts to
ranks through the NCCL init lines. Another framework's exception that carries NCCL's
remote-error string (Horovod's `ncclAllReduce failed: remote process exited or there was
a network error`, cupy's `NCCL_ERROR_REMOTE_ERROR`), or a system error of a collective
call, counts at low confidence: it names no peer and a peer that exited looks the same.
When a rank crashed before the first transport error (HD030/HD031), the lost connections
are its consequence and this finding is only a warning; so are NCCL's own WARNs that a peer
closed or reset its connection below a timeout or a process being taken down in the same
file (ProcessGroupNCCL's "… we are taking the entire process down"): the process taken
down closed its sockets, and its peers' proxies say so. When the failing call's return-code
chain (`… -> 2` lines after the WARN) runs through `bootstrap.cc`/`bootstrap.cu`, the
connection belonged to NCCL's bootstrap and the finding is an init/bootstrap hang; so it
is when torch's synchronous `NCCL error in: …` (communicator creation) carries a failed
proxy call as its last error (`Proxy Call to rank N failed (Connect)`, `Socket recv failed
while polling for opId=…`) before any collective ran: NCCL's transport setup failed.
The same holds for any failed proxy operation that creates connections (`Init`,
`SharedInit`, `Setup`, `Connect` of proxy.h's `ncclProxyMsgType`, named in `Proxy Call to
rank N failed (Connect)` or `[Proxy Service N] Failed to execute operation Connect from
rank M`) when nothing shows a collective before it: the stage is setup, whatever socket
error lies beneath (`Start`, which moves a running collective's data, is not setup).
So is a verbs call that only NCCL's IB connection set-up makes failing (`Call to
ibv_create_qp failed`, `ibv_modify_qp`, `ibv_create_cq` from misc/ibvwrap.cc: net_ib.cc
calls them for a queue pair of ncclIbConnect or ncclIbAccept). So is a socket NCCL
cannot even create (`Net : Socket creation failed`: misc/socket.cc creates sockets only
to listen or connect) before any collective, and a WARN of the
intra-node transports (`transport/p2p.cc`, `transport/shm.cc`: opening a peer's CUDA IPC
handle, a shared-memory segment), whose code only sets connections up.
So is any transport error raised from a wrapper's first collective (DDP's
`_verify_param_shape_across_processes` or `_sync_module_states`, DeepSpeed's `_broadcast_model`,
FSDP's `_sync_module_params_and_buffers`: the innermost frame of the traceback of torch's
synchronous `NCCL error in: …`) before any collective or training step: torch creates the
communicator on its first collective and NCCL connects the peers then, so whatever layer
failed (a network plugin's completion error, `NET/OFI … completed with error`), the
communicator never came up (views/nccl_setup.py `first_collective_of`).
So, last, is any transport error whose own source lines show set-up: its WARN's place and
its `-> rc` chain looked up in the table generated from every NCCL release
(`scripts/catalog/stages.py`, `parsers/catalog/data/stages/nccl.json`: the function each
such line sits in, per release), where the innermost line with a stage sits in set-up code
(a transport's connect or setup, communicator creation, the bootstrap) in every release
that has calls at all the chain's lines (and is the version the log prints): a memory
registration failing under `sendProxyConnect` is set-up, one failing under the proxy's
progress is not. A transport WARN that lost its place (torch's `Last error:` detail, a
header cut or re-prefixed by a launcher) is read by the functions that print its words in
the message catalog, set-up where every one of them is (`ncclSocketInit: connecting to
address … with family N is neither AF_INET nor AF_INET6`: misc/socket.cc's ncclSocketInit,
called only to bootstrap, listen, accept or connect).
Where every error is NCCL's socket layer finding the peer's end closed (`socketProgress:
Connection closed by remote peer <host><port>`, as a WARN or as the `Last error:` of a
running communicator's error: misc/socket.cc, recv(2) returned 0, and from NCCL 2.24 also
a reset or a broken pipe) and nothing places it in set-up, the finding is the peer's
process ending (`rank_dead_or_crashed`, a hint naming the peer's host and ranks): a
process that exits or is killed has its sockets closed by its kernel, while a link or a
switch that fails leaves the connection to time out or be unreachable, and does not close
it in order.
With no NCCL error at all, gloo's pair reset by its peer (`gloo/transport/tcp/pair.cc`
`Read error [addr]:port: Connection reset by peer`, ECONNRESET) is the transport's failure
at low confidence when nothing else is shown: no rank that died, timed out or was taken
down, and no peer's orderly close (`Connection closed by peer`, its process ended) beside
it, and a peer on another host (a loopback address, 127.0.0.0/8 or ::1, is a process of the
same host: no network lies between them); a peer killed mid-transfer resets its connections
too, and a launcher reports the kill after them, so any such line anywhere makes the reset
its echo.
With no NCCL error at all, non-zero InfiniBand/RoCE port error counters
(`/sys/class/infiniband/<dev>/ports/<port>/hw_counters/local_ack_timeout_err:91316`,
`perfquery`'s `SymbolErrorCounter`) give a low-confidence finding: they count since the
driver loaded.

## How to confirm
On the named host(s): `ibstat`/`ibv_devinfo` (port state, errors), `dmesg -T` for link
flaps (`mlx5_core … link down`), switch port counters; `ip addr` and `ping` between the
hosts on the interface NCCL chose. `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET` shows
which interfaces and devices NCCL uses.

## How to fix
Replace or reseat the failing link, cable or NIC; drain the node. For configuration
problems, pin the interfaces (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`), check `NCCL_IB_GID_INDEX`
for RoCE, and raise `NCCL_IB_TIMEOUT`/`NCCL_IB_RETRY_CNT` only for lossy fabrics.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.host import CounterGroup, LinkEvent, NicCounter, NicLink
from hangdoc.analyzer.payloads.nccl import (
    LinkError,
    LinkFailure,
    NcclError,
    NcclInit,
    NcclInitState,
    NcclNetwork,
    NcclWarn,
    SourceStage,
)
from hangdoc.analyzer.payloads.nccl import NcclTransportError as TransportWarn
from hangdoc.analyzer.payloads.torch_pg import Backend, ConnectionLost, NcclResult, PeerLoss
from hangdoc.analyzer.views.deaths import first_deaths
from hangdoc.analyzer.views.nccl_setup import first_collective_of, first_running
from hangdoc.analyzer.views.timeline import Placed, Timeline, before
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_STATUS = {
    12: "IB transport retry counter exceeded (link or remote port down)",
    13: "IB receiver-not-ready retry exceeded",
    4: "IB local protection error (GPUDirect RDMA / memory registration)",
    10: "IB remote access error",
    11: "IB remote operation error",
    5: "IB work request flushed (follows an earlier error)",
}
_FLUSHED = 5  # IB work requests flushed after an earlier error: its echo


def short(host: str) -> str:
    return host.split(".", 1)[0].lower()


def host_maps(tl: Timeline) -> tuple[dict[str, str], dict[str, set[int]]]:
    """(ip → host, host → ranks) from NCCL interface and init lines of every file."""
    ip_host: dict[str, str] = {}
    host_ranks: dict[str, set[int]] = {}
    for p in tl.events:
        host = p.event.host
        if host is None or not p.kind.startswith("nccl"):
            continue
        network = p.event.payload_as(NcclNetwork)
        ip = network.ip if network is not None else None
        if ip:
            ip_host.setdefault(ip, short(host))
        if p.rank is not None:
            host_ranks.setdefault(short(host), set()).add(p.rank)
    return ip_host, host_ranks


def _link(p: Placed) -> LinkError | None:
    """The transport failure an NCCL WARN (or an NCCL error's last error) names."""
    payload = p.event.payload
    if isinstance(payload, TransportWarn):
        return payload.error
    if isinstance(payload, NcclError):
        return payload.last_error_link
    return None


def _peer(p: Placed) -> str | None:
    payload = p.event.payload
    if isinstance(payload, TransportWarn):
        return payload.peer
    if isinstance(payload, NcclError):
        return payload.last_error_peer
    return None


def describe(p: Placed) -> str:
    error = p.event.payload_as(NcclError)
    if error is not None and error.aborted:
        return "communicator aborted"
    link = _link(p)
    if link is None:
        return "error"
    if link.failure == LinkFailure.IB_COMPLETION and link.ib_status is not None:
        status = link.ib_status
        return _STATUS.get(status, f"IB completion error status {status}")
    return link.tag.replace("_", " ")


class NcclTransportError(Rule):
    __doc__ = __doc__
    id = "HD200"
    name = "nccl-transport-error"
    summary = "NCCL lost a network connection (IB completion error, socket closed/reset)"
    categories = (Category.NCCL_NETWORK, Category.NCCL_INIT, Category.RANK_DEAD, Category.UNKNOWN)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        # "Call to connect returned …, retrying" is normal while peers start; it counts
        # only from processes that never completed an NCCL init afterwards.
        completed = [
            (p.event.host, p.event.pid, p.index)
            for p in tl.of(EventKind.NCCL_INIT)
            if (init := p.event.payload_as(NcclInit)) and init.state == NcclInitState.COMPLETE
        ]
        errors = [
            p
            for p in tl.of(EventKind.NCCL_TRANSPORT_ERROR)
            if not (error := p.event.payload_as(TransportWarn))
            or not error.retrying
            or not any(
                (h, pid) == (p.event.host, p.event.pid) and i > p.index for h, pid, i in completed
            )
        ]
        errors += [
            p
            for p in tl.of(EventKind.NCCL_ERROR)
            if (nccl := p.event.payload_as(NcclError))
            and (nccl.last_error_peer or nccl.last_error_link or _remote_error(p))
        ]
        if not errors:
            reset = self._gloo_reset(tl)
            if reset is not None:
                yield reset
                return
            counters = _counters(tl)
            if counters is not None:
                yield counters
            return
        primary = [p for p in errors if not _flushed(p)] or errors
        ip_host, host_ranks = host_maps(tl)
        peers: Counter[str] = Counter()
        reporters: dict[str, set[str]] = {}
        for p in primary:
            peer = _peer(p)
            reporter = short(p.event.host or f"rank{p.rank}")
            if peer:
                name = ip_host.get(peer, short(peer) if not peer[0].isdigit() else peer)
                peers[name] += 1
                reporters.setdefault(name, set()).add(reporter)
        reporter_hosts = {short(p.event.host or f"rank{p.rank}") for p in primary}
        culprit_hosts: list[str]
        if len(peers) == 1 or (peers and len(reporters[peers.most_common(1)[0][0]]) >= 2):
            culprit_hosts = [peers.most_common(1)[0][0]]
            how = "named as the remote peer by " + ", ".join(sorted(reporters[culprit_hosts[0]]))
        elif len(reporter_hosts) == 1 and len(peers) >= 2:
            culprit_hosts = sorted(reporter_hosts)
            how = f"the only host reporting errors, with {len(peers)} different peers"
        else:
            culprit_hosts = sorted(peers) or sorted(reporter_hosts)
            how = "the peers named in the errors"
        culprits = sorted({r for h in culprit_hosts for r in host_ranks.get(h, set())})
        local = sorted({p.rank for p in primary if _local(p) and p.rank is not None})
        if not peers and local:
            # A failure of the reporter's own socket ("Socket creation failed"): the
            # process that says so is the one that cannot connect, not its whole host.
            culprits = local
            how = "the process whose own socket failed"
        reporters_ranks = sorted({p.rank for p in primary if p.rank is not None} - set(culprits))
        first = primary[0]
        crashes = [d for d in first_deaths(tl) if d.certain and before(d.placed, first) is True]
        kinds = Counter(describe(p) for p in primary).most_common(2)
        involved = ", ".join(culprit_hosts[:4]) or "an unknown peer"
        title = f"NCCL network failure ({kinds[0][0]}) involving {involved}"
        if culprits:
            title += f" ({ranks_text(culprits)})"
        explanation = (
            f"{len(primary)} NCCL transport error(s): "
            + "; ".join(f"{k} ×{n}" for k, n in kinds)
            + f". Suspected: {', '.join(culprit_hosts) or 'unknown'} ({how})."
        )
        severity = Severity.ERROR
        category = Category.NCCL_NETWORK
        if all(_connecting(p) for p in primary):
            category = Category.NCCL_INIT
            title = f"NCCL could not connect to its peers ({kinds[0][0]})"
            explanation += (
                " Connections that cannot even be set up point at bootstrap/interface "
                "configuration (NCCL_SOCKET_IFNAME, firewall, MASTER_ADDR) more than at a link."
            )
        running_from = first_running(tl)
        if category is Category.NCCL_NETWORK and all(
            _creating(p) and p.index < running_from for p in primary
        ):
            category = Category.NCCL_INIT
            title = f"NCCL could not create its sockets ({kinds[0][0]}) before any collective ran"
            explanation += (
                " NCCL creates a socket only to listen or to connect (misc/socket.cc "
                "ncclSocketListen, ncclSocketConnect), i.e. while it sets connections up, and "
                "nothing shows a collective before it: setup failed on this host (no usable "
                "interface or address family: NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY)."
            )
        at_setup = [_proxy_request_at_setup(p, running_from) for p in primary]
        if (
            category is Category.NCCL_NETWORK
            and any(at_setup)
            and all(done or _proxy_request(p) for p, done in zip(primary, at_setup, strict=True))
        ):
            category = Category.NCCL_INIT
            title = (
                f"NCCL could not set up its transport connections ({kinds[0][0]}) while "
                "torch created the communicator"
            )
            explanation += (
                " The failing call is a proxy call (NCCL's setup requests to its proxy "
                "threads: Init, Setup, Connect), raised by torch's synchronous NCCL check "
                "before any collective ran: communicator setup failed, not a running link."
            )
        setting_up = sorted({op for p in primary if (op := _setup_op(p, running_from))})
        if category is Category.NCCL_NETWORK and setting_up:
            category = Category.NCCL_INIT
            title = (
                f"NCCL could not set up its connections ({kinds[0][0]}): its proxy's "
                f"{'/'.join(setting_up)} failed before any collective ran"
            )
            explanation += (
                f" The failing proxy operation ({', '.join(setting_up)}) is one NCCL uses "
                "only to create a communicator's connections (proxy.h ncclProxyMsgType), and "
                "nothing shows a collective completing before it: communicator setup failed, "
                "not a link that was running."
            )
        if category is Category.NCCL_NETWORK and all(
            _intra_node_setup(p, running_from) for p in primary
        ):
            category = Category.NCCL_INIT
            title = (
                f"NCCL could not connect GPUs of one node ({kinds[0][0]}) before any collective ran"
            )
            explanation += (
                " The WARN comes from NCCL's intra-node transports (transport/p2p.cc, "
                "shm.cc), whose code only sets connections up (CUDA IPC handles, peer "
                "mappings, shared-memory segments), and nothing shows a collective before it: "
                "communicator setup failed on this node, not a network link."
            )
        if category is Category.NCCL_NETWORK and all(
            _source_setup(p, running_from) for p in primary
        ):
            category = Category.NCCL_INIT
            title = (
                f"NCCL failed while setting up its connections ({kinds[0][0]}) before any "
                "collective ran"
            )
            explanation += (
                " The WARN and its return-code chain sit in NCCL's set-up code (a transport's "
                "connection set-up, the communicator's creation) in every NCCL release those "
                "source lines can come from, and nothing shows a collective completing or a "
                "training step before it: the connections never came up, whatever layer "
                "failed beneath (the interfaces, the HCAs, memory registration, versions)."
            )
        if category is Category.NCCL_NETWORK and all(_in_bootstrap(p) for p in primary):
            category = Category.NCCL_INIT
            title = f"NCCL's bootstrap lost a connection ({kinds[0][0]}) during communicator init"
            explanation += (
                " The failing call's return-code chain runs through bootstrap.cc: the "
                "connection belonged to the out-of-band setup every rank must finish before "
                "the communicator exists, so init stalls or fails on every rank."
            )
        wrappers = {first_collective_of(tl, p, running_from) for p in primary}
        at_first_collective = category is Category.NCCL_NETWORK and None not in wrappers
        if at_first_collective:
            category = Category.NCCL_INIT
            wrapper = sorted(w for w in wrappers if w is not None)[0]
            what = f" ({kinds[0][0]})" if kinds[0][0] != "error" else ""
            title = (
                f"NCCL failed{what} in the first collective of {wrapper}, which sets the "
                "communicator up"
            )
            explanation += (
                f" The error was raised from {wrapper}'s construction, the job's first "
                "collective on the communicator (torch creates an NCCL communicator on its "
                "first collective, and NCCL connects the peers then), and nothing shows a "
                "collective before it: the communicator never came up. Which layer failed "
                "the error says; that it failed while setting up points at the set-up's "
                "configuration (interfaces, routes, the fabric's provider) before a link "
                "that was running."
            )
        if all(_remote_error(p) for p in primary) and not at_first_collective:
            who = f" on {ranks_text(reporters_ranks)}" if reporters_ranks else ""
            said = first.event.payload_as(NcclError) or NcclError()
            title = f"NCCL failed in a collective{who}: {said.call or 'an NCCL call'} "
            title += f"failed with '{said.message}'"
            explanation += (
                " NCCL's remote or system error in a running collective means a connection "
                "to a peer broke: the peer process exited or the network between them "
                "failed; the error names neither."
            )
        unstaged = category is Category.NCCL_NETWORK and _stage_unshown(tl, primary, running_from)
        if unstaged:
            # A working link that broke is what the category claims; a peer that closed
            # or reset its connection, with nothing running before it, shows neither the
            # link failing (a peer that exited does the same) nor the stage.
            category = Category.UNKNOWN
            title += ": at set-up or on a running link, not shown"
            explanation += (
                " Every error is a peer closing or resetting its connection, which a peer "
                "process that exited does as well as a failing network, and nothing before "
                "it shows the communicator working (no collective, no training step, no "
                "NCCL line on the data path): set-up and a running link read the same here. "
                "The peers are named; the stage, and with it the cause, is not shown."
            )
        peer_ended = category is Category.NCCL_NETWORK and all(_peer_closed(p) for p in primary)
        if peer_ended:
            # A running connection the peer closed in order: its process ended, not a link.
            category = Category.RANK_DEAD
            title = (
                f"a peer process of NCCL's ended: {involved} closed its connection"
                + (f" ({ranks_text(culprits)})" if culprits else "")
                + " while collectives ran"
            )
            explanation += (
                " Every error is NCCL's socket layer finding the peer's end closed "
                "('Connection closed by remote peer': recv(2) returned 0, an orderly close, "
                "or from NCCL 2.24 a reset; misc/socket.cc socketProgress), on a communicator "
                "that was running. "
                "A peer closes its end so when its process exits or is killed (the kernel "
                "closes a dead process's sockets); a failing link or switch does not close "
                "a connection in order, it times out or is unreachable. Look at what ended "
                "the peer's process (its own log, the launcher, the OOM killer, a node "
                "taken away)."
            )
        if crashes:
            severity = Severity.WARNING
            explanation += (
                f" Rank {crashes[0].rank} failed before these errors "
                f"({crashes[0].summary}); the lost connections are probably its consequence."
            )
        echoes = all(_peer_gone_after_teardown(p, tl) for p in primary)
        if echoes:
            severity = Severity.WARNING
            explanation += (
                " Every one of them is a peer that closed or reset its connection after the "
                "same log already showed a timeout or a process being taken down (torch's "
                "watchdog ends its own process after a failed or timed-out collective): its "
                "peers then see the connection close. They are echoes of that failure, whose "
                "cause these lines do not show."
            )
        yield Finding(
            rule=self.id,
            category=category,
            severity=severity,
            title=title,
            explanation=explanation,
            fix=(
                "Find what ended the peer's process: its own log and exit status, the "
                "launcher's report, `dmesg -T | grep -i -E 'killed process|oom'` on its node."
                if peer_ended
                else "Check the links of the named host(s): ibstat/ibv_devinfo, dmesg -T for "
                "link flaps, switch port counters; drain the node if a port is bad. Pin NCCL "
                "to the right interfaces (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_GID_INDEX "
                "for RoCE)."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(reporters_ranks),
            evidence=tuple(limited_refs(primary, limit=6)),
            # NCCL's own error names the transport failure; a remote error names no peer
            # and a peer that exited looks the same. A peer's orderly close names the
            # peer's end, not why it ended: a hint.
            strength=Strength.ABSENCE
            if echoes
            else Strength.HINT
            if peer_ended
            else Strength.STATED
            if any(_ib_completion(p) for p in primary)
            else Strength.HINT
            if all(_remote_error(p) for p in primary)
            else Strength.SIGNAL,
        )

    def _gloo_reset(self, tl: Timeline) -> Finding | None:
        """gloo's pair reset by its peer, with nothing before it that it would echo.

        gloo/transport/tcp/pair.cc Pair::read throws "Read error <peer>: <strerror>" when
        recv(2) fails with an errno other than EAGAIN/EINTR, and "Connection closed by peer
        <peer>" when it reads end-of-stream. The close is the peer's orderly end (its
        process exited: a death, which other rules read); ECONNRESET is a reset of the
        connection (the peer's host or a middlebox dropped it, or the peer's socket went
        with unread data in it), which is the transport's failure unless a death, a
        timeout or a teardown is shown. Weak (HINT): it names the address, not the
        cause, and a peer killed mid-transfer can look the same."""
        gloo = [
            (p, lost)
            for p in tl.of(EventKind.CONNECTION_LOST)
            if (lost := p.event.payload_as(ConnectionLost)) is not None
            and lost.backend is Backend.GLOO
        ]
        resets = [p for p, lost in gloo if lost.failure is PeerLoss.CONNECTION_RESET]
        if not resets or len(resets) != len(gloo):
            return None  # none, or beside a peer's orderly close: a process that ended
        if all(_loopback(lost.peer) for _, lost in gloo):
            # The peer is a process of the same host (127.0.0.0/8, ::1): no network lies
            # between them, so the reset is that process's doing (it ended, or dropped the
            # pair with data unread), not the transport's.
            return None
        if first_deaths(tl) or any(tl.of(kind) for kind in _ECHOED):
            # A rank that died, timed out or was taken down anywhere in these logs: the
            # reset is its echo, whichever line comes first (a launcher reports a worker
            # killed after its peers' pairs were reset: recorded, fixtures/logs/recorded/
            # sigkill.log).
            return None
        first = resets[0]
        ip_host, host_ranks = host_maps(tl)
        lost = first.event.payload_as(ConnectionLost) or ConnectionLost()
        peer = lost.peer or "an unknown peer"
        host = ip_host.get(peer) if lost.peer else None
        culprits = tuple(sorted(host_ranks.get(host, set()))) if host else ()
        reporters = sorted({p.rank for p in resets if p.rank is not None} - set(culprits))
        where = f"[{peer}]:{lost.port}" if lost.port is not None else peer
        return Finding(
            rule=self.id,
            category=Category.NCCL_NETWORK,
            severity=Severity.ERROR,
            title=f"gloo's connection to {where} was reset by the peer",
            explanation=(
                "gloo failed reading from its peer with ECONNRESET "
                "(gloo/transport/tcp/pair.cc Pair::read: 'Read error <peer>: Connection reset "
                "by peer'), and nothing before shows a rank that died, timed out or was taken "
                "down: the TCP connection between the ranks was reset, a failure of the "
                "transport (the peer's host, a firewall or NAT dropping the connection). A "
                "peer process that exits closes its connections in order ('Connection closed "
                "by peer'); one killed mid-transfer can reset them too, so check the peer's "
                "log for its end."
            ),
            fix=(
                "Check the network path between the hosts (dmesg -T for link flaps, firewall "
                "and NAT/conntrack timeouts on long-lived connections); pin gloo to the right "
                "interface (GLOO_SOCKET_IFNAME); check the peer's own log for its exit."
            ),
            culprit_ranks=culprits,
            waiting_ranks=tuple(reporters),
            evidence=tuple(limited_refs(resets, limit=4)),
            strength=Strength.HINT,
        )


def _loopback(address: str | None) -> bool:
    """Whether a peer address (gloo's "[addr]" of the pair) is the host's own loopback."""
    try:
        return address is not None and ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return address == "localhost"


# What a connection reset echoes: a timeout, a process taken down.
_ECHOED = (
    EventKind.COLLECTIVE_TIMEOUT,
    EventKind.HEARTBEAT_TIMEOUT,
    EventKind.WATCHDOG_TEARDOWN,
    EventKind.STORE_TIMEOUT,
    EventKind.AGENT_TERMINATING,
)


# A peer that went away: NCCL's socket layer read end-of-stream or a reset (misc/socket.cc
# "Connection closed by remote peer", "Connection reset by peer", a broken pipe). A link
# that fails says other words (IB completion errors, timeouts, unreachable).
_PEER_GONE = frozenset(
    {LinkFailure.SOCKET_CLOSED, LinkFailure.CONNECTION_RESET, LinkFailure.BROKEN_PIPE}
)
# What a process prints as a collective fails and it is taken down: the watchdog's
# timeout, its heartbeat monitor, "Some NCCL operations have failed or timed out … we are
# taking the entire process down" (ProcessGroupNCCL WorkNCCL::handleException).
_TAKEN_DOWN = frozenset(
    {EventKind.COLLECTIVE_TIMEOUT, EventKind.HEARTBEAT_TIMEOUT, EventKind.WATCHDOG_TEARDOWN}
)


def _peer_gone_after_teardown(p: Placed, tl: Timeline) -> bool:
    """An NCCL WARN of its own (not the "Last error:" detail of the error a teardown
    reports) that a peer closed or reset the connection, below a timeout or a teardown in
    the same file: a process being taken down closes its sockets, so its peers' proxies
    see them close. The echo of that failure, not a network fault."""
    warn = p.event.payload_as(TransportWarn)
    if warn is None or warn.from_last_error or warn.error is None:
        return False
    if warn.error.failure not in _PEER_GONE:
        return False
    line = p.event.line or 0
    return any(
        q.event.source == p.event.source and (q.event.line or 0) < line
        for kind in _TAKEN_DOWN
        for q in tl.of(kind)
    )


def _flushed(p: Placed) -> bool:
    """An IB work request flushed after an earlier error (status 5): an echo, not a cause
    (only an NCCL WARN's own failure, as before: not an NCCL error's last error)."""
    error = p.event.payload_as(TransportWarn)
    link = error.error if error is not None else None
    return link is not None and not link.connect and link.ib_status == _FLUSHED


def _local(p: Placed) -> bool:
    error = p.event.payload_as(TransportWarn)
    return error is not None and error.local


def _creating(p: Placed) -> bool:
    """The process could not create a socket at all ("Net : Socket creation failed")."""
    link = _link(p)
    return link is not None and link.failure == LinkFailure.SOCKET_CREATION_FAILED


def _connecting(p: Placed) -> bool:
    """A connection that could not even be set up (NCCL WARN's own failure, or the last
    error torch's NCCL error carries)."""
    error = p.event.payload_as(TransportWarn)
    if error is not None:
        return error.error is not None and error.error.connect
    nccl = p.event.payload_as(NcclError)
    return nccl is not None and nccl.last_error_link is not None and nccl.last_error_link.connect


def _proxy_request(p: Placed) -> bool:
    """A failed request of the rank to a proxy thread (proxy.cc; the parser marks it:
    parsers/logs/nccl.py ``_PROXY``), as its own line: torch prints it under "Last error:"."""
    link = _link(p)
    return isinstance(p.event.payload, TransportWarn) and link is not None and link.proxy_request


def _proxy_request_at_setup(p: Placed, running_from: int) -> bool:
    """torch's synchronous NCCL error (``NCCL error in: <file>:<line>``, raised on the
    caller's thread, where torch creates the communicator: views/nccl_setup.py) whose
    last error is a failed proxy request, before any collective traffic. Proxy requests
    (Init, Setup, Connect…) are how NCCL sets up its transports."""
    error = p.event.payload_as(NcclError)
    if error is None or error.in_watchdog or not (error.where or "").strip():
        return False
    link = error.last_error_link
    return p.index < running_from and link is not None and link.proxy_request


def _setup_op(p: Placed, running_from: int) -> str | None:
    """The proxy operation that sets up connections (Init, SharedInit, Setup, Connect) which
    failed in this error, its own line's or its "Last error:" detail's, before anything
    shows collectives running; else None. Errors around it (a recv that broke, a peer that
    closed) are the same setup failing underneath."""
    if p.index >= running_from:
        return None
    link = _link(p)
    return link.proxy_op if link is not None and link.sets_up else None


# NCCL's intra-node transports: their WARNs are all in connection set-up (p2pSendSetup,
# p2pRecvConnect, the IPC handle exchange; shm segments), in every 2.x release.
_INTRA_NODE_FILES = re.compile(r"(?:^|/)transport/(?:p2p|shm)\.(?:cc|cu):\d+$")


def _intra_node_setup(p: Placed, running_from: int) -> bool:
    """A WARN of NCCL's intra-node transports (P2P/IPC, shared memory) before anything
    shows collectives running: the node's own connections failed to come up."""
    warn = p.event.payload_as(TransportWarn)
    where = (warn.where or "") if warn is not None else ""
    return p.index < running_from and _INTRA_NODE_FILES.search(where) is not None


def _ib_completion(p: Placed) -> bool:
    error = p.event.payload_as(TransportWarn)
    link = error.error if error is not None else None
    return link is not None and link.failure == LinkFailure.IB_COMPLETION


def _source_setup(p: Placed, running_from: int) -> bool:
    """A transport error whose own source lines (its WARN's place and "-> rc" chain) show
    communicator or connection set-up in every NCCL release they can come from
    (parsers/catalog/stages.py), before anything shows collectives or training running."""
    warn = p.event.payload_as(NcclWarn)
    return p.index < running_from and warn is not None and warn.stage is SourceStage.SETUP


def _peer_closed(p: Placed) -> bool:
    """NCCL's socket layer found the peer's end closed ("socketProgress: Connection closed
    by remote peer <host><port>": misc/socket.cc socketProgress, when socketProgressOpt's
    recv(2) returned 0, and from NCCL 2.24 also a recv that got ECONNRESET or a send that
    got EPIPE), as a WARN or as an NCCL error's last error: the peer's host closed or reset
    the connection, which it does when the peer's process exits or is killed; a link that
    fails does not, it times out or is unreachable."""
    link = _link(p)
    return link is not None and link.failure is LinkFailure.SOCKET_CLOSED


def _in_bootstrap(p: Placed) -> bool:
    """The WARN's "-> N" chain (parsers/logs/scanner.py ``rc_chain``) passes a bootstrap
    frame: NCCL ≤ 2.3 ran its bootstrap over the network transport itself
    ("transport/net_ib.cu:555 -> 2 … bootstrap.cu:169 -> 2 … init.cu:422 -> 2", horovod
    issue 210), later ones over sockets ("misc/socket.cc:… -> 2 … bootstrap.cc:… -> 2").
    The parser marks it (parsers/logs/errors.py)."""
    payload = p.event.payload
    return isinstance(payload, (TransportWarn, NcclError)) and payload.in_bootstrap


# How a connection fails when the process at its other end closes it: an orderly close
# (its sockets closed as it exited), a reset (it exited with data unread, or was killed),
# a write to it after that. A peer process that ended reads exactly so, at set-up or on a
# running link: the words say the peer went, not that a link failed.
_PEER_ENDED = frozenset(
    {LinkFailure.SOCKET_CLOSED, LinkFailure.CONNECTION_RESET, LinkFailure.BROKEN_PIPE}
)


def _stage_unshown(tl: Timeline, primary: list[Placed], running_from: int) -> bool:
    """Whether the errors show neither a link that failed nor a stage: every one is a
    peer that closed or reset its connection (``_PEER_ENDED``: a peer process that exited
    does the same), before anything shows collectives or training running (views/
    nccl_setup.py ``first_running``), and no NCCL line places a failure on the data path
    (a WARN or return chain whose source lines are proxy progress or a collective's
    launch: ``SourceStage.DATA``). Then the artifacts show no stage
    (fixtures/cases/README.md: a bare transport error supports neither reading)."""
    if not all((link := _link(p)) is not None and link.failure in _PEER_ENDED for p in primary):
        return False
    if any(p.index >= running_from for p in primary):
        return False
    return not any(
        (warn := q.event.payload_as(NcclWarn)) is not None and warn.stage is SourceStage.DATA
        for q in tl.of(EventKind.NCCL_WARN, EventKind.NCCL_RETURN, EventKind.NCCL_TRANSPORT_ERROR)
    )


def _remote_error(p: Placed) -> bool:
    """Another framework's exception that carries NCCL's ncclRemoteError string
    ("ncclAllReduce failed: remote process exited or there was a network error" from
    Horovod's NCCL_CHECK, cupy's NCCL_ERROR_REMOTE_ERROR; parsers/logs/torch_pg.py
    _FOREIGN_NCCL): NCCL lost a peer's connection. A system error of a collective call
    (not of communicator creation, which HD206 reads) is most often a socket or verbs
    call that failed under it. Neither says which peer, nor tells a peer that exited from
    a broken link, so it is weak alone (see check)."""
    error = p.event.payload_as(NcclError)
    if error is None or error.foreign is None:
        return False
    cls = error.error_class
    return cls == NcclResult.REMOTE_ERROR or (cls == NcclResult.SYSTEM_ERROR and not error.where)


def _counters(tl: Timeline) -> Finding | None:
    """The NIC's own evidence with no NCCL error to go with it: error counters (weak: they
    count since the driver loaded) and the kernel's link-down, cable-module and
    transmit-timeout messages. Worth saying when nothing else names the network."""
    found = [
        (p, counter)
        for p in tl.of(EventKind.NIC_COUNTER)
        if (counter := p.event.payload_as(NicCounter)) is not None
    ]
    links = _link_trouble(tl)
    if not found and not links:
        return None
    transport = [item for item in found if item[1].group == CounterGroup.TRANSPORT]
    counted = sorted(transport or found, key=lambda item: -(item[1].value or 0))
    where = sorted({f"{c.device}/{c.port}" for _, c in counted if c.device})
    listed = ", ".join(f"{c.counter}={c.value}" for _, c in counted[:4])
    shown = [p for p, _ in counted]
    parts: list[str] = []
    if links:
        parts.append(
            "the kernel reports "
            + ", ".join(
                f"{str(link.event or '').replace('_', ' ')} on {link.iface}"
                for _, link in links[:3]
            )
        )
    if shown:
        parts.append(
            "the port "
            + ("counts transport retries and failed completions" if transport else "error counters")
            + f": {listed}"
        )
    title = "NIC trouble without an NCCL error: " + "; ".join(parts)
    explanation = (
        f"{'; '.join(parts)}"
        + (f" (on {', '.join(where)})" if where else "")
        + ". "
        + (
            "A link that goes down or a transmit queue that times out breaks the connections "
            "collectives run on. "
            if links
            else ""
        )
        + (
            "ACK timeouts, sequence errors and completions with error are retransmissions and "
            "failed work requests: the fabric drops or delays packets (for RoCE often "
            "congestion control, PFC or a wrong GID index), and a collective whose retries run "
            "out stalls or fails. "
            if transport
            else ""
        )
        + (
            "The counters count since the driver loaded, so compare two readings taken a "
            "minute apart before blaming the link."
            if shown
            else ""
        )
    ).strip()
    return Finding(
        rule=NcclTransportError.id,
        category=Category.NCCL_NETWORK,
        severity=Severity.ERROR,
        title=title[:240],
        explanation=explanation,
        fix=(
            "Read the counters twice during a hang and see which grow; check the port "
            "(ibstat, ibv_devinfo, ethtool), its cable or transceiver and the switch port; "
            "for RoCE check PFC/ECN and NCCL_IB_GID_INDEX; drain the node if a port keeps "
            "erroring."
        ),
        evidence=tuple(limited_refs([*(p for p, _ in links), *shown], limit=6)),
        strength=Strength.HINT,  # counters count since the driver loaded
    )


_BREAKS = frozenset({LinkEvent.LINK_DOWN, LinkEvent.MODULE_ERROR, LinkEvent.TX_TIMEOUT})


def _link_trouble(tl: Timeline) -> list[tuple[Placed, NicLink]]:
    """Kernel NIC events that break connections: a link down (kept even when it came back:
    a flap drops the connections on it), a cable module error, a transmit timeout."""
    return [
        (p, link)
        for p in tl.of(EventKind.NIC_LINK)
        if (link := p.event.payload_as(NicLink)) is not None and link.event in _BREAKS
    ]


RULE = NcclTransportError
