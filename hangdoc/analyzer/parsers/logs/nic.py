"""InfiniBand/RoCE port error counters, as pasted from the node (FORMATS.md §6).

Two documented shapes:

* the kernel's sysfs counters (Documentation/ABI/stable/sysfs-class-infiniband):
  ``/sys/class/infiniband/<dev>/ports/<port>/counters/<name>`` (the IBA port counters:
  ``symbol_error``, ``link_downed``, ``port_rcv_errors``, …) and ``…/hw_counters/<name>``
  (the driver's, for mlx5 documented in NVIDIA's "Understanding mlx5 Linux Counters":
  ``local_ack_timeout_err``, ``packet_seq_err``, ``out_of_sequence``, ``req_cqe_error``,
  …), printed one per line with their path by ``grep "" /sys/class/infiniband/*/ports/*/
  hw_counters/*``
  (``/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err:91316``);
* ``perfquery`` (infiniband-diags): ``SymbolErrorCounter:..............0``.

Only error counters are kept, and only when not zero. They count since the driver loaded,
so a count says the fabric dropped or retried traffic at some time, not that it did during
the hang: the rules weigh them as weak evidence.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.host import CounterGroup, LinkEvent, NicCounter, NicLink
from hangdoc.analyzer.vocabulary import EventKind

_SYSFS = re.compile(
    r"/sys/class/infiniband/(?P<dev>[\w.\-]+)/ports/(?P<port>\d+)/(?:hw_)?counters/"
    r"(?P<name>\w+)\s*[:=]\s*(?P<value>\d+)\s*$"
)
_PERFQUERY = re.compile(r"^(?P<name>[A-Z]\w+?):\.{2,}(?P<value>\d+)\s*$")
# Counters of transport retries and failed work completions (what becomes NCCL's
# "Got completion … status=12" when the retries run out), and of a bad link.
TRANSPORT_COUNTERS = frozenset(
    {
        "local_ack_timeout_err",
        "packet_seq_err",
        "out_of_sequence",
        "implied_nak_seq_err",
        "rnr_nak_retry_err",
        "req_cqe_error",
        "resp_cqe_error",
        "req_remote_access_errors",
        "req_remote_invalid_request",
        "resp_local_length_error",
        "resp_remote_access_errors",
        "req_transport_retries_exceeded",
        "rx_icrc_encapsulated",
    }
)
LINK_COUNTERS = frozenset(
    {
        "symbol_error",
        "link_error_recovery",
        "link_downed",
        "port_rcv_errors",
        "port_rcv_remote_physical_errors",
        "local_link_integrity_errors",
        "excessive_buffer_overrun_errors",
        "port_xmit_discards",
    }
)
_PERFQUERY_NAMES = {
    "SymbolErrorCounter": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "PortXmitDiscards": "port_xmit_discards",
}


# The kernel's NIC messages (drivers/net/ethernet/mellanox/mlx5/core: "mlx5_core 0000:5e:00.0
# ens1f0: Link down" / "Link up", the port-module event "Port module event: module 0, Cable
# unplugged"; net/sched/sch_generic.c's "NETDEV WATCHDOG: ib0 (mlx5_core): transmit queue 3
# timed out").
_LINK = re.compile(
    r"(?P<driver>mlx\d_core|mlx\d_ib|ice|i40e|bnxt_en|igb|ixgbe|ena|efa)\b.{0,60}? "
    r"(?P<iface>[\w.\-]+): Link (?P<state>down|up)\b"
)
_MODULE = re.compile(
    r"mlx\d_core \S+: Port module event(?:\[error\])?: module (?P<module>\d+), "
    r"(?P<what>Cable unplugged|Cable plugged|[^,]*(?:error|Error)[^,]*)"
)
_TX_TIMEOUT = re.compile(
    r"NETDEV WATCHDOG: (?P<iface>\S+) \((?P<driver>[\w\-]+)\): transmit queue \d+ timed out"
)


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
EVENT_NEED = Need.words(("Link ", "Port module event", "NETDEV WATCHDOG"))


def match_nic_event(text: str) -> Hit | None:
    """A NIC link change, module event or transmit timeout in the kernel log."""
    if not EVENT_NEED.admits(text):
        return None
    if "Link " in text and (m := _LINK.search(text)) is not None:
        event = LinkEvent.LINK_DOWN if m.group("state") == "down" else LinkEvent.LINK_UP
        link = NicLink(event=event, iface=m.group("iface"), driver=m.group("driver"))
        return Hit(EventKind.NIC_LINK, payload=link, key=("link", m.group("iface"), event))
    if "Port module event" in text and (mo := _MODULE.search(text)) is not None:
        plugged = mo.group("what") == "Cable plugged"
        module = NicLink(
            event=LinkEvent.LINK_UP if plugged else LinkEvent.MODULE_ERROR,
            iface="module " + mo.group("module"),
            detail=mo.group("what"),
        )
        return Hit(EventKind.NIC_LINK, payload=module, key=("module", mo.group("module"), plugged))
    if "NETDEV WATCHDOG" in text and (t := _TX_TIMEOUT.search(text)) is not None:
        timeout = NicLink(
            event=LinkEvent.TX_TIMEOUT, iface=t.group("iface"), driver=t.group("driver")
        )
        return Hit(EventKind.NIC_LINK, payload=timeout, key=("txtimeout", t.group("iface")))
    return None


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
COUNTER_NEED = Need.words(("/sys/class/infiniband/", ":.."))


def match_nic_counter(text: str) -> Hit | None:
    """One non-zero error counter line (sysfs path form or perfquery)."""
    if not COUNTER_NEED.admits(text):
        return None
    if "/sys/class/infiniband/" in text and (m := _SYSFS.search(text)) is not None:
        name, value = m.group("name"), int(m.group("value"))
        dev, port = m.group("dev"), int(m.group("port"))
    elif text[:1].isupper() and ":.." in text and (m := _PERFQUERY.match(text.strip())):
        mapped = _PERFQUERY_NAMES.get(m.group("name"))
        if mapped is None:
            return None
        name, value, dev, port = mapped, int(m.group("value")), None, None
    else:
        return None
    if value == 0 or name not in TRANSPORT_COUNTERS | LINK_COUNTERS:
        return None
    counter = NicCounter(
        counter=name,
        value=value,
        group=CounterGroup.TRANSPORT if name in TRANSPORT_COUNTERS else CounterGroup.LINK,
        device=dev,
        port=port,
    )
    return Hit(EventKind.NIC_COUNTER, payload=counter, key=("nic", dev, port, name))
