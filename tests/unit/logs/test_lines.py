# ruff: noqa: E501  (tables of real log lines read better unwrapped)
"""One line at a time: every recognised family, old and new formats (FORMATS.md §1-§3, §6, §7).

Lines are the format facts of public reports (sources in the fixture files under
fixtures/logs/public/) and of the live recordings in fixtures/logs/recorded/.
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs import recognise_line
from hangdoc.analyzer.payloads.nccl import Transport, Via
from tests.unit.logs.helpers import fields

CASES: list[tuple[str, str, dict[str, object]]] = [
    # --- NCCL (§1) -------------------------------------------------------------------
    ("swat1-04:2017630:2017675 [6] NCCL INFO ncclCommInitRank comm 0x8ec0ac0 rank 6 nranks 16 cudaDev 6 nvmlDev 6 "
     "busId c8000 commId 0x49bbd7790311d5eb - Init COMPLETE",
     "nccl_init", {"rank": 6, "nranks": 16, "state": "complete", "comm_id": "0x49bbd7790311d5eb", "bus_id": "c8000",
                   "host": "swat1-04", "pid": 2017630}),
    ("n1:1:2 [4] NCCL INFO ncclCommInitRank comm 0x55 rank 12 nranks 16 cudaDev 4 nvmlDev 4 busId 87000 commId 0xcc - Init START",
     "nccl_init", {"state": "start", "rank": 12}),
    ("node:1:2 [1] NCCL INFO comm 0x7f rank 13 nranks 16 cudaDev 0 nvmlDev 5 - Init COMPLETE",
     "nccl_init", {"state": "complete", "rank": 13}),
    ("gpu-bql:18553:18612 [0] INFO comm 0x7fa42c00a3b0 rank 0 nranks 2", "nccl_init", {"state": "start", "nranks": 2}),
    ("host:1:2 [0] NCCL INFO Init timings: rank 3 nranks 8 total 1.08 (kernels 0.1, bootstrap 0.2)",
     "nccl_init", {"state": "complete", "rank": 3}),
    ("host:1:2 [0] NCCL INFO comm 0x5 rank 1 nranks 2 cudaDev 0 busId 1000 - Abort COMPLETE", "nccl_init", {"state": "abort"}),
    ("ai:480850:480850 [0] NCCL INFO Bootstrap : Using eth0:162.30.2.40<0>",
     "nccl_network", {"role": "bootstrap", "iface": "eth0", "ip": "162.30.2.40"}),
    ("paigcr-b:4152:4206 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>",
     "nccl_network", {"role": "socket", "iface": "lo"}),
    ("dgx:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE [RO]; OOB enp220s0np0:11.1.128.136<0>",
     "nccl_network", {"role": "oob", "iface": "enp220s0np0", "ip": "11.1.128.136"}),
    ("h:1:1 [0] NCCL INFO NET/IB : No device found.", "nccl_network", {"role": "ib", "iface": "none"}),
    ("h:1:1 [0] NCCL INFO Using network IB", "nccl_network", {"network": "IB"}),
    ("h:1:2 [5] NCCL INFO Channel 03/0 : 5[5] -> 12[4] [send] via NET/IB/3/GDRDMA", "nccl_transport", {"via": (Via(Transport.NET, "IB"),)}),
    ("h:1:2 [0] NCCL INFO Channel 00 : 0[1000] -> 1[2000] via P2P/IPC", "nccl_transport", {"via": (Via(Transport.P2P, "IPC"),)}),
    ("h:1:2 [0] NCCL INFO Ring 00 : 11[0] -> 12[0] via direct shared memory", "nccl_transport", {"via": (Via(Transport.SHM, "direct"),)}),
    ("hopper01:191369:191420 [0] NCCL INFO ReduceScatter: opCount e sendbuff 0x7fdf57c00000 recvbuff 0x7fdf61a00000 "
     "count 2097152 datatype 7 op 0 root 0 comm 0x55e290bd32d0 [nranks=2] stream 0x55e29067e430",
     "nccl_coll", {"op": "ReduceScatter", "opcount": 14, "count": 2097152, "datatype": 7, "nranks": 2}),
    ("hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 172.36.143.59<44206> with "
     "status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid ::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221",
     "nccl_transport_error", {"peer": "172.36.143.59", "error.tag": "ib_completion_status_12", "vendor_err": 129,
                              "direction": "recv"}),
    ("H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
     "fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)",
     "nccl_transport_error", {"error.tag": "ib_completion_status_4", "peer": "fe80::966d:ae03:8b:df78%ib0"}),
    ("h:1:2 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, opcode 1, len 21938, vendor err 81",
     "nccl_transport_error", {"error.tag": "ib_completion_status_4"}),
    ("gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
     "gpu004.ds-a4-r02.abc.com<55693>", "nccl_transport_error", {"error.tag": "socket_closed_by_peer",
                                                                 "peer": "gpu004.ds-a4-r02.abc.com"}),
    ("a100:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe",
     "nccl_transport_error", {"peer": "10.200.84.247", "error.tag": "broken_pipe"}),
    ("h:1:2 [0] misc/socket.cc:1 (socketProgressOpt) NCCL WARN socketProgressOpt: Call to recv from 10.1.2.3<5> failed : "
     "Connection reset by peer", "nccl_transport_error", {"error.tag": "connection_reset", "func": "socketProgressOpt"}),
    ("gpu-bql:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out",
     "nccl_transport_error", {"error.tag": "connect_timeout"}),
    ("h:1:2 [0] misc/socket.cc:1 NCCL WARN socketPollConnect: connect returned Connection timed out, exceeded error retry count (35)",
     "nccl_transport_error", {"error.tag": "connect_retry_exceeded"}),
    ("host:22337:22453 [6] proxy.cc:1097 NCCL WARN [Proxy Service 14] Failed to execute operation Connect from rank 14, retcode 2",
     "nccl_transport_error", {"error.tag": "proxy", "peer_rank": 14}),
    # ibv_modify_qp: NCCL moves a queue pair to RTR/RTS only in ncclIbConnect/ncclIbAccept
    # (transport/net_ib.cc ncclIbRtrQp, ncclIbRtsQp): a connection being set up.
    ("h:1:2 [0] misc/ibvwrap.cc:1 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
     "nccl_transport_error", {"error.tag": "connect_ib_verbs"}),
    ("box:2002:2051 [0] init.cc:871 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
     "nccl_config_error", {"problem": "duplicate_gpu", "rank_a": 1, "rank_b": 0}),
    ("h:1:2 [0] bootstrap.cc:1 NCCL WARN Bootstrap Root : mismatch in rank count from procs 8 : 16",
     "nccl_config_error", {"problem": "rank_count_mismatch", "count_a": 8, "count_b": 16}),
    ("h:1:2 [0] enqueue.cc:1 NCCL WARN Cuda failure 'out of memory'", "cuda_oom", {"where": "enqueue.cc:1", "error": "out of memory"}),
    ("h:1:2 [0] enqueue.cc:1 NCCL WARN Cuda failure 'invalid argument'", "cuda_error", {"error": "invalid argument"}),
    # a paste's first line cut inside the WARN's source location ("… include/alloc.h:114"):
    # its line number alone is left before the level word (NCCL's header, misc/debug.cc)
    ("114 NCCL WARN Cuda failure 2 'out of memory'", "cuda_oom", {"error": "out of memory"}),
    # the same body alone on its line, as torch prints NCCL's last WARN after "Last error:"
    # (cudawrap.h CUCHECK "Cuda failure %d '%s'", 2.19 on; checks.h CUDACHECK "Cuda failure '%s'")
    ("Cuda failure 217 'peer access is not supported between these two devices'", "cuda_error",
     {"error": "peer access is not supported between these two devices"}),
    ("Cuda failure 'invalid argument'", "cuda_error", {"error": "invalid argument"}),
    ("n:39719:39719 [3] init.cu:1197 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 11.",
     "collective_mismatch", {"peer_rank": 11}),
    # the same WARN wrapped or cut before its rank keeps its meaning, without the rank
    ("n:39719:39719 [3] init.cu:1197 NCCL WARN Mismatched collective detected, please check your collective calls at and ar",
     "collective_mismatch", {"peer_rank": None}),
    ("h:1:2 [0] proxy.cc:1 NCCL WARN something unexpected happened", "nccl_warn", {"message": "something unexpected happened"}),
    ("kolyoz2:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
     "connection_lost", {"backend": "nccl", "peer_local_rank": 0}),
    ("h:1:2 [0] NCCL INFO RAS declaring peer 10.0.0.7<28028> as DEAD; rasDeadPeersHash 0xdeadbeef",
     "ras_dead", {"peer": "10.0.0.7"}),
    ("NCCL version 2.21.5+cuda12.4", "nccl_version", {"version": "2.21.5", "cuda": "12.4"}),
    # --- torch process groups (§2), oldest to newest ------------------------------------
    ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
     "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.",
     "collective_timeout", {"seq": 469508, "op": "ALLREDUCE", "timeout_ms": 1800000, "ran_ms": 1802212,
                            "group_rank": 1, "backend": "nccl"}),
    ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for "
     "600060 milliseconds before timing out.", "collective_timeout", {"numel_in": 466119168, "numel_out": 466119168}),
    ("[rank0]:[E1003 10:01:02.1 ProcessGroupNCCL.cpp:1212] [PG 0 (default_pg) Rank 0] Work WorkNCCL(SeqNum=12, "
     "OpType=ALLGATHER, NumelIn=16, NumelOut=64, Timeout(ms)=300000) timed out in blocking wait (NCCL_BLOCKING_WAIT=1).",
     "collective_timeout", {"detector": "blocking_wait", "seq": 12, "pg": "0", "pg_desc": "default_pg"}),
    ("[rank0]:[E626 06:24:44.160366013 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception "
     "(either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.",
     "watchdog_status", {"seq": 808, "last_enqueued": 811, "last_completed": 807, "pg": "0", "pg_desc": "default_pg"}),
    ("[rank4]:[E318 07:39:53.79 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 9 Rank 4] Timeout at NCCL work: 610, last "
     "enqueued NCCL work: 616, last completed NCCL work: 609.", "watchdog_status", {"pg": "9", "pg_id": 2, "seq": 610}),
    ("[1784] [rank0]:[E602 11:17:52.399340163 ProcessGroupNCCL.cpp:2268] [PG ID 1 PG GUID 1 Rank 0]  failure detected by "
     "watchdog at work sequence id: 2847 PG status: last enqueued work: 2855, last completed work: 2846",
     "watchdog_status", {"seq": 2847, "last_enqueued": 2855, "last_completed": 2846, "pg": "1"}),
    ("[PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 5, last enqueued NCCL work: 5, "
     "last completed NCCL work: 4.", "watchdog_status", {"pg": "1", "group_rank": 0}),
    ("[rank6]:[E1 00:00:00.0 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 6] Received a dump signal due to "
     "a collective timeout from  rank 7 and we will try our best to dump the debug info. Last enqueued NCCL work: 5, "
     "last completed NCCL work: 4.This is most likely", "dump_signal", {"peer_rank": 7, "last_enqueued": 5}),
    ("[PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout from this local rank and "
     "we will try our best", "dump_signal", {"reporter": "self"}),
    ("[rank7]:[E602 11:17:52.5 ProcessGroupNCCL.cpp:1595] [PG ID 1 PG GUID 1 Rank 7] Observed flight recorder dump signal "
     "from another rank via TCPStore.", "dump_signal", {"reporter": "peer"}),
    ("[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after "
     "dumping debug info. workMetaList_.size()=1", "heartbeat_timeout", {"pg": "0"}),
    ("[rank6]:[E429 13:55:49.38 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL's "
     "watchdog got stuck for 480 seconds without making progress", "heartbeat_timeout", {"stuck_s": 480}),
    ("[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out.", "watchdog_teardown", {}),
    ("[E ProcessGroupNCCL.cpp:916] [Rank 2] NCCL watchdog thread terminated with exception: [Rank 2] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE", "collective_timeout", {"seq": 2}),
    ("[rank0]:[F602 11:28:52.4 ProcessGroupNCCL.cpp:1649] [PG ID 0 PG GUID 0(default_pg) Rank 0] [PG ID 0 PG GUID "
     "0(default_pg) Rank 0] Terminating the process after attempting to dump debug info, due to collective timeout or "
     "exception.", "watchdog_teardown", {"pg": "0"}),
    ("[rank0]:[E ProcessGroupNCCL.cpp:1] [PG 0 Rank 0] Collective WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, "
     "NumelOut=1, Timeout(ms)=600000) raised the following async exception: NCCL error: remote process exited or there "
     "was a network error, NCCL version 2.19.3", "nccl_error", {"error_class": "ncclRemoteError", "seq": 7}),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181, unhandled "
     "cuda error, NCCL version 21.0.3", "nccl_error", {"error_class": "ncclUnhandledCudaError"}),
    ("RuntimeError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1727, "
     "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
     "nccl_error", {"error_class": "ncclSystemError", "nccl_version": "2.18.1"}),
    ("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
     "nccl_error", {"error_class": "ncclRemoteError"}),
    ("RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint("
     "SequenceNumber=0, OpType=_ALLGATHER_BASE, TensorShape=[359, 1, 1435, 16], TensorDtypes=BFloat16, TensorDeviceTypes="
     "TensorOptions(dtype=float (default), device=cuda)), but Rank 2 is running collective: CollectiveFingerPrint("
     "SequenceNumber=0, OpType=_ALLGATHER_BASE, TensorShape=[359, 1, 1436, 16], TensorDtypes=BFloat16)).",
     "collective_mismatch", {"side_a.rank": 1, "side_b.rank": 2, "side_a.shape": "[359, 1, 1435, 16]",
                             "side_b.shape": "[359, 1, 1436, 16]", "side_a.op": "_ALLGATHER_BASE",
                             "side_a.device": "cuda"}),
    ("RuntimeError: Detected mismatch between collectives on ranks. Rank 3 is running inconsistent collective: "
     "CollectiveFingerPrint(OpType=BARRIER)", "collective_mismatch", {"side_a.rank": 3, "side_a.op": "BARRIER"}),
    ("Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint("
     "OpType=ALLREDUCE, TensorShape=[20, 10]), but Rank 1 is running collective: REDUCE.",
     "collective_mismatch", {"side_a.op": "ALLREDUCE", "side_b.op": "REDUCE", "side_b.rank": 1}),
    ("RuntimeError: [Rank 0]: Ranks 4, 5, 6, 7 failed to pass monitoredBarrier in 2000000 ms",
     "monitored_barrier_failure", {"ranks": (4, 5, 6, 7), "timeout_ms": 2000000}),
    ("[rank0]:[E1121 20:41:00.336202881 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank 1 failed to pass monitoredBarrier in 3000 ms",
     "monitored_barrier_failure", {"ranks": (1,)}),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 7/8 clients joined.",
     "store_timeout", {"error": "clients_missing", "joined": 7, "expected": 8}),
    ("torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /default_pg//0//cuda//0",
     "store_timeout", {"error": "store_wait", "timeout_ms": 600000}),
    ("torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to connect to "
     "(10.0.0.1, 29500).", "store_timeout", {"error": "store_connect", "peer": "10.0.0.1", "port": 29500}),
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "store_timeout", {"error": "rendezvous"}),
    ("torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
     "store_timeout", {"error": "nccl_unique_id", "root": 0, "group_rank": 3, "message": "Socket Timeout"}),
    ("RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Timeout waiting for key: default_pg/0/0 after 1800000 ms",
     "store_timeout", {"error": "nccl_unique_id", "keys": "0"}),
    ("[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
     "waiting 4000ms for recv operation to complete", "collective_timeout", {"backend": "gloo", "direction": "recv"}),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:10895",
     "connection_lost", {"backend": "gloo", "peer": "127.0.0.1", "failure": "connection_closed"}),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.92]:25266: Connection "
     "reset by peer", "connection_lost", {"failure": "connection_reset"}),
    # --- launchers (§3) ----------------------------------------------------------------
    ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 812917) of binary: "
     "/usr/bin/python", "worker_failed", {"exit_code": -9, "local_rank": 3, "pid": 812917, "signal": "SIGKILL"}),
    ("[2023-10-13 17:40:02,544] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -6) local_rank: 2 "
     "(pid: 4117) of binary: /usr/bin/python3", "worker_failed", {"signal": "SIGABRT"}),
    ("E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
     "local_rank: 0 (pid: 2607) of binary: /usr/bin/python", "worker_failed", {"exit_code": 1}),
    ("W1121 19:32:53.990000 8519 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 8569 closing "
     "signal SIGTERM", "agent_terminating", {"pid": 8569, "signal": "SIGTERM"}),
    ("[2024-05-01 10:00:00,000] torch.distributed.elastic.agent.server.api: [INFO] Received 15 death signal, shutting "
     "down workers", "agent_signal", {"signal": "SIGTERM"}),
    ("srun: error: gpu-node-17: task 5: Killed", "worker_failed", {"signal": "SIGKILL", "host": "gpu-node-17"}),
    ("srun: error: gpu-node-17: task 5: Exited with exit code 1", "worker_failed", {"exit_code": 1}),
    ("slurmstepd: error: *** STEP 831207.0 ON gpu-node-17 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***",
     "agent_signal", {"why": "DUE TO TIME LIMIT"}),
    ("mpirun noticed that process rank 6 with PID 0 on node gpu-node-18 exited on signal 9 (Killed).",
     "worker_failed", {"signal": "SIGKILL", "host": "gpu-node-18"}),
    ("[2024-01-01 10:00:00,123] [ERROR] [launch.py:322:sigkill_handler] ['python', '-u', 'train.py'] exits with return "
     "code = -9", "worker_failed", {"exit_code": -9, "signal": "SIGKILL", "launcher": "deepspeed"}),
    ("[2024-01-01 10:00:00,123] [INFO] [launch.py:316:sigkill_handler] Killing subprocess 4567",
     "agent_terminating", {"pid": 4567}),
    # the terminal's echo of the Ctrl-C that set DeepSpeed's handler off, glued before its first line
    ("^C[2024-05-26 15:06:40,046] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 22523",
     "agent_terminating", {"pid": 22523, "signs": ("interrupt",)}),
    # DeepSpeed's launcher reporting the signal it got itself (deepspeed/launcher/launch.py sigkill_handler)
    ("[2024-01-01 10:00:05,000] [INFO] [launch.py:326:sigkill_handler] Main process received SIGTERM, exiting",
     "agent_signal", {"signal": "SIGTERM", "launcher": "deepspeed"}),
    # --- how a process dies ------------------------------------------------------------
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.35 GiB. GPU 3 has a total capacity of 63.42 GiB",
     "cuda_oom", {"tried": "4.35 GiB", "gpu": 3}),
    ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total capacity; 4.36 GiB already "
     "allocated)", "cuda_oom", {"gpu": 0, "tried": "20.00 MiB"}),
    # the allocator's older message cut inside its fields (a first line cut in its middle)
    ("ty; 21.49 GiB already allocated; 62.56 MiB free; 21.69 GiB reserved in total by ",
     "cuda_oom", {}),
    ("932.41 MiB already allocated; 0 bytes free; 1.04 GiB reserved in total by PyTorch)",
     "cuda_oom", {}),
    # torch.cuda.memory_summary()'s header row (torch/cuda/memory.py): the device's count of OOMs
    ("|            CUDA OOMs: 1            |        cudaMalloc retries: 1         |",
     "cuda_oom", {"message": "torch.cuda.memory_summary() counts 1 CUDA out-of-memory error(s)"}),
    ("|                  CUDA OOMs: 3         |",  # the row cut after its first column
     "cuda_oom", {"message": "torch.cuda.memory_summary() counts 3 CUDA out-of-memory error(s)"}),
    # the allocator's message by its body (torch CUDACachingAllocator.cpp), its header cut or
    # wrapped onto the line before
    ("f memory. Tried to allocate 354.00 MiB (GPU 0; 10.91 GiB total capacity; 9.27 GiB already allocated;",
     "cuda_oom", {"gpu": 0, "tried": "354.00 MiB"}),
    ("Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 1.02 GiB is free.",
     "cuda_oom", {"gpu": 1, "tried": "2.00 GiB"}),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_error",
     {"error": "an illegal memory access was encountered"}),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "cuda_error",
     {"error": "uncorrectable ECC error encountered"}),
    ("Fatal Python error: Segmentation fault", "fatal_signal", {"signal": "SIGSEGV"}),
    ("*** SIGSEGV (@0x0) received by PID 1234 (TID 0x7f) from PID 0; stack trace: ***", "fatal_signal",
     {"signal": "SIGSEGV", "pid": 1234}),
    ("terminate called after throwing an instance of 'c10::DistBackendError'", "fatal_signal",
     {"signal": "SIGABRT", "exc_type": "c10::DistBackendError"}),
    ("bash: line 1: 1234 Killed python train.py", "fatal_signal", {"signal": "SIGKILL", "pid": 1234}),
    ("[12345.678901] Out of memory: Killed process 4321 (python) total-vm:123456kB, anon-rss:1kB",
     "host_oom_kill", {"pid": 4321, "name": "python"}),
    ("[1.0] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,task=pt_main_thread,pid=999,uid=0",
     "host_oom_kill", {"pid": 999, "name": "pt_main_thread"}),
    ("ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.", "actor_died", {}),
    # --- GPU (§6) ----------------------------------------------------------------------
    ("[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, "
     "errorString CTX SWITCH TIMEOUT, Info 0x58005", "gpu_xid", {"xid": 109, "pci": "0000:cb:00", "pid": 1797828, "name": "pt_main_thread"}),
    ("NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error", "gpu_xid", {"xid": 94}),
    ("kernel: NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000)", "gpu_xid", {"xid": 149}),
    ("NVRM: GPU 0000:cb:00.0: GPU has fallen off the bus.", "gpu_xid", {"xid": 79, "pci": "0000:cb:00.0"}),
    ("Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error", "gpu_xid", {"xid": None, "pci": "0000:3b:00.0", "message": "Unknown Error"}),
    # --- phases (§7) -------------------------------------------------------------------
    ("Running tokenizer on dataset:   9%|███▊  | 280000/2969526 [29:55<4:48:08, 155.57 examples/s]",
     "phase", {"phase": "preprocess", "progress.n": 280000, "progress.total": 2969526}),
    ("Map (num_proc=64):  22%|██▏ | 78224/359152 [04:43<14:17, 327.43 examples/s]", "phase", {"phase": "preprocess"}),
    ("Loading checkpoint shards:  50%|█████     | 2/4 [00:10<00:10,  5.00s/it]", "phase", {"phase": "load"}),
    ("  1%|          | 10/1752 [00:29<1:22:01,  2.83s/it]", "phase", {"phase": "train", "label": "progress"}),
    ("Epoch 0:  39%|███▉      | 4846/12331 [05:59<09:15, 13.47it/s, loss=2.6, v_num=1]", "phase", {"phase": "train"}),
    ("Validation DataLoader 0:  50%|█████     | 5/10 [00:01<00:01,  4.2it/s]", "phase", {"phase": "eval"}),
    ("[2023-07-24 13:21:33,261] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step10 is about to be "
     "saved!", "phase", {"phase": "checkpoint_save"}),
    ("[2023-07-24 13:21:33,261] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step10 is begin to save!",
     "phase", {"phase": "checkpoint_save"}),
    ("Saving model checkpoint to /out/checkpoint-500", "phase", {"phase": "checkpoint_save"}),
    (" successfully saved checkpoint from iteration    2000 to /ckpt", "phase", {"phase": "checkpoint_saved"}),
    ("***** Running Evaluation *****", "phase", {"phase": "eval"}),
    ("Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8", "phase", {"phase": "init", "world_size": 8}),
    (" iteration      100/  500000 | consumed samples:        12800 | elapsed time per iteration (ms): 1234.5",
     "phase", {"phase": "train"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "kind", "expected"), CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_line_is_recognised(line: str, kind: str, expected: dict[str, object]) -> None:
    hit = recognise_line(line)
    assert hit is not None, line
    assert hit.kind.value == kind
    got = {k: fields(hit).get(k) for k in expected}
    assert got == expected


NOT_EVENTS = [
    "hello from rank 0",
    "Epoch 3 done, loss 0.5",
    "ai:480850:480850 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
    "h:1:2 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
    "h:1:2 [0] NCCL INFO transport/net.cc:1298 -> 6",
    "UserWarning: TypedStorage is deprecated",
    "the run printed Cuda failure 'invalid argument' and stopped",  # not NCCL's line alone
    "Aborted training due to NaN loss at step 5",
    # torch.cuda.memory_summary()'s header row with no OOM counted (torch/cuda/memory.py)
    "|                  CUDA OOMs: 0         |        cudaMalloc retries: 0         |",
    # "Rank 2 successfully reached monitoredBarrier, but received errors … from rank 0" is
    # an event now (it names rank 0): tests/unit/logs/test_job_activity_lines.py.
    "",
]


@pytest.mark.parametrize("line", NOT_EVENTS)
def test_ordinary_lines_are_not_events(line: str) -> None:
    assert recognise_line(line) is None
