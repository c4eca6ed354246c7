# ruff: noqa: E501  (tables of real log lines read better unwrapped)
"""Init/rendezvous, NIC counter and file-system stall lines, one at a time.

Lines come from casebook train artifacts (fixtures/cases/…, named per case) or are
written from the documented format of the program that prints them (the source named
next to each).
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs import recognise_line
from hangdoc.analyzer.parsers.prefixes import clean_line
from hangdoc.analyzer.payloads.nccl import Iface
from tests.unit.logs.helpers import fields

CASES: list[tuple[str, str | None, dict[str, object]]] = [
    # NCCL ≤ 2.11 numbered interface lists (pytorch-68893-ray-ddp-init-veth).
    (
        "ip-172-31-0-137:14605:14673 [0] NCCL INFO Bootstrap : Using [0]ens5:172.31.0.137<0> [1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>",
        "nccl_network",
        {
            "role": "bootstrap",
            "iface": "ens5",
            "ip": "172.31.0.137",
            "ifaces": (
                Iface("ens5", "172.31.0.137"),
                Iface("veth75fa783", "fe80::14ad:64ff:fe64:b31e%veth75fa783"),
            ),
        },
    ),
    (
        "ip-172-31-0-137:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0> [1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>",
        "nccl_network",
        {"role": "socket", "iface": "ens5"},
    ),
    # torch c10d socket.cpp (SocketConnectOp / SocketListenOp), documented format.
    (
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (master-0, 29500). The client socket has failed to connect to master-0:29500 (errno: 113 - No route to host).",
        "store_timeout",
        {"error": "store_connect", "peer": "master-0", "port": 29500},
    ),
    (
        "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
        "store_timeout",
        {"error": "store_listen"},
    ),
    (
        "RuntimeError: connect() timed out. Original timeout was 1800000 ms.",
        "store_timeout",
        {"error": "store_connect", "timeout_ms": 1800000},
    ),
    ("RuntimeError: Address already in use", "store_timeout", {"error": "store_listen"}),
    (
        "[W socket.cpp:663] [c10d] The network addresses of (master-0, 29500) cannot be retrieved (gai error: -2 - Name or service not known).",
        "store_timeout",
        {"error": "store_resolve", "peer": "master-0"},
    ),
    (
        "[W socket.cpp:663] [c10d] The IPv6 network addresses of (localhost, 29500) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).",
        None,
        {},
    ),
    # The IPv6 try of a host that is no host name (c10d socket.cpp tryConnect's
    # recordError, AF_INET6 first): a path, an unexpanded variable, a URL fail every family.
    (
        "[W socket.cpp:601] [c10d] The IPv6 network addresses of (/root/env.sh, 45458) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).",
        "store_timeout",
        {"error": "store_resolve", "peer": "/root/env.sh"},
    ),
    (
        "[W socket.cpp:663] [c10d] The IPv6 network addresses of (${MASTER_ADDR}, 29500) cannot be retrieved (gai error: -2 - Name or service not known).",
        "store_timeout",
        {"error": "store_resolve", "peer": "${MASTER_ADDR}"},
    ),
    (
        "[W socket.cpp:663] [c10d] The IPv6 network addresses of (http://master-0, 29500) cannot be retrieved (gai error: -2 - Name or service not known).",
        "store_timeout",
        {"error": "store_resolve"},
    ),
    # A host name, an IPv4 or IPv6 literal: the IPv6 try's failure is the harmless one.
    (
        "[W socket.cpp:663] [c10d] The IPv6 network addresses of (node-3.cluster_a, 29500) cannot be retrieved (gai error: -5 - No address associated with hostname).",
        None,
        {},
    ),
    (
        "[W socket.cpp:663] [c10d] The IPv6 network addresses of (fe80::1%eth0, 29500) cannot be retrieved (gai error: -9 - Address family for hostname not supported).",
        None,
        {},
    ),
    # gloo/transport/tcp/pair.cc connectCallback's Error taken by value (gloo 31b1f02 to
    # 5ca057d): a failed connect sliced to the base Error, whose what() is "no error".
    (
        "[rank2]:[E212 02:14:01.179080356 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
        "store_timeout",
        {"error": "gloo_connect", "peer": None},
    ),
    (
        "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:148] no error",
        "store_timeout",
        {"error": "gloo_connect"},
    ),
    # gloo/transport/tcp/pair.cc while ProcessGroupGloo connects its full mesh.
    (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [127.0.1.1]:35807: Connection refused",
        "store_timeout",
        {"error": "gloo_connect", "peer": "127.0.1.1", "port": 35807},
    ),
    # Process listings and kernel stacks (dlworkspace-484-job-init-nfs-open-d-state).
    (
        "root       1054  0.0  0.0  19040  3560 ?        D    01:35   0:00 bash /pod/scripts/init_user.sh",
        "io_stall",
        {"source": "process_state", "pid": 1054, "command": "bash /pod/scripts/init_user.sh"},
    ),
    (
        "root         10  0.0  0.0  19040  3936 ?        S    01:35   0:00 bash /pod/scripts/init_user.sh",
        None,
        {},
    ),
    (
        "[<0>] nfs4_wait_clnt_recover+0x67/0x80 [nfsv4]",
        "io_stall",
        {"source": "kernel_stack", "function": "nfs4_wait_clnt_recover", "module": "nfsv4"},
    ),
    ("[<0>] do_syscall_64+0x6a/0x1a0", None, {}),
    # procps top batch row, /proc/PID/status (documented formats).
    (
        "  4242 alice     20   0   12.3g   2.1g 312340 D   0.0  1.7   5:12.33 python",
        "io_stall",
        {"pid": 4242},
    ),
    ("State:\tD (disk sleep)", "io_stall", {"source": "process_state"}),
    # NFS / Lustre clients (fs/nfs, lustre ptlrpc import messages).
    (
        "[Tue Mar  5 10:21:07 2024] nfs: server nfs01 not responding, still trying",
        "io_stall",
        {"source": "nfs_server", "server": "nfs01", "server_state": "not_responding"},
    ),
    ("nfs: server nfs01 OK", "io_stall", {"server_state": "ok"}),
    (
        "Lustre: lustre-OST0003-osc-ffff8: Connection to lustre-OST0003 (at 10.0.0.3@o2ib) was lost; in progress operations using this service will wait for recovery to complete",
        "io_stall",
        {"source": "lustre_server", "server": "lustre-OST0003"},
    ),
    # A storage error on a plain log line (slime-326-dist-ckpt-save-eio).
    (
        "ERROR: megatron.core.dist_checkpointing.strategies.filesystem_async: Local process 0 encountered an error: [Errno 5] Input/output error",
        "io_stall",
        {"source": "io_error"},
    ),
    # sysfs IB counters (nccl-394-roce-ack-timeouts) and perfquery.
    (
        "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err:91316",
        "nic_counter",
        {
            "counter": "local_ack_timeout_err",
            "value": 91316,
            "group": "transport",
            "device": "mlx5_0",
            "port": 1,
        },
    ),
    ("/sys/class/infiniband/mlx5_0/ports/1/hw_counters/packet_seq_err:0", None, {}),
    ("/sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent:17269947", None, {}),
    (
        "SymbolErrorCounter:..............................12",
        "nic_counter",
        {"counter": "symbol_error", "group": "link"},
    ),
    # Kernel NIC messages (mlx5_core, net/sched NETDEV WATCHDOG), documented formats.
    (
        "[Mon Jan  8 10:00:00 2024] mlx5_core 0000:5e:00.0 ens1f0: Link down",
        "nic_link",
        {"event": "link_down", "iface": "ens1f0"},
    ),
    (
        "mlx5_core 0000:5e:00.0: Port module event: module 0, Cable unplugged",
        "nic_link",
        {"event": "module_error"},
    ),
    (
        "NETDEV WATCHDOG: ib0 (mlx5_core): transmit queue 3 timed out",
        "nic_link",
        {"event": "tx_timeout", "iface": "ib0"},
    ),
    # Current NCCL formats (net_ib, os/linux.cc), documented by NVIDIA/nccl src.
    (
        "h:1:2 [0] transport/net_ib.cc:1500 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<51234> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 localGid ::ffff:10.0.0.1 remoteGids ::ffff:10.0.0.2 hca mlx5_0",
        "nccl_transport_error",
        {"error.tag": "ib_completion_status_12", "peer": "10.0.0.2", "vendor_err": 129},
    ),
    (
        "h:1:2 [0] transport/net_ib/common.cc:123 NCCL WARN NET/IB : mlx5_0:1 async fatal event: local catastrophic error",
        "nccl_transport_error",
        {"error.tag": "ib_verbs"},
    ),
    # NCCL's verbs wrappers (misc/ibvwrap.cc) for the calls only net_ib.cc's connection
    # set-up makes (ncclIbCreateQp, ncclIbRtrQp/RtsQp: ncclIbConnect, ncclIbAccept).
    (
        "h:1:2 [0] misc/ibvwrap.cc:280 NCCL WARN Call to ibv_create_qp failed",
        "nccl_transport_error",
        {"error.tag": "connect_ib_verbs"},
    ),
    (
        "h:1:2 [0] misc/ibvwrap.cc:294 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
        "nccl_transport_error",
        {"error.tag": "connect_ib_verbs"},
    ),
    # A verbs call of the data path is no connection set-up.
    (
        "h:1:2 [0] misc/ibvwrap.cc:310 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        "nccl_transport_error",
        {"error.tag": "ib_verbs"},
    ),
    (
        "h:1:2 [0] NCCL INFO ncclOsSocketStartConnect: connect to 10.0.0.1<41234> returned Connection refused, retrying (3/34) after sleep for 100 msec",
        "nccl_transport_error",
        {"error.tag": "connect_connection_refused", "retrying": True},
    ),
    # c10d NCCLUtils C10D_NCCL_CHECK_TIMEOUT: a non-blocking init that never finished.
    (
        "torch.distributed.DistBackendError: NCCL timeout in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:177, NCCL operation in progress, NCCL version 2.21.5",
        "nccl_error",
        {
            "error_class": "ncclInProgress",
            "where": "../torch/csrc/distributed/c10d/NCCLUtils.hpp:177",
        },
    ),
    # An NCCL fork's bracketed header (openrlhf-795-two-node-accl-init-warn, ACCL).
    (
        "(ActorModelRayActor pid=16101) [dlc1f0bnd3uip696-master-0][16101:17880][0][init.cc:1815] NCCL WARN init.cc:1815 -> 5",
        "nccl_warn",
        {"where": "init.cc:1815", "pid": 16101, "host": "dlc1f0bnd3uip696-master-0"},
    ),
    # libcurl's low-speed abort (lib/speedcheck.c: "Operation too slow. Less than %ld
    # bytes/sec transferred the last %ld seconds"), as an object-store client relays it
    # (TileDB's S3 VFS: "curlCode: 28, Timeout was reached; Details: …").
    (
        "Details: Operation too slow. Less than 1 bytes/sec transferred the last 3 seconds",
        "io_stall",
        {"source": "transfer_stall"},
    ),
    # Shared memory is not storage (a DataLoader worker's /dev/shm).
    (
        "RuntimeError: unable to write to file </torch_18_1234_0>: No space left on device (28)",
        None,
        {},
    ),
]


@pytest.mark.parametrize(("line", "kind", "expected"), CASES)
def test_line(line: str, kind: str | None, expected: dict[str, object]) -> None:
    hit = recognise_line(line)
    if kind is None:
        assert hit is None or hit.kind.value not in (
            "io_stall",
            "nic_counter",
            "nic_link",
            "store_timeout",
        )
        return
    assert hit is not None, line
    assert hit.kind.value == kind
    got = fields(hit)
    for key, value in expected.items():
        assert got.get(key) == value, (key, got)


def test_colour_reset_before_an_nccl_header_is_peeled() -> None:
    # pytorch-68893-ray-ddp-init-veth: Ray's colour codes lost their ESC in the paste.
    line = "[0m ip-172-31-0-137:14605:14673 [0] NCCL INFO Using network Socket"
    assert clean_line(line) == "ip-172-31-0-137:14605:14673 [0] NCCL INFO Using network Socket"
    hit = recognise_line(line)
    assert hit is not None and fields(hit).get("network") == "Socket"
    # Indentation after a colour code is kept (a traceback line stays a traceback line).
    assert clean_line('\x1b[31m  File "x.py", line 1') == '  File "x.py", line 1'
