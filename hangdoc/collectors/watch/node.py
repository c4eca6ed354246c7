"""The stall handler of a node of a Slurm job watched from a login node.

A node does not collect on its own: a hang of a distributed job is a job-wide event, and
the login node's watcher collects every node at once (``collect --slurm-job``'s engine)
into one report. So a node only says, in framed lines on its stdout (stream.py, the
protocol of whole-job collection, kind ``watch``):

* ``stalled <json>``: its ranks have been quiet for ``stall_after`` and their stacks did
  not move (the JSON: when it went quiet, which ranks, which ended and how). Said again
  after every further ``stall_after`` of quiet, so the login node can look again when
  the first analysis found the job merely slow;
* ``moving <why>``: something moved after a stall (a new report may follow);
* ``say <text>``: a line for the login node's watch.log (ranks found, ranks ended);
* ``ended <why>``: its ranks are gone.

Each line stays under srun's line length: the JSON drops details before it gets long.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hangdoc.collectors import procfs
from hangdoc.collectors.launchers.stream import Emitter
from hangdoc.collectors.watch.stall import Outcome, Stall

MAX_JSON = 880
PROC = Path("/proc")


def node_collect_running(job_id: str) -> bool:
    """Whether a ``hangdoc node-collect`` restricted to this Slurm job runs on this node."""
    marker = f"SLURM_JOB_ID={job_id}".encode()
    for pid in procfs.process_table():
        raw = _cmdline(pid)
        if b"node-collect" in raw and marker in raw.split(b"\0"):
            return True
    return False


def _cmdline(pid: int) -> bytes:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def compact(summary: dict[str, Any]) -> str:
    """The stall's JSON, shortened (notes, then output paths, then exits) to fit a line."""
    doc = dict(summary)
    text = json.dumps(doc, separators=(",", ":"))
    for drop in ("notes", "outputs", "exited", "ranks"):
        if len(text) <= MAX_JSON:
            break
        if drop == "outputs":
            doc["exited"] = [{k: v for k, v in e.items() if k != "outputs"} for e in doc["exited"]]
        else:
            doc[drop] = []
        text = json.dumps(doc, separators=(",", ":"))
    return text


class NodeHandler:
    """See the module doc."""

    def __init__(self, emitter: Emitter, job_id: str | None, grace_s: float) -> None:
        self.emitter = emitter
        self.told = False
        self.job_id = job_id
        self.grace_s = grace_s
        self.collect_seen = -float("inf")

    def collecting(self) -> bool:
        """A ``hangdoc node-collect`` of this job runs here, or ran a moment ago: the login
        node collects after our ``stalled``, and its probes (a lookup in the job's store,
        the flight recorder) move the ranks' I/O a little. Asked only after a stall."""
        now = time.monotonic()
        if self.job_id is not None and node_collect_running(self.job_id):
            self.collect_seen = now
        return now - self.collect_seen <= self.grace_s

    def say(self, text: str) -> None:
        self.emitter.watch("say", text)

    def stalled(self, stall: Stall) -> Outcome:
        self.emitter.watch("stalled", compact(stall.summary(self.emitter.host)))
        self.told = True
        return Outcome.RECHECK  # said again after another quiet period

    def resumed(self, reasons: list[str]) -> None:
        if self.told:
            self.told = False
            self.emitter.watch("moving", reasons[0] if reasons else "")
