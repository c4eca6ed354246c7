"""Slurm: the nodes of a job from ``scontrol``, one ``srun`` step that visits them all.

The collector runs as an extra step inside the job's own allocation::

    srun --jobid JOBID --overlap --nodes=N --ntasks-per-node=1 --nodelist=NODES \\
         --label --kill-on-bad-exit=0 --quiet --job-name=hangdoc-collect <node collector>

``--overlap`` lets the step share the CPUs (and memory) the job's own steps hold, so it
starts even when the job uses every core; without it the step would wait for resources
that the hung job never frees. One task per node finds that node's ranks itself
(``--all``, restricted to SLURM_JOB_ID=JOBID so another job on a shared node is left
alone). Stopping the step (SIGTERM to srun) ends the collectors, never the job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from hangdoc.collectors.launchers.base import JobTarget, LaunchCommand, Launcher, run_query
from hangdoc.errors import CollectionError, UsageError

_JOB_ID = re.compile(r"^\d+(?:_\d+|\+\d+)?$")  # 123, an array task 123_4, a het part 123+0
_FIELD = re.compile(r"(\S+?)=(\S*)")
_COLLECTABLE = frozenset({"RUNNING", "SUSPENDED", "COMPLETING"})


def parse_scontrol(text: str) -> dict[str, str]:
    """``scontrol show job --oneliner`` → {Key: Value} (first occurrence wins)."""
    out: dict[str, str] = {}
    for key, value in _FIELD.findall(text):
        out.setdefault(key, value)
    return out


class SlurmLauncher(Launcher):
    name: ClassVar[str] = "slurm"
    node_name_env: ClassVar[str | None] = "SLURMD_NODENAME"

    def __init__(
        self, srun: str = "srun", scontrol: str = "scontrol", step_name: str = "hangdoc-collect"
    ) -> None:
        self.srun = srun
        self.scontrol = scontrol
        self.step_name = step_name  # the step's name in squeue -s (hangdoc-watch for watch)

    def resolve(self, job_id: str) -> JobTarget:
        job_id = job_id.strip()
        if not _JOB_ID.match(job_id):
            raise UsageError(
                f"{job_id!r} is not a Slurm job id",
                help_text="Give the number squeue shows (123456, or 123456_7 for an array task).",
            )
        info = parse_scontrol(
            run_query([self.scontrol, "show", "job", "--oneliner", job_id], f"job {job_id}")
        )
        state = info.get("JobState", "UNKNOWN")
        if state not in _COLLECTABLE:
            raise CollectionError(
                f"Slurm job {job_id} is {state}: only a running job can be collected",
                help_text="`squeue -j JOBID` shows its state; a job that ended has left "
                "nothing to inspect (analyze its logs instead: hangdoc analyze slurm-*.out).",
            )
        nodelist = info.get("NodeList", "")
        if not nodelist or nodelist == "(null)":
            raise CollectionError(f"Slurm job {job_id} has no nodes yet (state {state})")
        hosts = tuple(
            line.strip()
            for line in run_query(
                [self.scontrol, "show", "hostnames", nodelist], f"the nodes of job {job_id}"
            ).splitlines()
            if line.strip()
        )
        if not hosts:
            raise CollectionError(f"scontrol expanded the node list {nodelist!r} to nothing")
        return JobTarget(
            launcher=self.name,
            job_id=info.get("JobId", job_id),
            hosts=hosts,
            name=info.get("JobName"),
            state=state,
            details={"NodeList": nodelist, "requested": job_id},
        )

    def commands(self, target: JobTarget, remote: Sequence[str]) -> list[LaunchCommand]:
        argv = (
            self.srun,
            "--jobid", target.details.get("requested", target.job_id),
            "--overlap",
            f"--nodes={len(target.hosts)}",
            "--ntasks-per-node=1",
            f"--nodelist={target.details.get('NodeList') or ','.join(target.hosts)}",
            "--label",
            "--kill-on-bad-exit=0",
            "--quiet",
            f"--job-name={self.step_name}",
            *remote,
        )  # fmt: skip
        return [LaunchCommand(argv=argv, hosts=target.hosts)]

    def env_match(self, target: JobTarget) -> tuple[tuple[str, str], ...]:
        return (("SLURM_JOB_ID", target.job_id),)

    def attribute(self, line: str) -> tuple[str, str] | None:
        return srun_error(line)


_SRUN_ERROR = re.compile(r"^srun: error: ([A-Za-z0-9._-]+): task (\d+): (.*)$")


def srun_error(line: str) -> tuple[str, str] | None:
    """(host, message) of srun's per-task error line ("srun: error: node3: task 3: Exited
    with exit code 1"), so that a node's failure gets its reason."""
    m = _SRUN_ERROR.match(line.strip())
    return (m.group(1), m.group(3)) if m else None
