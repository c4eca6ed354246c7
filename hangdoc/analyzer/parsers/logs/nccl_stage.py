"""The stage NCCL's own source lines show, read into each WARN and return-code chain once
the whole text is scanned (the version NCCL prints may come after the failure, and a
chain's callers after its WARN).

A WARN's place and the "file:line -> rc" lines under it are looked up in the table
generated from every NCCL release (``parsers/catalog/stages.py``): where they sit in
communicator or connection set-up in every release they can come from, the WARN is a
set-up failure whatever layer failed (fixtures/cases/README.md, "NCCL set-up or
network"); where they sit in the data path, it is not. A WARN of no transport, or a chain
whose WARN the paste lost, whose lines show set-up is marked ``setup`` as one printed from
a set-up file is (views/nccl_setup.py); a transport error keeps its kind (HD200 reads its
stage).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from hangdoc.analyzer.parsers.catalog import default_matcher
from hangdoc.analyzer.parsers.catalog.stages import (
    chain_stage,
    function_stage,
    host_memory_call,
    multicast_call,
)
from hangdoc.analyzer.parsers.catalog.torch_stages import site_stage
from hangdoc.analyzer.parsers.logs.nccl import harmless_warn, setup_site
from hangdoc.analyzer.payloads.base import EventPayload, Sign
from hangdoc.analyzer.payloads.nccl import (
    CudaFailure,
    NcclError,
    NcclTransportError,
    NcclVersion,
    NcclWarn,
    SourceStage,
)


class _Event(Protocol):
    payload: EventPayload


def printed_version(events: Iterable[_Event]) -> str | None:
    """The one NCCL version the text prints (its "NCCL version 2.21.5+cuda12.4" lines,
    torch's "…, NCCL version 2.14.3"), or None: none, or several (several jobs)."""
    found: set[str] = set()
    for event in events:
        payload = event.payload
        if isinstance(payload, NcclVersion) and payload.version:
            found.add(payload.version)
        elif isinstance(payload, NcclError) and payload.nccl_version:
            found.add(payload.nccl_version)
    return found.pop() if len(found) == 1 else None


def message_stage(text: str) -> SourceStage | None:
    """The stage of the NCCL code that prints a message with no place of its own (torch's
    "Last error:" detail: ncclGetLastError, the text of NCCL's last WARN without its
    header): set-up where the catalog holds it from NCCL functions only, and every one of
    them is set-up's in the stage table (``graph/xml.h`` xmlGetAttrStr: "Attribute arch of
    node cpu not found") or sits in a file that only set-up runs (``misc/nvmlwrap.cc``:
    "Failed to open libnvidia-ml.so.1"; parsers/logs/nccl.py setup_site); else None (a
    message several stages print, "Cuda failure 'invalid argument'" of any CUDACHECK)."""
    found = default_matcher().match(text.strip())
    if found is None or found.row.project != "nccl" or not found.row.sources:
        return None
    for source in found.row.sources:
        stage = function_stage(source.file, source.function)
        if stage is None and setup_site(source.file.removeprefix("src/")):
            stage = SourceStage.SETUP
        if stage is not SourceStage.SETUP:
            return None
    return SourceStage.SETUP


# The NCCL calls that create a communicator (nccl.h): a framework that names the call its
# NCCL error came from ("ncclCommInitRank failed: unhandled system error", Horovod; vLLM's
# pynccl "ncclCommInitRank failed with error: …") says the error is that creation's.
_CREATION_CALLS = frozenset(
    {
        "ncclCommInitRank",
        "ncclCommInitRankConfig",
        "ncclCommInitRankScalable",
        "ncclCommInitAll",
        "ncclCommSplit",
        "ncclGetUniqueId",
    }
)


def mark_stages(events: Sequence[_Event]) -> None:
    """Each NCCL WARN's and chain's ``stage``, from its lines and the printed version; and
    each torch NCCL error's, from the c10d check its "NCCL error in: <file>:<line>" names."""
    version: str | None = None
    versioned = False
    for event in events:
        warn = event.payload
        if isinstance(warn, NcclError) and warn.where and warn.stage is None:
            if warn.where in _CREATION_CALLS or warn.call in _CREATION_CALLS:
                event.payload = replace(warn, stage=SourceStage.SETUP)
                continue
            torch_stage = site_stage(warn.where)
            if torch_stage is not None:
                event.payload = replace(warn, stage=torch_stage)
            continue
        if not isinstance(warn, NcclWarn):
            continue
        if not (warn.where or warn.rc_chain):
            _mark_placeless(event, warn)
            continue
        if not versioned:
            version, versioned = printed_version(events), True
        if isinstance(warn, CudaFailure):
            warn = event.payload = _multicast_failure(warn, version)
            warn = event.payload = _host_memory_failure(warn, version)
        stage = chain_stage((warn.where, *warn.rc_chain), version)
        if stage is None:
            continue
        changes: dict[str, object] = {"stage": stage}
        if (
            stage is SourceStage.SETUP
            and type(warn) in (NcclWarn, CudaFailure)
            and not warn.setup
            and not harmless_warn(warn.message or "")
        ):
            changes["setup"] = True
        event.payload = replace(warn, **changes)  # type: ignore[arg-type]


def _mark_placeless(event: _Event, warn: NcclWarn) -> None:
    """A transport WARN that lost its place (the paste cut or re-prefixed its header, or a
    framework printed ncclGetLastError's text on its own line after "Last error:") keeps
    the stage of the NCCL functions that print its words: set-up where every source row
    of the message is set-up's in the stage table (:func:`message_stage`; misc/socket.cc's
    ncclSocketInit refusing an address of neither family, called only by the bootstrap,
    the socket and IB transports' connect/listen/accept and the proxies' connect, in every
    release that prints it), so HD200 reads it as the connections' set-up failing, as it
    does a placed WARN of the same function. Only NCCL's transport WARNs: a CUDA failure
    or a bare WARN without a place is read as the parser typed it (their words are
    printed by many call sites)."""
    if type(warn) is not NcclTransportError or warn.stage is not None or not warn.message:
        return
    if message_stage(warn.message) is SourceStage.SETUP:
        event.payload = replace(warn, stage=SourceStage.SETUP)


def _multicast_failure(failure: CudaFailure, version: str | None) -> CudaFailure:
    """A CUDA failure of a multicast call in NCCL's NVLS transport (its WARN's place is
    such a check in every release its lines allow: ``transport/nvls.cc:158 NCCL WARN Cuda
    failure 1 'invalid argument'`` of 2.21.5's cuMulticastBindMem) names the NVSwitch
    fabric's state: ``hardware`` says so (HD301 reads it; views/nccl_setup.py leaves a
    CUDA failure that names the hardware to it) and Sign.NVLS_MULTICAST marks it. Not an
    out-of-memory (HD031's), nor a failure already read as the hardware's."""
    if failure.hardware is not None or not failure.error or "out of memory" in failure.error:
        return failure
    call = multicast_call((failure.where, *failure.rc_chain), version)
    if call is None:
        return failure
    return replace(
        failure,
        hardware=f"{call}: {failure.error}",
        signs=tuple(dict.fromkeys((*failure.signs, Sign.NVLS_MULTICAST))),
    )


def _host_memory_failure(failure: CudaFailure, version: str | None) -> CudaFailure:
    """An out-of-memory NCCL reported from a CUDA call that allocates or pins host memory
    (its WARN's place is such a check in every release its lines allow:
    ``include/alloc.h:65 NCCL WARN Cuda failure 2 'out of memory'`` of 2.26's
    ncclCuMemHostAlloc, the SHM transport's pinned buffer; ``cudaHostRegister`` of a
    /dev/shm segment) is marked Sign.PINNED_HOST_MEMORY: the host could not pin the
    memory NCCL sets its connections up with, which the deaths view does not read as the
    GPU's out-of-memory (HD031) and the set-up view reads as NCCL's set-up failing."""
    if not failure.error or "out of memory" not in failure.error:
        return failure
    if Sign.PINNED_HOST_MEMORY in failure.signs:
        return failure
    call = host_memory_call((failure.where, *failure.rc_chain), version)
    if call is None:
        return failure
    return replace(failure, signs=tuple(dict.fromkeys((*failure.signs, Sign.PINNED_HOST_MEMORY))))
