"""What a cluster engine must provide for ``hangdoc collect`` to gather a whole job.

Everything engine-specific is two questions, answered by a :class:`Launcher`:

1. **Which nodes run the job?** ``resolve(job_id)`` asks the engine (Slurm's
   ``scontrol show job``; Kubernetes' pods of a PyTorchJob; a host list for ssh) and
   returns a :class:`JobTarget`, or raises CollectionError with what to do instead.
2. **How is a command run on each of them, next to the job?** ``commands(target, argv)``
   returns the local command lines that run ``argv`` once per node: one ``srun`` for
   all nodes, or one ``kubectl exec`` / ``ssh`` per node (``LaunchCommand.hosts`` says
   which nodes each one reaches).

The rest is shared (collectors/launchers/engine.py): starting those commands, reading
the framed lines every node writes on its stdout (stream.py), per-node progress,
deadlines, failures, archives, and the job manifest. A new engine is one module with
one Launcher subclass (docs/launchers.md walks through Kubernetes and ssh).
"""

from __future__ import annotations

import abc
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from hangdoc.errors import CollectionError

# Each engine query (scontrol, kubectl get) is bounded: a hung controller must not hang
# the person on call.
QUERY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class JobTarget:
    """A running job as its engine describes it."""

    launcher: str
    job_id: str
    hosts: tuple[str, ...]
    name: str | None = None
    state: str | None = None
    details: dict[str, str] = field(default_factory=dict)  # engine-specific (NodeList...)


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    """One local command line that runs the node collector on ``hosts``."""

    argv: tuple[str, ...]
    hosts: tuple[str, ...]


class Launcher(abc.ABC):
    """An engine that can run a command on every node of a job (see the module doc)."""

    name: ClassVar[str]
    # How many LaunchCommands may run at once (per-node engines: ssh, kubectl exec).
    max_parallel: ClassVar[int] = 64
    # The environment variable that holds, on a node, the name the engine gives it (the
    # name ``resolve`` returns), when one command reaches many nodes; per-node commands
    # pass ``--node-name HOST`` themselves.
    node_name_env: ClassVar[str | None] = None

    @abc.abstractmethod
    def resolve(self, job_id: str) -> JobTarget:
        """The job's nodes; CollectionError when it is unknown or not running."""

    @abc.abstractmethod
    def commands(self, target: JobTarget, remote: Sequence[str]) -> list[LaunchCommand]:
        """Command lines that run ``remote`` once on every node of ``target``."""

    def env_match(self, target: JobTarget) -> tuple[tuple[str, str], ...]:
        """Environment values that mark the job's own processes on a shared node, so that
        ``--all`` on the node does not pick up another job's ranks."""
        return ()

    def attribute(self, line: str) -> tuple[str, str] | None:
        """(host, message) when a line the launch command wrote on stderr is about one
        node (srun: "error: node3: task 3: Exited with exit code 1")."""
        return None

    def stop(self, proc: subprocess.Popen[str]) -> None:
        """End a launch command that outlived its deadline (never the job itself)."""
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def run_query(argv: Sequence[str], what: str, timeout_s: float = QUERY_TIMEOUT_S) -> str:
    """Run an engine query; its stdout, or CollectionError naming the command and why."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise CollectionError(
            f"{argv[0]} not found: cannot ask for {what}",
            help_text=f"Run hangdoc where the job's engine tools ({argv[0]}) are installed, "
            "e.g. on a login node of the cluster.",
        ) from None
    except subprocess.TimeoutExpired:
        raise CollectionError(
            f"`{' '.join(argv)}` did not answer within {timeout_s:g}s",
            help_text="The controller may be overloaded or down; try again in a minute.",
        ) from None
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise CollectionError(
            f"`{' '.join(argv)}` failed (exit {done.returncode}): "
            + (why[-1] if why else "no message")
        )
    return done.stdout
