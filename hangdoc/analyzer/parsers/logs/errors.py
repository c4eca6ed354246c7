"""What an error line says, read once, when its event is made: the signs of its exception
and message (payloads.base.Sign), the GPU-hardware and storage failures it names, and the
allocation an out-of-memory error names.

The deaths view and the rules decide on these typed fields; before, each of them searched
the words again (a rank's death told from a consequence by words in its summary). Every
producer of log events finishes its payloads here (parsers/logs/hit.py ``log_event``).
"""

from __future__ import annotations

import dataclasses
import functools
import re

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.catalog import default_matcher
from hangdoc.analyzer.parsers.logs.oserror import entry_call, errno_of, os_failure_of
from hangdoc.analyzer.payloads.base import EventPayload, Sign
from hangdoc.analyzer.payloads.launch import ExceptionRaised
from hangdoc.analyzer.payloads.nccl import CudaFailure, NcclError, NcclWarn
from hangdoc.analyzer.payloads.torch_pg import WatchdogTeardown
from hangdoc.analyzer.vocabulary import CONSEQUENCE_TEXT, save_storage_error, storage_error

# Text of a CUDA/NCCL error that says the GPU itself failed (ECC, NVLink, off the bus).
HARDWARE = re.compile(
    r"uncorrectable ECC|ECC error|ECCUncorrectable|uncorrectable NVLink|NVLink error|fallen off "
    r"the bus|"
    r"GPU is lost|GPU lost|cudaErrorECC"
    # The whole reason of ROCm's runtime for a hardware exception (ROCR runtime.cpp
    # HwExceptionHandler: "HW Exception by GPU node-%u (Agent handle: %p) reason :%s", "ECC"
    # or "GPU Hang"), as the catalog's row rocr-hw-exception gives it.
    r"|^(?:ECC|GPU Hang)$"
)
# An HCCL call that failed under torch_npu (github.com/Ascend/pytorch): HCCLUtils.hpp's
# HCCL_CHECK_ERROR ("HCCL function error: <call>, error code is N"; 5.x/6.x "HCCL error in:
# <file>:<line>"), NPUException.h's NPU_CHECK_ERROR around an HCCL call ("OPS function
# error: HcclAllreduce, error code is N", OpParamMaker.cpp's ops) and ErrCode::HCCL's text
# (NPUException.cpp: "call hccl api failed"): the collective library's failure, which its
# own lines (the catalog's hccl rows: HD206, HD200) name; not a crash of the rank.
_HCCL_CALL_FAILED = re.compile(
    r"HCCL function error|HCCL error in: |OPS function error: Hccl\w*|call hccl api failed"
)
# An NCCL call's error string in another framework's exception (Horovod's NCCL_CHECK in
# horovod/common/ops/nccl_operations.cc: "<op_name> failed: " + ncclGetErrorString(…);
# XLA's xla/service/gpu/nccl_utils.cc: "NCCL operation <expr(args)> failed: <string>";
# NVIDIA/nccl src/init.cc's strings): an NCCL failure that the parser reads as an
# NCCL_ERROR event (HD206 at communicator creation, HD200 for a remote error), not a crash.
# cupy's "NcclError: NCCL_ERROR_…" is already a consequence by CONSEQUENCE_TEXT.
_NCCL_CALL_FAILED = re.compile(
    r"\bnccl[A-Z]\w*(?:\(.*?\))? failed: (?:(?:unhandled )?(?:cuda|system) error|internal error"
    r"|invalid argument|invalid usage|remote process exited|NCCL operation in progress)"
)
# What an object raises once it was shut down, and a framework's report that one of its
# processes failed earlier, told above (Sign.SHUT_DOWN): a call made after the shutdown,
# or the relay of a failure printed elsewhere; never the failure that began it. From the
# sources that raise them:
# * "<object> is closed", "has been shut down", "is shutting down": CPython's asyncio
#   (base_events.py _check_closed: "Event loop is closed") and multiprocessing (queues.py
#   _check_closed: f"Queue {self!r} is closed"), Horovod (runner/util/streams.py "Pipe is
#   closed", common/basics.py "Horovod is shutting down.", its SHUT_DOWN_ERROR status
#   "Horovod has been shut down. This was caused by an exception on one of the ranks …"),
#   and vllm-omni's engine (diffusion_engine.py collective_rpc: ``if self._closed: raise
#   RuntimeError("DiffusionEngine is closed.")``);
# * concurrent.futures' executors (thread.py, process.py submit): "cannot schedule new
#   futures after shutdown" / "… after interpreter shutdown";
# * vLLM v1's relays of a failure told above: EngineDeadError (v1/engine/exceptions.py:
#   "EngineCore encountered an issue. See stack trace (above) for the root cause."),
#   MultiprocExecutor.collective_rpc's "Worker failed with error '<e>', please check the
#   stack trace above for the root cause" and "One or more workers failed",
#   EngineCoreProc's "Executor failed."; Horovod's elastic driver "Job has been shutdown,
#   see above error messages for details.".
# Searched anywhere in the message: an HTTP client's status error carries the server's
# words after its own (openai's _make_status_error_from_response: f"Error code:
# {status} - {body}"), so a server's EngineDeadError reaches a test's client as
# "openai.InternalServerError: Error code: 500 - EngineCore encountered an issue".
_SHUT_DOWN = re.compile(
    r"\b(?:is|was|has been) (?:closed|shut ?down)\b|\bis shutting down\b"
    r"|\bnew futures after (?:interpreter )?shutdown\b"
    r"|\bEngineCore encountered an issue\b|\bcheck the stack trace above for the root cause\b"
    r"|\bOne or more workers failed\b|^Executor failed\.?$"
    r"|\bsee above error messages for details\b"
)
# cudaGetErrorString(cudaErrorPeerAccessUnsupported), the CUDA runtime's error 217
# (libcudart's error-string table: the catalog's cuda.json row cuda.e6e1d7b00a), as NCCL
# prints it after the number (p2p.cc "failed to open CUDA IPC handle : %d %s", cudawrap.h
# "Cuda failure %d '%s'") and torch after "CUDA error: ".
PEER_ACCESS_UNSUPPORTED = "peer access is not supported between these two devices"
# cudaGetErrorString(cudaErrorSystemNotReady) / cuGetErrorString(CUDA_ERROR_SYSTEM_NOT_READY),
# error 802: CUDA's documentation says "the system is not yet ready to start any CUDA work
# … verify the system configuration is in a valid state and all required driver daemons
# are actively running" (on NVSwitch systems the fabric manager).
SYSTEM_NOT_READY = "system not yet initialized"
_TRIED = re.compile(r"Tried to allocate (\d+(?:\.\d+)? ?[KMGTPE]i?B)")
# ProcessGroupNCCL's watchdog rethrows what ended it: "[PG ID 2 PG GUID 3 Rank 4] Process
# group watchdog thread terminated with exception: CUDA error: an illegal memory access was
# encountered" (older: "[Rank 1] NCCL watchdog thread terminated with exception: CUDA
# error: …"). A timeout or a peer's abort ends it with a c10d/NCCL message; a CUDA error is
# raised by a kernel on this rank's own GPU (torch's CUDA error strings, c10/cuda), so this
# rank failed first. Seen in torchtitan #810 and kohya #1434 (the ECC form, HD301's).
_WATCHDOG_CUDA_ERROR = re.compile(
    r"watchdog thread terminated with exception: CUDA error: (?P<what>[^\n]{1,200})"
)
# The same message's exception, to the end of its line: what a wrap may have cut.
_WATCHDOG_WHAT = re.compile(r"watchdog thread terminated with exception: ?(?P<what>[^\n]{0,200})$")
# What c10_cuda_check_implementation (c10/cuda/CUDAException.cpp) starts every CUDA error's
# what() with; the watchdog's exception is that what() when a kernel of its GPU faulted.
_CUDA_ERROR_WORDS = "CUDA error: "


def known_cuda_error(error: str) -> bool:
    """The whole of a CUDA runtime error string the catalog holds (a cuda row that prints
    "CUDA error: <cudaGetErrorString>", libcudart's table): not a piece of one."""
    what = _cuda_error_only(error)
    found = default_matcher().match(_CUDA_ERROR_WORDS + what) if what else None
    return (
        found is not None
        and found.row.project == "cuda"
        and found.text.strip() == _CUDA_ERROR_WORDS + what
    )


def watchdog_cuda_error_cut(text: str) -> bool:
    """A line of the watchdog's abort ("… watchdog thread terminated with exception: …")
    that ends where its exception could still be a CUDA error the line does not hold
    whole: the line stops inside "CUDA error: " or inside the error string after it (a
    terminal's hard wrap at its width: atmorep #55's "… exception: CUDA erro" over
    "r: unspecified launch failure"). Its next line may be the rest (the scanner's
    ``_rest_of_watchdog``)."""
    m = _WATCHDOG_WHAT.search(text.rstrip())
    if m is None:
        return False
    what = m.group("what")
    if len(what) < len(_CUDA_ERROR_WORDS):
        return _CUDA_ERROR_WORDS.startswith(what)
    return what.startswith(_CUDA_ERROR_WORDS) and not known_cuda_error(
        what[len(_CUDA_ERROR_WORDS) :]
    )


def watchdog_cuda_error_joined(text: str, rest: str) -> str | None:
    """The watchdog's abort line ``text`` with the line after it, ``rest``, as one line,
    when together they hold a CUDA error the catalog knows whole: read as a hard wrap
    (the pieces meet as they are) or, failing that, a soft wrap at a space (the space
    gone). None when neither join does: the next line is not the rest of the message."""
    head, tail = text.rstrip(), rest.strip()
    for joined in (head + tail, f"{head} {tail}"):
        m = _WATCHDOG_CUDA_ERROR.search(joined)
        if m is not None and known_cuda_error(m.group("what")):
            return joined
    return None


# The catalog's strengths of a GPU/driver meaning below "strong", as the sign each gives
# (a strong or decisive one is the hardware words' above, HD301's stated reading).
_GPU_SIGNS = {"moderate": Sign.GPU_DRIVER_LIKELY, "weak": Sign.GPU_DRIVER_POSSIBLE}
_CUDA_ERROR_AT = re.compile(r"\bCUDA error: (?P<what>[^\n]{1,200})")
# The advice c10 prints on the line after every CUDA error (c10/cuda/CUDAException.cpp; the
# catalog's cuda-debug-hint family): a paste hard-wrapped and rejoined glues it to the
# error's last word ("…was terminatedCUDA kernel errors might…").
_C10_ADVICE = "CUDA kernel errors might be asynchronously reported"


def _cuda_error_only(what: str) -> str:
    """The CUDA error string, less c10's advice a rejoined wrap glued to it."""
    return what.split(_C10_ADVICE, 1)[0].strip()


# The catalog's payload field a family's sign is given by (meanings.toml ``fields``).
_SIGNS_FIELD = "signs"


def cuda_gpu_sign(error: str | None) -> Sign | None:
    """The sign a CUDA runtime error string gives by its documented meaning: the catalog's
    cuda row that prints it ("CUDA error: <cudaGetErrorString>"), when its meaning names
    the GPU or its driver at a strength below strong (meanings.toml, the cuda families),
    or the caller's own request (Sign.CUDA_CALLER_REQUEST, the family's field: a device
    index the node does not have, a build without the device's kernels)."""
    if not error:
        return None
    found = default_matcher().match(f"CUDA error: {_cuda_error_only(error)}")
    if found is None or found.row.project != "cuda" or found.row.meaning is None:
        return None
    meaning = found.row.meaning.for_text(found.text)
    if (_SIGNS_FIELD, Sign.CUDA_CALLER_REQUEST.value) in meaning.fields:
        return Sign.CUDA_CALLER_REQUEST  # the caller's own request (cuda-caller-request)
    if meaning.category != Category.GPU_HARDWARE:
        return None
    return _GPU_SIGNS.get(meaning.strength)


def cuda_time_limit(error: str | None) -> bool:
    """A CUDA runtime error string whose documented meaning is a kernel cut by the device's
    run-time limit (the catalog's cuda row with the field Sign.KERNEL_TIME_LIMIT, from
    CUDA's cudaError_t documentation of cudaErrorLaunchTimeout)."""
    if not error:
        return False
    found = default_matcher().match(f"CUDA error: {_cuda_error_only(error)}")
    if found is None or found.row.project != "cuda" or found.row.meaning is None:
        return False
    fields = found.row.meaning.for_text(found.text).fields
    return (_SIGNS_FIELD, Sign.KERNEL_TIME_LIMIT.value) in fields


# The catalog's family of the CUDA errors that say the build has no code for this GPU
# (meanings.toml, cuda-build-lacks-device: cudaErrorNoKernelImageForDevice,
# cudaErrorInvalidDeviceFunction, the PTX JIT's refusals).
_BUILD_FAMILY = "cuda-build-lacks-device"


def cuda_build_lacks_device(error: str | None) -> bool:
    """Whether a CUDA runtime error string is one CUDA documents as the build lacking
    code for this GPU (its architecture not compiled in): the install, not the call."""
    if not error:
        return False
    found = default_matcher().match(f"CUDA error: {_cuda_error_only(error)}")
    if found is None or found.row.project != "cuda" or found.row.meaning is None:
        return False
    return found.row.meaning.for_text(found.text).family == _BUILD_FAMILY


# The catalog's strengths of a meaning that is the message's own, written for its words or
# for a family of like messages; "weak" is most often a whole source file's meaning (every
# error of torch's pipelining module read as a pipeline's, of DCP as a save's), which says
# where a message comes from rather than what failed.
_OWN_MEANING = frozenset({"moderate", "strong", "decisive"})


# An error repeated through a long log (every rank's copy of one CUDA error, of one
# exception) is looked up in the catalog once.
@functools.lru_cache(maxsize=4096)
def cuda_gpu_hardware(error: str | None) -> str | None:
    """A CUDA runtime error string whose documented meaning is the GPU, its driver or the
    platform, stated (the catalog's cuda row at strength strong or decisive: the fabric
    manager not ready, exclusive-process mode, an NVLink error, the MPS server's limits),
    as the hardware failure it names; None for any other, and for peer access refused
    (the platform's topology: HD302 reads Sign.PEER_ACCESS_UNSUPPORTED)."""
    if not error or PEER_ACCESS_UNSUPPORTED in error:
        return None
    what = _cuda_error_only(error)
    found = default_matcher().match(f"CUDA error: {what}")
    if found is None or found.row.project != "cuda" or found.row.meaning is None:
        return None
    meaning = found.row.meaning.for_text(found.text)
    stated = meaning.strength in ("strong", "decisive")
    return what if meaning.category == Category.GPU_HARDWARE and stated else None


# The meanings of a CUDA error that end the process or name its GPU, whoever reports it: a
# kernel fault's (the catalog's cuda-kernel-fault family: the context is dead, every later
# call fails alike), the GPU's or its driver's, out of memory (HD031's). The cuda-other
# family's weak "ends the rank" is a guess for an error torch raised, not a meaning.
_FATAL_CUDA = frozenset({Category.GPU_HARDWARE, Category.CUDA_OOM})


def cuda_error_fatal(error: str | None) -> bool:
    """Whether a CUDA error string's documented meaning (the catalog's cuda rows, as
    "CUDA error: <string>"; else the line's own row, NCCL's "Cuda failure …") ends the
    process that got it or names its GPU: not a call's bad argument ("invalid argument"),
    which NCCL's CUDACHECK returns to its caller as ncclUnhandledCudaError."""
    if not error:
        return False
    what = _cuda_error_only(error)
    meant = catalog_meaning(f"CUDA error: {what}") or catalog_meaning(what)
    if meant is None:
        return False
    category, strength = meant
    return category in _FATAL_CUDA or (category == Category.RANK_DEAD and strength in _OWN_MEANING)


@functools.lru_cache(maxsize=4096)
def catalog_meaning(said: str) -> tuple[Category, str] | None:
    """The category and strength the message catalog gives an exception's words
    ("<type>: <message>", else the message alone): a row of the library that prints them,
    with a meaning (its strength above "none"). None when no row knows them, or its row
    means nothing."""
    matcher = default_matcher()
    message = said.split(": ", 1)[-1]
    for text in (said, message):
        found = matcher.match(text)
        if found is None or found.row.meaning is None:
            continue
        meaning = found.row.meaning.for_text(found.text)
        if meaning.strength != "none" and meaning.category is not None:
            return Category(meaning.category), meaning.strength
    return None


# The exception types torch's C++ side raises into Python (c10::Error and std::exception as
# RuntimeError: torch/csrc/Exceptions.h; torch.distributed's DistError, DistBackendError,
# DistStoreError, DistNetworkError, DistQueueEmptyError, all RuntimeError's subclasses:
# torch/csrc/distributed/c10d/exception.h) and the frameworks' NCCL bindings raise
# (vLLM's and SGLang's pynccl_wrapper: RuntimeError), or none (a framework's record of a
# worker's exception, its type not printed). Not Python's own checks of arguments and
# configuration (ValueError, TypeError, AssertionError, KeyError …): those are the job's.
_TORCH_RAISED = frozenset(
    {
        "RuntimeError",
        "DistError",
        "DistBackendError",
        "DistStoreError",
        "DistNetworkError",
        "DistQueueEmptyError",
    }
)


def _torch_raised(exc_type: str) -> bool:
    return not exc_type or exc_type.rsplit(".", 1)[-1] in _TORCH_RAISED


@functools.lru_cache(maxsize=4096)
def words_unread(said: str) -> bool:
    """Whether an exception's words ("<type>: <message>", else the message alone) say
    nothing hangdoc knows of what failed: no row of the message catalog holds them, or
    the row that does only reports that something raised (a framework's record of a
    worker's exception, "Exception in worker … while processing method init_device: <e>",
    whose meaning is a crash at less than strong: the words of <e> are the failure's).
    A row with no meaning is a library's own message, seen and held: not unread."""
    matcher = default_matcher()
    message = said.split(": ", 1)[-1]
    for text in (said, message):
        found = matcher.match(text)
        if found is None:
            continue
        if found.row.meaning is None:
            return False
        meaning = found.row.meaning.for_text(found.text)
        return meaning.category == Category.RANK_DEAD and meaning.strength in ("weak", "moderate")
    return True


def _known_as(meant: tuple[Category, str] | None) -> str | None:
    """The other failure than a crash that the catalog's meaning of an exception's words
    names with a strength of its own (moderate or above), as its category's value."""
    if meant is None or meant[0] in (Category.RANK_DEAD, Category.UNKNOWN):
        return None
    return meant[0].value if meant[1] in _OWN_MEANING else None


# ncclGetErrorString's words for the classes a failed set-up returns (NCCL src/init.cc,
# every 2.x release), in a message that names NCCL (Sign.NCCL_SETUP_CLASS).
_NCCL_SETUP_CLASS = re.compile(
    r"\bnccl\b.*?\b(?:unhandled cuda error|unhandled system error|internal error|invalid usage)\b",
    re.IGNORECASE,
)

# An NCCL error as torch's C10D_NCCL_CHECK (c10d/NCCLUtils.hpp: "NCCL error in: FILE:LINE,
# <ncclGetErrorString>") and the frameworks' bindings (vLLM's and SGLang's pynccl_wrapper
# NCCL_CHECK: "NCCL error: <ncclGetErrorString>") raise it, and every string
# ncclGetErrorString returns (NVIDIA/nccl src/init.cc, 2.x to 2.28): an NCCL error whose
# words are none of them is one hangdoc cannot read (Sign.NCCL_ERROR_UNREAD).
_NCCL_ERROR_RAISED = re.compile(r"\bNCCL error(?: in: [^,]*:\d+,|:)\s*(?P<words>.*)", re.DOTALL)
_NCCL_ERROR_STRINGS = re.compile(
    r"unhandled cuda error|unhandled system error|internal error|invalid argument"
    r"|invalid usage|remote process exited|operation in progress|timeout|no error"
    r"|unknown result code|out of memory",
    re.IGNORECASE,
)

# A URL's server the process could not reach: urllib's URLError as ``do_open`` raises it
# (CPython Lib/urllib/request.py: ``except OSError as err: raise URLError(err)`` around
# ``h.request(…)``, the connect and the request's send; the response is read outside that
# ``try``), printed "<urlopen error [Errno 110] Connection timed out>" (URLError.__str__),
# and requests' ConnectTimeout (requests/adapters.py: urllib3's ConnectTimeoutError while
# connecting). A download's or an upload's connection to a host outside the job, not a
# wait on a peer rank: its "timed out" / "reset by peer" are that host's, the process's
# own failure, not a consequence of another rank's.
_URLOPEN_ERROR = re.compile(r"^<urlopen error\b")


def _server_unreachable(exc_type: str, message: str) -> bool:
    """The exception is a client's failure to connect to a URL's server (above)."""
    name = exc_type.rsplit(".", 1)[-1]
    if name == "URLError":
        return bool(_URLOPEN_ERROR.match(message.strip()))
    return name == "ConnectTimeout" and exc_type.startswith("requests.")


def signs_of(exc_type: str, message: str, where: str = "") -> tuple[Sign, ...]:
    """What an exception type and message say about the rank that printed them."""
    found: list[Sign] = []
    if ("running low on memory" in message or exc_type.startswith("ray.exceptions.")) and (
        "OutOfMemoryError" in exc_type or "low on memory" in message
    ):
        found.append(Sign.HOST_OOM)  # Ray's memory monitor: host RAM, not a GPU
    if "OutOfMemoryError" in exc_type or "CUDA out of memory" in message:
        found.append(Sign.CUDA_OOM)
    if "out of memory" in message:
        found.append(Sign.OUT_OF_MEMORY)
    if "DataLoader worker" in message or "encountered in worker" in message:
        found.append(Sign.DATALOADER_WORKER)
    if (
        CONSEQUENCE_TEXT.search(exc_type)
        or CONSEQUENCE_TEXT.search(message)
        or _NCCL_CALL_FAILED.search(message)
        or _HCCL_CALL_FAILED.search(message)
    ) and not _server_unreachable(exc_type, message):
        found.append(Sign.CONSEQUENCE)
    if _SHUT_DOWN.search(message.strip()):
        found.append(Sign.SHUT_DOWN)
    if (
        "_tensor_to_object" in where
        and "distributed_c10d" in where
        and exc_type.rsplit(".", 1)[-1] in ("EOFError", "UnpicklingError")
    ):
        found.append(Sign.EMPTY_COLLECTIVE)
    if "KeyboardInterrupt" in exc_type or "KeyboardInterrupt" in message:
        found.append(Sign.INTERRUPT)
    if _NCCL_SETUP_CLASS.search(f"{exc_type}: {message}"):
        found.append(Sign.NCCL_SETUP_CLASS)
    elif (nccl := _NCCL_ERROR_RAISED.search(message)) is not None and (
        not _NCCL_ERROR_STRINGS.search(nccl.group("words"))
    ):
        found.append(Sign.NCCL_ERROR_UNREAD)
    return tuple(found)


def _hardware(*texts: str | None) -> str | None:
    """The first text that names a GPU-hardware failure, from those words on."""
    for text in texts:
        m = HARDWARE.search(text) if text else None
        if text and m is not None:
            return text[m.start() :]
    return None


def finish_payload(payload: EventPayload, text: str) -> EventPayload:
    """``payload`` with what its error words say read into their typed fields; ``text``
    is the event's line."""
    changes: dict[str, object] = {}
    exc_type, message = payload.exc_type or "", payload.message or ""
    if isinstance(payload, (NcclWarn, NcclError)):
        # A failure whose place or return-code chain is NCCL's bootstrap (bootstrap.cc,
        # bootstrap.cu of NCCL ≤ 2.3): the out-of-band setup every rank must finish.
        places = (payload.rc_where, *payload.rc_chain, payload.where)
        changes["in_bootstrap"] = any("bootstrap.c" in (place or "") for place in places)
    gpu_sign: Sign | None = None
    cuda_what: str | None = None  # the CUDA error string the line names, where one is read
    if isinstance(payload, WatchdogTeardown):
        m = _WATCHDOG_CUDA_ERROR.search(text)
        # A CUDA error the catalog reads as the GPU's or the driver's is this GPU's own,
        # whatever words it uses ("the launch timed out" is a kernel cut by the device's
        # run-time limit, not a collective's timeout).
        gpu_sign = cuda_gpu_sign(m.group("what")) if m is not None else None
        cuda_what = m.group("what") if m is not None else None
        if m is not None and (gpu_sign is not None or not CONSEQUENCE_TEXT.search(m.group("what"))):
            changes["cuda_error"] = _cuda_error_only(m.group("what"))
        changes["hardware"] = _hardware(text) or cuda_gpu_hardware(m.group("what") if m else None)
    elif isinstance(payload, NcclError):
        changes["hardware"] = _hardware(payload.last_error)
        detail = " ".join(filter(None, (payload.last_error, payload.message))).lower()
        changes["out_of_memory"] = "out of memory" in detail
    elif isinstance(payload, CudaFailure):
        # (a multicast call of NCCL's NVLS transport failing names the fabric's state
        # whatever its error says: nccl_stage.py read it from the WARN's place and kept it)
        # (a message that says so itself, NCCL 2.27's "Failed to bind NVLink SHARP (NVLS)
        # Multicast memory", names it by its words where no check place named the call)
        nvls = (
            payload.hardware or f"NVLS multicast: {payload.error or payload.message or ''}"
            if Sign.NVLS_MULTICAST in payload.signs
            else None
        )
        changes["hardware"] = (
            _hardware(payload.error, message, exc_type) or cuda_gpu_hardware(payload.error) or nvls
        )
        changes["storage"] = storage_error(f"CUDA error: {payload.error or ''}")
        gpu_sign = cuda_gpu_sign(payload.error)
        cuda_what = payload.error
        changes["fatal"] = cuda_error_fatal(payload.error or payload.message)
    elif exc_type or message:
        at = _CUDA_ERROR_AT.search(message)
        changes["hardware"] = _hardware(message, exc_type) or cuda_gpu_hardware(
            at.group("what") if at is not None else None
        )
        gpu_sign = cuda_gpu_sign(at.group("what")) if at is not None else None
        cuda_what = at.group("what") if at is not None else None
    signs = payload.signs
    if exc_type or message:
        where = str(getattr(payload, "where", None) or "")
        # (with the signs the recogniser itself gave the line: its own reading of whose
        # report it is, RAYLET_WORKER_LOST, which no words of the message repeat)
        read = signs_of(exc_type, message, where)
        signs = changes["signs"] = tuple(dict.fromkeys((*payload.signs, *read)))
        said = f"{exc_type}: {message}"
        # A save shown in the traceback, else its innermost line writing a file.
        saving = str(getattr(payload, "saving", None) or getattr(payload, "writing", None) or "")
        # The line too: a catalog row may keep only its slot as the message ("<dir> does
        # not exist" of torch.save's "Parent directory <dir> does not exist.").
        saved = save_storage_error(f"{said}\n{text}", saving)
        changes.setdefault("storage", storage_error(said) or saved)
        if isinstance(payload, ExceptionRaised):
            meant = catalog_meaning(said)
            changes["known"] = meant is not None
            changes["known_as"] = _known_as(meant)
            changes["unread"] = _torch_raised(exc_type) and words_unread(said)
            # the errno it reports and its family, from the stdlib's tables (oserror.py)
            changes["errno"] = errno_of(exc_type, message)
            changes["os_failure"] = os_failure_of(exc_type, message)
            changes["entry_call"] = entry_call(
                message, payload.where_file, payload.where_function, payload.source
            )
        if payload.tried is None and (m := _TRIED.search(message)):
            changes["tried"] = m.group(1)
    # (not for CUDA state a forked child inherited: Sign.CUDA_AFTER_FORK, the scanner's
    # reading of the abort the error is the what() of; the driver is not in question)
    if gpu_sign is not None and gpu_sign not in signs and Sign.CUDA_AFTER_FORK not in signs:
        signs = changes["signs"] = (*signs, gpu_sign)
    if cuda_time_limit(cuda_what) and Sign.KERNEL_TIME_LIMIT not in signs:
        signs = changes["signs"] = (*signs, Sign.KERNEL_TIME_LIMIT)
    texts = (message, getattr(payload, "error", None), getattr(payload, "last_error", None))
    if (
        any(isinstance(t, str) and PEER_ACCESS_UNSUPPORTED in t for t in texts)
        and Sign.PEER_ACCESS_UNSUPPORTED not in signs
    ):
        signs = changes["signs"] = (*signs, Sign.PEER_ACCESS_UNSUPPORTED)
    hardware = changes.get("hardware", payload.hardware)
    if (
        isinstance(hardware, str)
        and SYSTEM_NOT_READY in hardware
        and Sign.FABRIC_NOT_READY not in signs
    ):
        changes["signs"] = (*signs, Sign.FABRIC_NOT_READY)
    changes = {k: v for k, v in changes.items() if getattr(payload, k) != v}
    return dataclasses.replace(payload, **changes) if changes else payload  # type: ignore[arg-type]
