"""How a rank's process died: Python exceptions, CUDA errors, signals, OOM killers,
launcher exit reports (Slurm, mpirun, DeepSpeed), Ray actors.

An exception line is only an event when it ends a traceback (the scanner tracks that)
or is one of the few types that matter on their own (CUDA OOM, DistBackendError):
a bare ``ValueError: …`` in the middle of a training log is often just printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoc.analyzer.parsers.logs.hit import Hit, as_int
from hangdoc.analyzer.parsers.logs.literals import Need, any_of
from hangdoc.analyzer.parsers.logs.ray_actors import killed_task
from hangdoc.analyzer.payloads.base import EventPayload, Sign
from hangdoc.analyzer.payloads.launch import (
    RAY_MEMORY_MONITOR,
    CodeStage,
    ExceptionRaised,
    ExitConvention,
    FatalReport,
    FatalSignal,
    HostOomKill,
    Launcher,
    LauncherReport,
    LoaderWorkerDied,
    SignalName,
    read_exit,
)
from hangdoc.analyzer.payloads.nccl import CudaFailure
from hangdoc.analyzer.vocabulary import EventKind

# Ray re-raises a task's exception as a class named after its cause (ray/exceptions.py,
# RayTaskError.as_instanceof_cause): "ray.exceptions.RayTaskError(RuntimeError): ray::…".
EXCEPTION_LINE = re.compile(
    r"(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Timeout)"
    r"(?:\([\w.]+\))?)"
    r"(?:\[[^\]]*\])?(?::\s?(?P<msg>.*))?$"
)
# The cause a Ray wrapper names in its class name ("RayTaskError(RuntimeError)"; ray/
# exceptions.py: as_instanceof_cause makes a class of that name, whose str() is the remote
# task's traceback, its "Traceback" header replaced by "ray::<Actor.method>() (pid=…,
# ip=…)", ending in the remote exception's own line "RuntimeError: …").
_RAY_WRAPPER = re.compile(r"\bRayTaskError\((?:[\w]+\.)*(?P<cause>\w+)\)$")


def ray_task_cause(exc_type: str) -> str | None:
    """The class name of the remote exception a Ray wrapper re-raises ("RuntimeError" of
    "ray.exceptions.RayTaskError(RuntimeError)"), or None for any other exception."""
    m = _RAY_WRAPPER.search(exc_type)
    return m.group("cause") if m is not None else None


def exception_class(exc_type: str) -> str:
    """The class name of an exception line's type, without its module ("OSError" of
    "builtins.OSError")."""
    return exc_type.rsplit(".", 1)[-1]


# The CUDA driver API's out-of-memory result (cuda.h: CUDA_ERROR_OUT_OF_MEMORY = 2, whose
# cuGetErrorString is "out of memory") as the libraries that call cuMemCreate/cuMemAlloc
# print it: its name (cuGetErrorName; CuPy's CUDADriverError "CUDA_ERROR_OUT_OF_MEMORY: out of
# memory"), torch's c10/cuda/driver_api.h (C10_CUDA_DRIVER_CHECK, 2.1 on) "CUDA driver error:
# out of memory" and SGLang's "CUDA Driver Error: out of memory", and the number with its
# string after a CUresult (torch_memory_saver csrc/utils.h CURESULT_CHECK: "CUresult error: 2
# (out of memory)"), or the bare number as the first CURESULT_CHECK (torch_memory_saver
# 5c99b42, Dec 2024, shipped in the wheels SGLang/verl pinned in 2025) streamed the CUresult:
# "[torch_memory_saver.cpp] CUresult error  result=2 file=… func=cu_mem_create line=…",
# after which it calls exit(1). Only the code 2 is an OOM: cuda.h numbers the others apart.
_DRIVER_OOM = (
    r"|CUDA_ERROR_OUT_OF_MEMORY|CUDA [Dd]river [Ee]rror: out of memory"
    r"|CUresult\b[^\n]{0,40}?\b2 \(out of memory\)"
    r"|CUresult error\s+result=2(?!\d)"
)
# The caching allocator's message is known by its body too, so a paste whose header was cut
# or wrapped away ("CUDA out o" / "f memory. Tried to allocate …") keeps it: torch ≤ 1.13's
# CUDACachingAllocator.cpp "Tried to allocate <size> (GPU <n>; <size> total capacity; …" and
# torch ≥ 2.1's "Tried to allocate <size>. GPU <n> has a total capacity of …" (2.1 wrote
# "capacty"). Cut further in (a paste's first line cut in its middle), the older message's
# next fields still say it: "…; <size> already allocated; <size> free; [<size> allowed; ]
# <size> reserved in total by PyTorch)" (format_size writes "0 bytes" for nothing free).
_SIZE = r"\d+(?:\.\d+)? ?(?:bytes|[KMGTP]i?B)"
_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA [Ee]rror: out of memory|CUBLAS_STATUS_ALLOC_FAILED"
    + _DRIVER_OOM
    + r"|Tried to allocate \d+(?:\.\d+)? ?[KMGTP]i?B(?: \(GPU \d+; \d+(?:\.\d+)? ?[KMGTP]i?B total "
    r"capacity|\. GPU \d+ has a total capac)" + rf"|{_SIZE} already allocated; {_SIZE} free; "
)
# Ray's memory monitor (host RAM), whose exception is also named OutOfMemoryError; its
# message's second line, the raylet's details (src/ray/raylet: "Memory on the node (IP: …)
# where the task (task ID: …, name=…, pid=N, …) was running was …, which exceeds the memory
# usage threshold of 0.95. Ray killed this worker (ID: …) because …"), said alone when a
# paste or a log shipper put it on its own line.
_RAY_HOST_OOM = re.compile(
    r"killed due to the node running low on memory|(?P<detail>Ray killed this worker \(ID: )"
)
# The raylet's periodic summary of its memory monitor's kills (src/ray/raylet/
# node_manager.cc; quoted in Ray's docs, ray-core/scheduling/ray-oom-prevention): "2 Workers
# (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other
# reasons at node (ID: …, IP: …) over the last time period." Matched from "actors)" on: a
# paste wrapped inside "(tasks / actors)" keeps the kill on its second line (the count,
# then unknown, is one or more: the raylet prints the summary when it killed a worker).
_RAY_OOM_SUMMARY = re.compile(
    r"(?:(?P<n>\d+) Workers \(tasks / )?actors\) killed due to memory pressure \(OOM\)"
)
# A traceback frame as Python prints it: 'File "/x/y.py", line 3, in f'.
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line \d+, in (?P<func>[\w.<>]+)')
# torch.cuda.memory_summary() (torch/cuda/memory.py; fairseq's trainer, Lightning and users
# print it after an OOM): its header row "|  {_:9} CUDA OOMs: {num_ooms:<12d} | {_:6}
# cudaMalloc retries: {num_alloc_retries:<8d}  |" ("Torch CUDA memory summary" and
# cuda_malloc_retries before torch 1.5). num_ooms counts the out-of-memory errors the
# caching allocator raised on that device since its counters were last reset: a count
# above zero is the device's own record of a CUDA OOM, whatever else the paste kept.
_MEMORY_SUMMARY_OOMS = re.compile(
    r"\bCUDA OOMs: (?P<n>\d+)\s*(?:\|\s*cudaMalloc retries: (?P<retries>\d+)|\||$)"
)
_OOM_SIZE = re.compile(r"Tried to allocate (\d+(?:\.\d+)? ?[KMGTP]i?B)")
_OOM_GPU = re.compile(r"\(GPU (\d+);|GPU (\d+) has a total capac")
_CUDA_ERROR = re.compile(
    r"CUDA (?:driver )?error: (?P<what>[^.\n]*?(?:\.|$))|(?P<code>cudaError\w+)|"
    r"(?P<ecc>uncorrectable ECC error|uncorrectable NVLink error|GPU has fallen off the bus)"
)
# A device-side assert as CUDA's device runtime prints it from the kernel (__assertfail:
# "<file>:<line>: <function>: block: [x,y,z], thread: [x,y,z] Assertion `<expr>` failed.",
# the output LLVM's MLIR CUDA integration tests check, mlir/test/Integration/GPU/CUDA/
# assert.mlir), and Triton's interpreter the same without the thread ("block: [x, y, z]
# Assertion `…` failed.", then abort()). The assert traps the kernel: the context is left
# with cudaErrorAssert, whose string is "device-side assert triggered", and every later
# CUDA call of the process fails with it; the process dies of it (torch raises it where
# it is next checked). The words after the coordinates may be cut or wrapped away, and
# the backquotes read as Markdown's code span.
_DEVICE_ASSERT = re.compile(
    r"\bblock: \[\d+, ?\d+, ?\d+\](?:, thread: \[\d+, ?\d+, ?\d+\])? Assertion\b"
)
# cudaGetErrorString(cudaErrorAssert): what the process's CUDA calls fail with after it.
DEVICE_ASSERT_ERROR = "device-side assert triggered"
_FATAL = re.compile(
    r"Fatal Python error: (?P<py>Segmentation fault|Aborted|Bus error|Floating point exception|"
    r"Illegal instruction)"
    r"|Fatal Python error: (?P<pyabort>\S.*)"
    r"|\*\*\* (?P<glog>SIG[A-Z]+)(?: \(@0x[0-9a-f]+\))? received by PID (?P<gpid>\d+)"
    r"|terminate called after throwing an instance of '(?P<cxx>[^']+)'"
    r"|^.*line \d+: +(?P<shpid>\d+) +(?P<sh>Segmentation fault|Aborted|Bus error|Killed)\b.*$"
    r"|^(?P<sh2>Segmentation fault|Aborted|Bus error|Killed)(?: +\(core dumped\))?\s*$"
    # gdb's report of the signal that ended the program it debugs or whose core it opened
    # (gdb/corelow.c core_target_open and infrun.c print_signal_exited_reason: "Program
    # terminated with signal %s, %s.", gdb_signal_to_name then gdb_signal_to_string:
    # "Program terminated with signal SIGSEGV, Segmentation fault."). Not its "Program
    # received signal": a live program stopped at a signal, which gdb may pass on or not.
    r"|[Pp]rogram terminated with signal (?P<gdb>SIG[A-Z0-9]+)\b"
)
_SIGNALS = {
    "Segmentation fault": SignalName.SIGSEGV,
    "Aborted": SignalName.SIGABRT,
    "Bus error": SignalName.SIGBUS,
    "Floating point exception": SignalName.SIGFPE,
    "Illegal instruction": SignalName.SIGILL,
    "Killed": SignalName.SIGKILL,
}
_HOST_OOM = re.compile(
    r"(?:Memory cgroup out of memory|Out of memory): Kill(?:ed)? process (?P<pid>\d+) "
    r"\((?P<name>[^)]+)\)"
    r"|oom-kill:.*?task=(?P<name2>[^,]+),pid=(?P<pid2>\d+)"
    r"|Detected (?P<n>\d+) oom[-_]kill events? in (?:StepId=)?(?P<step>\S+)"
)
_SLURM_TASK = re.compile(
    r"srun: error: (?P<host>\S+): tasks? (?P<task>\d+)(?:-\d+)?: (?P<what>Killed|Segmentation "
    r"fault|Aborted|"
    r"Exited with exit code (?P<code>\d+)|Terminated|Out Of Memory)"
)
_SLURM_CANCEL = re.compile(
    r"\*\*\* (?:STEP|JOB) (?P<id>\S+) ON (?P<host>\S+) CANCELLED AT (?P<at>\S+)(?P<why>.*?)\*\*\*"
)
# Open MPI's "orterun:proc-aborted-strsignal" (orte/tools/orterun/help-orterun.txt): "%s
# noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s).". The
# rank and the signal are what it says of the death; the PID and node identify a machine,
# which people blank out before they paste ("with PID xxxxxx on node xxxxxxxx"): a
# placeholder there (letters x, stars, "<pid>") is read as the field left out.
_MPIRUN = re.compile(
    r"noticed that process rank (?P<rank>\d+) with PID (?P<pid>\d+|[xX*#]+|<\w*>) on node "
    r"(?P<host>\S+) exited on signal (?P<sig>\d+)(?: \((?P<name>[^)]+)\))?"
)
_REDACTED = re.compile(r"[xX*#]+|<\w*>")
_DS_EXIT = re.compile(r"exits with return code = (?P<code>-?\d+)")
# horovodrun's gloo launcher: "Process 0 exit with status code 137." (128 + signal number).
_HOROVOD_EXIT = re.compile(r"^Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)\.?\s*$")
_DS_LOCAL_RANK = re.compile(r"--local_rank[= ](\d+)")
# torchelastic's report of a worker killed by a signal ("traceback : Signal 9 (SIGKILL)
# received by PID 812" in a ChildFailedError table, or alone when only that line is pasted).
_ELASTIC_SIGNAL = re.compile(
    r"[Ss]ignal (?P<num>\d+) \((?P<sig>SIG\w+)\) received by PID (?P<pid>\d+)"
)
# torch.multiprocessing.spawn (ProcessContext.join) when a child died without an error on
# its queue: "process %d terminated with signal %s" / "process %d terminated with exit code
# %d" (raised as ProcessExitedException, plain Exception before torch 1.8); the number is
# the spawn index, which mp.spawn passes to the function as its (local) rank.
_MP_SPAWN = re.compile(
    r"\b[Pp]rocess (?P<idx>\d+) terminated with (?:signal (?P<sig>SIG[A-Z0-9]+)|exit code "
    r"(?P<code>-?\d+))"
)
# Lightning's launcher of a node's other local ranks (lightning/fabric/strategies/launchers/
# subprocess_script.py, _ChildProcessObserver._run): when a child ends with a non-zero
# code, rank_prefixed_message(f"Child process with PID {pid} terminated with code {code}.
# Forcefully terminating all other processes to avoid zombies 🧟", rank=i + 1): the
# child's local rank (the launcher is local rank 0, its children 1, 2, …) in Lightning's
# "[rank: N] " tag.
_LIGHTNING_CHILD = re.compile(
    r"(?:\[rank: (?P<local>\d+)\] )?Child process with PID (?P<pid>\d+) terminated with code "
    r"(?P<code>-?\d+)"
)
# CPython's subprocess.CalledProcessError, which launchers that run the workers as
# subprocesses raise when one ends badly (accelerate's simple_launcher and
# multi_gpu_launcher, torch.distributed.launch before torchrun, DeepSpeed's runner): its
# __str__ (Lib/subprocess.py CalledProcessError.__str__) is "Command '<cmd>' died with
# <Signals.SIGKILL: 9>." for a returncode of -N (Popen's: killed by signal N), "died with
# unknown signal N." where the number names no signal, else "returned non-zero exit status
# N.". The line is the launcher's report of its child's end, not an error of that child.
CALLED_PROCESS = re.compile(
    r"CalledProcessError: Command (?P<cmd>.*?) (?:died with <Signals\.(?P<sig>SIG[A-Z0-9]+): "
    r"(?P<num>\d+)>|died with unknown signal (?P<unknown>\d+)|returned non-zero exit status "
    r"(?P<code>-?\d+))\."
)
_DS_PID = re.compile(r"(?:[Pp]rocess|subprocess) (\d+)")
_DS_KILL = re.compile(r"Killing subprocess (?P<pid>\d+)")
# DeepSpeed's launcher (deepspeed/launcher/launch.py, main.sigkill_handler) kills every
# worker ("Killing subprocess <pid>") when one of them exited with a non-zero code (then
# "<cmd> exits with return code = N") or when the launcher itself got SIGINT or SIGTERM
# (its handler for both): then "Main process received <SIGINT|SIGTERM>, exiting".
_DS_RECEIVED = re.compile(r"Main process received (?P<sig>SIG(?:INT|TERM)), exiting")
# A terminal echoes the interrupt key it turned into SIGINT as "^C" (termios ECHOCTL) at
# the cursor: glued before the next line the job prints, a person pressed Ctrl-C there.
_TTY_INTERRUPT = "^C"
# The raylet's own report (src/ray/raylet/node_manager.cc): "A worker died or was killed
# while executing a task by an unexpected system error. To troubleshoot the problem, check
# the logs for the dead worker."
_RAY_DIED = re.compile(
    r"(?:RayActorError|ActorDiedError|The actor died unexpectedly|actor is dead because"
    r"|(?P<raylet>A worker died or was killed while executing))"
)
# The worker it names: its own fields (node_manager.cc streams "… Worker IP address: <ip>
# Worker port: <port> Worker PID: <pid> Worker exit type: <type> …"), or an actor's
# "pid=N, ip=A" of RayActorError.
_RAY_PID = re.compile(r"\bpid[:=] ?(\d+)|\bWorker PID: (\d+)")
_RAY_IP = re.compile(r"\bip[:=] ?([\d.]+)|\bWorker IP address: \[?([\d.]+)")
_KEYS = (
    "memory",
    "CUDA",
    "cuda",
    "Fatal",
    "] Assertion",
    "***",
    "terminate",
    "fault",
    "Aborted",
    "error",
    "Killed",
    "oom",
    "Bus",
    "rank",
    "exits",
    "Killing",
    "actor",
    "Actor",
    "worker died",
    "ECC",
    "bus",
    "CANCELLED",
    "received by PID",
    "exit with status",
    "terminated with",
    "Tried to allocate",
    "already allocated",
    "Main process received",
    "CalledProcessError",
    # torch's class alone (torch.OutOfMemoryError, torch.cuda.OutOfMemoryError:
    # c10::OutOfMemoryError), whatever words its message has
    "OutOfMemoryError",
)
_HAS_KEY = any_of(_KEYS)  # one search, not a test per word (literals.any_of)
# Every line match_process makes an event of is a match of one of these (its branches'
# patterns, in their order), and so holds what their syntax trees say it must (the
# scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
_HIT_PATTERNS = (
    _RAY_HOST_OOM,
    _RAY_OOM_SUMMARY,
    _OOM,
    _HOST_OOM,
    _SLURM_TASK,
    _SLURM_CANCEL,
    _MPIRUN,
    _HOROVOD_EXIT,
    _DS_EXIT,
    _MP_SPAWN,
    _LIGHTNING_CHILD,
    _ELASTIC_SIGNAL,
    _DS_KILL,
    _DS_RECEIVED,
    CALLED_PROCESS,
    _MEMORY_SUMMARY_OOMS,
    _FATAL,
    _DEVICE_ASSERT,
    _CUDA_ERROR,
    _RAY_DIED,
)
NEED = Need.patterns(*_HIT_PATTERNS)


# A traceback line that shows a save: a frame of a function whose name says it saves
# (torch.save's save and _save in torch/serialization.py, save_checkpoint, save_pretrained,
# save_on_global_ranks, Megatron's dist_checkpointing save), torch's distributed
# checkpoint's saver (torch/distributed/checkpoint/state_dict_saver.py), or a call of
# torch.save. Not a module alone: torch/serialization.py and the checkpoint packages load
# too, and a load's missing file is not a save's. The frame's line may end in spaces a
# paste padded it with (a block copied from a terminal's fixed-width window): the function's
# name still ends the frame.
SAVE_FRAME = re.compile(
    r", in _*\w*save\w*\s*$|torch/distributed/checkpoint/state_dict_saver\.py|\btorch\.save\("
)


# A source line of a traceback that calls a file write: a file object's write, writelines
# or flush, torch.save, os.write, os.fsync, os.replace / os.rename (a checkpoint moved into
# place). An OSError raised by the innermost such line is the write failing on its storage
# (errors.finish_payload, vocabulary.save_storage_error); the errno tells it from the
# network's and memory's (vocabulary._NOT_FILE_SYSTEM).
WRITE_CALL = re.compile(
    r"\.(?:write|writelines|flush)\(|\btorch\.save\(|\bos\.(?:write|fsync|replace|rename)\("
)


# torch's ExceptionWrapper.reraise (torch/_utils.py: "Caught {exc_type.__name__}
# {where}.\nOriginal {traceback}"), its ``where`` set by the DataLoader's worker loop
# (torch/utils/data/_utils/worker.py: "in DataLoader worker process {worker_id}"): the
# main process re-raising what a worker raised, under the worker's own exception type.
_LOADER_WRAPPED = re.compile(r"Caught \w+ in DataLoader worker process \d+")


def writing_line(source: str) -> str | None:
    """``source`` (a traceback's innermost source line) when it calls a file write."""
    return source.strip()[:200] if source and WRITE_CALL.search(source) else None


def exception_hit(
    exc_type: str,
    message: str,
    *,
    where: str | None = None,
    bare: bool = False,
    saving: str | None = None,
    writing: str | None = None,
    source: str | None = None,
    stage: CodeStage | None = None,
    in_collective: bool = False,
    in_wait: bool = False,
    by_dataloader: bool = False,
    in_loader_worker: bool = False,
) -> Hit:
    """An uncaught exception: the line that ends a traceback (``where``: its last frame;
    ``saving``: a line of it that shows a save; ``writing``: its innermost source line, a
    file write; ``source``: that line, whatever it calls; ``stage``: the stage its frames
    show; ``in_collective``: its innermost frame is a collective of torch.distributed,
    ``in_wait``: waiting for the others;
    ``by_dataloader``: its frames show torch's DataLoader; ``in_loader_worker``: its
    frames show a DataLoader worker's own loop), or a paste's last line with no
    traceback above it (``bare``)."""
    frame = _FRAME.search(where) if where else None
    payload = ExceptionRaised(
        exc_type=exc_type,
        message=message[:400],
        where=where[:200] if where else None,
        bare=bare,
        saving=saving,
        writing=writing,
        stage=stage,
        in_collective=in_collective,
        in_wait=in_wait,
        by_dataloader=by_dataloader,
        where_file=frame.group("file") if frame is not None else None,
        where_function=frame.group("func") if frame is not None else None,
        source=source.strip()[:200] if source and source.strip() else None,
        in_loader_worker=in_loader_worker or _LOADER_WRAPPED.match(message) is not None,
    )
    return Hit(EventKind.EXCEPTION, payload=payload, key=("exc", exc_type, message[:120]))


def match_exception_line(text: str) -> tuple[str, str] | None:
    """``RuntimeError: msg`` → (type, message), for the line that ends a traceback."""
    if not text or not (text[0].isalpha() or text[0] == "_"):
        return None
    m = EXCEPTION_LINE.match(text.rstrip())
    if m is None:
        return None
    return m.group("type"), (m.group("msg") or "").strip()


def signal_name(code: int) -> SignalName | None:
    """The signal a launcher's number means (an exit code of -N, 128 + N): Linux's
    numbering (SignalName.of_number)."""
    return SignalName.of_number(code)


# torch's own messages when a DataLoader worker dies (torch/utils/data/dataloader.py,
# torch/csrc/DataLoader.cpp): "DataLoader worker (pid 14647) is killed by signal: Killed",
# "DataLoader worker (pid(s) 1, 2) exited unexpectedly", "ERROR: Unexpected bus error
# encountered in worker. This might be caused by insufficient shared memory (shm).",
# "DataLoader timed out after 60 seconds". DataLoader.cpp's _error_if_any_worker_fails writes
# "is killed by signal: " << strsignal(…) << ". " and, for SIGBUS only, goes on: "It is
# possible that dataloader's workers are out of shared memory. Please try to raise your
# shared memory limit."
_LOADER_WORKER = re.compile(
    r"DataLoader worker \(pid(?:\(s\))? (?P<pids>[\d, ]+)\) (?:is killed by signal: "
    r"(?P<signal>[A-Za-z -]+?)(?:\.?\s*$|\. )|exited unexpectedly)"
    # (the message's body: a paste that cut its start keeps "…bus error encountered in worker")
    r"|(?:Unexpected )?(?P<what>segmentation fault|bus error|floating-point exception) "
    r"encountered in worker"
    # (the SIGBUS message's second sentence, which only that handler prints: a cut that
    # took the first one keeps "…might be caused by insufficient shared memory (shm).")
    r"|(?P<bus>caused by insufficient shared memory \(shm\))"
    r"|DataLoader timed out after (?P<timeout>\d+) seconds"
)
# torch names the signal that killed a worker by strsignal() (glibc's words, string/
# siglist.h); the shell's words above are among them.
_STRSIGNAL = {
    **_SIGNALS,
    "Hangup": SignalName.SIGHUP,
    "Interrupt": SignalName.SIGINT,
    "Quit": SignalName.SIGQUIT,
    "Trace/breakpoint trap": SignalName.SIGTRAP,
    "User defined signal 1": SignalName.SIGUSR1,
    "User defined signal 2": SignalName.SIGUSR2,
    "Broken pipe": SignalName.SIGPIPE,
    "Alarm clock": SignalName.SIGALRM,
    "Terminated": SignalName.SIGTERM,
}
_LOADER_SIGNALS = {"segmentation fault": SignalName.SIGSEGV, "bus error": SignalName.SIGBUS,
                   "floating-point exception": SignalName.SIGFPE}  # fmt: skip
# torch.multiprocessing's shared-memory files (/dev/shm/torch_<pid>_<n>), through which
# DataLoader workers pass their batches, failing (aten/src/ATen/MapAllocator.cpp, TH's
# THAllocator.c before it): "unable to write to file </torch_31_1030151126>: No space left
# on device (28)" (/dev/shm full; Lightly's docs and the torch forum show it under
# storage._share_fd_ in a worker), "unable to open shared memory object </torch_…> in
# read-write mode: Too many open files (24)" (the file_descriptor strategy's fd limit),
# "unable to mmap N bytes from file </torch_…>: Cannot allocate memory (12)", "unable to
# resize file </torch_22438_3818345986> to the right size" (pytorch issue 20409); TH
# appended " at /pytorch/aten/src/TH/THAllocator.c:383".
_TORCH_SHM = re.compile(
    r"unable to (?:write to file|open shared memory object|mmap \d+ bytes from file|resize "
    r"file) </torch_[\w.-]*>(?P<rest>.*)$"
)
_SHM_WHY = re.compile(r": (?P<why>[A-Za-z][^(:]*?)(?: \(\d+\))?\s*$")


def _match_torch_shm(text: str) -> Hit | None:
    m = _TORCH_SHM.search(text)
    if m is None:
        return None
    why = _SHM_WHY.search(m.group("rest"))
    died = LoaderWorkerDied(
        message=text.strip()[:300],
        shm_error=why.group("why") if why else "failed",
        shm="Too many open files" not in text,
    )
    return Hit(EventKind.DATALOADER_WORKER_DIED, payload=died, key=("loader_shm",))


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
# ("(shm)": the SIGBUS message's second sentence, which a cut may leave alone; main's
# 0c80395 reads it.)
WORKER_NEED = Need.words(("</torch_", "orker", "DataLoader", "(shm)"))


def match_dataloader_worker(text: str) -> Hit | None:
    """A DataLoader worker process died or timed out (torch's own wording), or the shared
    memory its batches go through failed."""
    if not WORKER_NEED.admits(text):
        return None
    if "</torch_" in text:
        return _match_torch_shm(text)
    m = _LOADER_WORKER.search(text)
    if m is None:
        return None
    said = m.group("signal")
    signal = _STRSIGNAL.get(said.strip(), SignalName.UNKNOWN) if said else None
    what = "bus error" if m.group("bus") else m.group("what")
    signal = _LOADER_SIGNALS.get(what or "") or signal
    pids = tuple(int(p) for p in (m.group("pids") or "").replace(" ", "").split(",") if p)
    died = LoaderWorkerDied(
        message=text.strip()[:300],
        signal=signal,
        worker_pids=pids,
        timeout_s=as_int(m.group("timeout")),
        shm="shared memory" in text or what == "bus error",
    )
    return Hit(EventKind.DATALOADER_WORKER_DIED, payload=died, key=("loader", signal))


def _report(kind: EventKind, report: LauncherReport, key: tuple[object, ...], **who: object) -> Hit:
    """A launcher's report; ``who``: the rank, host, pid or local rank the line names."""
    return Hit(kind, payload=report, key=key, **who)  # type: ignore[arg-type]


def _called_process(cp: re.Match[str]) -> Hit:
    """CalledProcessError's report of a worker run as a subprocess that ended: the signal
    it names, or its exit status (a returncode: ExitConvention.POPEN), and the local rank
    its command line passes (torch.distributed.launch's ``--local_rank=N``)."""
    number = cp.group("num") or cp.group("unknown")
    if cp.group("sig"):
        signal: SignalName | None = SignalName.parse(cp.group("sig"))
        code: int | None = -int(number) if number else None
    else:
        status = read_exit(-int(number) if number else int(cp.group("code")), ExitConvention.POPEN)
        signal, code = status.signal, status.exit_code
    local = _DS_LOCAL_RANK.search(cp.group("cmd"))
    report = LauncherReport(exit_code=code, signal=signal)
    return _report(
        EventKind.WORKER_FAILED,
        report,
        ("calledprocess", cp.group("cmd")[:80], code),
        named_local_rank=int(local.group(1)) if local else None,
    )


def match_process(text: str) -> Hit | None:
    """CUDA OOM / errors, fatal signals, OOM killer, launcher exit reports, Ray deaths."""
    if not _HAS_KEY(text) or not NEED.admits(text):
        return None
    if ("low on memory" in text or "Ray killed" in text) and (
        rk := _RAY_HOST_OOM.search(text)
    ) is not None:
        ray = HostOomKill(name=RAY_MEMORY_MONITOR, message=text.strip()[:300])
        # the killed task's pid, and the rank its actor's name pins (verl's WorkerDict_0:N)
        pid, rank = killed_task(text)
        return Hit(
            EventKind.HOST_OOM_KILL,
            payload=ray,
            key=("rayhostoom", pid) if rk.group("detail") else ("rayhostoom",),
            rank=rank,
            named_pid=pid,
        )
    if "memory pressure" in text and (r := _RAY_OOM_SUMMARY.search(text)) and r["n"] != "0":
        workers = int(r["n"]) if r["n"] else None
        summary = HostOomKill(name=RAY_MEMORY_MONITOR, events=workers, message=text.strip()[:300])
        return Hit(EventKind.HOST_OOM_KILL, payload=summary, key=("rayoomsummary",))
    if _OOM.search(text) and "ray.exceptions.OutOfMemoryError" not in text:
        # (Ray's class of the same name is its memory monitor's: host RAM, read above)
        size = _OOM_SIZE.search(text)
        gpu = _OOM_GPU.search(text)
        oom = CudaFailure(
            tried=size.group(1) if size else None,
            gpu=int(gpu.group(1) or gpu.group(2)) if gpu else None,
            message=text.strip()[:300],
        )
        return Hit(EventKind.CUDA_OOM, payload=oom, key=("oom",))
    if "CUDA OOMs" in text and (ms := _MEMORY_SUMMARY_OOMS.search(text)) and int(ms["n"]) > 0:
        counted = CudaFailure(
            message=f"torch.cuda.memory_summary() counts {ms['n']} CUDA out-of-memory error(s)"
        )
        return Hit(EventKind.CUDA_OOM, payload=counted, key=("oomsummary",))
    if (h := _HOST_OOM.search(text)) is not None:
        pid = as_int(h.group("pid") or h.group("pid2"))
        killed = HostOomKill(name=h.group("name") or h.group("name2"), events=as_int(h.group("n")))
        return Hit(EventKind.HOST_OOM_KILL, payload=killed, key=("hostoom", pid), named_pid=pid)
    if (s := _SLURM_TASK.search(text)) is not None:
        what = s.group("what")
        if s.group("code"):
            task = LauncherReport(launcher=Launcher.SLURM, exit_code=int(s.group("code")))
        elif what == "Out Of Memory":
            task = LauncherReport(launcher=Launcher.SLURM, signal=SignalName.SIGKILL, host_oom=True)
        else:
            sig = _SIGNALS.get(what, SignalName.SIGTERM if what == "Terminated" else None)
            task = LauncherReport(launcher=Launcher.SLURM, signal=sig)
        return _report(
            EventKind.WORKER_FAILED,
            task,
            ("slurm", s.group("task")),
            rank=int(s.group("task")),
            named_host=s.group("host"),
        )
    if (c := _SLURM_CANCEL.search(text)) is not None:
        cancel = LauncherReport(launcher=Launcher.SLURM, why=c.group("why").strip() or "cancelled")
        return _report(
            EventKind.AGENT_SIGNAL, cancel, ("slurm_cancel",), named_host=c.group("host")
        )
    if (mp := _MPIRUN.search(text)) is not None:
        sig = signal_name(int(mp.group("sig"))) or _SIGNALS.get(
            mp.group("name") or "", SignalName.UNKNOWN
        )
        exited = LauncherReport(launcher=Launcher.MPIRUN, signal=sig)
        return _report(
            EventKind.WORKER_FAILED,
            exited,
            ("mpirun", mp.group("rank")),
            rank=int(mp.group("rank")),
            named_host=None if _REDACTED.fullmatch(mp.group("host")) else mp.group("host"),
            named_pid=as_int(mp.group("pid")),
        )
    if text.startswith("Process ") and (hv := _HOROVOD_EXIT.match(text)) is not None:
        code = int(hv.group("code"))
        horovod = LauncherReport(
            launcher=Launcher.HOROVOD,
            exit_code=code,
            signal=signal_name(code - 128) if code > 128 else None,
        )
        return _report(
            EventKind.WORKER_FAILED,
            horovod,
            ("horovod", hv.group("rank"), code),
            rank=int(hv.group("rank")),
        )
    if (d := _DS_EXIT.search(text)) is not None:
        code = int(d.group("code"))
        pid_said = _DS_PID.search(text)
        local = _DS_LOCAL_RANK.search(text)
        pid = int(pid_said.group(1)) if pid_said else None
        local_rank = int(local.group(1)) if local else None
        deepspeed = LauncherReport(
            launcher=Launcher.DEEPSPEED,
            exit_code=code,
            signal=signal_name(-code) if code < 0 else None,
        )
        return _report(
            EventKind.WORKER_FAILED,
            deepspeed,
            ("ds", pid, local_rank, code),
            named_pid=pid,
            named_local_rank=local_rank,
        )
    if "CalledProcessError" in text and (cp := CALLED_PROCESS.search(text)) is not None:
        return _called_process(cp)
    if "terminated with" in text and (sp := _MP_SPAWN.search(text)) is not None:
        if sp.group("sig"):
            spawn = LauncherReport(
                launcher=Launcher.TORCH_MULTIPROCESSING, signal=SignalName.parse(sp.group("sig"))
            )
        else:
            code = int(sp.group("code"))
            spawn = LauncherReport(
                launcher=Launcher.TORCH_MULTIPROCESSING,
                exit_code=code,
                signal=signal_name(-code) if code < 0 else None,
            )
        return _report(
            EventKind.WORKER_FAILED,
            spawn,
            ("mpspawn", sp.group("idx")),
            named_local_rank=int(sp.group("idx")),
        )
    if "Child process" in text and (lc := _LIGHTNING_CHILD.search(text)) is not None:
        code = int(lc.group("code"))
        lightning = LauncherReport(
            launcher=Launcher.LIGHTNING,
            exit_code=code,
            signal=signal_name(-code) if code < 0 else None,
        )
        child = lc.group("local")
        return _report(
            EventKind.WORKER_FAILED,
            lightning,
            ("lightning", lc.group("pid"), code),
            named_pid=int(lc.group("pid")),
            named_local_rank=int(child) if child is not None else None,
        )
    if "received by PID" in text and (es := _ELASTIC_SIGNAL.search(text)) is not None:
        pid = int(es.group("pid"))
        fatal = FatalSignal(
            signal=SignalName.parse(es.group("sig")), reported_by=FatalReport.TORCHELASTIC
        )
        # the worker it is about: a ChildFailedError names its rank
        return Hit(
            EventKind.FATAL_SIGNAL,
            payload=fatal,
            key=("elastic_signal", es.group("pid")),
            pid=pid,
            named_pid=pid,
        )
    if (k := _DS_KILL.search(text)) is not None:
        # the user's Ctrl-C echoed just before the handler's first line: it ran on SIGINT
        typed = (Sign.INTERRUPT,) if _TTY_INTERRUPT in text[: k.start()] else ()
        kill = LauncherReport(launcher=Launcher.DEEPSPEED, signal=SignalName.SIGKILL, signs=typed)
        return _report(
            EventKind.AGENT_TERMINATING,
            kill,
            ("dskill", k.group("pid")),
            named_pid=int(k.group("pid")),
        )
    if "Main process received" in text and (dr := _DS_RECEIVED.search(text)) is not None:
        got = SignalName.parse(dr.group("sig"))
        told = LauncherReport(launcher=Launcher.DEEPSPEED, signal=got)
        return _report(EventKind.AGENT_SIGNAL, told, ("dsreceived", dr.group("sig")))
    if (f := _FATAL.search(text)) is not None:
        return _fatal(f)
    if _DEVICE_ASSERT.search(text) is not None:
        # a kernel's own assert failing: the error its process's CUDA calls then return
        failed = CudaFailure(error=DEVICE_ASSERT_ERROR, message=text.strip()[:200])
        return Hit(EventKind.CUDA_ERROR, payload=failed, key=("cudaerr", DEVICE_ASSERT_ERROR))
    if (ce := _CUDA_ERROR.search(text)) is not None:
        what = (ce.group("what") or ce.group("code") or ce.group("ecc") or "").strip().rstrip(".")
        if not what:
            return None
        return Hit(EventKind.CUDA_ERROR, payload=CudaFailure(error=what), key=("cudaerr", what))
    if (ray_died := _RAY_DIED.search(text)) is not None:
        pid_said = _RAY_PID.search(text)
        ip = _RAY_IP.search(text)
        pid = int(pid_said.group(1) or pid_said.group(2)) if pid_said else None
        # The raylet's own words, not a caller's error (a caller that met the dead actor
        # raises RayActorError / ActorDiedError, whose words come first when both are in
        # the line): a worker process of the cluster ended.
        lost = (Sign.RAYLET_WORKER_LOST,) if ray_died.group("raylet") else ()
        died = EventPayload(message=text.strip()[:200], signs=lost)
        return Hit(
            EventKind.ACTOR_DIED,
            payload=died,
            key=("ray", pid),
            named_pid=pid,
            named_host=(ip.group(1) or ip.group(2)) if ip else None,
        )
    return None


def _fatal(f: re.Match[str]) -> Hit:
    """A fatal signal: Python's faulthandler header, glog's, an abort of an uncaught C++
    exception ("terminate called after throwing …"), the shell's words."""
    pid: int | None = None
    exc_type: str | None = None
    if f.group("py"):
        signal, by = _SIGNALS[f.group("py")], FatalReport.PYTHON
    elif f.group("pyabort"):
        # CPython's own fatal error (Python/pylifecycle.c fatal_error: Py_FatalError, a
        # failed Py_ExitStatusException): it prints "Fatal Python error: [func: ]msg" and
        # the threads' tracebacks, then fatal_error_exit(-1) calls abort(): the process dies
        # of SIGABRT whatever the message (a C extension's refcount bug, a GIL misuse).
        signal, by = SignalName.SIGABRT, FatalReport.PYTHON_FATAL_ERROR
    elif f.group("glog"):
        signal, by = SignalName.parse(f.group("glog")), FatalReport.GLOG
        pid = int(f.group("gpid"))
    elif f.group("gdb"):
        signal, by = SignalName.parse(f.group("gdb")), FatalReport.GDB
    elif f.group("cxx"):
        signal, by, exc_type = SignalName.SIGABRT, FatalReport.TERMINATE, f.group("cxx")
    else:
        signal, by = _SIGNALS[f.group("sh") or f.group("sh2")], FatalReport.SHELL
        pid = as_int(f.group("shpid"))
    fatal = FatalSignal(signal=signal, reported_by=by, exc_type=exc_type)
    return Hit(EventKind.FATAL_SIGNAL, payload=fatal, key=("fatal", signal), named_pid=pid)


# Open MPI / PRRTE's report of the first process that exited non-zero (help-orterun.txt,
# prrte help-prun.txt "[prun:non-zero-exit]"):
#   mpirun detected that one or more processes exited with non-zero status, thus causing
#   the job to be terminated. The first process to do so was:
#
#     Process name: [[28387,1],3]
#     Exit code:    1
# The last number of the process name is the MPI rank.
MPI_NONZERO = "detected that one or more processes exited with non-zero status"
_MPI_NAME = re.compile(r"^\s*Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]")
_MPI_CODE = re.compile(r"^\s*Exit code: +(?P<code>-?\d+)")
_MPI_BODY = re.compile(r"^\s*(?:the job to be terminated|-{8,}|Process name:|Exit code:)")


@dataclass(slots=True)
class MpiExitBlock:
    """mpirun's "The first process to do so was" report: that rank and its exit code."""

    rank: int | None = None
    exit_code: int | None = None

    @staticmethod
    def start(text: str) -> MpiExitBlock | None:
        return MpiExitBlock() if MPI_NONZERO in text else None

    def feed(self, text: str) -> bool:
        if not text.strip():
            return True
        if (n := _MPI_NAME.match(text)) is not None:
            self.rank = int(n.group("rank"))
        elif (c := _MPI_CODE.match(text)) is not None:
            self.exit_code = int(c.group("code"))
        elif not _MPI_BODY.match(text):
            return False
        return self.exit_code is None

    def finish(self) -> Hit | None:
        if self.rank is None:
            return None
        code = self.exit_code
        exited = LauncherReport(
            launcher=Launcher.MPIRUN,
            exit_code=code,
            signal=signal_name(code - 128) if code is not None and code > 128 else None,
        )
        return Hit(
            EventKind.WORKER_FAILED,
            payload=exited,
            rank=self.rank,
            key=("mpirun_exit", str(self.rank)),
        )


# UCX's backtrace under its "Caught signal N (…)" line (src/ucs/debug/debug.c,
# ucs_debug_print_backtrace): "==== backtrace (tid:%7d) ====", one line per frame
# (UCS_DEBUG_BACKTRACE_LINE_FMT: "%2d 0x%016lx %s()  %s:%u", the function, then the source
# file or the shared object), then a line of "=". The catalog reads the signal line; this
# reads whose code the frames are in.
UCX_BACKTRACE_HEAD = re.compile(r"^==== backtrace \(tid:\s*\d+\) ====")
_UCX_FRAME = re.compile(r"^\s*\d+\s+0x[0-9a-fA-F]+ (?P<func>\S*?)\(\)\s+(?P<file>\S+?):\d+")
# NCCL's shared object, or a function of its API (ncclGroupEnd, ncclCommInitRank: the
# nearest exported symbol where the library is stripped).
_NCCL_FRAME = re.compile(r"(?:^|/)libnccl[\w.-]*\.so|^nccl[A-Z]")


class UcxBacktraceBlock:
    """The frames of UCX's backtrace; ``in_nccl`` when one is NCCL's."""

    def __init__(self) -> None:
        self.in_nccl = False

    @staticmethod
    def start(text: str) -> UcxBacktraceBlock | None:
        return UcxBacktraceBlock() if UCX_BACKTRACE_HEAD.match(text) else None

    def feed(self, text: str) -> bool:
        if (m := _UCX_FRAME.match(text)) is not None:
            if _NCCL_FRAME.search(m.group("file")) or _NCCL_FRAME.search(m.group("func")):
                self.in_nccl = True
            return True
        return text.startswith("=====")
