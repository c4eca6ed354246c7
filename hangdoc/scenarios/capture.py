"""Hang a scenario for real and collect it: shared by the demo and fixtures/record.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hangdoc.scenarios.launch import launch


def capture(
    scenario: str,
    world_size: int,
    dump_dir: Path,
    *,
    torchrun: bool = False,
    samples: int = 2,
    interval_s: float = 1.0,
    ready_timeout_s: float = 180.0,
) -> list[int]:
    """Run the scenario until every rank is blocked, collect it into ``dump_dir``, kill it.

    Returns the pids that were collected.
    """
    from hangdoc.collectors.collect import CollectOptions, run_collect

    with (
        tempfile.TemporaryDirectory(prefix=f"hangdoc-{scenario}-") as workdir,
        launch(scenario, world_size, Path(workdir), torchrun=torchrun) as job,
    ):
        job.wait_ready(timeout=ready_timeout_s)
        if torchrun:
            assert job.agent is not None
            pids = [job.agent.pid]
        else:
            pids = [p.pid for p in job.procs if p.poll() is None]
        run_collect(
            CollectOptions(pids=tuple(pids), out=dump_dir, samples=samples, interval_s=interval_s)
        )
    return pids
