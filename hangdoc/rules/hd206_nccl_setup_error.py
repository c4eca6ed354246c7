"""NCCL failed while setting up a communicator

## What it means
NCCL reported an error from the code that creates or connects a communicator, before any
collective had run: a WARN line from its setup code (`init.cc`, `bootstrap.cc`,
`transport.cc`, the NVLS set-up in `transport/nvls.cc`, `graph/…`:
`graph/topo.h:230 NCCL WARN Could not find NET with id 0`,
`Bootstrap : no socket interface found`, `NET/Socket : no interface found`), the error
chain unwinding through those files (`init.cc:1523 -> 2`), or torch's synchronous
`NCCL error in: …ProcessGroupNCCL.cpp:1333, unhandled cuda error … Last error: Cuda
failure 'invalid argument'` raised by `init_process_group`, `new_group` or the first
collective, which is when torch creates the NCCL communicator, where the paste shows that
stage, or its `NCCL timeout in: …NCCLUtils.hpp:N` when a non-blocking communicator init
never finished.

## Why it hangs
Communicator creation is collective: when one rank fails it, the ranks that did not fail
wait for it in their own init or first collective until the timeout, and the job stops
before training starts. The failure is in the environment (network interfaces, topology
detection, GPU peer access, container IPC limits, the NCCL build), not in the model.

## Evidence used
NCCL WARN lines by their source file (also those of the NVML and libcuda wrappers,
`misc/nvmlwrap.cc`, `misc/cudawrap.cc`, which only setup calls) and setup messages, a WARN
of any file whose return-code chain unwinds through setup code (`NCCL WARN … failed: …`
then `graph/xml.cc:N -> 2`, `init.cc:N -> 2`), a CUDA failure NCCL WARNed about so
(`transport.cc:N NCCL WARN Cuda failure '…'`: not a crash, HD030 leaves it), also from a
header's helper when the same thread had just printed a connection it sets up (`Ring 00 :
4[4] -> 3[3] via direct shared memory`), NCCL return-code chains, and
torch's `NCCL error in: <file>:<line>` messages of class ncclSystemError,
ncclInternalError, ncclUnhandledCudaError or ncclInvalidUsage where something shows the
set-up stage: the printed place a check of torch's communicator set-up in every held
release (`…/torch/lib/c10d/ProcessGroupNCCL.cpp:N`, 1.x), the creation call the caller
named (`ncclCommInitRank failed: unhandled system error`), a last error that only NCCL's
set-up prints (`Last error: Attribute arch of node cpu not found`, graph/xml.h; `Failed to
open libnvidia-ml.so.1`, misc/nvmlwrap.cc), a traceback through set-up (init_process_group,
new_group, DDP's construction, NeMo 0.x's NeuralModuleFactory whose constructor runs the
default group's first all_reduce, an RL framework's worker building its model: verl's and
SkyRL's `init_model`, OpenRLHF's `init_model_from_pretrained`, where the process group's
first collectives create the communicator), or NCCL's own set-up output of the process (its init and
interface lines before the error, a set-up WARN, a refused configuration or a
shared-memory segment around it). A bare `NCCL error in: …NCCLUtils.hpp:275, unhandled
cuda error` with nothing else shows no stage: torch's C10D_NCCL_CHECK wraps a
collective's launch as well as the creation, so such a paste is not read here. And an
exception carrying
one of those errors' words (`NCCL error: unhandled system error`, raised by vLLM's and
SGLang's own NCCL bindings) whose traceback shows it raised while a communicator was
created (`ncclCommInitRank`, `init_process_group`; a paste cut between a frame and its
source line keeps that call on the line above the first frame shown) or in the worker
method its logged record names (vLLM's "Error executing method init_device", whose
device set-up creates the distributed environment's communicators; a paste that starts
inside an earlier record of the same logging call takes that record's method), or logged by its
caller after the call's name (`ncclCommInitRank failed with error: NCCL error: internal
error`), and NCCL's WARN that it could not create a shared-memory segment (`Error while
creating shared memory segment /dev/shm/nccl-… (size N)`, header or not: NCCL opens them
only while it connects a communicator), and the set-up failures of a framework's own
communicator that the message catalog names (TransformerEngine's userbuffers exchanging
its IPC handles; vLLM's custom all-reduce, whose CUDACHECK in `custom_all_reduce.cuh`
wraps the calls that share its buffers between the GPUs: `Failed: Cuda error
…/custom_all_reduce.cuh:336 'invalid argument'`) (analyzer/views/nccl_setup.py).
HCCL's set-up failures on an Ascend NPU job count the same way, read from the catalog's
rows of HCCL's own sources (hicann/hcomm: `[Wait][LinkEstablish]wait socket establish
timeout`, the error manager's `EI0006: … Getting socket times out`, `EJ0001: … Failed to
initialize the HCCP process`) and of torch_npu's ProcessGroupHCCL (`HCCL function error:
HcclCommInitRootInfo(…)`); the finding then names HCCL.
An NCCL CUDA failure "out of memory" whose WARN's place is a check of a call that
allocates or pins *host* memory in every release its lines can come from
(`include/alloc.h:65 NCCL WARN Cuda failure 2 'out of memory'` under
`transport/shm.cc:534 -> 1`: 2.26's ncclCuMemHostAlloc for the SHM transport;
cudaHostAlloc, cudaHostRegister of a /dev/shm segment; the table scripts/catalog/
host_memory.py generates from every release) counts here as a set-up WARN, not as
HD031's out-of-memory: the host could not pin the memory (its locked-memory limit, a
container's or WSL2's), the GPU's memory did not run out.
A CUDA failure NCCL WARNs of an error CUDA's documentation gives as the caller's request
(the catalog's cuda-caller-request family: "invalid device function", "no kernel image is
available for execution on the device", a build without this GPU's architecture), from
whatever place NCCL checked it (`enqueue.cc:215 NCCL WARN Cuda failure 'invalid device
function'` on its first kernel launch), counts as a set-up WARN: the NCCL build or its
configuration does not fit the machine, an install's failure on first use, not the GPU's.
A CUDA failure of a multicast call in the NVLS set-up (`cuMulticastBindMem`…, found by
the WARN's place in NCCL's sources) is HD301's, the NVSwitch fabric's state; HD206 keeps
only its return-code chain.
Not used when collectives or training had already been logged before the error, when
NCCL reported a lost connection (HD200) or when the error is a CUDA out-of-memory (HD031),
nor for torch's error of aborting a communicator as its process group was destroyed (the
failure reason C10D_NCCL_CHECK prints under it, "Process Group destroyed on rank N",
which ~ProcessGroupNCCL passes to ncclCommAbort): that is teardown, not set-up.
An NCCL error in words none of ncclGetErrorString's strings (a release's, a plugin's or
a fork's new words, `NCCL error in: …/ProcessGroupNCCL.cpp:535, <words>`, `NCCL error:
<words>`) counts where the same things show the stage (a check in communicator creation,
a traceback through a set-up entry point, NCCL's own set-up output before it), stated one
step weaker (`WORDS_UNREAD`): where it failed is read, what failed is not.

## How to confirm
Rerun with `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH` (or `NCCL_DEBUG=WARN` at
least): the WARN line just before the error names the failing step. Run `nccl-tests`
(`all_reduce_perf -g <gpus>`) on the same nodes, with the same container, outside the
training script.

## How to fix
Follow the WARN: pin the interfaces (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`), give containers
host networking and enough shared memory (`--ipc=host`, `--shm-size`), try
`NCCL_P2P_DISABLE=1` / `NCCL_SHM_DISABLE=1` to isolate a peer-access problem, and use an
NCCL version that knows the machine's topology (upgrading NCCL fixes many topology
detection errors).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.nccl import NcclError, NcclWarn
from hangdoc.analyzer.payloads.torch_pg import Foreign, NcclResult
from hangdoc.analyzer.views.nccl_setup import SetupFailure, setup_failure, unread_class
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted


class NcclSetupError(Rule):
    __doc__ = __doc__
    id = "HD206"
    name = "nccl-setup-error"
    summary = "NCCL failed while creating or connecting a communicator"
    categories = (Category.NCCL_INIT,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        failure = setup_failure(ctx.timeline)
        if failure is not None:
            yield _finding(self.id, failure)


def _unread(failure: SetupFailure) -> bool:
    """Every error of the failure is of a class hangdoc does not know."""
    errors = [p.event.payload_as(NcclError) for p in failure.errors]
    raised = [p.event.payload for p in failure.raised]
    return bool(errors or raised) and (
        all(e is not None and unread_class(e) for e in errors)
        and all(Sign.NCCL_ERROR_UNREAD in r.signs for r in raised)
    )


def _finding(rule_id: str, failure: SetupFailure) -> Finding:
    placed = failure.placed
    ranks = list(failure.ranks)
    first = placed[0]
    if failure.warns:
        # The WARN whose failure NCCL unwound (a return code logged after it) said what
        # stopped the setup; earlier WARNs may be what led to it.
        warn = next((w for w in failure.warns if _unwound(w)), failure.warns[0])
        said_warn = warn.event.payload_as(NcclWarn) or NcclWarn()
        said = f"NCCL WARN {said_warn.message or warn.event.text}"
        if said_warn.library is not None:
            # another collective library's own line (HCCL's plog, its error manager)
            said = f"{said_warn.library}: {(said_warn.message or warn.event.text).strip()}"
        site = said_warn.where
        if warn.kind != EventKind.NCCL_WARN and site is None:
            # a CUDA failure no NCCL header printed: a framework's own communicator set-up
            # (TransformerEngine's userbuffers, vLLM's custom all-reduce) checked it
            said = warn.event.text.strip()
        what = f"{said[:160]}" + (f" (from {site})" if site else "")
        if Sign.PINNED_HOST_MEMORY in said_warn.signs:
            what += (
                ", a pinned host-memory allocation: the host could not pin it, the GPU's "
                "memory did not run out"
            )
    else:
        placed_error = (failure.errors or failure.raised or (first,))[0]
        error = placed_error.event.payload
        cls = error.error_class if isinstance(error, NcclError) else None
        last = error.last_error if isinstance(error, NcclError) else None
        where = error.where if isinstance(error, (NcclError, NcclWarn)) else None
        what = f"{cls or 'an NCCL error'} at {where or 'setup'}" + (f": {last}" if last else "")
        if cls == NcclResult.IN_PROGRESS:
            what = f"a non-blocking communicator setup never finished (NCCL timeout in: {where})"
    library = _library(placed)
    kinds = [
        name
        for name, items in (
            ("a setup WARN" if library == "NCCL" else "a set-up error", failure.warns),
            ("a return chain through setup code", failure.returns),
            (_raised_by(failure.errors), failure.errors),
            ("an NCCL error raised from communicator set-up code", failure.raised),
        )
        if items
    ]
    # One line of one kind is weak (a WARN NCCL may survive, an error whose call site is
    # only probably setup); two kinds that agree name the failure outright.
    strength = shifted(Strength.SIGNAL, Shift.AGREES) if len(kinds) >= 2 else Strength.SIGNAL
    if not failure.warns and not failure.returns and _unread(failure):
        # an error whose words name no class hangdoc knows, read as set-up only by where it
        # was checked or raised (views/nccl_setup.unread_class)
        strength = shifted(strength, Shift.WORDS_UNREAD)
    who = f" on {ranks_text(ranks)}" if ranks else ""
    fix = _FIXES.get(library, _FIXES["NCCL"])
    if any(Sign.PINNED_HOST_MEMORY in p.event.payload.signs for p in failure.warns):
        fix = _PINNED_FIX
    return Finding(
        rule=rule_id,
        category=Category.NCCL_INIT,
        severity=Severity.ERROR,
        title=f"{library} failed while setting up a communicator{who}: {what}",
        explanation=(
            f"{library} reported {', '.join(kinds)} before any collective had run: {what}. "
            "Communicator creation (init_process_group, new_group or the first collective) "
            "failed; the ranks that did not fail wait for this one in their own setup."
        ),
        fix=fix,
        culprit_ranks=tuple(ranks),
        evidence=tuple(limited_refs(placed, limit=6)),
        strength=strength,
    )


_FIXES = {
    "NCCL": (
        "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH and read the WARN "
        "before the error; run nccl-tests on the same nodes and container; pin the "
        "interfaces (NCCL_SOCKET_IFNAME, NCCL_IB_HCA), give containers host networking, "
        "--ipc=host and enough shared memory, isolate peer access with NCCL_P2P_DISABLE=1, "
        "and try a newer NCCL for topology detection errors."
    ),
    # HCCL's fault-diagnosis guide (hicann/hccl docs/zh/user_guide/fault_diagnosis,
    # param_link_stage.md: link set-up timeouts, EI0006) and its error-code pages
    "HCCL": (
        "Read the plog of both ends of the link that failed (the LINK_ERROR_INFO table names "
        "their device IPs and ranks) for the first error; check the NPU network between them "
        "(hccn_tool link and IP state), that no earlier training process still holds the "
        "devices, and that every rank reaches communicator creation within "
        "HCCL_CONNECT_TIMEOUT (raise it when ranks start far apart)."
    ),
}


# NCCL pins host memory for its proxies' and the SHM transport's buffers (cudaHostAlloc,
# cudaHostRegister of /dev/shm segments, and from 2.19 cuMem host allocations, which
# NCCL_CUMEM_HOST_ENABLE=0 turns off: src/misc/cudawrap.cc); CUDA reports the host's
# refusal to pin as out of memory.
_PINNED_FIX = (
    "The host refused to pin memory for NCCL's buffers: raise the locked-memory limit "
    "(ulimit -l unlimited, the container's memlock ulimit), give the container or WSL2 VM "
    "more memory, and on NCCL 2.19+ try NCCL_CUMEM_HOST_ENABLE=0 (NCCL then pins with "
    "cudaHostAlloc instead of cuMem host allocations) or NCCL_SHM_DISABLE=1 to take the SHM "
    "transport's buffers out; lowering the batch size does not help."
)


def _library(placed: tuple[Placed, ...]) -> str:
    """The library the set-up lines are from: NCCL unless every line that names one names
    another (HCCL's own lines on an Ascend NPU job)."""
    named = {w.library for p in placed if (w := p.event.payload_as(NcclWarn)) is not None}
    if len(named) == 1 and (only := next(iter(named))) is not None:
        return only
    return "NCCL"


def _unwound(p: Placed) -> bool:
    warn = p.event.payload_as(NcclWarn)
    return warn is not None and warn.rc is not None


RULE = NcclSetupError


# Who raised the NCCL error string (NcclError.foreign): torch's own check, or another
# framework's exception that carried NCCL's error string.
_RAISED_BY = {
    Foreign.HOROVOD: "an NCCL error raised by Horovod",
    Foreign.XLA: "an NCCL error raised by XLA",
    Foreign.CUPY: "an NCCL error raised by CuPy",
    Foreign.BINDING: "an NCCL error raised by a framework's NCCL binding",
    Foreign.UNKNOWN: "an NCCL error raised by another framework",
}


def _raised_by(errors: tuple[Placed, ...]) -> str:
    """How the explanation names the synchronous errors: torch's, unless every one was
    raised by another framework (one name when they agree)."""
    foreign = {
        e.event.payload.foreign if isinstance(e.event.payload, NcclError) else None for e in errors
    }
    if len(foreign) == 1 and (only := foreign.pop()) is not None:
        return _RAISED_BY[only]
    return "a synchronous NCCL error in torch"
