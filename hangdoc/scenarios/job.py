"""One rank of a scenario job: ``python train.py SCENARIO``.

Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment (torchrun or
``launch.py`` set them) and HANGDOC_READY_DIR, where it writes ``ready-<rank>`` just
before the call that blocks. The culprit is always the last rank.
"""

from __future__ import annotations

import io
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

# Long enough that every hang outlasts collection; short enough that a leaked job ends.
PG_TIMEOUT = timedelta(seconds=int(os.environ.get("HANGDOC_SCENARIO_TIMEOUT", "900")))
_FOREVER = threading.Event()


def rank() -> int:
    return int(os.environ["RANK"])


def world() -> int:
    return int(os.environ["WORLD_SIZE"])


def culprit() -> int:
    return world() - 1


def ready(tag: str = "") -> None:
    """Tell the launcher this rank is about to block."""
    directory = os.environ.get("HANGDOC_READY_DIR")
    if directory:
        marker = Path(directory) / f"ready-{rank()}"
        marker.with_suffix(".tmp").write_text(tag or "ready")
        os.replace(marker.with_suffix(".tmp"), marker)


def init() -> None:
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)
    warm = torch.ones(4)
    dist.all_reduce(warm)


class StuckFile(io.RawIOBase):
    """A file whose write never returns: a checkpoint target on a filesystem that hangs."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        ready("in checkpoint write")
        _FOREVER.wait()
        return len(data)


def save_checkpoint(model: torch.nn.Module, step: int) -> None:
    state = {"step": step, "model": model.state_dict()}
    torch.save(state, StuckFile())


def train_step(model: torch.nn.Module) -> torch.Tensor:
    loss = model(torch.randn(8, 16)).sum()
    loss.backward()
    return loss


def scenario_checkpoint(op: str) -> None:
    """The culprit saves a checkpoint that never finishes; the others go on to ``op``."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        save_checkpoint(model, step=100)
    ready(op)
    if op == "barrier":
        dist.barrier()
    else:
        out = [torch.zeros(4) for _ in range(world())]
        dist.all_gather(out, torch.ones(4))


class StallingDataset(Dataset[torch.Tensor]):
    """Items past the first few block in the worker, as a read from a dead mount does."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        if index >= 4:
            _FOREVER.wait()
        return torch.full((4,), float(index))


def _ignore_sigterm(_worker_id: int) -> None:
    # Workers stuck in uninterruptible I/O do not die on SIGTERM either.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def scenario_dataloader_teardown() -> None:
    """The culprit stops iterating early; tearing its workers down blocks on a stuck worker."""
    init()
    model = torch.nn.Linear(16, 4)
    if rank() == culprit():
        # torch waits MP_STATUS_CHECK_INTERVAL (5 s) per worker join; stretch it so that
        # the stall outlasts collection (in the field the worker never exits at all).
        import torch.utils.data._utils as data_utils

        data_utils.MP_STATUS_CHECK_INTERVAL = 3600.0
        loader = DataLoader(
            StallingDataset(), batch_size=2, num_workers=2, worker_init_fn=_ignore_sigterm
        )
        batches: Iterator[torch.Tensor] = iter(loader)
        for _ in range(2):
            next(batches)
        ready("dataloader teardown")
        del batches  # max_steps reached: the iterator is dropped and shuts its workers down
    else:
        ready("all_reduce")
    grads = torch.ones(4)
    train_step(model)
    dist.all_reduce(grads)


def scenario_killed() -> None:
    """The culprit is killed (SIGKILL, as by the OOM killer while loading data) before it
    joins the process group; the others wait for it in init_process_group.

    A rank killed after init does not make a durable hang with gloo: the survivors see its
    sockets close (or, with lazy init, get 'connection refused') and raise within seconds,
    where NCCL survivors would wait for the timeout. Before init nothing can tell them.
    """
    if rank() == culprit():
        os.kill(os.getpid(), signal.SIGKILL)
    # Create the store first (rank 0 does not wait for the others), so that 'ready' is
    # said just before the call that blocks: the group creation that needs every rank.
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world(),
        is_master=rank() == 0,
        timeout=PG_TIMEOUT,
        wait_for_workers=False,
    )
    ready("init_process_group")
    dist.init_process_group("gloo", store=store, rank=rank(), world_size=world(), timeout=PG_TIMEOUT)
    dist.all_reduce(torch.ones(4))


def evaluate(model: torch.nn.Module) -> float:
    """Rank-0-style evaluation that gathers a metric no other rank gathers."""
    metric = float(model(torch.randn(4, 16)).mean())
    gathered: list[object] = [None] * world()
    ready("eval gather")
    dist.all_gather_object(gathered, {"acc": metric})
    return metric


def scenario_eval_mismatch() -> None:
    """The culprit runs evaluation and gathers a metric while the others wait in a barrier."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        evaluate(model)
    else:
        ready("barrier")
        dist.barrier()


def scenario_slow() -> None:
    """A healthy job whose steps are slow and uneven: it must not be called hung."""
    init()
    model = torch.nn.Linear(16, 4)
    rng = random.Random(rank())
    step = 0
    while True:
        time.sleep(0.15 + rng.random() * 0.25 + (0.2 if rank() == culprit() else 0.0))
        train_step(model)
        grads = torch.ones(4)
        dist.all_reduce(grads)
        step += 1
        print(f"rank {rank()} step {step} loss {float(grads[0]):.3f}", flush=True)
        if step == 3:
            ready("training")


SCENARIOS: dict[str, Callable[[], None]] = {
    "checkpoint": lambda: scenario_checkpoint("all_gather"),
    "checkpoint-barrier": lambda: scenario_checkpoint("barrier"),
    "dataloader-teardown": scenario_dataloader_teardown,
    "killed": scenario_killed,
    "eval-mismatch": scenario_eval_mismatch,
    "slow": scenario_slow,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in SCENARIOS:
        print(f"usage: train.py {{{','.join(SCENARIOS)}}}", file=sys.stderr)
        return 2
    SCENARIOS[argv[0]]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
