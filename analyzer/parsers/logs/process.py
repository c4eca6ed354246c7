"""How a rank's process died: Python exceptions, CUDA errors, signals, OOM killers,
launcher exit reports (Slurm, mpirun, DeepSpeed), Ray actors.

An exception line is only an event when it ends a traceback (the scanner tracks that)
or is one of the few types that matter on their own (CUDA OOM, DistBackendError):
a bare ``ValueError: …`` in the middle of a training log is often just printed.
"""

from __future__ import annotations

import re

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

EXCEPTION_LINE = re.compile(
    r"(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Timeout))"
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
_DS_PID = re.compile(r"(?:[Pp]rocess|subprocess) (\d+)")
_DS_KILL = re.compile(r"Killing subprocess (?P<pid>\d+)")
_RAY_DIED = re.compile(
    r"(?:RayActorError|ActorDiedError|The actor died unexpectedly|actor is dead because)"
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
    "ECC",
    "bus",
    "CANCELLED",
    "received by PID",
    "exit with status",
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
    r"|Unexpected (?P<what>segmentation fault|bus error|floating-point exception) encountered "
    r"in worker"
    r"|DataLoader timed out after (?P<timeout>\d+) seconds"
)
_LOADER_SIGNALS = {"segmentation fault": "SIGSEGV", "bus error": "SIGBUS",
                   "floating-point exception": "SIGFPE"}  # fmt: skip


def match_dataloader_worker(text: str) -> Hit | None:
    """A DataLoader worker process died or timed out (torch's own wording)."""
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
