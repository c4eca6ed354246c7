"""The base of every log event's payload: the error a line reports, as printed and as the
parser read it.

Any recognised line may report an error: an exception type and message (free text, kept
as printed for people), and what the parser read from them once, typed (``signs``, the
GPU-hardware and storage words, the allocation an out-of-memory names). The deaths view
and the rules decide on those typed fields; none of them searches the words again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Sign(enum.StrEnum):
    """What an error line says about the rank that printed it (the parser reads the
    exception type, the message and the frame that raised it: parsers/logs/errors.py)."""

    CUDA_OOM = "cuda_oom"  # out of GPU memory: OutOfMemoryError, "CUDA out of memory"
    # A fatal signal whose native backtrace (UCX's, under its "Caught signal") runs through
    # NCCL: a frame in libnccl.so, or a function of NCCL's API (parsers/logs/process.py
    # UcxBacktraceBlock). The fault was in NCCL's own threads or memory; a SIGBUS there is a
    # touch past the end of a /dev/shm segment NCCL mapped (its SHM transport, the proxy's
    # buffers) that the file system could not back: a /dev/shm too small (docker's 64 MB).
    NATIVE_IN_NCCL = "native_in_nccl"
    OUT_OF_MEMORY = "out_of_memory"  # "out of memory" in other words
    HOST_OOM = "host_oom"  # killed for host memory (Ray's memory monitor)
    DATALOADER_WORKER = "dataloader_worker"  # a DataLoader worker died, not the rank itself
    # The consequence of a failure elsewhere: a timeout, a lost peer, the watchdog's abort,
    # an NCCL call's error string, an interrupt (vocabulary.CONSEQUENCE_TEXT).
    CONSEQUENCE = "consequence"
    # An object collective (broadcast_object_list…) that delivered no data, because it was
    # aborted: EOFError / UnpicklingError raised in distributed_c10d._tensor_to_object.
    EMPTY_COLLECTIVE = "empty_collective"
    # The words an object raises once it was shut down, or a framework's report that one
    # of its processes failed earlier, "see above" (parsers/logs/errors.py _SHUT_DOWN):
    # asyncio's "Event loop is closed", multiprocessing's "Queue … is closed",
    # concurrent.futures' "cannot schedule new futures after shutdown", vLLM's
    # EngineDeadError "EngineCore encountered an issue. See stack trace (above) for the
    # root cause.", Horovod's "Job has been shutdown, see above error messages for
    # details.": the shutdown's evidence, raised after whatever ended the job, never
    # the first failure itself.
    SHUT_DOWN = "shut_down"
    INTERRUPT = "interrupt"  # KeyboardInterrupt: someone stopped the job
    # CUDA refused peer access between two GPUs (cudaErrorPeerAccessUnsupported, 217): the
    # platform cannot map one GPU's memory into another's
    PEER_ACCESS_UNSUPPORTED = "peer_access_unsupported"
    # A CUDA error whose documented meaning (the message catalog's cuda rows, from CUDA's
    # cudaError_t documentation) points at the GPU, its driver or the platform's settings
    # rather than the program, not for certain: the catalog's strength "moderate"
    # (GPU_DRIVER_LIKELY: cudaErrorLaunchTimeout, a kernel run-time limit only the device's
    # settings impose) or "weak" (GPU_DRIVER_POSSIBLE: cudaErrorUnknown, an internal error
    # the documentation gives no cause for).
    GPU_DRIVER_LIKELY = "gpu_driver_likely"
    GPU_DRIVER_POSSIBLE = "gpu_driver_possible"
    # The CUDA runtime's initialization error (cudaErrorInitializationError) as the what()
    # of an uncaught C++ exception ("terminate called after throwing an instance of
    # 'c10::Error'" then "what():  CUDA error: initialization error"): thrown by C++ code
    # outside any Python call (a destructor, a deleter, a thread), so on CUDA state that
    # existed before the failing call, in a process where CUDA cannot initialise: a child
    # forked after its parent initialised CUDA (torch: "The CUDA runtime does not support
    # the fork start method"; a first use from Python raises "Cannot re-initialize CUDA in
    # forked subprocess" instead). A rank's forked children are most often its DataLoader
    # workers: not the GPU's or its driver's failure.
    CUDA_AFTER_FORK = "cuda_after_fork"
    # An abort ("terminate called after throwing …") whose what() on the next line is a
    # transport's data-path failure (gloo's ibverbs pair enforcing a work completion's
    # status: "what(): … IBV_WC_SUCCESS. 12 vs 0 …"): that failure ending the process.
    ABORTED_BY_TRANSPORT = "aborted_by_transport"
    # An NCCL error string of a class a failed communicator set-up returns, in the message
    # of an exception that names NCCL (ncclGetErrorString's "unhandled cuda error",
    # "unhandled system error", "internal error", "invalid usage": NCCL src/init.cc), as a
    # framework's own binding raises it (vLLM's pynccl: "NCCL error: {error_str}"): with a
    # traceback through communicator creation, that set-up failed (views/nccl_setup.py).
    NCCL_SETUP_CLASS = "nccl_setup_class"
    # An NCCL error raised as an exception whose words are none of ncclGetErrorString's
    # (NCCL src/init.cc: "unhandled cuda error", "unhandled system error", "internal
    # error", "invalid argument", "invalid usage", "remote process exited …", "NCCL
    # operation in progress", "timeout"), as torch's C10D_NCCL_CHECK ("NCCL error in:
    # FILE:LINE, …") or a framework's binding ("NCCL error: …") prints it: a release's,
    # a plugin's or a fork's words hangdoc has not seen. Its traceback alone can say what
    # failed (views/nccl_setup.py: set-up where it shows set-up, one step weaker).
    NCCL_ERROR_UNREAD = "nccl_error_unread"
    # The raylet's report that one of its worker processes ended ("A worker died or was
    # killed while executing a task by an unexpected system error", Ray's
    # src/ray/raylet/node_manager.cc): a process of the cluster, any task's or actor's;
    # it does not say that the process was a rank of the job, nor that anything waited on
    # it (a caller's RayActorError / ActorDiedError does).
    RAYLET_WORKER_LOST = "raylet_worker_lost"
    # A CUDA multicast call (cuMulticastCreate, cuMulticastAddDevice, cuMulticastBindMem…)
    # failed in NCCL's NVLS (NVLink SHARP) transport: its WARN's place is such a check in
    # every NCCL release its lines can come from (parsers/catalog/stages.py
    # multicast_call). The multicast object is the NVSwitch fabric's, set up by the fabric
    # manager: the GPUs' and the fabric's state, not the communicator's configuration.
    NVLS_MULTICAST = "nvls_multicast"
    # CUDA's error 802, "system not yet initialized" (cudaErrorSystemNotReady): a driver
    # daemon the system needs is not running — on NVSwitch systems the fabric manager.
    FABRIC_NOT_READY = "fabric_not_ready"
    # NCCL's "Cuda failure 2 'out of memory'" of a call that allocates or pins *host*
    # memory (cudaHostAlloc, cudaHostRegister, a host-located cuMem allocation: its WARN's
    # place is such a check in every NCCL release its lines can come from,
    # parsers/catalog/stages.py host_memory_call): the host could not pin or map the
    # memory for NCCL's buffers, not the GPU running out: NCCL's set-up failing, not a
    # rank's CUDA out-of-memory.
    PINNED_HOST_MEMORY = "pinned_host_memory"
    # A CUDA error whose documented meaning is the caller's own request, not the device's
    # or the driver's failure (the catalog's cuda-caller-request family, from CUDA's
    # cudaError_t documentation: cudaErrorInvalidDevice, "the device ordinal supplied by
    # the user does not correspond to a valid CUDA device"; a kernel image the job's build
    # lacks; a limit or mode the device does not support): the process's own configuration
    # or code. Raised in the device's set-up (set_device), it is the rank dying of its own
    # error, not communication failing to set up.
    CUDA_CALLER_REQUEST = "cuda_caller_request"
    # A CUDA error that says a kernel ran past the run-time limit the device's driver
    # imposes (cudaErrorLaunchTimeout, "the launch timed out and was terminated"; the
    # catalog's cuda-launch-timeout family's field): which kernel ran long the error does
    # not say, the process's stack may (views/kernel_limit.py).
    KERNEL_TIME_LIMIT = "kernel_time_limit"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class EventPayload:
    """The payload of a kind whose line carries nothing but the error it may report, and
    the base of every other payload."""

    exc_type: str | None = None  # as printed: "RuntimeError", "c10::DistBackendError"
    message: str | None = None  # as printed (free text)
    signs: tuple[Sign, ...] = ()  # what exc_type and message say, read by the parser
    hardware: str | None = None  # the GPU-hardware failure it names, from its words on
    storage: str | None = None  # the storage-failure words it names ("[Errno 5]"…)
    tried: str | None = None  # the allocation an out-of-memory error names ("4.35 GiB")


NO_PAYLOAD = EventPayload()
