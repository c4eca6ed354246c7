"""NCCL bootstraps on a loopback or container interface in a multi-node job

## What it means
NCCL chose `lo` (127.0.0.1), `docker0`, a `veth`/`virbr`/CNI bridge or similar for its
bootstrap or socket transport (`Bootstrap : Using lo:127.0.0.1<0>`, `NET/Socket : Using
[0]docker0:172.17.0.1<0>`), while the job spans several hosts. Other nodes cannot reach
that address.

## Why it hangs
Communicator creation exchanges the bootstrap addresses of all ranks; connecting to a
loopback or a host-local bridge address from another node fails or times out, so init
(or the first collective) never completes.

## Evidence used
NCCL INFO interface lines (`Bootstrap : Using`, `NET/Socket : Using`, `NET : Using
interface`, `OOB`), and the number of distinct hosts in the NCCL lines (or a
communicator larger than the GPUs seen on one host).

## How to confirm
`ip addr` on each node; the NCCL line names the interface and address each process
advertised. Try `NCCL_SOCKET_IFNAME=<the real NIC>` and watch init complete.

## How to fix
Set `NCCL_SOCKET_IFNAME` (and `GLOO_SOCKET_IFNAME`) to the interface that connects the
nodes (e.g. `eth0`, `ens…`, `bond0`, or exclusions `^lo,docker`), run containers with
host networking, and make the hostname resolve to a routable address.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.nccl import NcclInit, NcclNetwork, NcclTransport, NetRole, Transport
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs

_ADVERTISED = frozenset({NetRole.BOOTSTRAP, NetRole.SOCKET, NetRole.OOB})


def _network(p: Placed) -> NcclNetwork:
    found = p.event.payload_as(NcclNetwork)
    return found if found is not None else NcclNetwork()


class NcclBootstrapInterface(Rule):
    __doc__ = __doc__
    id = "HD202"
    name = "nccl-bootstrap-interface"
    summary = "NCCL uses a loopback/container interface while the job spans hosts"
    categories = (Category.NCCL_INIT,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        nets = [p for p in tl.of(EventKind.NCCL_NETWORK) if _network(p).role in _ADVERTISED]
        bad = [p for p in nets if _local_pairs(p)]
        if not bad:
            return
        hosts = {
            (p.event.host or "").split(".")[0]
            for p in tl.events
            if p.kind.startswith("nccl") and p.event.host
        }
        inits = tl.of(EventKind.NCCL_INIT)
        nranks = max(
            (init.nranks or 0 for p in inits if (init := p.event.payload_as(NcclInit))),
            default=0,
        )
        devices = {(p.event.host, p.event.cuda_dev) for p in inits}
        per_host = max(
            (sum(1 for h, _ in devices if h == host) for host in {h for h, _ in devices}), default=0
        )
        # Channels "via NET/…" connect ranks on different nodes: within a node NCCL uses
        # P2P or SHM (unless both are disabled by hand).
        over_net = any(
            via.transport == Transport.NET
            for p in tl.of(EventKind.NCCL_TRANSPORT)
            if (transport := p.event.payload_as(NcclTransport))
            for via in transport.via
        )
        multi = (
            len(hosts) > 1
            or (nranks > 0 and per_host > 0 and nranks > per_host and len(hosts) == 1)
            or over_net
        )
        ifaces = sorted({pair for p in bad for pair in _local_pairs(p)})
        # Only a secondary interface of the socket transport's list is unusable: the
        # connections NCCL spreads over it fail, the others work.
        secondary = all(
            _network(p).role == NetRole.SOCKET and not _network(p).first_unreachable for p in bad
        )
        culprits = sorted({p.rank for p in bad if p.rank is not None})
        yield Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR if multi else Severity.WARNING,
            title=f"NCCL advertises {', '.join(ifaces[:3])}, unreachable from other nodes"
            + ("" if multi else " (if this job spans nodes)"),
            explanation=(
                f"NCCL picked {', '.join(ifaces)} for bootstrap/socket traffic"
                + (f" in a job across {len(hosts)} hosts" if len(hosts) > 1 else "")
                + (
                    f" with {nranks} ranks but {per_host} GPUs per host"
                    if nranks > per_host > 0
                    else ""
                )
                + (" whose ranks talk over the network (channels via NET)" if over_net else "")
                + ". Other nodes cannot connect to a loopback, container-bridge or link-local "
                "address, so communicator creation stalls"
                + (
                    " (the socket transport spreads its connections over every listed "
                    "interface, this one included)."
                    if secondary
                    else "."
                )
            ),
            fix="Set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface that connects "
            "the nodes, e.g. NCCL_SOCKET_IFNAME=eth0 or ^lo,docker; use host networking for "
            "containers.",
            culprit_ranks=tuple(culprits),
            evidence=tuple(limited_refs(bad, limit=4)),
            # NCCL states the interface; a secondary one only fails some connections, and
            # a job that may run on one node only makes it a hint.
            strength=(Strength.SIGNAL if secondary else Strength.STATED)
            if multi
            else Strength.HINT,
        )


def _local_pairs(p: Placed) -> list[str]:
    """The unreachable ``iface:ip`` pairs a bootstrap/socket/OOB line advertises (the
    parser tells them: parsers/logs/nccl.py)."""
    return [f"{i.name}:{i.address}" for i in _network(p).unreachable]


RULE = NcclBootstrapInterface
