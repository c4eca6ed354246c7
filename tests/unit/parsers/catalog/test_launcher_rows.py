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

import sys
from pathlib import Path
from types import ModuleType

import pytest

from hangdoc.analyzer.parsers.catalog import default_matcher, to_event
from hangdoc.analyzer.parsers.catalog.template import display
from hangdoc.analyzer.vocabulary import EventKind

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


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
