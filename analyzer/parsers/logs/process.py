"""How a rank's process died: Python exceptions, CUDA errors, signals, OOM killers,
launcher exit reports (Slurm, mpirun, DeepSpeed), Ray actors.

An exception line is only an event when it ends a traceback (the scanner tracks that)
or is one of the few types that matter on their own (CUDA OOM, DistBackendError):
a bare ``ValueError: …`` in the middle of a training log is often just printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit, put
from hangdoc.analyzer.vocabulary import (
    F_ERROR,
    F_EXC_TYPE,
    F_EXIT_CODE,
    F_HOST,
    F_LOCAL_RANK,
    F_MESSAGE,
    F_PID,
    F_SIGNAL,
    EventKind,
)

# Ray re-raises a task's exception as a class named after its cause (ray/exceptions.py,
# RayTaskError.as_instanceof_cause): "ray.exceptions.RayTaskError(RuntimeError): ray::…".
EXCEPTION_LINE = re.compile(
    r"(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Timeout)"
    r"(?:\([\w.]+\))?)"
    r"(?:\[[^\]]*\])?(?::\s?(?P<msg>.*))?$"
)
_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA [Ee]rror: out of memory|CUBLAS_STATUS_ALLOC_FAILED"
)
# Ray's memory monitor (host RAM), whose exception is also named OutOfMemoryError.
_RAY_HOST_OOM = re.compile(r"killed due to the node running low on memory")
_OOM_SIZE = re.compile(r"Tried to allocate (\d+(?:\.\d+)? ?[KMGTP]i?B)")
_OOM_GPU = re.compile(r"\(GPU (\d+);|GPU (\d+) has a total capac")
_CUDA_ERROR = re.compile(
    r"CUDA (?:driver )?error: (?P<what>[^.\n]*?(?:\.|$))|(?P<code>cudaError\w+)|"
    r"(?P<ecc>uncorrectable ECC error|uncorrectable NVLink error|GPU has fallen off the bus)"
)
_FATAL = re.compile(
    r"Fatal Python error: (?P<py>Segmentation fault|Aborted|Bus error|Floating point exception|"
    r"Illegal instruction)"
    r"|\*\*\* (?P<glog>SIG[A-Z]+)(?: \(@0x[0-9a-f]+\))? received by PID (?P<gpid>\d+)"
    r"|terminate called after throwing an instance of '(?P<cxx>[^']+)'"
    r"|^.*line \d+: +(?P<shpid>\d+) +(?P<sh>Segmentation fault|Aborted|Bus error|Killed)\b.*$"
    r"|^(?P<sh2>Segmentation fault|Aborted|Bus error|Killed)(?: +\(core dumped\))?\s*$"
)
_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
    "Killed": "SIGKILL",
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
_MPIRUN = re.compile(
    r"noticed that process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node (?P<host>\S+) exited "
    r"on "
    r"signal (?P<sig>\d+)(?: \((?P<name>[^)]+)\))?"
)
_DS_EXIT = re.compile(r"exits with return code = (?P<code>-?\d+)")
# horovodrun's gloo launcher: "Process 0 exit with status code 137." (128 + signal number).
_HOROVOD_EXIT = re.compile(r"^Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)\.?\s*$")
_DS_LOCAL_RANK = re.compile(r"--local_rank[= ](\d+)")
# torchelastic's report of a worker killed by a signal ("traceback : Signal 9 (SIGKILL)
# received by PID 812" in a ChildFailedError table, or alone when only that line is pasted).
_ELASTIC_SIGNAL = re.compile(
    r"Signal (?P<num>\d+) \((?P<sig>SIG\w+)\) received by PID (?P<pid>\d+)"
)
# torch.multiprocessing.spawn (ProcessContext.join) when a child died without an error on
# its queue: "process %d terminated with signal %s" / "process %d terminated with exit code
# %d" (raised as ProcessExitedException, plain Exception before torch 1.8); the number is
# the spawn index, which mp.spawn passes to the function as its (local) rank.
_MP_SPAWN = re.compile(
    r"\b[Pp]rocess (?P<idx>\d+) terminated with (?:signal (?P<sig>SIG[A-Z0-9]+)|exit code "
    r"(?P<code>-?\d+))"
)
_DS_PID = re.compile(r"(?:[Pp]rocess|subprocess) (\d+)")
_DS_KILL = re.compile(r"Killing subprocess (?P<pid>\d+)")
# The raylet's own report (src/ray/raylet/node_manager.cc): "A worker died or was killed
# while executing a task by an unexpected system error. To troubleshoot the problem, check
# the logs for the dead worker."
_RAY_DIED = re.compile(
    r"(?:RayActorError|ActorDiedError|The actor died unexpectedly|actor is dead because"
    r"|A worker died or was killed while executing)"
)
_RAY_PID = re.compile(r"\bpid[:=] ?(\d+)")
_RAY_IP = re.compile(r"\bip[:=] ?([\d.]+)")
_KEYS = (
    "memory",
    "CUDA",
    "cuda",
    "Fatal",
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
)


def match_exception_line(text: str) -> tuple[str, str] | None:
    """``RuntimeError: msg`` → (type, message), for the line that ends a traceback."""
    if not text or not (text[0].isalpha() or text[0] == "_"):
        return None
    m = EXCEPTION_LINE.match(text.rstrip())
    if m is None:
        return None
    return m.group("type"), (m.group("msg") or "").strip()


def signal_name(code: int) -> str | None:
    names = {
        1: "SIGHUP",
        2: "SIGINT",
        4: "SIGILL",
        6: "SIGABRT",
        7: "SIGBUS",
        8: "SIGFPE",
        9: "SIGKILL",
        11: "SIGSEGV",
        13: "SIGPIPE",
        15: "SIGTERM",
    }
    return names.get(code)


# torch's own messages when a DataLoader worker dies (torch/utils/data/dataloader.py,
# torch/csrc/DataLoader.cpp): "DataLoader worker (pid 14647) is killed by signal: Killed",
# "DataLoader worker (pid(s) 1, 2) exited unexpectedly", "ERROR: Unexpected bus error
# encountered in worker. This might be caused by insufficient shared memory (shm).",
# "DataLoader timed out after 60 seconds".
_LOADER_WORKER = re.compile(
    r"DataLoader worker \(pid(?:\(s\))? (?P<pids>[\d, ]+)\) (?:is killed by signal: "
    r"(?P<signal>[A-Za-z -]+?)\.?\s*$|exited unexpectedly)"
    # (the message's body: a paste that cut its start keeps "…bus error encountered in worker")
    r"|(?:Unexpected )?(?P<what>segmentation fault|bus error|floating-point exception) "
    r"encountered in worker"
    r"|DataLoader timed out after (?P<timeout>\d+) seconds"
)
_LOADER_SIGNALS = {"segmentation fault": "SIGSEGV", "bus error": "SIGBUS",
                   "floating-point exception": "SIGFPE"}  # fmt: skip
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
    fields = {F_MESSAGE: text.strip()[:300], "shm_error": why.group("why") if why else "failed"}
    if "Too many open files" not in text:
        fields["shm"] = "1"
    return Hit(EventKind.DATALOADER_WORKER_DIED, fields, key=("loader_shm",))


def match_dataloader_worker(text: str) -> Hit | None:
    """A DataLoader worker process died or timed out (torch's own wording), or the shared
    memory its batches go through failed."""
    if "</torch_" in text:
        return _match_torch_shm(text)
    if "orker" not in text and "DataLoader" not in text:
        return None
    m = _LOADER_WORKER.search(text)
    if m is None:
        return None
    fields: dict[str, str] = {F_MESSAGE: text.strip()[:300]}
    signal = m.group("signal")
    put(fields, F_SIGNAL, _SIGNALS.get(signal.strip(), signal.strip()) if signal else None)
    put(fields, F_SIGNAL, _LOADER_SIGNALS.get(m.group("what") or ""))
    put(fields, "worker_pids", (m.group("pids") or "").replace(" ", "") or None)
    put(fields, "timeout_s", m.group("timeout"))
    if "shared memory" in text or m.group("what") == "bus error":
        fields["shm"] = "1"
    return Hit(EventKind.DATALOADER_WORKER_DIED, fields, key=("loader", fields.get(F_SIGNAL)))


def match_process(text: str) -> Hit | None:
    """CUDA OOM / errors, fatal signals, OOM killer, launcher exit reports, Ray deaths."""
    if not any(k in text for k in _KEYS):
        return None
    fields: dict[str, str] = {}
    if "low on memory" in text and _RAY_HOST_OOM.search(text):
        fields.update({"name": "ray memory monitor", F_MESSAGE: text.strip()[:300]})
        return Hit(EventKind.HOST_OOM_KILL, fields, key=("rayhostoom",))
    if _OOM.search(text):
        size = _OOM_SIZE.search(text)
        gpu = _OOM_GPU.search(text)
        put(fields, "tried", size.group(1) if size else None)
        put(fields, "gpu", (gpu.group(1) or gpu.group(2)) if gpu else None)
        fields[F_MESSAGE] = text.strip()[:300]
        return Hit(EventKind.CUDA_OOM, fields, key=("oom",))
    if (h := _HOST_OOM.search(text)) is not None:
        put(fields, F_PID, h.group("pid") or h.group("pid2"))
        put(fields, "name", h.group("name") or h.group("name2"))
        put(fields, "events", h.group("n"))
        return Hit(EventKind.HOST_OOM_KILL, fields, key=("hostoom", fields.get(F_PID)))
    if (s := _SLURM_TASK.search(text)) is not None:
        what = s.group("what")
        fields.update({F_HOST: s.group("host"), "launcher": "slurm"})
        if s.group("code"):
            fields[F_EXIT_CODE] = s.group("code")
        elif what == "Out Of Memory":
            fields.update({F_SIGNAL: "SIGKILL", "oom": "host"})
        else:
            put(fields, F_SIGNAL, _SIGNALS.get(what, "SIGTERM" if what == "Terminated" else None))
        return Hit(
            EventKind.WORKER_FAILED,
            fields,
            rank=int(s.group("task")),
            key=("slurm", s.group("task")),
        )
    if (c := _SLURM_CANCEL.search(text)) is not None:
        fields.update(
            {
                F_HOST: c.group("host"),
                "launcher": "slurm",
                "why": c.group("why").strip() or "cancelled",
            }
        )
        return Hit(EventKind.AGENT_SIGNAL, fields, key=("slurm_cancel",))
    if (mp := _MPIRUN.search(text)) is not None:
        sig = signal_name(int(mp.group("sig"))) or _SIGNALS.get(
            mp.group("name") or "", mp.group("sig")
        )
        fields.update(
            {F_HOST: mp.group("host"), F_PID: mp.group("pid"), F_SIGNAL: sig, "launcher": "mpirun"}
        )
        return Hit(
            EventKind.WORKER_FAILED,
            fields,
            rank=int(mp.group("rank")),
            key=("mpirun", mp.group("rank")),
        )
    if text.startswith("Process ") and (hv := _HOROVOD_EXIT.match(text)) is not None:
        code = int(hv.group("code"))
        fields.update({F_EXIT_CODE: str(code), "launcher": "horovod"})
        put(fields, F_SIGNAL, signal_name(code - 128) if code > 128 else None)
        return Hit(
            EventKind.WORKER_FAILED,
            fields,
            rank=int(hv.group("rank")),
            key=("horovod", hv.group("rank"), code),
        )
    if (d := _DS_EXIT.search(text)) is not None:
        code = int(d.group("code"))
        pid = _DS_PID.search(text)
        fields.update({F_EXIT_CODE: str(code), "launcher": "deepspeed"})
        put(fields, F_PID, pid.group(1) if pid else None)
        put(fields, F_SIGNAL, signal_name(-code) if code < 0 else None)
        local = _DS_LOCAL_RANK.search(text)
        put(fields, F_LOCAL_RANK, local.group(1) if local else None)
        return Hit(
            EventKind.WORKER_FAILED,
            fields,
            key=("ds", fields.get(F_PID), fields.get(F_LOCAL_RANK), code),
        )
    if "terminated with" in text and (sp := _MP_SPAWN.search(text)) is not None:
        fields.update({F_LOCAL_RANK: sp.group("idx"), "launcher": "torch.multiprocessing"})
        if sp.group("sig"):
            fields[F_SIGNAL] = sp.group("sig")
        else:
            code = int(sp.group("code"))
            fields[F_EXIT_CODE] = str(code)
            put(fields, F_SIGNAL, signal_name(-code) if code < 0 else None)
        return Hit(EventKind.WORKER_FAILED, fields, key=("mpspawn", sp.group("idx")))
    if "received by PID" in text and (es := _ELASTIC_SIGNAL.search(text)) is not None:
        fields.update({F_SIGNAL: es.group("sig"), F_PID: es.group("pid"), "source": "torchelastic"})
        hit = Hit(EventKind.FATAL_SIGNAL, fields, key=("elastic_signal", es.group("pid")))
        hit.pid = int(es.group("pid"))  # the worker it is about: a ChildFailedError names its rank
        return hit
    if (k := _DS_KILL.search(text)) is not None:
        fields.update({F_PID: k.group("pid"), F_SIGNAL: "SIGKILL", "launcher": "deepspeed"})
        return Hit(EventKind.AGENT_TERMINATING, fields, key=("dskill", k.group("pid")))
    if (f := _FATAL.search(text)) is not None:
        if f.group("py"):
            fields[F_SIGNAL] = _SIGNALS[f.group("py")]
        elif f.group("glog"):
            fields.update({F_SIGNAL: f.group("glog"), F_PID: f.group("gpid")})
        elif f.group("cxx"):
            fields.update({F_SIGNAL: "SIGABRT", F_EXC_TYPE: f.group("cxx")})
        else:
            fields[F_SIGNAL] = _SIGNALS[f.group("sh") or f.group("sh2")]
            put(fields, F_PID, f.group("shpid"))
        return Hit(EventKind.FATAL_SIGNAL, fields, key=("fatal", fields[F_SIGNAL]))
    if (ce := _CUDA_ERROR.search(text)) is not None:
        what = (ce.group("what") or ce.group("code") or ce.group("ecc") or "").strip().rstrip(".")
        if not what:
            return None
        fields[F_ERROR] = what
        return Hit(EventKind.CUDA_ERROR, fields, key=("cudaerr", what))
    if _RAY_DIED.search(text):
        pid = _RAY_PID.search(text)
        ip = _RAY_IP.search(text)
        put(fields, F_PID, pid.group(1) if pid else None)
        put(fields, F_HOST, ip.group(1) if ip else None)
        fields[F_MESSAGE] = text.strip()[:200]
        return Hit(EventKind.ACTOR_DIED, fields, key=("ray", fields.get(F_PID)))
    return None


# Open MPI / PRRTE's report of the first process that exited non-zero (help-orterun.txt,
# prrte help-prun.txt "[prun:non-zero-exit]"):
#   mpirun detected that one or more processes exited with non-zero status, thus causing
#   the job to be terminated. The first process to do so was:
#
#     Process name: [[28387,1],3]
#     Exit code:    1
# The last number of the process name is the MPI rank.
_MPI_NONZERO = "detected that one or more processes exited with non-zero status"
_MPI_NAME = re.compile(r"^\s*Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]")
_MPI_CODE = re.compile(r"^\s*Exit code: +(?P<code>-?\d+)")
_MPI_BODY = re.compile(r"^\s*(?:the job to be terminated|-{8,}|Process name:|Exit code:)")


@dataclass(slots=True)
class MpiExitBlock:
    """mpirun's "The first process to do so was" report: that rank and its exit code."""

    fields: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def start(text: str) -> MpiExitBlock | None:
        return MpiExitBlock() if _MPI_NONZERO in text else None

    def feed(self, text: str) -> bool:
        if not text.strip():
            return True
        if (n := _MPI_NAME.match(text)) is not None:
            self.fields["rank"] = n.group("rank")
        elif (c := _MPI_CODE.match(text)) is not None:
            self.fields[F_EXIT_CODE] = c.group("code")
        elif not _MPI_BODY.match(text):
            return False
        return F_EXIT_CODE not in self.fields

    def finish(self) -> Hit | None:
        rank = self.fields.get("rank")
        if rank is None:
            return None
        fields = {"launcher": "mpirun"}
        code = self.fields.get(F_EXIT_CODE)
        if code is not None:
            fields[F_EXIT_CODE] = code
            put(fields, F_SIGNAL, signal_name(int(code) - 128) if int(code) > 128 else None)
        return Hit(EventKind.WORKER_FAILED, fields, rank=int(rank), key=("mpirun_exit", rank))
