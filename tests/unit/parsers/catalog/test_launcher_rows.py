"""The rows of Slurm, Open MPI, vLLM, Ray, Triton and CuPy (scripts/catalog/launchers.py)
and what they mean.

The lines are the forms the sources print, filled with values: Slurm's srun/launch.c
(``"%s: %s %s: Exited with exit code %d"`` under srun's ``srun: error: `` log prefix) and
slurmstepd/req.c (``"*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***"``), task/cgroup's
task_cgroup_memory.c; Open MPI 4.1's orte/tools/orterun/help-orterun.txt
(``%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s).``)
and ompi/mpi/help-mpi-api.txt; vLLM's v1/executor/multiproc_executor.py (``"Worker proc %s
died unexpectedly, shutting down executor."``, ``f"RPC call to {method} timed out."``)
under vLLM's ``(EngineCore pid=N) ERROR <date> [file:line]`` log header; SGLang's
srt/entrypoints/engine.py (``f"Rank {i} scheduler is dead. Please check if there are relevant
logs."``, the SIGCHLD handler's ``"Child process unexpectedly failed with an exit code %d.
pid=%d"``) under its ``[date]`` header; ray/exceptions.py
(RayActorError's ``base_error_msg``); Triton's third_party/nvidia/backend/driver.c
(gpuAssert: ``"Triton Error [CUDA]: " + cuGetErrorString``) and CuPy's
cupy_backends/cuda/api/runtime.pyx (``'%s: %s' % (cudaGetErrorName, cudaGetErrorString)``)
with the CUDA runtime's own error strings. The extractor tests feed hand-written sources
in those files' forms.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hangdoc.analyzer.parsers.catalog import default_matcher, to_event
from hangdoc.analyzer.parsers.catalog.loader import default_catalog
from hangdoc.analyzer.parsers.catalog.template import display
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.parsers.catalog.scripts_import import catalog_script

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"
DATA = Path(__file__).resolve().parents[4] / "hangdoc" / "analyzer" / "parsers" / "catalog" / "data"


def _launchers() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog import launchers
    finally:
        sys.path.remove(str(SCRIPTS))
    return launchers


# (line, project, kind, category, strength, values the event must carry)
_LINES = [
    (
        "srun: error: node017: task 3: Exited with exit code 1",
        "slurm",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "moderate",
        {"rank": 3, "exitcode": 1},
    ),
    (
        "slurmstepd: error: *** STEP 4242.0 ON node017 CANCELLED AT 2024-05-01T10:00:00 "
        "DUE TO TIME LIMIT ***",
        "slurm",
        EventKind.AGENT_SIGNAL,
        "unknown",
        "weak",
        {},
    ),
    (
        "slurmstepd: error: *** JOB 4242 ON node017 CANCELLED AT 2024-05-01T10:00:00 DUE TO "
        "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
        "slurm",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "strong",
        {},
    ),
    (
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.",
        "slurm",
        EventKind.HOST_OOM_KILL,
        "rank_dead_or_crashed",
        "strong",
        {},
    ),
    (
        "mpirun noticed that process rank 5 with PID 31337 on node gpu-03 exited on signal 9 "
        "(Killed).",
        "ompi",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "strong",
        {"rank": 5},
    ),
    (
        "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD",
        "ompi",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "strong",
        {"rank": 2},
    ),
    (
        "(EngineCore_DP0 pid=4100) ERROR 05-01 10:00:00 [multiproc_executor.py:154] Worker proc "
        "VllmWorker-1 died unexpectedly, shutting down executor.",
        "vllm",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "strong",
        {},
    ),
    (
        "TimeoutError: RPC call to execute_model timed out.",
        "vllm",
        EventKind.COLLECTIVE_TIMEOUT,
        "unknown",
        "weak",
        {},
    ),
    (
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
        "trace (above) for the root cause.",
        "vllm",
        EventKind.EXCEPTION,
        "rank_dead_or_crashed",
        "weak",
        {},
    ),
    (
        "[2025-05-01 10:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs.",
        "sglang",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "strong",
        {"rank": 0},
    ),
    (
        "[2025-05-01 10:00:00] Child process unexpectedly failed with an exit code 9. pid=4242",
        "sglang",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "moderate",
        {"exitcode": 9},
    ),
    (
        "(EngineCore pid=4100) DEBUG 05-01 10:00:00 [shm_broadcast.py:395] No available shared "
        "memory broadcast block found in 60 second.",
        "vllm",
        EventKind.STALL_WATCHDOG,
        "unknown",
        "weak",
        {},
    ),
    (
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "ray",
        EventKind.ACTOR_DIED,
        "rank_dead_or_crashed",
        "strong",
        {},
    ),
    (
        "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
        "triton",
        EventKind.CUDA_ERROR,
        "rank_dead_or_crashed",
        "moderate",
        {"cuda_error": "an illegal memory access was encountered"},
    ),
    (
        "RuntimeError: Triton Error [CUDA]: out of memory",
        "triton",
        EventKind.CUDA_OOM,
        "cuda_oom",
        "strong",
        {},
    ),
    (
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorIllegalAddress: an illegal "
        "memory access was encountered",
        "cupy",
        EventKind.CUDA_ERROR,
        "rank_dead_or_crashed",
        "moderate",
        {},
    ),
    (
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorECCUncorrectable: "
        "uncorrectable ECC error encountered",
        "cupy",
        EventKind.CUDA_ERROR,
        "gpu_hardware_or_driver",
        "strong",
        {},
    ),
    # ---- vLLM, SGLang and Ray read from their released wheels (scripts/catalog/wheels.py)
    # v1/executor/multiproc_executor.py 0.33: f"Worker proc {proc.name} died unexpectedly
    # (exit code: {proc.exitcode}), shutting down executor."
    (
        "(EngineCore_DP0 pid=4100) ERROR 11-01 10:00:00 [multiproc_executor.py:301] Worker proc "
        "VllmWorker-1 died unexpectedly (exit code: -9), shutting down executor.",
        "vllm",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "strong",
        {},
    ),
    # v1/engine/core.py run_engine_core: logger.exception("EngineCore failed to start.")
    (
        "(EngineCore_DP0 pid=3144) ERROR 09-18 10:00:00 [core.py:708] EngineCore failed to start.",
        "vllm",
        EventKind.EXCEPTION,
        "rank_dead_or_crashed",
        "moderate",
        {},
    ),
    # executor/multiproc_worker_utils.py (V0): "Exception in worker %s while processing
    # method %s."
    (
        "(VllmWorkerProcess pid=4242) ERROR 12-27 10:00:00 multiproc_worker_utils.py:236] "
        "Exception in worker VllmWorkerProcess while processing method load_model.",
        "vllm",
        EventKind.EXCEPTION,
        "rank_dead_or_crashed",
        "moderate",
        {},
    ),
    # worker/worker_base.py execute_method: f"Error executing method {method!r}. This might
    # cause deadlock in distributed execution." (init_device: the set-up)
    (
        "ERROR 05-30 22:22:26 [worker_base.py:620] Error executing method 'execute_model'. "
        "This might cause deadlock in distributed execution.",
        "vllm",
        EventKind.EXCEPTION,
        "rank_dead_or_crashed",
        "moderate",
        {},
    ),
    (
        "ERROR 05-30 22:22:26 [worker_base.py:620] Error executing method 'init_device'. "
        "This might cause deadlock in distributed execution.",
        "vllm",
        EventKind.EXCEPTION,
        "nccl_init_or_bootstrap_hang",
        "moderate",
        {},
    ),
    # v1/core/kv_cache_utils.py check_enough_kv_cache_memory (0.6.6-0.11)
    (
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        "vllm",
        EventKind.CUDA_OOM,
        "cuda_oom",
        "moderate",
        {},
    ),
    (
        "ValueError: To serve at least one request with the models's max seq len (131072), "
        "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(9.53 GiB). Based on the available memory, the estimated maximum model length is "
        "78000. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
        "vllm",
        EventKind.CUDA_OOM,
        "cuda_oom",
        "moderate",
        {},
    ),
    # distributed/device_communicators/pynccl_wrapper.py find_nccl_library/NCCLLibrary
    (
        "ERROR 04-28 10:00:00 [pynccl_wrapper.py:250] Failed to load NCCL library from "
        "libnccl.so.2. It is expected if you are not running on NVIDIA/AMD GPUs.Otherwise, the "
        "nccl library might not exist, be corrupted or it does not support the current platform "
        "Linux-5.15.0-x86_64-with-glibc2.35. If you already have the library, please set the "
        "environment variable VLLM_NCCL_SO_PATH to point to the correct nccl library path.",
        "vllm",
        EventKind.EXCEPTION,
        "nccl_init_or_bootstrap_hang",
        "moderate",
        {},
    ),
    # executor/ray_utils.py _wait_until_pg_ready
    (
        "ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0, "
        "'node:10.0.0.4': 0.001}, {'GPU': 1.0}] within 1800 seconds. See `ray status` and "
        "`ray list nodes` to make sure the cluster has enough resources.",
        "vllm",
        EventKind.STORE_TIMEOUT,
        "nccl_init_or_bootstrap_hang",
        "weak",
        {},
    ),
    # v1/engine/core_client.py 0.33 (the engine's start-up wait)
    (
        "TimeoutError: Timed out waiting for engine core processes to start. This is often "
        "caused by slow weight loading for large models. Waited 600s (configured by "
        "VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the environment variable: "
        "VLLM_ENGINE_READY_TIMEOUT_S=<seconds>",
        "vllm",
        EventKind.COLLECTIVE_TIMEOUT,
        "unknown",
        "weak",
        {},
    ),
    # shm_broadcast.py 0.33: logger.info(LONG_WAIT_TIME_LOG_MSG, VLLM_RINGBUFFER_WARNING_INTERVAL)
    (
        "(EngineCore_DP0 pid=4100) INFO 11-01 10:00:00 [shm_broadcast.py:763] No available "
        "shared memory broadcast block found in 60 seconds. This typically happens when some "
        "processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv "
        "cache quantization).",
        "vllm",
        EventKind.STALL_WATCHDOG,
        "unknown",
        "weak",
        {},
    ),
    # SGLang srt/managers/scheduler.py Scheduler.watchdog_thread
    (
        "[2025-05-01 10:00:00 TP3] Watchdog timeout (self.watchdog_timeout=300)",
        "sglang",
        EventKind.STALL_WATCHDOG,
        "unknown",
        "weak",
        {},
    ),
    # srt/model_executor/model_runner.py init_memory_pool
    (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "sglang",
        EventKind.CUDA_OOM,
        "cuda_oom",
        "strong",
        {},
    ),
    # model_runner.py load_model: the TP group's monitored_barrier after loading failed
    (
        "ValueError: TP rank 1 could finish the model loading, but there are other ranks that "
        "didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow "
        "node.",
        "sglang",
        EventKind.EXCEPTION,
        "rank_dead_or_crashed",
        "moderate",
        {},
    ),
    # srt/distributed/parallel_state.py GroupCoordinator.__init__
    (
        "[2025-05-01 10:00:00 TP0] Setup Custom allreduce failed with CUDA error: peer access "
        "is not supported between these two devices. To silence this warning, specify "
        "--disable-custom-all-reduce explicitly.",
        "sglang",
        EventKind.NCCL_INIT,
        "nccl_init_or_bootstrap_hang",
        "weak",
        {},
    ),
    # ray/exceptions.py ActorUnavailableError
    (
        "ray.exceptions.ActorUnavailableError: The actor 7f2c9e1d is unavailable: The actor is "
        "temporarily unavailable: RpcError: Socket closed. The task may or may not have been "
        "executed on the actor.",
        "ray",
        EventKind.ACTOR_DIED,
        "rank_dead_or_crashed",
        "weak",
        {},
    ),
    # ray/dashboard/modules/job/job_supervisor.py: the job's entrypoint exited non-zero, as
    # `ray job submit` / `ray job status` print it. Horovod's runner/util/lsf.py prints the
    # same words after a command ("<lscpu_cmd> failed with exit code <exit_code>"): the line
    # is Ray's, its own row holding more of it.
    (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to "
        "20,000 chars):",
        "ray",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "moderate",
        {"exitcode": 1},
    ),
    (
        "Job entrypoint command failed with exit code 137. No logs available.",
        "ray",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "moderate",
        {"exitcode": 137},
    ),
    (
        "2025-06-01 10:00:00,123\tINFO job_supervisor.py:321 -- Job raysubmit_Xk2 entrypoint "
        "command exited with code 1",
        "ray",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "moderate",
        {"exitcode": 1},
    ),
    # Ray's raylet (src/ray/common/file_system_monitor.cc): a node's spill directory or
    # session folder over the capacity threshold, as the driver prints the raylet's log
    (
        "(raylet, ip=10.2.0.7) [2025-03-02 11:00:01,004 E 4411 4420] (raylet) "
        "file_system_monitor.cc:116: /mnt/spill/ray is over 97% full, available space: 1.5 "
        "GB; capacity: 1024 GB. Object creation will fail if spilling is required.",
        "raylet",
        EventKind.IO_STALL,
        "io_or_filesystem_stall",
        "strong",
        {},
    ),
    (
        "[2025-03-02 11:00:01,004 E 4411 4420] file_system_monitor.cc:101: /tmp/ray/session_x "
        "has no capacity, object creation will fail if spilling is required.",
        "raylet",
        EventKind.IO_STALL,
        "io_or_filesystem_stall",
        "strong",
        {},
    ),
    # and Horovod's own line stays Horovod's
    (
        "RuntimeError: lscpu failed with exit code 1",
        "horovod",
        EventKind.WORKER_FAILED,
        "rank_dead_or_crashed",
        "moderate",
        {"exitcode": 1},
    ),
]

# Rows of these projects that say nothing about a hang by themselves: set-up notes, and the
# header of a traceback whose exception (after it) is what failed.
_SILENT = [
    "(VllmWorker rank=0 pid=100) WARNING 05-01 10:00:00 [custom_all_reduce.py:85] Custom "
    "allreduce is disabled because this process group spans across nodes.",
    "[2025-02-24 14:09:34 TP14] Scheduler hit an exception: Traceback (most recent call last):",
]


def _mangled(line: str) -> list[str]:
    """A paste's manglings: quoted, indented, a timestamp or a log shipper's header before
    it, that header cut mid-way."""
    header = "2024-05-01T10:00:00.123456789Z stdout F "
    return [
        line,
        "> " + line,
        "    " + line,
        header + line,
        (header + line)[17:],
    ]


@pytest.mark.parametrize("line,project,kind,category,strength,values", _LINES)
def test_a_line_of_the_source_means_what_its_family_says(
    line: str,
    project: str,
    kind: EventKind,
    category: str,
    strength: str,
    values: dict[str, object],
) -> None:
    matcher = default_matcher()
    for text in _mangled(line):
        match = matcher.match(text)
        assert match is not None, text
        event = to_event(match, matcher)
        assert (event.project, event.kind, event.category, event.strength) == (
            project,
            kind,
            category,
            strength,
        ), text
        for key, value in values.items():
            assert event.values.get(key) == value, (text, event.values)


@pytest.mark.parametrize("line", _SILENT)
def test_a_note_of_the_serving_stacks_is_recognised_and_means_nothing(line: str) -> None:
    matcher = default_matcher()
    for text in _mangled(line):
        match = matcher.match(text)
        assert match is not None, text
        event = to_event(match, matcher)
        assert event.project in {"vllm", "sglang"}, text
        assert (event.kind, event.strength) == (None, "none"), text


def test_the_serving_stacks_rows_load_with_their_releases() -> None:
    """vLLM's, SGLang's and Ray's rows are read from released wheels: they load, each names
    the releases it is in, and every one of those is a release the data file read."""
    rows = [r for r in default_catalog().rows if r.project in {"vllm", "sglang", "ray"}]
    counts = {p: sum(r.project == p for r in rows) for p in ("vllm", "sglang", "ray")}
    assert counts["vllm"] > 200 and counts["sglang"] > 200 and counts["ray"] > 20, counts
    for project in counts:
        data = json.loads((DATA / f"{project}.json").read_text(encoding="utf-8"))
        releases = set(data["source"]["versions"])
        assert all(re.fullmatch(r"\d+(?:\.\d+)+(?:\.post\d+)?", v) for v in releases)
        for row in (r for r in rows if r.project == project):
            named = {v for v in re.split(r"[–,\s]+", row.versions) if v}
            assert named and named <= releases, (row.id, row.versions)
    # two wordings of one message across releases are two rows (shm_broadcast's stall)
    stalls = {r.template for r in rows if r.template.startswith("No available")}
    assert len(stalls) >= 3, stalls


def test_slurm_formats_read_its_own_conversions_and_host_lists_as_words() -> None:
    launchers = _launchers()
    code = (
        "static void _task_finish(task_exit_msg_t *msg)\n{\n"
        '\terror("%s: %s %s: Exited with exit code %d", hosts, task_str, tasks, rc);\n'
        '\terror("Detected %"PRIu64" oom_kill event%s in %ps.", cnt, s, &step_id);\n}\n'
    )
    sites = launchers._slurm_sites(code, "src/srun/launch.c", ("error",))
    templates = [display(tuple(site.parts)) for site in sites]
    assert templates[0] == "<hosts>: <task_str> <tasks>: Exited with exit code <rc>"
    assert [p.type for p in sites[0].parts if not isinstance(p, str)][:3] == ["word"] * 3
    assert "in <&step_id>." in templates[1]  # %ps is one value, not %p and an "s"


def test_an_open_mpi_help_topic_is_one_row_per_printed_line() -> None:
    launchers = _launchers()
    text = (
        "# comment\n[orterun:proc-aborted-signal]\n"
        "%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s).\n"
        "\n[other]\nshort\n"
    )
    sites = launchers.help_sites(text, "orte/tools/orterun/help-orterun.txt")
    assert len(sites) == 1
    assert sites[0].function == "orterun:proc-aborted-signal"
    assert display(sites[0].parts) == (
        "<value> noticed that process rank <rank> with PID <pid> on node <node> exited on "
        "signal <signal> (<value>)."
    )


def test_a_python_class_message_is_read_from_its_str_and_its_msg_attributes() -> None:
    launchers = _launchers()
    code = (
        "class ObjectLostError(RayError):\n"
        "    def __str__(self):\n"
        '        return self._base_str() + "\\n\\n" + (f"All copies of {self.h} were lost.")\n'
        "class RayActorError(RayError):\n"
        "    def __init__(self, cause=None):\n"
        '        self.base_error_msg = "The actor died unexpectedly before finishing this task."\n'
    )
    sites = launchers.assembled_sites(code, "ray", "python/ray/exceptions.py", "abc")
    assert [display(s.parts) for s in sites] == [
        "All copies of <self.h> were lost.",
        "The actor died unexpectedly before finishing this task.",
    ]
    assert [s.level for s in sites] == ["__str__", "message"]


def test_tritons_prefix_is_joined_to_the_drivers_error_string() -> None:
    launchers = _launchers()
    code = (
        "static bool gpuAssert(CUresult code, const char *file, int line) {\n"
        '  const char *prefix = "Triton Error [CUDA]: ";\n'
        "  const char *str;\n  cuGetErrorString(code, &str);\n"
        "  strcat(err, prefix);\n  strcat(err, str);\n}\n"
    )
    sites = launchers._c_sites(code, "triton", "third_party/nvidia/backend/driver.c", "abc")
    assert [display(s.parts) for s in sites] == ["Triton Error [CUDA]: <cuGetErrorString>"]


def test_rays_log_streams_and_the_string_stream_they_print_are_read() -> None:
    """RAY_LOG(LEVEL) << …; and a message built in an ostringstream and logged whole (the
    raylet's file-system monitor): its ";" inside a literal does not end it."""
    launchers = _launchers()
    code = (
        "// read from github.com/ray-project/ray at commit abc\n"
        "bool Monitor::Over(const std::string &path) const {\n"
        '  RAY_LOG(WARNING) << "Failed to read " << path;\n'
        "  std::ostringstream ostr;\n"
        '  ostr << path << " is over " << pct << "% full, available: " << gb << " GB"\n'
        '       << "; capacity: " << cap << " GB.";\n'
        "  RAY_LOG_EVERY_MS(ERROR, 10 * 1000) << ostr.str();\n"
        '  RAY_CHECK(ok) << "Cannot free " << path;\n'
        "  return true;\n}\n"
    )
    sites = launchers._c_sites(code, "raylet", "src/ray/common/m.cc", "abc")
    assert sorted((s.level, display(s.parts)) for s in sites) == [
        ("RAY_CHECK FATAL", "Cannot free <path>"),
        ("RAY_LOG WARNING", "Failed to read <path>"),
        ("stream ERROR", "<path> is over <pct>% full, available: <gb> GB; capacity: <cap> GB."),
    ]


def test_mpiruns_report_keeps_its_rank_when_the_paste_starts_at_noticed() -> None:
    """help-orterun.txt's line begins with mpirun's name (a %s): a paste cut there loses the
    name only."""
    matcher = default_matcher()
    match = matcher.match(
        "noticed that process rank 7 with PID 4242 on node gpu-03 exited on signal 11 "
        "(Segmentation fault)."
    )
    assert match is not None
    event = to_event(match, matcher)
    assert (event.project, event.kind, event.values.get("rank")) == (
        "ompi",
        EventKind.WORKER_FAILED,
        7,
    )


def _script(name: str) -> ModuleType:
    return catalog_script(name)


def test_a_module_constant_a_log_call_names_is_that_calls_format() -> None:
    """vLLM 0.33's shm_broadcast keeps its stall message in LONG_WAIT_TIME_LOG_MSG and logs
    ``logger.info(LONG_WAIT_TIME_LOG_MSG, VLLM_RINGBUFFER_WARNING_INTERVAL)``."""
    pysource = _script("pysource")
    code = (
        'LONG_WAIT_TIME_LOG_MSG = (\n    "No available block found "\n    "in %d seconds."\n)\n'
        "def acquire_write(self):\n"
        "    logger.info(LONG_WAIT_TIME_LOG_MSG, VLLM_RINGBUFFER_WARNING_INTERVAL)\n"
        "    logger.info(not_a_constant)\n"
    )
    sites = pysource.sites_of(code, "vllm", "shm_broadcast.py", "0.33.0")
    assert [display(s.parts) for s in sites if s.literal] == [
        "No available block found in <VLLM_RINGBUFFER_WARNING_INTERVAL> seconds."
    ]
    assert [s.literal for s in sites] == [True, False]


def test_a_message_kept_in_a_class_body_is_read() -> None:
    """ray 2.46's ActorDiedError: ``BASE_ERROR_MSG = "The actor died …"`` in its class body."""
    launchers = _launchers()
    code = (
        "class ActorDiedError(RayActorError):\n"
        '    BASE_ERROR_MSG = "The actor died unexpectedly before finishing this task."\n'
        "    def __init__(self, cause=None):\n"
        "        error_msg = self.BASE_ERROR_MSG\n"
    )
    sites = launchers.assembled_sites(code, "ray", "python/ray/exceptions.py", "2.46.0")
    assert [(display(s.parts), s.function) for s in sites] == [
        ("The actor died unexpectedly before finishing this task.", "ActorDiedError")
    ]


def test_the_wheels_files_are_laid_out_by_release_with_a_header(tmp_path: Path) -> None:
    """scripts/catalog/wheels.py: the oldest release of a file gets its path, a later one
    ``<path>@<version>``; the first line names the release (and the commit the wheel
    records); do_indexed reads versions from it and counts lines after it."""
    import zipfile

    wheels = _script("wheels")
    launchers = _launchers()
    for version, text in (("0.8.5", "old wording"), ("0.11.0", "new wording")):
        with zipfile.ZipFile(tmp_path / f"vllm-{version}-cp38-abi3-any.whl", "w") as archive:
            archive.writestr("vllm/_version.py", f"__commit_id__ = commit_id = 'g{'ab' * 5}'\n")
            archive.writestr(
                "vllm/v1/executor/multiproc_executor.py",
                f'def f():\n    raise RuntimeError("Worker failed with {text}")\n',
            )
    root = tmp_path / "indexed"
    written = wheels.lay_out(sorted(tmp_path.glob("*.whl")), root)
    names = sorted(p.name for p in written)
    assert names == ["multiproc_executor.py", "multiproc_executor.py@0.11.0"]
    first = written[0].read_text(encoding="utf-8").split("\n", 1)[0]
    assert "at release 0.8.5 (commit ababababab)" in first
    sites, versions = launchers.indexed_sites("vllm", root / "vllm-project" / "vllm")
    assert versions == ["0.8.5", "0.11.0"]
    assert sorted((display(s.parts), s.version, s.file, s.line) for s in sites) == [
        ("Worker failed with new wording", "0.11.0", "vllm/v1/executor/multiproc_executor.py", 2),
        ("Worker failed with old wording", "0.8.5", "vllm/v1/executor/multiproc_executor.py", 2),
    ]
