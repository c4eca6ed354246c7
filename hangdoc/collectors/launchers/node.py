"""The node side of a whole-job collection: what ``hangdoc node-collect`` runs on each node.

The launcher starts this once per node (srun, kubectl exec, ssh). It says hello with its
clock (the launcher estimates the node's clock offset from it), collects the node's ranks
with the ordinary node collector (``--all``, restricted to the job's processes), lets the
caller's finalizer write the node summary, and then either

* leaves the dump in ``OUT/<host>`` when it sees the launcher's probe file there (a file
  system both share: nothing to send), or
* sends the dump back as a ``.tar.gz`` in framed base64 lines on stdout (``stream``), or
  only its manifest and summary (``summary``: the raw files stay on the node, in a
  directory the ``done`` line names).

It always ends with a ``done`` line, whatever failed; the exit status is 0 when a dump was
made (complete or partial) and the CollectionError's code otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hangdoc.collectors.collect import CollectOptions, Finalizer, run_collect
from hangdoc.collectors.dumpformat import MANIFEST_NAME
from hangdoc.collectors.jobformat import SUMMARY_NAME, TransferMode
from hangdoc.collectors.launchers.stream import Emitter
from hangdoc.common.archive import write_archive
from hangdoc.errors import HangdocError

PROBE_NAME = ".hangdoc-probe"


@dataclass(frozen=True, slots=True)
class NodeOptions:
    out_parent: Path  # the launcher's output directory (as the launcher sees it)
    probe: str  # the token the launcher wrote into OUT/.hangdoc-probe
    transfer: TransferMode
    collect: CollectOptions  # its ``out`` is chosen here


def sees_probe(out_parent: Path, token: str) -> bool:
    """True when this node reads the launcher's probe file: OUT is on a shared file system."""
    try:
        return (out_parent / PROBE_NAME).read_text(encoding="utf-8").strip() == token
    except (OSError, UnicodeDecodeError):
        return False


class _FrameSink:
    """The collector's progress, as framed lines for the launcher."""

    def __init__(self, emitter: Emitter) -> None:
        self.emitter = emitter
        self.total = 0
        self.done = 0

    def start(self, total: int, description: str) -> None:
        self.total = total
        self.emitter.progress(0, total, description)

    def advance(self, description: str) -> None:
        self.done += 1
        self.emitter.progress(self.done, self.total, description)

    def warn(self, message: str) -> None:
        self.emitter.warn(message)


def _pack(dump_dir: Path, summary_only: bool) -> Path:
    """The dump (or its manifest and summary only) as a .tar.gz beside it."""
    only = (MANIFEST_NAME, SUMMARY_NAME) if summary_only else None
    return write_archive(dump_dir, dump_dir.with_name(dump_dir.name + ".tar.gz"), only=only)


def run_node(
    opts: NodeOptions, finalize: Finalizer | None, out: TextIO, name: str | None = None
) -> int:
    """Collect this node and report to the launcher through ``out``; see the module doc.
    ``name`` is the node's name as the launcher knows it (Slurm's SLURMD_NODENAME), which
    may differ from its host name."""
    emitter = Emitter(out, name or socket.gethostname())
    shared = sees_probe(opts.out_parent, opts.probe)
    emitter.hello(time.time(), shared)
    mode = ("shared" if shared else "stream") if opts.transfer == "auto" else opts.transfer
    if mode == "shared" and not shared:
        emitter.done(
            "failed", [], None,
            f"--transfer shared, but this node does not see {opts.out_parent} (it is not on "
            "a file system the launcher shares); use --transfer stream",
        )  # fmt: skip
        return 3
    scratch: Path | None = None
    if mode == "shared":
        dump_dir = opts.out_parent / emitter.host
    else:
        scratch = Path(tempfile.mkdtemp(prefix="hangdoc-node-"))
        dump_dir = scratch / emitter.host
    collect = dataclasses.replace(opts.collect, out=dump_dir, archive=False)
    try:
        result = run_collect(collect, _FrameSink(emitter), finalize)
    except HangdocError as exc:
        status = "partial" if (dump_dir / MANIFEST_NAME).is_file() else "failed"
        if status == "failed":
            emitter.done("failed", [], None, str(exc))
            _cleanup(scratch)
            return exc.exit_code
        text = f"partial dump: {exc}"
    except Exception as exc:  # a bug must still end with a done line
        emitter.done("failed", [], None, f"{type(exc).__name__}: {exc}")
        _cleanup(scratch)
        return 1
    else:
        status = "ok" if result.manifest["complete"] else "partial"
        samples = len(result.manifest["samples"])
        text = f"{len(result.manifest['ranks'])} process(es) x {samples} sample(s)"
        if not result.manifest["ranks"]:  # every rank here belongs to another job
            why = "; ".join(result.manifest["warnings"][-2:]) or "no rank process found"
            emitter.done("failed", [], str(dump_dir), f"no rank of this job here: {why}")
            _cleanup(scratch)
            return 3
    ranks = sorted(_ranks(dump_dir))
    if mode == "shared":
        emitter.done(status, ranks, str(dump_dir), text)
        return 0
    try:
        archive = _pack(dump_dir, summary_only=mode == "summary")
        with archive.open("rb") as stream:
            emitter.data(stream)
        archive.unlink()
    except (OSError, HangdocError) as exc:
        emitter.done("failed", ranks, str(dump_dir), f"could not send the dump: {exc}")
        return 3
    if mode == "summary":
        emitter.done(status, ranks, str(dump_dir), text + "; raw files left on the node")
    else:
        emitter.done(status, ranks, None, text)
        _cleanup(scratch)
    return 0


def _ranks(dump_dir: Path) -> list[int]:
    try:
        manifest = json.loads((dump_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [r["rank"] for r in manifest.get("ranks", []) if isinstance(r.get("rank"), int)]


def _cleanup(scratch: Path | None) -> None:
    if scratch is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(scratch)
