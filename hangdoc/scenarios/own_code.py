"""Scenarios in which the job names things its own way: ``python train.py own-…``.

Real jobs have their own checkpoint writers, validation routines, metric reporters and
callbacks; no catalog of library frames lists them. In each scenario here the culprit (the
last rank) does something the others do not, under the job's own names, and every rank
prints ordinary log lines, so a hang can be diagnosed from the stacks, from the logs, or
from both. The launcher copies this file as the job's train.py and job.py beside it as
jobkit.py (the helpers: init, ready, rank...).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from hangdoc.scenarios.job import culprit, init, main, rank, ready, train_step, world
else:  # in the job's folder: the launcher's copy of job.py
    from jobkit import culprit, init, main, rank, ready, train_step, world

_FOREVER = threading.Event()


def log(message: str) -> None:
    print(f"[rank{rank()}] {message}", flush=True)


def train_epoch(model: torch.nn.Module, epoch: int, steps: int) -> None:
    for step in range(steps):
        loss = train_step(model)
        for param in model.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad)
        log(f"epoch {epoch} step {step} loss {float(loss):.4f}")


# --- 1. a checkpoint writer of the job's own, blocked opening its shard file -----------


class ShardWriter:
    """Writes this rank's shard of the model; the culprit's target is a FIFO that nobody
    reads (a stalled mount behaves alike: open() never returns)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def persist_shard(self, model: torch.nn.Module, step: int) -> None:
        folder = self.root / f"step_{step}"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"shard{rank()}.bin"
        if rank() == culprit():
            os.mkfifo(target)
            ready("open of a shard file")
        log(f"writing shard {rank()} to {target} ...")
        with open(target, "wb") as handle:
            torch.save(model.state_dict(), handle)
        log(f"wrote shard {rank()} ({target.stat().st_size} bytes)")


def scenario_own_checkpoint() -> None:
    init()
    model = torch.nn.Linear(16, 4)
    train_epoch(model, 0, 3)
    workdir = Path(os.environ.get("HANGDOC_READY_DIR", ".")).parent
    ShardWriter(workdir / "ckpt").persist_shard(model, 3)
    if rank() != culprit():
        ready("barrier after the shards")
    dist.barrier()


# --- 2. a validation routine of its own on some ranks ----------------------------------


def run_val_epoch(model: torch.nn.Module, epoch: int) -> None:
    """Validation of the job's own: scores its batches and gathers them from every rank;
    only the culprit's epoch-end condition leads here."""
    log(f"validating epoch {epoch} on 4 batches ...")
    scores = [float(model(torch.randn(2, 16)).mean()) for _ in range(4)]
    gathered: list[object] = [None] * world()
    ready("validation gather")
    dist.all_gather_object(gathered, scores)
    log(f"validation epoch {epoch} done")


def scenario_own_validation() -> None:
    init()
    model = torch.nn.Linear(16, 4)
    train_epoch(model, 0, 3)
    if rank() == culprit():  # a rank-dependent "is it time to validate" check
        run_val_epoch(model, 0)
    else:
        ready("next epoch's gradient all_reduce")
    train_epoch(model, 1, 3)


# --- 3. a metrics gather of its own ------------------------------------------------------


class MetricsReporter:
    """Aggregates training metrics across ranks every ``every`` steps."""

    def __init__(self, every: int) -> None:
        self.every = every

    def maybe_report(self, step: int, loss: float) -> None:
        if step % self.every:
            return
        log(f"reporting metrics for step {step} ...")
        values = torch.tensor([loss])
        out = [torch.zeros(1) for _ in range(world())]
        ready("metrics all_gather")
        dist.all_gather(out, values)
        log(f"metrics step {step}: mean loss {float(torch.cat(out).mean()):.4f}")


def scenario_metrics_gather() -> None:
    init()
    model = torch.nn.Linear(16, 4)
    # The culprit's reporter was built with another interval (a per-rank config value).
    reporter = MetricsReporter(every=2 if rank() == culprit() else 1000)
    for step in range(1, 4):
        loss = train_step(model)
        log(f"step {step} loss {float(loss):.4f}")
        reporter.maybe_report(step, float(loss))
        if rank() != culprit() and step == 2:
            ready("gradient all_reduce")
        for param in model.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad)


# --- 4. per-rank data counts that disagree, visible in the logs ------------------------


def shard_batches(total: int, batch_size: int) -> list[torch.Tensor]:
    """This rank's batches after a per-rank quality filter (the culprit's drops some)."""
    mine = total // world() - (4 if rank() == culprit() else 0)
    return [torch.randn(batch_size, 16) for _ in range(mine // batch_size)]


def scenario_data_count() -> None:
    init()
    model = torch.nn.Linear(16, 4)
    batches = shard_batches(96, 4)
    log(f"dataset ready: {len(batches) * 4} samples, {len(batches)} batches per epoch")
    for step, batch in enumerate(batches):
        model(batch).sum().backward()
        for param in model.parameters():
            if param.grad is not None:
                if rank() != culprit() and step == len(batches) - 1:
                    ready("last step's gradient all_reduce")
                dist.all_reduce(param.grad)
        log(f"epoch 0 step {step}")
    log("epoch 0 finished")
    if rank() == culprit():
        ready("end-of-epoch barrier")
    dist.barrier()


# --- 5. a histogram whose size differs on one rank, visible in the logs -----------------


def reduce_histogram(hist: torch.Tensor, bucket: int = 3) -> None:
    """All-reduce a histogram in buckets (as gradient buckets are): the number of
    collectives follows its length."""
    for start in range(0, hist.numel(), bucket):
        chunk = hist[start : start + bucket].clone()
        if rank() != culprit() and start + bucket >= hist.numel():
            ready("last bucket's all_reduce")
        dist.all_reduce(chunk)


def scenario_size_mismatch() -> None:
    init()
    classes = 10
    labels = torch.arange(classes).repeat(3)
    if rank() == culprit():
        labels = labels[labels < classes - 1]  # its shard lacks the last class
    hist = torch.bincount(labels)  # no minlength: the size follows the data
    log(f"label histogram: {hist.numel()} bins, {int(hist.sum())} labels")
    reduce_histogram(hist.float())
    log("histogram reduced")
    if rank() == culprit():
        ready("barrier after the histogram")
    dist.barrier()


# --- 6. a barrier inside a callback of its own ------------------------------------------


class CheckpointOnImprovement:
    """An epoch-end callback: when the rank's own validation loss improved, it syncs every
    rank before saving. The loss is per rank, so only some ranks enter the barrier."""

    def __init__(self) -> None:
        self.best = float("inf")

    def on_epoch_end(self, epoch: int, val_loss: float) -> None:
        log(f"epoch {epoch} end: val_loss {val_loss:.3f}")
        if val_loss < self.best:
            self.best = val_loss
            ready("callback barrier")
            dist.barrier()
            log("synced for the best model")


def scenario_callback_barrier() -> None:
    init()
    model = torch.nn.Linear(16, 4)
    callback = CheckpointOnImprovement()
    callback.best = 0.4
    for epoch in range(2):
        train_epoch(model, epoch, 2)
        improved = epoch == 1 and rank() == culprit()  # only its own shard's loss fell
        if epoch == 1 and not improved:
            ready("next epoch's gradient all_reduce")
        callback.on_epoch_end(epoch, 0.3 if improved else 0.5)
    train_epoch(model, 2, 2)


SCENARIOS: dict[str, Callable[[], None]] = {
    "own-checkpoint": scenario_own_checkpoint,
    "own-validation": scenario_own_validation,
    "own-metrics-gather": scenario_metrics_gather,
    "own-data-count": scenario_data_count,
    "own-size-mismatch": scenario_size_mismatch,
    "own-callback-barrier": scenario_callback_barrier,
}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], SCENARIOS))
