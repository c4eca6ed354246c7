"""NCCL failures that happened while a communicator was being set up, not while it ran.

Creating a communicator (``ncclCommInitRank`` and friends, and the connections NCCL sets
up on a communicator's first collectives) is where configuration problems surface: no
usable network interface, a topology NCCL cannot map, a CUDA call that fails while the
peer-to-peer buffers are set up, a rank that is twice on one GPU. Three kinds of lines
say that setup failed, and this view gathers them for HD206 (and for the deaths view,
which must not call the same failure a crash):

* **NCCL WARN lines from setup code.** Every WARN names its source file
  (``graph/topo.h:230 NCCL WARN Could not find NET with id 0``): ``init.cc``,
  ``bootstrap.cc``, ``transport.cc``, ``channel.cc`` and the topology code in ``graph/``
  run only while a communicator is created or connected (NVIDIA/nccl ``src/``). Some
  setup messages are known by their words wherever they come from (``Bootstrap : no
  socket interface found``, ``NET/Socket : no interface found``, ``… verify
  NCCL_SOCKET_IFNAME``).
* **NCCL's return-code chain** through those files (``init.cc:1523 -> 2``), which NCCL
  prints as the failure unwinds.
* **A synchronous NCCL error in torch**: ``NCCL error in: <file>:<line>, unhandled cuda
  error …`` is the message of torch's ``C10D_NCCL_CHECK`` macros (c10d/NCCLUtils.hpp),
  which wrap NCCL calls made on the caller's thread: communicator creation
  (``NCCLComm::create`` in NCCLUtils.hpp, ``getNCCLComm`` in ProcessGroupNCCL.cpp) and
  the launch of a collective. Errors of a collective that already runs reach torch
  asynchronously instead, through the watchdog (``NCCL error: …`` without ``in:``,
  "Process group watchdog thread terminated with exception"). A synchronous system,
  internal, CUDA or usage error with no sign of earlier collective traffic is therefore
  a setup failure. In the casebook's train split three of the four such errors are
  exactly that: xtuner#314 (``ProcessGroupNCCL.cpp:1333, unhandled cuda error``),
  pytorch#131781 (``ProcessGroupNCCL.cpp:1970, unhandled system error`` while the
  unique id was exchanged) and ray-project/ray#40758 (``ProcessGroupNCCL.cpp:1275,
  internal error`` when DDP first talked over NCCL); the fourth, peft#1703, is a CUDA
  out-of-memory during ``deepspeed.initialize``'s first broadcast, which HD031 names.
  A remote error, or one whose detail names a lost connection, is a transport failure
  (HD200), and an out-of-memory is HD031's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import F_MESSAGE, EventKind

# NCCL source files that run only while a communicator is created or connected.
_SETUP_SITE = re.compile(
    r"(?:^|/)(?:init\.cc|bootstrap\.cc|transport\.cc|channel\.cc|graph/\w+\.(?:cc|h))(?::\d+)?$"
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
# ncclResult_t names (nccl.h) that a failed setup returns; ncclRemoteError is a peer's
# failure or a broken connection (HD200), ncclInvalidArgument a caller's bad buffer.
# ncclInProgress is torch's "NCCL timeout in: …" (a non-blocking init that never finished).
_SETUP_CLASSES = frozenset(
    {
        "ncclSystemError",
        "ncclInternalError",
        "ncclUnhandledCudaError",
        "ncclInvalidUsage",
        "ncclInProgress",
    }
)
# Events that show collectives had already been running before the error.
_RUNNING = frozenset(
    {
        EventKind.NCCL_COLL.value,
        EventKind.COLLECTIVE_TIMEOUT.value,
        EventKind.WATCHDOG_STATUS.value,
        EventKind.WATCHDOG_TEARDOWN.value,
        EventKind.HEARTBEAT_TIMEOUT.value,
        EventKind.DUMP_SIGNAL.value,
        EventKind.COLLECTIVE_MISMATCH.value,
    }
)
_TRAINING_PHASES = frozenset({"train", "eval", "checkpoint_save", "checkpoint_saved"})


@dataclass(frozen=True, slots=True)
class SetupFailure:
    """The lines that say NCCL failed while setting a communicator up."""

    warns: tuple[Placed, ...]  # NCCL WARN lines from setup code or with setup words
    returns: tuple[Placed, ...]  # "init.cc:N -> rc" chains
    errors: tuple[Placed, ...]  # torch's synchronous "NCCL error in: …" of a setup class

    @property
    def placed(self) -> tuple[Placed, ...]:
        return tuple(sorted((*self.warns, *self.returns, *self.errors), key=lambda p: p.index))


def _where(p: Placed) -> str:
    return (p.get("where") or "").strip()


def _file(where: str) -> str:
    return where.rsplit(":", 1)[0] if where[-1:].isdigit() else where


def is_setup_warn(p: Placed) -> bool:
    """An NCCL WARN written by communicator-setup code, or a setup message."""
    message = p.get(F_MESSAGE) or p.event.text
    if _HARMLESS.search(message):
        return False
    return bool(_SETUP_SITE.search(_file(_where(p))) or _SETUP_WORDS.search(message))


def first_running(tl: Timeline) -> int:
    """Index of the first event that shows collectives or training running (else the end)."""
    for p in tl.events:
        if p.kind in _RUNNING:
            return p.index
        if p.kind == EventKind.PHASE and (p.get("phase") or "") in _TRAINING_PHASES:
            return p.index
    return len(tl.events)


def is_setup_error(p: Placed, running_from: int) -> bool:
    """torch's synchronous NCCL error of a setup class, before any collective traffic,
    that is neither an out-of-memory (HD031) nor a lost connection (HD200)."""
    if p.kind != EventKind.NCCL_ERROR or not _where(p) or "watchdog" in p.event.text.lower():
        return False
    if (p.get("class") or "") not in _SETUP_CLASSES:
        return False
    detail = " ".join(filter(None, (p.get("last_error"), p.get(F_MESSAGE)))).lower()
    if "out of memory" in detail or p.get("last_error_peer") or p.get("last_error_error"):
        return False
    return p.index < running_from


def _lost_connections(tl: Timeline) -> bool:
    """NCCL transport errors other than the connect retries every start-up logs."""
    return any(not p.get("retrying") for p in tl.of(EventKind.NCCL_TRANSPORT_ERROR))


def setup_failure(tl: Timeline) -> SetupFailure | None:
    """What says a communicator's setup failed, or None. Transport errors (HD200's) and
    a completed run of collectives before the lines make it something else."""
    if _lost_connections(tl):
        return None
    running_from = first_running(tl)
    warns = tuple(
        p for p in tl.of(EventKind.NCCL_WARN) if p.index < running_from and is_setup_warn(p)
    )
    returns = tuple(
        p
        for p in tl.of(EventKind.NCCL_RETURN)
        if p.index < running_from and _SETUP_SITE.search(_file(_where(p)))
    )
    errors = tuple(p for p in tl.of(EventKind.NCCL_ERROR) if is_setup_error(p, running_from))
    if not (warns or returns or errors):
        return None
    return SetupFailure(warns, returns, errors)


def setup_error_lines(tl: Timeline) -> frozenset[tuple[str, int | None]]:
    """(file, line) of each synchronous setup error: the CUDA failure NCCL attached to
    it ("Last error: Cuda failure 'invalid argument'") sits on the same line, and is
    that setup failure's detail, not a crash of its own."""
    errors = tl.of(EventKind.NCCL_ERROR)
    if not errors or _lost_connections(tl):
        return frozenset()
    running_from = first_running(tl)
    return frozenset(
        (p.event.source, p.event.line) for p in errors if is_setup_error(p, running_from)
    )
