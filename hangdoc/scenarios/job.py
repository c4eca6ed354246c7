"""One rank of a scenario job: ``python train.py SCENARIO``.

Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment (torchrun or
``launch.py`` set them) and HANGDOC_READY_DIR, where it writes ``ready-<rank>`` just
before the call that blocks. The culprit is always the last rank.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import IO, Any, cast

import torch
import torch.distributed as dist
from torch.distributed import TCPStore  # type: ignore[attr-defined]
from torch.utils.data import DataLoader, Dataset

# Long enough that every hang outlasts collection; short enough that a leaked job ends.
PG_TIMEOUT = timedelta(seconds=int(os.environ.get("HANGDOC_SCENARIO_TIMEOUT", "900")))
# Healthy training steps (a print and an all_reduce each, STEP_S apart) before the hang, so
# that a watcher started with the job first sees it move (``hangdoc watch``'s tests).
WARMUP_STEPS = int(os.environ.get("HANGDOC_SCENARIO_WARMUP_STEPS", "0"))
WARMUP_STEP_S = float(os.environ.get("HANGDOC_SCENARIO_STEP_S", "0.5"))
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


def ready_once_in(function: str, file_suffix: str, tag: str) -> None:
    """Tell the launcher this rank is ready once its main thread is inside ``function``
    (of a file ending in ``file_suffix``): for a wait that library code reaches only after
    work of its own (imports, hashing), so that a loaded machine cannot sample the rank on
    its way there. The watching thread ends once it has told."""
    main = threading.main_thread().ident

    def watch() -> None:
        while True:
            frame = sys._current_frames().get(main or 0)
            while frame is not None:
                code = frame.f_code
                if code.co_name == function and code.co_filename.endswith(file_suffix):
                    ready(tag)
                    return
                frame = frame.f_back
            time.sleep(0.02)

    threading.Thread(target=watch, name="ready-watch", daemon=True).start()


def init() -> None:
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)
    warm = torch.ones(4)
    dist.all_reduce(warm)
    for step in range(WARMUP_STEPS):
        time.sleep(WARMUP_STEP_S)
        dist.all_reduce(warm)
        print(f"rank {rank()} warm-up step {step + 1}/{WARMUP_STEPS}", flush=True)


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
    torch.save(state, cast(IO[bytes], StuckFile()))


def train_step(model: torch.nn.Module) -> torch.Tensor:
    loss: torch.Tensor = model(torch.randn(8, 16)).sum()
    loss.backward()  # type: ignore[no-untyped-call]
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
    store = TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world(),
        is_master=rank() == 0,
        timeout=PG_TIMEOUT,
        wait_for_workers=False,
    )
    ready("init_process_group")
    dist.init_process_group(
        "gloo", store=store, rank=rank(), world_size=world(), timeout=PG_TIMEOUT
    )
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


def scenario_slow_silent() -> None:
    """A healthy job that prints nothing at all: a step every few seconds (the sleep
    stands for a long forward/backward), an all_reduce in each. Only its stacks and its
    CPU say it is alive."""
    init()
    model = torch.nn.Linear(16, 4)
    rng = random.Random(rank())
    step = 0
    while True:
        time.sleep(WARMUP_STEP_S * (0.8 + 0.4 * rng.random()))
        train_step(model)
        dist.all_reduce(torch.ones(4))
        step += 1
        if step == 2:
            ready("training")


class HiccupFile(io.RawIOBase):
    """A checkpoint target whose first write waits ``seconds`` (storage that stops for a
    while and comes back), then takes the rest at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.seconds:
            time.sleep(self.seconds)
            self.seconds = 0.0
        return len(data)


def scenario_stall_twice() -> None:
    """A job that hangs, resumes and hangs again: the culprit's checkpoint writes stall for
    HANGDOC_SCENARIO_STALL_S seconds (default 60) twice, with training steps before each;
    the others wait in the barrier after the save. The job then ends."""
    stall_s = float(os.environ.get("HANGDOC_SCENARIO_STALL_S", "60"))
    init()
    model = torch.nn.Linear(16, 4)
    for episode in (1, 2):
        for step in range(6):
            time.sleep(WARMUP_STEP_S)
            train_step(model)
            dist.all_reduce(torch.ones(4))
            print(f"rank {rank()} episode {episode} step {step}", flush=True)
        if rank() == culprit():
            ready(f"checkpoint write {episode}")
            torch.save(model.state_dict(), cast(IO[bytes], HiccupFile(stall_s)))
        else:
            ready(f"barrier {episode}")
        dist.barrier()
    print(f"rank {rank()} done", flush=True)


def scenario_throughput() -> None:
    """A healthy job that runs as fast as it can: a forward and backward pass of a small MLP
    and an all_reduce of each gradient per step; every 20 steps it prints its step count
    and the time (scripts/bench_watch.py measures steps per minute from these lines)."""
    init()
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256)
    )
    ready("training")
    step = 0
    while True:
        model(torch.randn(64, 256)).sum().backward()
        for param in model.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad)
        step += 1
        if step % 20 == 0:
            print(f"step {step} {time.time():.3f}", flush=True)


def scenario_secrets() -> None:
    """A checkpoint hang in a job that leaks credentials, for the redaction tests.

    Every environment value whose name starts with TORCH_PLANT_ is printed to stdout and
    stderr (as a careless debug print does) and carried in a thread's name (py-spy dumps
    it), and it sits in the environment hangdoc collects (TORCH_* is allow-listed).
    """
    planted = sorted(v for k, v in os.environ.items() if k.startswith("TORCH_PLANT_"))
    for value in planted:
        print(f"config: {value}", flush=True)
        print(f"debug: {value}", file=sys.stderr, flush=True)
    for index, value in enumerate(planted):
        name = f"uploader-{index} {value}"
        threading.Thread(target=_FOREVER.wait, name=name, daemon=True).start()
    scenario_checkpoint("barrier")


SCENARIOS: dict[str, Callable[[], None]] = {
    "checkpoint": lambda: scenario_checkpoint("all_gather"),
    "checkpoint-barrier": lambda: scenario_checkpoint("barrier"),
    "dataloader-teardown": scenario_dataloader_teardown,
    "killed": scenario_killed,
    "eval-mismatch": scenario_eval_mismatch,
    "slow": scenario_slow,
    "slow-silent": scenario_slow_silent,
    "stall-twice": scenario_stall_twice,
    "throughput": scenario_throughput,
    "secrets": scenario_secrets,
}


# --- Causes that live in the stacks and the node (issue 7) -----------------------------
# Each scenario writes its ready marker just before the call that blocks on that rank.


class ForkLockDataset(Dataset[torch.Tensor]):
    """Items are read under a cache lock. The DataLoader forked its workers while a
    cache-warming thread held that lock: each worker inherits it locked, with no thread
    left to release it."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        ready("worker blocked on a lock inherited through fork")
        with self.lock:
            return torch.full((4,), float(index))


def scenario_dataloader_worker() -> None:
    """The culprit waits for its first batch; its workers deadlock on a fork-inherited lock."""
    init()
    model = torch.nn.Linear(16, 4)
    if rank() == culprit():
        cache_lock = threading.Lock()
        held = threading.Event()

        def warm_cache() -> None:
            # Held until well after the workers forked: with a short hold a loaded machine
            # could fork them after the release, and the job then ran on instead of hanging.
            with cache_lock:
                held.set()
                time.sleep(120.0)

        threading.Thread(target=warm_cache, name="cache-warmer", daemon=True).start()
        held.wait()
        loader = DataLoader(ForkLockDataset(cache_lock), batch_size=2, num_workers=2)
        next(iter(loader))
    else:
        ready("all_reduce")
    train_step(model)
    dist.all_reduce(torch.ones(4))


class MetricsLogger:
    """Aggregates metrics under one lock and writes them under another; a background
    flusher takes the two in the opposite order (the events make the race certain)."""

    def __init__(self) -> None:
        self.metrics_lock = threading.Lock()
        self.writer_lock = threading.Lock()
        self.values: list[float] = []
        self.flusher_writing = threading.Event()
        self.main_logging = threading.Event()
        threading.Thread(target=self.flush_forever, name="metrics-flusher", daemon=True).start()

    def flush_forever(self) -> None:
        with self.writer_lock:
            self.flusher_writing.set()
            self.main_logging.wait()
            with self.metrics_lock:
                self.values.clear()

    def log(self, value: float) -> None:
        with self.metrics_lock:
            self.values.append(value)
            self.main_logging.set()
            self.flusher_writing.wait()
            ready("lock deadlock")
            with self.writer_lock:
                print(self.values)


def scenario_lock_deadlock() -> None:
    """The culprit's main thread and its metrics flusher deadlock on two locks."""
    init()
    model = torch.nn.Linear(16, 4)
    loss = train_step(model)
    if rank() == culprit():
        MetricsLogger().log(float(loss))
    else:
        ready("all_reduce")
    dist.all_reduce(torch.ones(4))


class LogScrubber:
    """Redacts log lines in a background thread with a regular expression that backtracks
    catastrophically on some lines: ``re`` holds the GIL for the whole match."""

    PATTERN = re.compile(r"^(\w+\s?)*$")

    def __init__(self) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self.scrub_forever, name="log-scrubber", daemon=True).start()

    def scrub_forever(self) -> None:
        while True:
            line = self.lines.get()
            self.PATTERN.match(line)


def scenario_gil_held() -> None:
    """The culprit's log scrubber holds the GIL forever; its main thread starves."""
    init()
    model = torch.nn.Linear(16, 4)
    if rank() == culprit():
        scrubber = LogScrubber()
        ready("gil held")
        scrubber.lines.put("token " * 4 + "x" * 40 + "!")
        for _ in range(1000):
            train_step(model)
    else:
        ready("all_reduce")
    train_step(model)
    dist.all_reduce(torch.ones(4))


def save_checkpoint_to(handle: Any, model: torch.nn.Module) -> None:
    torch.save(model.state_dict(), handle)


def scenario_io_stall() -> None:
    """The culprit writes its checkpoint to storage that stops answering (D state)."""
    from hangdoc.scenarios.storage import freeze, mount_stuck_storage

    init()
    model = torch.nn.Linear(1024, 1024)
    if rank() == culprit():
        mount = mount_stuck_storage(PG_TIMEOUT.total_seconds())
        handle = (mount / "model.pt").open("wb")
        handle.write(b"\0" * 65536)
        handle.flush()
        freeze(mount)
        ready("checkpoint write")
        save_checkpoint_to(handle, model)
    else:
        ready("barrier")
    dist.barrier()


class ThrottledFile(io.RawIOBase):
    """A checkpoint target that accepts about 256 KiB/s (an object-store upload)."""

    def __init__(self, path: Path, rate: float = 256 * 1024) -> None:
        self.file = path.open("wb")
        self.rate = rate

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        for start in range(0, len(view), 16384):
            chunk = view[start : start + 16384]
            self.file.write(chunk)
            self.file.flush()
            time.sleep(len(chunk) / self.rate)
        return len(view)


def scenario_slow_save() -> None:
    """The culprit saves a checkpoint slowly but steadily: slow, not hung."""
    init()
    model = torch.nn.Linear(2048, 2048)
    if rank() == culprit():
        target = Path(os.environ["HANGDOC_READY_DIR"]).parent / "model.pt"
        slow_target: Any = ThrottledFile(target)
        ready("slow save")
        torch.save(model.state_dict(), slow_target)
    else:
        ready("barrier")
    dist.barrier()


def send_forward(tensor: torch.Tensor) -> None:
    dist.send(tensor, rank() + 1)


def recv_forward(tensor: torch.Tensor) -> None:
    dist.recv(tensor, rank() - 1)


def send_backward(tensor: torch.Tensor) -> None:
    dist.send(tensor, rank() - 1)


def recv_backward(tensor: torch.Tensor) -> None:
    dist.recv(tensor, rank() + 1)


def pipeline_step(microbatches: int, last_one_f_one_b: bool) -> float:
    """One pipeline step, rank = stage. All-forward-then-all-backward, except that the last
    stage may run 1F1B (sends each gradient back as soon as it has it)."""
    act = torch.ones(4096)
    first, last = rank() == 0, rank() == world() - 1
    if last and last_one_f_one_b:
        for _ in range(microbatches):
            recv_forward(act)
            send_backward(act * 0.5)
        return float(act.mean())
    for _ in range(microbatches):
        if not first:
            recv_forward(act)
        if not last:
            send_forward(act)
    for _ in range(microbatches):
        if not last:
            recv_backward(act)
        if not first:
            send_backward(act)
    return float(act.mean()) if last else -1.0


def scenario_p2p_deadlock() -> None:
    """Stages disagree on the schedule: the last runs 1F1B, the others GPipe. Stage 2 sends
    activations to 3 while 3 sends gradients to 2: a send/send cycle."""
    init()
    ready("pipeline step")
    pipeline_step(4, last_one_f_one_b=True)


def scenario_pipeline_healthy() -> None:
    """Story (d): a healthy pipeline. Non-last stages print loss -1.0 (only the last stage
    computes the loss) and memory grows in the first step only (activation stash)."""
    init()
    stash: list[torch.Tensor] = []
    step = 0
    while True:
        if not stash:
            stash.extend(torch.zeros(1 << 18) for _ in range(8))
        loss = pipeline_step(4, last_one_f_one_b=False)
        step += 1
        print(f"stage {rank()} step {step} loss {loss:.3f} stash {len(stash)}", flush=True)
        time.sleep(0.15)
        if step == 3:
            ready("pipeline training")


def batches_of_rank(total: int, batch_size: int) -> list[torch.Tensor]:
    """This rank's batches. The culprit's shard lost samples to a per-rank filter, and no
    DistributedSampler(drop_last=True) evens the counts out."""
    mine = total // world() - (batch_size if rank() == culprit() else 0)
    return [torch.randn(batch_size, 16) for _ in range(mine // batch_size)]


def train_one_epoch(model: torch.nn.Module, batches: list[torch.Tensor]) -> None:
    for step, batch in enumerate(batches):
        loss: torch.Tensor = model(batch).sum()
        if step == 3:
            ready("gradient all_reduce")
        loss.backward()  # type: ignore[no-untyped-call]


def scenario_uneven_ddp() -> None:
    """DDP: the culprit has fewer batches, finishes the epoch and waits in the end-of-epoch
    barrier while the others wait in DDP's gradient all_reduce."""
    init()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
    train_one_epoch(model, batches_of_rank(64, 4))
    ready("end-of-epoch barrier")
    dist.barrier()


def evaluate_shard(model: torch.nn.Module, n_batches: int) -> None:
    """Evaluation that gathers every batch's predictions from all ranks."""
    with torch.no_grad():
        for batch_idx in range(n_batches):
            preds = model(torch.randn(4, 16))
            gathered = [torch.zeros_like(preds) for _ in range(world())]
            if batch_idx == 3:
                ready("eval gather")
            dist.all_gather(gathered, preds)


def scenario_uneven_after_eval() -> None:
    """Story (a): training stalls right after evaluation. The validation set is split
    without padding: the culprit gets one batch more and still gathers predictions while
    the others are back in training, in DDP's gradient all_reduce."""
    init()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
    for _ in range(2):  # DDP rebuilds its buckets (a broadcast) in the second step
        model(torch.randn(4, 16)).sum().backward()
    evaluate_shard(model, 3 + (1 if rank() == culprit() else 0))
    loss: torch.Tensor = model(torch.randn(4, 16)).sum()
    ready("gradient all_reduce")
    loss.backward()  # type: ignore[no-untyped-call]


def gather_batch(batch: Any) -> Any:
    """Gather a (possibly nested) tuple of tensors from every rank, like accelerate's."""
    if isinstance(batch, tuple | list):
        return type(batch)(gather_batch(item) for item in batch)
    parts = [torch.zeros_like(batch) for _ in range(world())]
    dist.all_gather(parts, batch)
    return torch.cat(parts)


def evaluate_and_log(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for batch_idx in range(3):
            inputs, labels = torch.randn(4, 16), torch.arange(4)
            model(inputs)
            if rank() == culprit() and batch_idx == 1:
                ready("gather of an (inputs, labels) batch")
                gather_batch((inputs, labels))


def scenario_eval_gather_tuple() -> None:
    """Story (b): only the main process gathers an (inputs, labels) batch during
    evaluation, to log samples; the others finish evaluation and wait in a barrier."""
    init()
    model = torch.nn.Linear(16, 4)
    evaluate_and_log(model)
    if rank() != culprit():
        ready("barrier")
    dist.barrier()


def consolidate_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """ZeRO-3-style: every rank holds a shard of each parameter; gather the full ones."""
    full: dict[str, torch.Tensor] = {}
    for name, shard in model.state_dict().items():
        parts = [torch.zeros_like(shard) for _ in range(world())]
        dist.all_gather(parts, shard)
        full[name] = torch.cat(parts)
    return full


def save_final_model(model: torch.nn.Module, path: Path) -> None:
    torch.save(consolidate_state_dict(model), path)


def scenario_final_save() -> None:
    """Story (c): the final model save hangs on one rank: only it saves, and the save
    gathers the sharded weights; the others wait in the final barrier."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        ready("final save")
        save_final_model(model, Path(os.environ["HANGDOC_READY_DIR"]).parent / "final.pt")
    else:
        ready("final barrier")
    dist.barrier()


def average_gradients(model: torch.nn.Module) -> None:
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad)
            param.grad /= world()


def scenario_steps_per_epoch() -> None:
    """Story (e): the culprit computes steps per epoch without the world size, so it runs
    4x the steps: it waits in the gradient all_reduce of step 4 while the others finished
    the epoch and wait in the end-of-epoch barrier."""
    init()
    model = torch.nn.Linear(16, 4)
    dataset_len, batch_size = 64, 4
    if rank() == culprit():
        steps_per_epoch = dataset_len // batch_size
    else:
        steps_per_epoch = dataset_len // (batch_size * world())
    for step in range(steps_per_epoch):
        train_step(model)
        if step == steps_per_epoch // world():
            ready("gradient all_reduce")
        average_gradients(model)
    ready("end-of-epoch barrier")
    dist.barrier()


def write_shard(path: Path, batch: torch.Tensor) -> None:
    path.write_bytes(bytes(batch.contiguous().untyped_storage()))


def read_shard(path: Path) -> torch.Tensor:
    """Raw float32 rows of 16 (no pickle: a scenario reads nothing it could run)."""
    return torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.float32).view(-1, 16)


class ShardPrefetcher:
    """Reads the rank's data shards in a background thread, ahead of the training loop.
    A shard that cannot be read kills the thread (``threading.excepthook`` prints its
    traceback to stderr), and nothing puts the next batch: the loop waits for it forever."""

    def __init__(self, shards: list[Path]) -> None:
        self.batches: queue.Queue[torch.Tensor] = queue.Queue(maxsize=2)
        self.thread = threading.Thread(
            target=self.read_ahead, args=(shards,), name="shard-prefetcher", daemon=True
        )
        self.thread.start()

    def read_ahead(self, shards: list[Path]) -> None:
        for shard in shards:
            self.batches.put(read_shard(shard))

    def next_batch(self) -> torch.Tensor:
        return self.batches.get()


class StallDetector:
    """The job's own stall detector, as many training loops have one: when no step ended
    for ``after_s`` it prints every thread's stack to stderr (faulthandler), once. Minutes
    in a real job; short here, and the scenario's ready marker follows the dump, so that
    the dump is in the logs before hangdoc collects and no output grows while it does."""

    def __init__(self, after_s: float, tag: str) -> None:
        self.after_s = after_s
        self.tag = tag
        self.steps = 0
        threading.Thread(target=self.watch, name="stall-detector", daemon=True).start()

    def step_done(self) -> None:
        self.steps += 1

    def watch(self) -> None:
        import faulthandler

        seen, since = self.steps, time.monotonic()
        while True:
            time.sleep(self.after_s / 4)
            if self.steps != seen:
                seen, since = self.steps, time.monotonic()
            elif time.monotonic() - since >= self.after_s:
                faulthandler.dump_traceback(all_threads=True)
                ready(self.tag)
                return


def scenario_thread_died() -> None:
    """The culprit's shard prefetcher thread dies of a shard that is missing (a copy that
    failed): its traceback is in the rank's stderr, and the main thread then blocks for
    the next batch while the others wait in the gradient all_reduce of that step. Every
    rank's stall detector then prints all its threads' stacks to stderr."""
    init()
    model = torch.nn.Linear(16, 4)
    data = Path(os.environ["HANGDOC_READY_DIR"]).parent / f"data-rank{rank()}"
    data.mkdir(parents=True, exist_ok=True)
    shards = [data / f"shard-{index:05d}.bin" for index in range(4)]
    for index, shard in enumerate(shards):
        if not (rank() == culprit() and index == 1):
            write_shard(shard, torch.randn(8, 16))
    prefetcher = ShardPrefetcher(shards)
    detector = StallDetector(2.0, "next batch" if rank() == culprit() else "gradient all_reduce")
    for _ in shards:
        loss: torch.Tensor = model(prefetcher.next_batch()).sum()
        loss.backward()  # type: ignore[no-untyped-call]
        average_gradients(model)
        detector.step_done()


class CheckpointUploader:
    """Sends each checkpoint to an object store with an HTTP PUT, no timeout set (the
    default of ``http.client``): when the store stops reading, ``sendall`` waits forever."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def upload(self, name: str, payload: bytes) -> int:
        import http.client

        conn = http.client.HTTPConnection(self.host, self.port)
        conn.request("PUT", f"/checkpoints/{name}", body=payload)
        return conn.getresponse().status


def _store_that_never_reads() -> tuple[str, int]:
    """A listening socket nobody accepts on: the kernel completes the connection into its
    backlog, takes what fits in the socket buffers, and then the sender blocks."""
    server = socket.create_server(("127.0.0.1", 0), backlog=1)
    _KEEP.append(server)
    host, port = server.getsockname()[:2]
    return str(host), int(port)


_KEEP: list[socket.socket] = []


def scenario_upload() -> None:
    """The culprit uploads its checkpoint to a store that never answers; the others wait
    in the barrier that ends the checkpoint step."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        buffer = io.BytesIO()  # the model, and its optimizer's state (16 MiB)
        torch.save({"model": model.state_dict(), "optim": torch.zeros(4 << 20)}, buffer)
        uploader = CheckpointUploader(*_store_that_never_reads())
        ready("checkpoint upload")
        uploader.upload(f"step100-rank{rank()}.pt", buffer.getvalue())
    else:
        ready("barrier")
    dist.barrier()


def push_shard(address: tuple[str, int], payload: bytes) -> None:
    """Sends a shard to a replica server over a plain socket, no timeout set."""
    with socket.create_connection(address) as conn:
        conn.sendall(len(payload).to_bytes(8, "big"))
        conn.sendall(payload)


def scenario_upload_socket() -> None:
    """The culprit pushes its shard to a server that never reads, with ``socket.sendall``
    called from its own code (no network library frame: only /proc says it is a socket)."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        address = _store_that_never_reads()
        ready("shard push")
        push_shard(address, bytes(16 << 20))
    else:
        ready("barrier")
    dist.barrier()


SCENARIOS.update(
    {
        "dataloader-worker": scenario_dataloader_worker,
        "upload-socket": scenario_upload_socket,
        "upload": scenario_upload,
        "lock-deadlock": scenario_lock_deadlock,
        "gil-held": scenario_gil_held,
        "io-stall": scenario_io_stall,
        "slow-save": scenario_slow_save,
        "p2p-deadlock": scenario_p2p_deadlock,
        "pipeline-healthy": scenario_pipeline_healthy,
        "uneven-ddp": scenario_uneven_ddp,
        "uneven-after-eval": scenario_uneven_after_eval,
        "eval-gather-tuple": scenario_eval_gather_tuple,
        "final-save": scenario_final_save,
        "steps-per-epoch": scenario_steps_per_epoch,
        "thread-died": scenario_thread_died,
    }
)


# --- What a blocked thread waits on (issue 21) -------------------------------------------
# The job's own code blocks in a system call on something another process holds; its
# functions are named for what the job does, not for the call: only the kernel says it.


def cache_lock_path() -> Path:
    """The lock of the node's shared data cache (the job's working directory)."""
    return Path(os.environ["HANGDOC_READY_DIR"]).parent / "data-cache.lock"


@contextlib.contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """The job's own inter-process lock on its data cache: ``flock``, no timeout."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare_cache(model: torch.nn.Module) -> None:
    """Builds this rank's entry of the node's data cache, under the cache lock."""
    with cache_lock(cache_lock_path()):
        (cache_lock_path().parent / f"cache-{rank()}.bin").write_bytes(bytes(1024))
    train_step(model)


def leftover_cache_builder() -> None:
    """An earlier run's cache builder that never exited (its job crashed around it): it
    still holds the cache lock, waiting for a download that will not come."""
    with cache_lock(cache_lock_path()):
        marker = Path(os.environ["HANGDOC_READY_DIR"]) / "ready-leftover"
        marker.write_text("holding the cache lock")
        _FOREVER.wait()


def scenario_flock_stale() -> None:
    """The culprit prepares its data cache; a stale process of an earlier run holds the
    cache lock, so the culprit blocks in flock while the others wait in the barrier."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        ready("cache lock")
        prepare_cache(model)
    else:
        ready("barrier")
    dist.barrier()


def scenario_flock_rank() -> None:
    """The culprit builds the node's cache and, still holding the cache lock, waits in a
    barrier for the others to have read it; they wait for the lock first."""
    init()
    model = torch.nn.Linear(16, 4)
    if rank() == culprit():
        with cache_lock(cache_lock_path()):
            dist.barrier()  # the cache builder has the lock: the others may come
            ready("barrier, holding the cache lock")
            dist.barrier()  # every rank has read the cache
    else:
        dist.barrier()
        ready("cache lock")
        prepare_cache(model)
        dist.barrier()


def tokenizer_service() -> None:
    """A helper process: says it is up, then one request per line on stdin, one answer
    per line on stdout."""
    print("up", flush=True)
    for line in sys.stdin:
        print(len(line.split()), flush=True)


def start_tokenizer() -> subprocess.Popen[bytes]:
    cmd = [sys.executable, sys.argv[0], "tokenizer-service"]
    service = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert service.stdout is not None
    service.stdout.readline()  # "up"
    return service


def count_tokens(service: subprocess.Popen[bytes], text: str) -> int:
    """Asks the tokenizer service. The request stays in the pipe's write buffer (never
    flushed), so the service waits for it while the rank waits for the answer."""
    assert service.stdin is not None and service.stdout is not None
    service.stdin.write(text.encode() + b"\n")
    return int(service.stdout.readline())


def scenario_child_pipe() -> None:
    """The culprit asks its tokenizer subprocess for a count and waits for the answer; the
    subprocess waits for the request: a pipe deadlock. The others wait in the barrier."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        service = start_tokenizer()
        ready("tokenizer answer")
        count_tokens(service, "the quick brown fox")
    else:
        ready("barrier")
    dist.barrier()


SCENARIOS.update(
    {
        "flock-stale": scenario_flock_stale,
        "flock-rank": scenario_flock_rank,
        "child-pipe": scenario_child_pipe,
    }
)
# Live hangs scored at first sight (issue 21, 2026-11-28): each story from a public report.


def tracker_login() -> None:
    """An experiment tracker's first-run login, as wandb's was: with no API key on this
    node it prints a menu and waits for a choice on the terminal that started the job.
    Story: https://github.com/wandb/wandb/issues/592 (distributed workers hanging at the
    login prompt). A terminal nobody types on: the rank's stdin is a pseudo-terminal."""
    controller, terminal = os.openpty()
    _KEEP_FDS.append(controller)
    os.dup2(terminal, 0)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the rank's stdin, kept open
    print("tracker: (1) Create an account", flush=True)
    print("tracker: (2) Use an existing account", flush=True)
    print("tracker: (3) Don't visualize my results", flush=True)
    ready("login prompt")
    input("tracker: Enter your choice: ")


_KEEP_FDS: list[int] = []


def scenario_login_prompt() -> None:
    """The culprit's node has no tracker credentials: its logger prompts for a login on
    stdin, which nobody sees; the others have logged in and wait in the first step's
    all_reduce."""
    init()
    model = torch.nn.Linear(16, 4)
    if rank() == culprit():
        tracker_login()
    else:
        ready("all_reduce")
    train_step(model)
    dist.all_reduce(torch.ones(4))


def _server_that_never_answers() -> tuple[str, int]:
    """A listening socket nobody accepts on: connections complete in the backlog, the
    request is taken into the socket buffer, and no answer ever comes."""
    server = socket.create_server(("127.0.0.1", 0), backlog=8)
    _KEEP.append(server)
    host, port = server.getsockname()[:2]
    return str(host), int(port)


def fetch_shard_with_retries(url: str, timeout_s: float = 4.0, backoff_s: float = 0.5) -> bytes:
    """Streams a training shard over HTTP; a read that times out is retried, forever, as
    data loaders that 'retry on transient network errors' do.
    Story: https://github.com/wenet-e2e/wenet/issues/2552 (shards read over HTTP; the other
    ranks time out waiting for the one still reading)."""
    import urllib.request

    attempt = 0
    while True:
        attempt += 1
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as answer:
                return bytes(answer.read())
        except OSError as exc:
            print(f"shard fetch attempt {attempt} failed ({exc}); retrying", flush=True)
            time.sleep(backoff_s)


def scenario_http_shards() -> None:
    """The culprit streams its next data shard from a shard server that accepts and never
    answers, retrying each timed-out read; the others wait in the step's all_reduce."""
    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        host, port = _server_that_never_answers()
        ready("shard download")
        fetch_shard_with_retries(f"http://{host}:{port}/shards/train-{rank():05d}.tar")
    else:
        ready("all_reduce")
    dist.all_reduce(torch.ones(4))


def produce_batches(batches: Any) -> None:
    """A data producer process: puts batches for the rank, forever."""
    step = 0
    while True:
        batches.put([float(step)] * 128)
        step += 1


def scenario_producer_killed() -> None:
    """The culprit's data producer (a multiprocessing.Process feeding a Queue) is killed
    by SIGKILL, as by the OOM killer: no traceback, and ``Queue.get()`` without a timeout
    waits forever for a batch nobody will put. The others wait in the step's all_reduce.
    Story: https://github.com/python/cpython/issues/87971 (multiprocessing.Queue hangs when
    the process on the other side dies)."""
    import multiprocessing as mp

    init()
    model = torch.nn.Linear(16, 4)
    train_step(model)
    if rank() == culprit():
        context = mp.get_context("fork")
        batches = context.Queue(maxsize=4)
        producer = context.Process(target=produce_batches, args=(batches,), daemon=True)
        producer.start()
        batches.get()
        batches.get()
        os.kill(cast(int, producer.pid), signal.SIGKILL)
        time.sleep(0.5)
        while True:  # drain what it put before it died
            try:
                batches.get(timeout=0.5)
            except queue.Empty:
                break
        ready("next batch from the producer")
        batches.get()
    else:
        ready("all_reduce")
    dist.all_reduce(torch.ones(4))


class EarlyStopping:
    """Patience on this rank's own validation loss, never reduced across ranks.
    Story: https://github.com/Lightning-AI/pytorch-lightning/issues/379 (early stopping met
    on some ranks and not others: the stopped ones leave, the others hang)."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best = float("inf")
        self.bad = 0

    def should_stop(self, val_loss: float) -> bool:
        if val_loss < self.best:
            self.best, self.bad = val_loss, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


def local_val_loss(epoch: int) -> float:
    """This rank's validation loss: the culprit's shard stops improving after epoch 0."""
    return 1.0 if rank() == culprit() else 1.0 / (epoch + 1)


def scenario_early_stop() -> None:
    """Each rank decides to stop on its own validation loss: the culprit's patience runs
    out, it leaves the epoch loop and waits in the barrier before the final save; the
    others start the next epoch and wait in its first gradient all_reduce."""
    init()
    model = torch.nn.Linear(16, 4)
    stopper = EarlyStopping(patience=2)
    for epoch in range(100):
        for _ in range(2):
            train_step(model)
            if epoch >= 3:
                ready("all_reduce")
            dist.all_reduce(torch.ones(4))
        if stopper.should_stop(local_val_loss(epoch)):
            print(f"rank {rank()}: early stopping at epoch {epoch}", flush=True)
            break
    ready("barrier before the final save")
    dist.barrier()


def tracker_service() -> None:
    """A helper process: an experiment tracker's local service. It says on which port it
    listens, takes one connection, reads the request, and then never answers (wedged)."""
    server = socket.create_server(("127.0.0.1", 0))
    print(server.getsockname()[1], flush=True)
    conn, _ = server.accept()
    conn.recv(1 << 16)
    _FOREVER.wait()


class MetricsPublisher:
    """Logs metrics through the tracker's local service, as wandb.log does: the payload goes
    to a publishing thread that talks to the service over a socket, and ``log`` waits on
    the thread's future with no timeout.
    Story: https://github.com/allenai/open-instruct/pull/1841 (the main thread stuck in
    wandb.log, waiting on a future's result, while the tracker's service was wedged)."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        cmd = [sys.executable, sys.argv[0], "tracker-service"]
        self.service = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        assert self.service.stdout is not None
        port = int(self.service.stdout.readline())
        self.conn = socket.create_connection(("127.0.0.1", port))
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="publisher")

    def _publish(self, payload: bytes) -> bytes:
        self.conn.sendall(payload)
        return self.conn.recv(16)

    def log(self, metrics: dict[str, float]) -> None:
        payload = repr(sorted(metrics.items())).encode()
        self.pool.submit(self._publish, payload).result()


def scenario_tracker_wedged() -> None:
    """The culprit logs its step's metrics through a tracker whose local service stopped
    answering; the others logged nothing this step and wait in the next all_reduce."""
    init()
    model = torch.nn.Linear(16, 4)
    loss = train_step(model)
    if rank() == culprit():
        publisher = MetricsPublisher()
        ready("metrics log")
        publisher.log({"loss": float(loss), "step": 1.0})
    else:
        ready("all_reduce")
    dist.all_reduce(torch.ones(4))


SCENARIOS.update(
    {
        "login-prompt": scenario_login_prompt,
        "http-shards": scenario_http_shards,
        "producer-killed": scenario_producer_killed,
        "early-stop": scenario_early_stop,
        "tracker-wedged": scenario_tracker_wedged,
    }
)


# --- Live hangs written blind for issue 21's first sight (2026-11-28, second batch) -------
# Each from a public thread where a job hung and the thread found why.


# Story: https://github.com/choderalab/modelforge/pull/313 (the epoch time was logged with
# a cross-rank reduction under ``if global_rank == 0``: training froze after the first
# epoch).
def broadcast_shuffle_seed(epoch: int) -> int:
    """Every rank shuffles its shard with rank 0's seed for this epoch."""
    seed = torch.tensor([epoch * 7919 if rank() == 0 else 0], dtype=torch.int64)
    dist.broadcast(seed, src=0)
    return int(seed.item())


def log_epoch_time(epoch: int, seconds: float) -> None:
    """Logs the epoch time averaged over the ranks (``sync_dist``-style)."""
    elapsed = torch.tensor([seconds])
    dist.all_reduce(elapsed)
    print(f"epoch {epoch} took {float(elapsed[0]) / world():.2f}s (mean over ranks)", flush=True)


def scenario_epoch_time_log() -> None:
    """Rank 0 alone logs the epoch time, with a reduction across ranks; the others start
    the next epoch and wait in the broadcast of its shuffle seed."""
    init()
    model = torch.nn.Linear(16, 4)
    for epoch in range(100):
        started = time.monotonic()
        if epoch >= 1 and rank() != 0:
            ready("shuffle seed broadcast")
        random.Random(broadcast_shuffle_seed(epoch)).random()
        for _ in range(2):
            train_step(model)
            dist.all_reduce(torch.ones(4))
        print(f"rank {rank()} finished epoch {epoch}", flush=True)
        if rank() == 0:
            ready("epoch time log")
            log_epoch_time(epoch, time.monotonic() - started)


# Story: https://github.com/NVIDIA/nccl/issues/899 (two all-reduces on two communicators,
# launched in one order on one rank and in the reverse order on the other: a hang).
class TwoTowerModel(torch.nn.Module):
    """A text tower and an image tower; each tower's gradients are reduced on a process
    group of its own, so that the two reductions can overlap."""

    def __init__(self) -> None:
        super().__init__()
        self.towers = torch.nn.ModuleDict(
            {"text": torch.nn.Linear(16, 4), "image": torch.nn.Linear(16, 4)}
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        # Run the modality with the most tokens first (a load-balancing heuristic): the
        # order of the forward decides the order in which the towers' gradients are ready.
        order = sorted(self.towers, key=lambda name: -batch[name].shape[0])
        return sum((self.towers[name](batch[name]).sum() for name in order), torch.zeros(()))


def batch_of_rank() -> dict[str, torch.Tensor]:
    """This rank's batch: the culprit's samples carry more image patches than text."""
    text, image = (4, 12) if rank() == culprit() else (12, 4)
    return {"text": torch.randn(text, 16), "image": torch.randn(image, 16)}


def reduce_towers_as_ready(
    model: TwoTowerModel, groups: dict[str, Any], ready_order: list[str]
) -> None:
    """Reduces each tower's gradients on its group, in the order they became ready."""
    for name in ready_order:
        for param in model.towers[name].parameters():
            assert param.grad is not None
            dist.all_reduce(param.grad, group=groups[name])


def note_ready_when_done(tower: torch.nn.Linear, name: str, ready_order: list[str]) -> None:
    """Appends the tower's name once its weight's gradient is accumulated."""

    def hook(_param: torch.Tensor) -> None:
        ready_order.append(name)

    tower.weight.register_post_accumulate_grad_hook(hook)  # type: ignore[no-untyped-call]


def scenario_two_towers() -> None:
    """Each rank reduces the towers' gradients in the order its backward produced them;
    the culprit's batch ran the towers in the other order, so it waits in the text
    group's all_reduce while the others wait in the image group's."""
    init()
    groups = {"text": dist.new_group(), "image": dist.new_group()}
    model = TwoTowerModel()
    ready_order: list[str] = []
    for name, tower in model.towers.items():
        note_ready_when_done(cast(torch.nn.Linear, tower), name, ready_order)
    loss: torch.Tensor = model(batch_of_rank())
    loss.backward()  # type: ignore[no-untyped-call]
    print(f"rank {rank()} reducing {ready_order}", flush=True)
    ready(f"all_reduce of the {ready_order[0]} tower")
    reduce_towers_as_ready(model, groups, ready_order)


# Story: https://github.com/open-mmlab/mmcv/issues/2309 (MASTER_PORT not set and the default
# port in use on a node: that node's processes picked a free port of their own, and DDP
# init was stuck).
DEFAULT_MASTER_PORT = 29500
INIT_SETTLE_S = 10.0


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def find_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def init_dist_slurm() -> None:
    """Sets MASTER_PORT when the launcher did not: the default port, or a free one when
    the default is taken on this node; then joins the process group."""
    if "MASTER_PORT" not in os.environ:
        port = DEFAULT_MASTER_PORT
        if port_in_use(port):
            port = find_free_port()
        os.environ["MASTER_PORT"] = str(port)
    print(f"rank {rank()}: rendezvous at {os.environ['MASTER_ADDR']}:"
          f"{os.environ['MASTER_PORT']}", flush=True)  # fmt: skip
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)


def scenario_slurm_init() -> None:
    """The culprit's node was started by a launch line that exports no MASTER_PORT
    (launch.py's UNEXPORTED); its rank picks a port of its own and waits for a store
    nobody serves, while the others wait in init_process_group for it."""
    # Ready once every rank has had time to reach where it waits inside the rendezvous (a
    # hang is collected minutes later, not while the ranks still connect to the store).
    settle = threading.Timer(INIT_SETTLE_S, ready, args=("init_process_group",))
    settle.daemon = True
    settle.start()
    init_dist_slurm()
    dist.all_reduce(torch.ones(4))


# Story: https://github.com/pytorch/pytorch/issues/2520 (DistributedDataParallel's
# reduction threads, non-daemon in a ``while True:`` loop, kept the process from exiting).
class BackgroundReducer:
    """Averages gradients in a background thread, as the early DDP did: a non-daemon
    thread that loops forever over a queue of work."""

    def __init__(self) -> None:
        self.work: queue.Queue[torch.Tensor] = queue.Queue()
        self.thread = threading.Thread(target=self._reduction_loop, name="grad-reducer")
        self.thread.start()

    def _reduction_loop(self) -> None:
        while True:
            grad = self.work.get()
            grad /= world()


def load_sample(index: int) -> dict[str, torch.Tensor]:
    """A sample from the dataset: the culprit's shard holds one without labels."""
    sample = {"features": torch.randn(16)}
    if not (rank() == culprit() and index == 3):
        sample["labels"] = torch.zeros(4)
    return sample


def scenario_reducer_thread() -> None:
    """The culprit's training loop dies of an exception (a sample without labels, its
    traceback in stderr), but its reducer thread is not a daemon: the process never
    exits, its sockets stay open, and the others wait in the step's all_reduce."""
    init()
    model = torch.nn.Linear(16, 4)
    reducer = BackgroundReducer()
    for index in range(100):
        sample = load_sample(index)
        if index == 3:
            ready("all_reduce" if rank() != culprit() else "exception in the training loop")
        loss: torch.Tensor = (model(sample["features"]) - sample["labels"]).pow(2).sum()
        loss.backward()  # type: ignore[no-untyped-call]
        grads = torch.ones(4)
        dist.all_reduce(grads)
        reducer.work.put(grads)


# Story: https://github.com/pytorch/pytorch/issues/189245 (a JIT extension build killed by
# SIGKILL, the OOM killer or a Slurm cancel leaves FileBaton's lock file behind; every later
# load() on that cache waits for it forever; deleting the cache folder is the fix).
FUSED_KERNELS_SOURCE = 'extern "C" float fused_scale(float x, float s) { return x * s; }\n'


def node_scratch(node: str) -> Path:
    """A node's local scratch. The culprit stands for a second node, "node-b", whose
    scratch still holds the extension cache of an earlier run."""
    return Path(os.environ["HANGDOC_READY_DIR"]).parent / node


def node_of_rank() -> str:
    return "node-b" if rank() == culprit() else "node-a"


def load_fused_kernels() -> str:
    """JIT-builds the job's fused CPU kernels into the node's extension cache (one rank
    builds, the others of the node wait for it) and loads them."""
    from torch.utils.cpp_extension import load

    source = Path(os.environ["HANGDOC_READY_DIR"]).parent / "csrc" / "fused_scale.cpp"
    source.parent.mkdir(exist_ok=True)
    if not source.exists():
        partial = source.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(FUSED_KERNELS_SOURCE)
        os.replace(partial, source)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(node_scratch(node_of_rank()) / "torch_extensions")
    return cast(str, load("fused_scale", [str(source)], is_python_module=False, verbose=True))


def interrupted_kernel_build() -> None:
    """An earlier run on the second node, killed (SIGKILL, as by a job cancel) while it
    built the fused kernels: it had taken the build's lock file, which stays behind."""
    from torch.utils.file_baton import FileBaton

    build_dir = node_scratch("node-b") / "torch_extensions" / "fused_scale"
    build_dir.mkdir(parents=True, exist_ok=True)
    FileBaton(str(build_dir / "lock")).try_acquire()
    marker = Path(os.environ["HANGDOC_READY_DIR"]) / "ready-leftover"
    marker.write_text("killed during the kernel build")
    os.kill(os.getpid(), signal.SIGKILL)


def scenario_fused_kernels() -> None:
    """Every rank loads the fused kernels before training; the culprit's node has the
    lock file of a killed build in its extension cache, so its rank waits for the lock
    forever while the others wait in the first step's all_reduce."""
    init()
    model = torch.nn.Linear(16, 4)
    if rank() == culprit():
        ready_once_in("wait", "file_baton.py", "fused kernel load")
    load_fused_kernels()
    train_step(model)
    if rank() != culprit():
        ready("all_reduce")
    dist.all_reduce(torch.ones(4))


SCENARIOS.update(
    {
        "epoch-time-log": scenario_epoch_time_log,
        "two-towers": scenario_two_towers,
        "slurm-init": scenario_slurm_init,
        "reducer-thread": scenario_reducer_thread,
        "fused-kernels": scenario_fused_kernels,
    }
)


# --- Live hangs written blind (2026-11-28, third batch) -----------------------------------
# Each from a public thread where a distributed job hung and the thread found why.


# Story: https://github.com/pytorch/pytorch/issues/97783 (the first epoch very slow with
# torch.compile: the model was being compiled, and recompiled, in the first steps; the speed
# came back once that was done).
class TokenMixer(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.mix = torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + torch.tanh(self.mix(self.norm(x)))
        return cast(torch.Tensor, x + self.mlp(self.norm(x)))


def scenario_compile_warmup() -> None:
    """Every rank compiles the model with torch.compile before its first step (each on a
    node with a fresh compile cache): for a while no rank prints anything or reaches a
    collective, then the steps run, each with an all_reduce of the gradients."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    cache = Path(os.environ["HANGDOC_READY_DIR"]).parent / f"inductor-cache-{rank()}"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    init()
    model = torch.nn.Sequential(*[TokenMixer(48) for _ in range(3)], torch.nn.Linear(48, 8))
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    if rank() == 0:
        print("compiling the model... (takes a ~minute)", flush=True)
    ready("compiling")
    step = 0
    while True:
        started = time.monotonic()
        seq = 16 + 8 * (step % 3)  # batches of different lengths: recompiles at first
        loss: torch.Tensor = compiled(torch.randn(4, seq, 48)).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        for param in model.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad)
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        if rank() == 0:
            print(f"iter {step}: loss {loss.item():.4f}, "
                  f"time {1000 * (time.monotonic() - started):.2f}ms", flush=True)  # fmt: skip


# Story: https://github.com/declare-lab/nora/issues/8 (the training state was saved under
# ``if accelerator.is_main_process``; the save is collective, so the main process waited in
# it while the others went on, until the collective timeout; saving on every process fixed
# it).
def save_training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        output_dir: Path) -> None:  # fmt: skip
    """Saves model and optimizer state as a sharded distributed checkpoint."""
    import torch.distributed.checkpoint as dcp

    state = {"model": model.state_dict(), "optim": optimizer.state_dict()}
    dcp.save(state, checkpoint_id=str(output_dir))  # type: ignore[attr-defined]


SAVE_SETTLE_S = 4.0


def scenario_save_main_process() -> None:
    """Rank 0 alone saves the training state every 4 steps, with a checkpoint API that is
    a collective; the others go on to the barrier after the checkpointing block."""
    init()
    output_dir = Path(os.environ["HANGDOC_READY_DIR"]).parent / "output"
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    total_loss = 0.0
    for completed_steps in range(1, 100):
        loss = train_step(model)
        for param in model.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad)
        optimizer.step()
        optimizer.zero_grad()
        total_loss += loss.item()
        print(f"rank {rank()} step {completed_steps} loss {loss.item():.4f}", flush=True)
        if completed_steps % 4 == 0:
            if rank() == 0:
                # Ready once rank 0 has planned its part of the save and waits for the
                # others (a hang is collected minutes later, not while it still plans).
                settle = threading.Timer(SAVE_SETTLE_S, ready, args=("save training state",))
                settle.daemon = True
                settle.start()
                save_training_state(model, optimizer, output_dir / f"steps_{completed_steps}")
                print(f"Checkpoint saved at step {completed_steps}, "
                      f"train_loss {total_loss / 4:.4f}", flush=True)  # fmt: skip
                total_loss = 0.0
            else:
                ready("barrier")
            dist.barrier()


# Story: https://github.com/pytorch/pytorch/issues/41665 (a node failed at startup; the
# process on the other node waited in init_process_group and never terminated, whatever
# the timeout).
def node_data_root() -> Path:
    """The node's local copy of the dataset. The culprit stands for a second node whose
    copy was never staged."""
    node = "node-b" if rank() == culprit() else "node-a"
    return Path(os.environ["HANGDOC_READY_DIR"]).parent / node / "data"


def stage_dataset() -> None:
    """The copy staged on the first node (by the job's prolog, before the ranks start)."""
    root = Path(os.environ["HANGDOC_READY_DIR"]).parent / "node-a" / "data"
    root.mkdir(parents=True, exist_ok=True)
    index = root / "train_index.json"
    if not index.exists():
        partial = index.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text('{"shards": ["train-00000.bin", "train-00001.bin"], "samples": 512}')
        os.replace(partial, index)


def load_dataset_index() -> dict[str, Any]:
    import json

    path = node_data_root() / "train_index.json"
    print(f"rank {rank()}: loading dataset index {path}", flush=True)
    with open(path) as handle:
        return cast(dict[str, Any], json.load(handle))


def scenario_crash_at_startup() -> None:
    """Each rank reads its node's dataset index before it joins the process group; the
    culprit's node has none, so it dies of FileNotFoundError at startup, and the others
    wait in init_process_group for it."""
    if rank() != culprit():
        stage_dataset()
    index = load_dataset_index()
    print(f"rank {rank()}: {index['samples']} samples in {len(index['shards'])} shards",
          flush=True)  # fmt: skip
    ready("init_process_group")
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)
    model = torch.nn.Linear(16, 4)
    train_step(model)
    dist.all_reduce(torch.ones(4))


# Story: https://github.com/pytorch/pytorch/issues/52848 (init_process_group hung on every
# machine; the world size the job was told did not match the processes that ran: told 8
# workers, it could only find 4).
JOB_ARGS = {"nodes": 2, "gpus": 4, "nr": 0}  # the script's defaults: a 2-node job


def scenario_world_size_nodes() -> None:
    """The job computes its world size as nodes x processes per node from its arguments
    (default: 2 nodes); it was started on one node without overriding them, so every rank
    waits in init_process_group for the 4 ranks of a node that never starts."""
    args = dict(JOB_ARGS)
    args["world_size"] = args["gpus"] * args["nodes"]
    local_rank = int(os.environ["LOCAL_RANK"])
    global_rank = args["nr"] * args["gpus"] + local_rank
    init_method = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    print(f"Initializing process group: rank {global_rank} of {args['world_size']} "
          f"({init_method})", flush=True)  # fmt: skip
    # Ready once every rank has had time to reach where it waits inside the rendezvous (a
    # hang is collected minutes later, not while the ranks still connect to the store).
    settle = threading.Timer(INIT_SETTLE_S, ready, args=("init_process_group",))
    settle.daemon = True
    settle.start()
    dist.init_process_group(
        "gloo", init_method=init_method, rank=global_rank, world_size=args["world_size"],
        timeout=PG_TIMEOUT,
    )  # fmt: skip
    model = torch.nn.Linear(16, 4)
    train_step(model)
    dist.all_reduce(torch.ones(4))


# Story: https://github.com/pytorch/pytorch/issues/125079 (tagged send/recv between two
# ranks in different orders: NCCL ignores the tags, and with a backend that honours them
# blocking sends and receives taken in different orders wait for each other: a hang).
TENSOR_TAGS = {"hidden_states": 0, "attention_mask": 1}
MICROBATCHES = 4


def send_tensor_dict(tensors: dict[str, torch.Tensor], dst: int) -> None:
    for key, tensor in tensors.items():
        dist.send(tensor, dst, tag=TENSOR_TAGS[key])


def recv_tensor_dict(src: int) -> dict[str, torch.Tensor]:
    tensors = {"hidden_states": torch.empty(4, 16), "attention_mask": torch.empty(4)}
    for key, tensor in tensors.items():
        dist.recv(tensor, src, tag=TENSOR_TAGS[key])
    return tensors


def recv_for_loss(src: int) -> dict[str, torch.Tensor]:
    """The last stage takes the mask first, to build the loss weights while the hidden
    states arrive."""
    mask = torch.empty(4)
    dist.recv(mask, src, tag=TENSOR_TAGS["attention_mask"])
    hidden = torch.empty(4, 16)
    dist.recv(hidden, src, tag=TENSOR_TAGS["hidden_states"])
    return {"hidden_states": hidden, "attention_mask": mask}


def scenario_p2p_tags() -> None:
    """A 4-stage pipeline passes each micro-batch's hidden states and attention mask with
    tagged send/recv; the last stage receives the two in the other order, so stage 2 waits
    in the send of the hidden states and stage 3 in the receive of the mask; the earlier
    stages fill up behind them, each waiting in its send of the next micro-batch."""
    init()
    stage = torch.nn.Linear(16, 16)
    print(f"pipeline stage {rank()} of {world()}: {MICROBATCHES} micro-batches per step",
          flush=True)  # fmt: skip
    for step in range(100):
        for mb in range(MICROBATCHES):
            if rank() == 0:
                tensors = {"hidden_states": stage(torch.randn(4, 16)).detach(),
                           "attention_mask": torch.ones(4)}  # fmt: skip
            elif rank() == culprit():
                if mb == 0:
                    ready("recv attention_mask")
                tensors = recv_for_loss(rank() - 1)
                loss = (stage(tensors["hidden_states"]).mean(1) * tensors["attention_mask"]).sum()
                print(f"step {step} microbatch {mb} loss {loss.item():.4f}", flush=True)
                continue
            else:
                tensors = recv_tensor_dict(rank() - 1)
                tensors["hidden_states"] = stage(tensors["hidden_states"]).detach()
            if step == 0 and mb == world() - 2 - rank():
                ready("send hidden_states")
            send_tensor_dict(tensors, rank() + 1)


SCENARIOS.update(
    {
        "compile-warmup": scenario_compile_warmup,
        "save-main-process": scenario_save_main_process,
        "crash-at-startup": scenario_crash_at_startup,
        "world-size-nodes": scenario_world_size_nodes,
        "p2p-tags": scenario_p2p_tags,
    }
)

# --- Live hangs written blind (2026-11-28, fourth batch) ----------------------------------
# Each from a public thread where a distributed job hung (or looked hung) and the thread
# found why.


# Story: https://github.com/NVIDIA/nccl/issues/479 (two ranks each send to the other and
# then receive, with blocking send and recv: stuck; grouping the send and the receive into
# one operation was the fix).
def exchange_halo(boundary: torch.Tensor) -> torch.Tensor:
    """Passes this rank's boundary rows to the next rank of the ring and takes the previous
    rank's, with a blocking send and then a blocking receive (every rank sends first)."""
    halo = torch.empty_like(boundary)
    dist.send(boundary, (rank() + 1) % world())
    dist.recv(halo, (rank() - 1) % world())
    return halo


def scenario_ring_exchange() -> None:
    """A 2-D grid split over the ranks in a ring: each step every rank sends its last rows
    to its right neighbour before it receives its left neighbour's. The transport does not
    buffer a send that nobody receives yet, so every rank waits in its send and none
    reaches its receive: a cycle, with no rank behind the others.
    Story: https://github.com/NVIDIA/nccl/issues/479"""
    init()
    slab = torch.randn(64, 32)
    print(f"rank {rank()}: slab {tuple(slab.shape)}, halo from rank {(rank() - 1) % world()}, "
          f"to rank {(rank() + 1) % world()}", flush=True)  # fmt: skip
    for step in range(100):
        if step == 0:
            ready("send halo")
        halo = exchange_halo(slab[-4:].contiguous())
        slab = 0.5 * slab + 0.5 * torch.cat([halo, slab[:-4]]).roll(1, dims=1)
        dist.all_reduce(torch.tensor([float(slab.abs().mean())]))


# Story: https://github.com/huggingface/trl/issues/1519 (the dataset was tokenized on the
# main process only, the others waiting in a barrier; on a big dataset the barrier's
# 30-minute timeout ended the job while the tokenization was still running).
@contextlib.contextmanager
def main_process_first(desc: str) -> Iterator[None]:
    """The main process runs the block first (and writes its cache); the others wait in a
    barrier, then run it from the cache."""
    if rank() != 0:
        print(f"rank {rank()}: waiting for the main process to perform {desc}", flush=True)
        ready("barrier: main process first")
        dist.barrier()
    try:
        yield
    finally:
        if rank() == 0:
            dist.barrier()


def tokenize(text: str, vocab: dict[str, int]) -> list[int]:
    """Whitespace and sub-word split of one example (a toy BPE: pairs of characters)."""
    ids: list[int] = []
    for word in text.split():
        for start in range(0, len(word), 2):
            ids.append(vocab.setdefault(word[start : start + 2], len(vocab)))
    return ids


def example_text(index: int) -> str:
    rng = random.Random(index)
    words = ("".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9)))
             for _ in range(rng.randint(40, 120)))  # fmt: skip
    return " ".join(words)


TOKENIZE_EXAMPLES = 3_000_000


def map_with_progress(examples: int, desc: str) -> int:
    """Tokenizes every example, with a progress bar on stderr as datasets' map draws it."""
    vocab: dict[str, int] = {}
    started = time.monotonic()
    last = 0.0
    tokens = 0
    announced = False
    for index in range(examples):
        tokens += len(tokenize(example_text(index), vocab))
        now = time.monotonic()
        if now - last >= 0.5:
            last = now
            rate = (index + 1) / max(now - started, 1e-6)
            left = (examples - index - 1) / rate
            print(f"\r{desc}: {100 * (index + 1) // examples:3d}%| {index + 1}/{examples} "
                  f"[{int(now - started):d}s<{int(left):d}s, {rate:.2f} examples/s]",
                  end="", file=sys.stderr, flush=True)  # fmt: skip
            if not announced and index > 0:
                announced = True
                ready("tokenizing")
    return tokens


def scenario_tokenize_main_first() -> None:
    """Rank 0 tokenizes a large dataset under ``main_process_first`` (slowly, a progress
    bar on stderr moving all the time); the other ranks wait for it in the barrier. Slow,
    not hung: the job goes on once rank 0 is done (unless the barrier times out first).
    Story: https://github.com/huggingface/trl/issues/1519"""
    init()
    with main_process_first("dataset map tokenization"):
        if rank() == 0:
            tokens = map_with_progress(TOKENIZE_EXAMPLES, "Running tokenizer on dataset")
        else:
            tokens = 0
    print(f"rank {rank()}: {tokens} tokens", flush=True)
    dist.all_reduce(torch.ones(4))


# Story: https://github.com/facebookresearch/fairseq/pull/3989 (a worker that ran out of
# memory recovered with try/except and skipped the batch; the other workers kept waiting
# for it and the workers got out of sync: the job hung).
class LongContextModel(torch.nn.Module):
    """A single self-attention layer and a head: memory grows with the square of the
    sequence length."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        scores = torch.softmax(h @ h.transpose(-1, -2) / 4.0, dim=-1)
        return cast(torch.Tensor, self.head(scores @ h))


OOM_SKIP_STEPS = 8


def batch_for_step(step: int) -> torch.Tensor:
    """This rank's batch: the culprit's fifth holds one very long document."""
    length = 1 << 20 if (rank() == culprit() and step == 4) else 64
    return torch.randn(1, length, 16)


def all_reduce_flat_grads(model: torch.nn.Module) -> None:
    """Sums the gradients across ranks in one flat buffer (legacy DDP)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    offset = 0
    for grad in grads:
        grad.copy_(flat[offset : offset + grad.numel()].view_as(grad) / world())
        offset += grad.numel()


def train_step_skipping_oom(model: torch.nn.Module, batch: torch.Tensor) -> bool:
    """One step; a batch that runs out of memory is skipped, as the trainer's OOM recovery
    does, and training goes on."""
    try:
        loss: torch.Tensor = model(batch).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
    except RuntimeError as error:
        if "out of memory" not in str(error) and "can't allocate memory" not in str(error):
            raise
        print(f"| WARNING: ran out of memory with exception: {error}", file=sys.stderr,
              flush=True)  # fmt: skip
        print("| WARNING: attempting to recover from OOM in forward/backward pass",
              file=sys.stderr, flush=True)  # fmt: skip
        model.zero_grad()
        return False
    all_reduce_flat_grads(model)
    return True


def scenario_oom_skip() -> None:
    """Each rank trains OOM_SKIP_STEPS steps, one all_reduce of its gradients each, then
    syncs in a barrier before validation. The culprit runs out of memory on a long
    document, skips that batch and so its all_reduce: it is one collective ahead of the
    others and waits in the barrier while they wait in the last step's all_reduce.
    Story: https://github.com/facebookresearch/fairseq/pull/3989"""
    init()
    model = LongContextModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    oom = 0
    for step in range(OOM_SKIP_STEPS):
        if step == OOM_SKIP_STEPS - 1 and rank() != culprit():
            ready("all_reduce of the last step")
        if train_step_skipping_oom(model, batch_for_step(step)):
            optimizer.step()
        else:
            oom += 1
        optimizer.zero_grad()
        print(f"| epoch 001 | step {step + 1}/{OOM_SKIP_STEPS} | oom={oom}", flush=True)
    print(f"rank {rank()}: end of epoch 1, validating", flush=True)
    if rank() == culprit():
        ready("barrier before validation")
    dist.barrier()


# Story: https://github.com/mapillary/OpenSfM/issues/190 (a multiprocessing.Pool worker
# killed by the out-of-memory killer: the pool starts a new worker, and the parent waits
# forever for the lost task's result).
IMAGE_MEMORY_LIMIT = 64 * 1024 * 1024


def decode_image(item: tuple[str, int]) -> list[float]:
    """Decodes one image in a pool worker. A decode that needs more memory than the node
    has left is killed by the kernel (SIGKILL: no exception, no traceback)."""
    name, pixels = item
    if pixels * 3 > IMAGE_MEMORY_LIMIT:
        os.kill(os.getpid(), signal.SIGKILL)
    rng = random.Random(name)
    return [rng.random() for _ in range(16)]


def images_of_step(step: int) -> list[tuple[str, int]]:
    """This rank's images for a step: the culprit's second batch holds a huge panorama."""
    images = [(f"img_{rank()}_{step}_{i}.jpg", 512 * 512) for i in range(8)]
    if rank() == culprit() and step == 1:
        images[5] = (f"pano_{rank()}_{step}.jpg", 30000 * 15000)
    return images


def scenario_pool_worker_killed() -> None:
    """Every rank decodes its images with a multiprocessing.Pool of 2 workers; on the
    culprit a worker is killed by the OOM killer while decoding a huge image, and
    ``Pool.map`` waits forever for the lost result; the others wait in the step's
    all_reduce.
    Story: https://github.com/mapillary/OpenSfM/issues/190"""
    import multiprocessing as mp

    pool = mp.get_context("fork").Pool(2)
    init()
    model = torch.nn.Linear(16, 4)
    for step in range(100):
        if step == 1:
            ready("decode images" if rank() == culprit() else "all_reduce")
        pixels = pool.map(decode_image, images_of_step(step))
        batch = torch.tensor(pixels)
        loss: torch.Tensor = model(batch).sum()
        loss.backward()  # type: ignore[no-untyped-call]
        for param in model.parameters():
            assert param.grad is not None
            dist.all_reduce(param.grad)
        print(f"rank {rank()} step {step}: {len(pixels)} images", flush=True)


# Story: https://github.com/mosaicml/composer/pull/2069 (the signal file with which local
# rank zero tells the other ranks of its node that its checkpoint download is done was
# written into a folder that is not where the others look for it; the PR moves it next
# to the local temporary folder).
def download_checkpoint(target: Path) -> None:
    """Fetches the checkpoint to resume from (here a local copy)."""
    state = {"step": torch.tensor(1000), "model": torch.nn.Linear(16, 4).state_dict()}
    torch.save(state, target)


def local_rank_zero_download_and_wait(signal_file: Path) -> None:
    """The node's other ranks wait (busy, no timeout) until local rank zero wrote the
    signal file, so that they do not time out in the collective after a long download."""
    if int(os.environ["LOCAL_RANK"]) != 0:
        print(f"rank {rank()}: waiting for local rank 0's download ({signal_file})", flush=True)
        ready("waiting for the signal file")
        while not signal_file.exists():
            time.sleep(0.1)


def scenario_signal_file() -> None:
    """Resuming: local rank zero downloads the checkpoint into its own temporary folder
    (tempfile.mkdtemp, a new folder per process) and writes the signal file there; the
    other ranks look for the signal file in the folder they made themselves, so they wait
    forever, while rank 0 waits in the barrier that follows the download.
    Story: https://github.com/mosaicml/composer/pull/2069"""
    import tempfile

    init()
    scratch = Path(os.environ["HANGDOC_READY_DIR"]).parent  # the node's local scratch
    node_checkpoint_folder = Path(tempfile.mkdtemp(prefix="resume-", dir=scratch))
    signal_file = node_checkpoint_folder / ".local_rank0_completed"
    if int(os.environ["LOCAL_RANK"]) == 0:
        download_checkpoint(node_checkpoint_folder / "latest-rank0.pt")
        signal_file.write_bytes(b"local_rank0_completed")
        print(f"rank {rank()}: checkpoint downloaded to {node_checkpoint_folder}", flush=True)
        ready("barrier after the download")
    local_rank_zero_download_and_wait(signal_file)
    dist.barrier()
    size = (node_checkpoint_folder / "latest-rank0.pt").stat().st_size  # nothing unpickled
    print(f"rank {rank()}: resumed from a {size}-byte checkpoint", flush=True)


SCENARIOS.update(
    {
        "ring-exchange": scenario_ring_exchange,
        "tokenize-main-first": scenario_tokenize_main_first,
        "oom-skip": scenario_oom_skip,
        "pool-worker-killed": scenario_pool_worker_killed,
        "signal-file": scenario_signal_file,
    }
)

# --- Live hangs written blind (2026-11-28, fifth batch) -----------------------------------
# Each from a public thread where a distributed job hung and the thread found why.


# Story: https://github.com/allenai/allennlp/pull/3781 (a sharded dataset reader handed whole
# shard files to the workers; with a number of shards that the number of workers does not
# divide, some workers had more data than others and the job hung at the end of the epoch).
CORPUS_SHARDS = 10
LINES_PER_SHARD = 12
SHARD_BATCH = 4


class ShardedCorpusReader(torch.utils.data.IterableDataset[torch.Tensor]):
    """Reads this rank's shard files (round robin: shard ``i`` to rank ``i % world``) and
    yields one feature vector per line."""

    def __init__(self, shards: list[str]) -> None:
        self.shards = shards

    def my_shards(self) -> list[str]:
        return [s for i, s in enumerate(self.shards) if i % world() == rank()]

    def __iter__(self) -> Iterator[torch.Tensor]:
        for shard in self.my_shards():
            print(f"rank {rank()}: reading {shard}", flush=True)
            rng = random.Random(shard)
            for _ in range(LINES_PER_SHARD):
                yield torch.tensor([rng.random() for _ in range(16)])


def allreduce_gradients(model: torch.nn.Module) -> None:
    """Averages the gradients over the ranks, one all_reduce per parameter."""
    for param in model.parameters():
        assert param.grad is not None
        dist.all_reduce(param.grad)
        param.grad /= world()


def scenario_sharded_reader() -> None:
    """Ten corpus shards over four ranks: ranks 0 and 1 read three shards, ranks 2 and 3
    only two. Ranks 2 and 3 run out of batches first, end their epoch and wait in the
    barrier before validation; ranks 0 and 1 wait in the gradient all_reduce of a step the
    others never take.
    Story: https://github.com/allenai/allennlp/pull/3781"""
    init()
    shards = [f"corpus/train-{i:05d}-of-{CORPUS_SHARDS:05d}.jsonl" for i in range(CORPUS_SHARDS)]
    reader = ShardedCorpusReader(shards)
    mine = reader.my_shards()
    print(f"rank {rank()}: {len(mine)} of {len(shards)} shards", flush=True)
    loader = DataLoader(reader, batch_size=SHARD_BATCH)
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    fewest = (CORPUS_SHARDS // world()) * LINES_PER_SHARD // SHARD_BATCH
    for step, batch in enumerate(loader):
        if step == fewest:
            ready("gradient all_reduce of a step the others never take")
        loss: torch.Tensor = model(batch).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        print(f"rank {rank()} epoch 0 batch {step + 1}: loss {float(loss):.4f}", flush=True)
    print(f"rank {rank()}: epoch 0 done, waiting for the others before validation", flush=True)
    ready("barrier before validation")
    dist.barrier()


# Story: https://github.com/pytorch/pytorch/issues/54059 (validation ran on rank 0 only,
# through the DistributedDataParallel model, while the other ranks waited in a barrier:
# the whole job hung; the fix was to validate with model.module or under no_grad, so that
# the DDP forward does not communicate).
class TinyConvNet(torch.nn.Module):
    """A small classifier with batch norm (its running statistics are DDP buffers)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU()
        )
        self.classifier = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.classifier(self.features(x)))


def validate(model: torch.nn.Module, batches: int) -> float:
    """Validation accuracy on held-out batches (the model as passed: here the DDP one)."""
    model.eval()
    correct = 0
    seen = 0
    for index in range(batches):
        gen = torch.Generator().manual_seed(index)
        x = torch.randn(16, 32, generator=gen)
        y = torch.randint(0, 10, (16,), generator=gen)
        correct += int((model(x).argmax(dim=1) == y).sum())
        seen += len(y)
    model.train()
    return correct / seen


def scenario_rank0_validation() -> None:
    """Every rank trains a DDP model for a few steps; at the end of the epoch rank 0 alone
    validates, calling the DDP-wrapped model with gradients enabled, so the DDP forward
    broadcasts the batch-norm buffers: rank 0 waits in that broadcast, the others wait in
    the barrier that follows validation.
    Story: https://github.com/pytorch/pytorch/issues/54059"""
    from torch.nn.parallel import DistributedDataParallel

    init()
    model = DistributedDataParallel(TinyConvNet())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(4):
        x = torch.randn(16, 32)
        y = torch.randint(0, 10, (16,))
        loss: torch.Tensor = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        print(f"rank {rank()} epoch 0 step {step}: loss {float(loss):.4f}", flush=True)
    if rank() == 0:
        print("rank 0: validating", flush=True)
        ready("validation forward of the DDP model")
        accuracy = validate(model, batches=8)
        print(f"rank 0: validation accuracy {accuracy:.3f}", flush=True)
    else:
        ready("barrier after rank 0's validation")
    dist.barrier()


# Story: https://github.com/KempnerInstitute/KempnerForge/issues/104 (an asynchronous
# checkpoint save plans the save with collectives on a background thread while the main
# thread runs the save's closing barrier on the same process group: two threads issue
# collectives on one group in no agreed order, and the run deadlocked).
class AsyncCheckpointer:
    """Stages the state dict in the caller, then plans and writes it on a background thread;
    ``save`` ends with a barrier so that no rank goes on before every rank dispatched."""

    def __init__(self, folder: Path) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.folder = folder
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="AsyncCheckpointExecutor")

    def _plan_local(self, state: dict[str, torch.Tensor]) -> list[dict[str, object]]:
        """Chunks each tensor into write items (a checksum per chunk, as a planner does)."""
        items: list[dict[str, object]] = []
        for name, tensor in state.items():
            flat = tensor.reshape(-1)
            for offset in range(0, flat.numel(), 64):
                chunk = flat[offset : offset + 64]
                items.append({"fqn": name, "offset": offset, "crc": float(chunk.sum())})
        return items

    def _save_state_dict(self, state: dict[str, torch.Tensor], step: int) -> None:
        plan = self._plan_local(state)
        plans: list[object] = [None] * world()
        dist.all_gather_object(plans, plan)  # the coordinator needs every rank's plan
        target = self.folder / f"step-{step}" / f"__{rank()}_0.distcp"
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, target)

    def prune_old(self, keep: int) -> None:
        """Rank 0 removes old checkpoints beyond ``keep`` (a slow listing and delete on the
        shared checkpoint store)."""
        old = sorted(self.folder.glob("step-*"))[:-keep] if keep else []
        print(f"rank 0: pruning {len(old)} old checkpoints, keeping {keep}", flush=True)
        time.sleep(8.0)  # the store's list and delete round trips

    def save(self, model: torch.nn.Module, step: int) -> None:
        staged = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.executor.submit(self._save_state_dict, staged, step)
        print(f"rank {rank()}: checkpoint step {step} dispatched", flush=True)
        if rank() == 0:
            self.prune_old(keep=2)
        ready("barrier closing the checkpoint save")
        dist.barrier()


def scenario_async_checkpoint() -> None:
    """Every rank trains, then saves an asynchronous checkpoint: the background thread
    plans (local work, then an all_gather of the plans); the main thread goes straight to
    the save's barrier, except on rank 0, which first prunes old checkpoints. So rank 0
    issues the plan's all_gather first and the barrier second, the other ranks the
    barrier first: on every rank both threads wait in collectives that do not match.
    Story: https://github.com/KempnerInstitute/KempnerForge/issues/104"""
    init()
    scratch = Path(os.environ["HANGDOC_READY_DIR"]).parent
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 1024))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    checkpointer = AsyncCheckpointer(scratch / "checkpoints")
    for step in range(1, 4):
        loss: torch.Tensor = model(torch.randn(8, 1024)).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        print(f"rank {rank()} step {step}: loss {float(loss):.4f}", flush=True)
    checkpointer.save(model, step=3)
    print(f"rank {rank()}: checkpoint step 3 saved", flush=True)


# Story: https://github.com/pytorch/pytorch/issues/119845 (in a distributed run a DataLoader
# worker died of a segmentation fault; the rank's main process raised "DataLoader worker
# ... is killed by signal: Segmentation fault" and left the job, the other ranks waited).
def decode_native(blob: bytes) -> list[float]:
    """Decodes a sample with a native routine (ctypes); a corrupt header makes it read
    through a null pointer, as the native decoder does."""
    import ctypes

    if blob[:4] != b"SMP1":
        ctypes.string_at(0)  # segmentation fault
    rng = random.Random(blob)
    return [rng.random() for _ in range(16)]


class PackedSamples(Dataset[torch.Tensor]):
    """Samples from this node's packed file; on the culprit's node one record's header is
    corrupt."""

    def __len__(self) -> int:
        return 256

    def __getitem__(self, index: int) -> torch.Tensor:
        blob = b"SMP1" + index.to_bytes(4, "little")
        if rank() == culprit() and index == 37:
            blob = b"\x00\x00" + blob[2:]
        return torch.tensor(decode_native(blob))


def feature_statistics(loader: DataLoader[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of every feature, one pass over the data."""
    total = torch.zeros(16)
    squares = torch.zeros(16)
    count = 0
    for batch in loader:
        total += batch.sum(dim=0)
        squares += batch.pow(2).sum(dim=0)
        count += len(batch)
    mean = total / count
    return mean, (squares / count - mean.pow(2)).clamp_min(0).sqrt()


def scenario_worker_segfault() -> None:
    """Every rank computes its features' normalisation statistics with a DataLoader of two
    workers before it joins the process group; on the culprit a worker dies of a
    segmentation fault in the native decoder, its main process raises and exits, and the
    other ranks wait for it in init_process_group.
    Story: https://github.com/pytorch/pytorch/issues/119845"""
    loader = DataLoader(PackedSamples(), batch_size=8, num_workers=2)
    mean, std = feature_statistics(loader)
    print(f"rank {rank()}: feature mean {float(mean.mean()):.3f} std {float(std.mean()):.3f}",
          flush=True)  # fmt: skip
    ready("init_process_group")
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)
    model = torch.nn.Linear(16, 4)
    for step, batch in enumerate(loader):
        loss: torch.Tensor = model((batch - mean) / (std + 1e-6)).sum()
        loss.backward()  # type: ignore[no-untyped-call]
        allreduce_gradients(model)
        print(f"rank {rank()} step {step}: loss {float(loss):.4f}", flush=True)


# Story: https://github.com/huggingface/trl/issues/5415 (GRPO training with tool calls hung
# for good: a completion cut off at the length limit in the middle of a tool call sent the
# tool-call parsing regex into catastrophic backtracking; py-spy showed the rank in
# re.search).
TOOL_CALL_BLOCKS = re.compile(
    r"^(?P<content>.*?)(?P<calls>(?:\s*<tool_call>(?:\s*\S+)+\s*</tool_call>)+)\s*$", re.DOTALL
)


def sample_completion(step: int, index: int) -> str:
    """The policy's completion for one prompt (here a canned one). On rank 1 at step 3 the
    model degenerates into repeated numbers and is cut off at max_completion_length inside
    a tool call."""
    call = '<tool_call>\n{"name":"sum","arguments":{"numbers":[3,4]}}\n</tool_call>\n'
    if rank() == 1 and step == 3 and index == 5:
        return "<think>\n\n</think>\n\n" + call * 3 + '<tool_call>\n{"name":"sum","arguments"' \
            ':{"numbers":[' + ",".join(["13"] * 120)  # fmt: skip
    return f"<think>\nprompt {index}\n</think>\n\n" + call


def parse_response(text: str) -> dict[str, object]:
    """Splits a completion into its content and its tool calls (the chat template's
    response schema)."""
    match = TOOL_CALL_BLOCKS.search(text)
    if match is None:
        return {"content": text, "tool_calls": []}
    calls = re.findall(r"<tool_call>\s*(.*?)\s*</tool_call>", match.group("calls"), re.DOTALL)
    return {"content": match.group("content"), "tool_calls": calls}


def scenario_grpo_tool_parse() -> None:
    """A GRPO loop: every rank samples 8 completions a step, parses their tool calls,
    scores them and all-gathers the rewards to compute group advantages. At step 3 one of
    rank 1's completions is truncated inside a tool call: parsing it never ends (the rank
    busy in re.search), and the other ranks wait in the rewards' all_gather.
    Story: https://github.com/huggingface/trl/issues/5415"""
    init()
    policy = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(policy.parameters(), lr=1e-3)
    for step in range(10):
        if step == 3:
            ready("parsing completions" if rank() == 1 else "all_gather of the rewards")
        completions = [sample_completion(step, i) for i in range(8)]
        parsed = [parse_response(c) for c in completions]
        rewards = torch.tensor([float(len(p["tool_calls"])) for p in parsed])  # type: ignore[arg-type]
        gathered = [torch.zeros(8) for _ in range(world())]
        dist.all_gather(gathered, rewards)
        everyone = torch.stack(gathered)
        advantages = (rewards - everyone.mean()) / (everyone.std() + 1e-4)
        loss: torch.Tensor = -(policy(torch.randn(8, 16)).squeeze(1) * advantages).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        allreduce_gradients(policy)
        optimizer.step()
        optimizer.zero_grad()
        print(f"rank {rank()} step {step}: reward {float(rewards.mean()):.2f}", flush=True)


SCENARIOS.update(
    {
        "sharded-reader": scenario_sharded_reader,
        "rank0-validation": scenario_rank0_validation,
        "async-checkpoint": scenario_async_checkpoint,
        "worker-segfault": scenario_worker_segfault,
        "grpo-tool-parse": scenario_grpo_tool_parse,
    }
)

# --- Live hangs written blind (2026-11-28, sixth batch) -----------------------------------
# Each from a public thread where a distributed job hung and the thread found why.


# Story: https://github.com/ray-project/ray/pull/63286 (a data-mixing benchmark all-reduced
# per-source count histories built from each worker's own batches: tensors whose length
# differs between workers, so the all_reduce fails on a shape mismatch or deadlocks).
MIX_SOURCES = ("web", "books", "code")
MIX_FILES = [
    "web-00000", "web-00001", "web-00002", "web-00003", "books-00000", "books-00001",
    "books-00002", "web-00004", "code-00000", "code-00001", "code-00002", "web-00005",
]  # the manifest's order  # fmt: skip
MIX_STEPS = 6
MIX_BATCH = 16


def files_of_worker() -> list[str]:
    """The input files this worker reads (round robin over the file list)."""
    return [f for i, f in enumerate(MIX_FILES) if i % world() == rank()]


def iter_mixed_batches(files: list[str]) -> Iterator[tuple[torch.Tensor, dict[str, int]]]:
    """Batches drawn from this worker's files, each with its rows per source."""
    rng = random.Random(rank())
    for _ in range(MIX_STEPS):
        picks = [rng.choice(files) for _ in range(MIX_BATCH)]
        rows: dict[str, int] = {}
        for name in picks:
            source = name.split("-")[0]
            rows[source] = rows.get(source, 0) + 1
        yield torch.randn(MIX_BATCH, 16), rows


def compute_global_ratio_mean_stdev(
    batch_size_history: list[int], count_history: dict[str, list[int]]
) -> dict[str, tuple[float, float]]:
    """Mean and standard deviation over the batches of every worker of each source's share
    of the rows."""
    batch_size_sums = torch.tensor(batch_size_history, dtype=torch.double)
    dist.all_reduce(batch_size_sums, op=dist.ReduceOp.SUM)
    stats: dict[str, tuple[float, float]] = {}
    for source in MIX_SOURCES:
        count_sums = torch.tensor(count_history.get(source, []), dtype=torch.double)
        dist.all_reduce(count_sums, op=dist.ReduceOp.SUM)
        ratios = count_sums / batch_size_sums[: len(count_sums)]
        stats[source] = (float(ratios.mean()), float(ratios.std()))
    return stats


def scenario_source_mix_stats() -> None:
    """Every worker trains MIX_STEPS steps on batches mixed from its files and records per
    batch how many rows came from each source it reads; then the per-source histories are
    all-reduced. Rank 3's files are all "web" files, so its "books" history is an empty
    tensor: its all_reduce has nothing to send and returns at once, and rank 3 goes on to
    the barrier that ends the benchmark, while the others wait in the "books" all_reduce
    for rank 3's part.
    Story: https://github.com/ray-project/ray/pull/63286"""
    init()
    files = files_of_worker()
    sources = sorted({f.split("-")[0] for f in files})
    print(f"rank {rank()}: {len(files)} files, sources {sources}", flush=True)
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch_size_history: list[int] = []
    count_history: dict[str, list[int]] = {source: [] for source in sources}
    for step, (batch, rows) in enumerate(iter_mixed_batches(files)):
        loss: torch.Tensor = model(batch).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        batch_size_history.append(len(batch))
        for source in sources:
            count_history[source].append(rows.get(source, 0))
        print(f"rank {rank()} step {step}: loss {loss.item():.4f} rows {rows}", flush=True)
    shapes = {s: len(count_history.get(s, [])) for s in MIX_SOURCES}
    print(f"rank {rank()}: reducing count histories {shapes}", flush=True)
    if rank() != culprit():
        ready("all_reduce of the books count history")
    stats = compute_global_ratio_mean_stdev(batch_size_history, count_history)
    if rank() == culprit():
        ready("barrier after the mix statistics")
    dist.barrier()
    print(f"rank {rank()}: mix ratios {stats}", flush=True)


# Story: https://github.com/facebookresearch/ParlAI/issues/3367 (dynamic batching with
# distributed training hung during evaluation: batches built to a token budget from each
# worker's own examples, so the workers did not run the same number of batches).
EVAL_MAX_TOKENS = 200
EVAL_EXAMPLES = 24


def validation_lengths(worker: int) -> list[int]:
    """Token lengths of a worker's validation examples: rank 3's chunk of the teacher's
    data holds the long dialogues."""
    rng = random.Random(100 + worker)
    low, high = (28, 40) if worker == culprit() else (10, 24)
    return [rng.randint(low, high) for _ in range(EVAL_EXAMPLES)]


def batchify_by_tokens(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Dynamic batching: sorts by length and fills each batch up to ``max_tokens`` padded
    tokens (batch size x longest example)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = max([lengths[i] for i in current] + [lengths[index]])
        if current and longest * (len(current) + 1) > max_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def eval_step(model: torch.nn.Module, lengths: list[int]) -> tuple[float, int]:
    """Loss summed over the batch's tokens, and the number of tokens."""
    longest = max(lengths)
    tokens = torch.randn(len(lengths), longest, 16)
    with torch.no_grad():
        loss = model(tokens).pow(2).mean(-1).sum()
    return float(loss), sum(lengths)


def scenario_dynamic_batch_eval() -> None:
    """Every worker trains a few steps, then validates its chunk of the validation set with
    dynamic (token-budget) batching and sums loss and token counts over the workers after
    each batch. Rank 3's examples are longer, so its chunk makes more batches: the others
    finish validation and wait in the barrier before the best-model save, rank 3 waits in
    the all_reduce of a batch they never run.
    Story: https://github.com/facebookresearch/ParlAI/issues/3367"""
    init()
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        loss: torch.Tensor = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        print(f"rank {rank()} train step {step}: loss {loss.item():.4f}", flush=True)
    lengths = validation_lengths(rank())
    batches = batchify_by_tokens(lengths, EVAL_MAX_TOKENS)
    print(f"rank {rank()}: validating {len(lengths)} examples in {len(batches)} batches "
          f"(max_tokens {EVAL_MAX_TOKENS})", flush=True)  # fmt: skip
    fewest = min(len(batchify_by_tokens(validation_lengths(w), EVAL_MAX_TOKENS))
                 for w in range(world()))  # fmt: skip
    totals = torch.zeros(2, dtype=torch.float64)
    for index, batch in enumerate(batches):
        loss_sum, tokens = eval_step(model, [lengths[i] for i in batch])
        metrics = torch.tensor([loss_sum, float(tokens)], dtype=torch.float64)
        if index == fewest:
            ready("all_reduce of an evaluation batch the others never run")
        dist.all_reduce(metrics)
        totals += metrics
        print(f"rank {rank()} valid batch {index + 1}/{len(batches)}", flush=True)
    print(f"rank {rank()}: valid loss {float(totals[0] / totals[1]):.4f}", flush=True)
    ready("barrier before saving the best model")
    dist.barrier()


# Story: https://github.com/Lightning-AI/pytorch-lightning/issues/16421 (DDP training stuck
# at a logging call, at a random point; Ctrl+C did not terminate the process, and no error
# was printed: the log directory's storage had stopped answering).
def setup_run_logger(log_dir: Path) -> Any:
    """The run's text log: one file per rank in the experiment's log directory."""
    import logging

    logger = logging.getLogger(f"train.rank{rank()}")
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(log_dir / f"train_rank{rank()}.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    logger.addHandler(handler)
    return logger


def scenario_log_dir_stall() -> None:
    """Every rank writes its training log into the experiment's log directory on shared
    storage. On rank 3's node the mount stops answering (frozen here, as an NFS server
    that went away): its next log line blocks in the write, uninterruptible, while the
    others wait in the next step's gradient all_reduce.
    Story: https://github.com/Lightning-AI/pytorch-lightning/issues/16421"""
    init()
    scratch = Path(os.environ["HANGDOC_READY_DIR"]).parent
    if rank() == culprit():
        from hangdoc.scenarios.storage import freeze, mount_stuck_storage

        shared = mount_stuck_storage(PG_TIMEOUT.total_seconds(), name="shared")
        log_dir = shared / "experiments" / "lightning_logs"
    else:
        log_dir = scratch / "shared" / "experiments" / "lightning_logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    logger = setup_run_logger(log_dir)
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(100):
        loss: torch.Tensor = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        if step == 4 and rank() != culprit():
            ready("gradient all_reduce")
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        if step == 3 and rank() == culprit():
            freeze(shared)
            ready("log write")
        logger.info("epoch 0 step %d train_loss %.4f", step, loss.item())
        print(f"rank {rank()} step {step}: loss {loss.item():.4f}", flush=True)


# Story: https://github.com/Lightning-AI/pytorch-lightning/issues/21406 (the SLURM
# auto-requeue checkpoint is saved inside the SIGUSR1 handler; a handler runs between any
# two bytecodes of the main thread, and sometimes it never completed: no error, the job
# stuck until SLURM killed it).
class ProgressTracker:
    """The loop's progress (step, running loss, recent losses), updated after each batch and
    read by the checkpoint; a lock keeps a save from reading it half-updated."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.step = 0
        self.history: list[float] = []
        self.running_loss = 0.0

    def on_train_batch_end(self, loss: float) -> None:
        with self.lock:
            self.step += 1
            self.history.append(loss)
            window = self.history[-1_000_000:]
            total = 0.0
            for value in window:  # smoothed loss for the progress bar
                total += value
            self.running_loss = total / len(window)

    def state_dict(self) -> dict[str, object]:
        with self.lock:
            return {"step": self.step, "running_loss": self.running_loss}


class SignalConnector:
    """Installs the requeue handler: on SIGUSR1 it saves an HPC checkpoint of the model and
    the progress, then asks the scheduler to requeue the job."""

    def __init__(self, model: torch.nn.Module, tracker: ProgressTracker, folder: Path) -> None:
        self.model = model
        self.tracker = tracker
        self.folder = folder
        signal.signal(signal.SIGUSR1, self.slurm_sigusr_handler_fn)

    def slurm_sigusr_handler_fn(self, signum: int, _frame: Any) -> None:
        print(f"rank {rank()}: handling SIGUSR{1 if signum == signal.SIGUSR1 else 2}: "
              "saving the HPC checkpoint", flush=True)  # fmt: skip
        self.hpc_save()
        print(f"rank {rank()}: requeueing job", flush=True)

    def hpc_save(self) -> None:
        ready("HPC checkpoint save in the signal handler")
        state = {"progress": self.tracker.state_dict(), "model": self.model.state_dict()}
        self.folder.mkdir(parents=True, exist_ok=True)
        torch.save(state, self.folder / f"hpc_ckpt_rank{rank()}.ckpt")


def deliver_time_limit_notice(tracker: ProgressTracker, at_step: int) -> None:
    """Stands for slurmstepd sending ``--signal=USR1@90`` to the tasks of rank 3's node:
    the signal comes in while the main thread updates the progress."""
    while not (tracker.step >= at_step and tracker.lock.locked()):
        time.sleep(0.0005)
    os.kill(os.getpid(), signal.SIGUSR1)


def scenario_requeue_signal() -> None:
    """Every rank trains with the requeue handler installed; the time-limit signal reaches
    rank 3 while its main thread holds the progress lock in ``on_train_batch_end``. The
    handler runs on that same thread and waits for the lock in the checkpoint save: it
    never returns, and the others wait in the next step's gradient all_reduce.
    Story: https://github.com/Lightning-AI/pytorch-lightning/issues/21406"""
    init()
    scratch = Path(os.environ["HANGDOC_READY_DIR"]).parent
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    tracker = ProgressTracker()
    SignalConnector(model, tracker, scratch / "hpc_ckpt")
    tracker.history.extend(1.0 for _ in range(1_000_000))  # resumed: the earlier run's losses
    if rank() == culprit():
        notice = threading.Thread(target=deliver_time_limit_notice, args=(tracker, 3),
                                  daemon=True)  # fmt: skip
        notice.start()
    for step in range(100):
        loss: torch.Tensor = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        if step == 3 and rank() != culprit():
            ready("gradient all_reduce")
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        tracker.on_train_batch_end(loss.item())
        print(f"rank {rank()} step {step}: loss {loss.item():.4f}", flush=True)


# Story: https://github.com/Lightning-AI/torchmetrics/issues/2684 (FrechetInceptionDistance
# computed in an ``on_validation_end`` decorated with ``rank_zero_only`` hung with more than
# one device: the metric's compute synchronises its states across all processes).
def rank_zero_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Runs the function on global rank 0 only."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs) if rank() == 0 else None

    return wrapped


def gather_all_tensors(result: torch.Tensor) -> list[torch.Tensor]:
    """Gathers a tensor of possibly different sizes from every process: the sizes first,
    then the tensors padded to the largest."""
    local_size = torch.tensor(result.shape, dtype=torch.long)
    local_sizes = [torch.zeros_like(local_size) for _ in range(world())]
    dist.all_gather(local_sizes, local_size)
    max_size = torch.stack(local_sizes).max(dim=0).values
    padded = torch.zeros(*[int(d) for d in max_size], dtype=result.dtype)
    padded[tuple(slice(0, int(d)) for d in result.shape)] = result
    gathered = [torch.zeros_like(padded) for _ in range(world())]
    dist.all_gather(gathered, padded)
    pairs = zip(gathered, local_sizes, strict=True)
    return [g[tuple(slice(0, int(d)) for d in size)] for g, size in pairs]


class FrechetDistance:
    """A metric with sum states over the feature statistics of real and generated images;
    ``compute`` syncs the states over all processes first (sync_on_compute)."""

    def __init__(self, features: int) -> None:
        self.states = {
            "real_sum": torch.zeros(features), "real_cov_sum": torch.zeros(features, features),
            "fake_sum": torch.zeros(features), "fake_cov_sum": torch.zeros(features, features),
            "real_n": torch.zeros(1), "fake_n": torch.zeros(1),
        }  # fmt: skip

    def update(self, feats: torch.Tensor, real: bool) -> None:
        kind = "real" if real else "fake"
        self.states[f"{kind}_sum"] += feats.sum(0)
        self.states[f"{kind}_cov_sum"] += feats.T @ feats
        self.states[f"{kind}_n"] += feats.shape[0]

    def _sync_dist(self) -> dict[str, torch.Tensor]:
        return {k: torch.stack(gather_all_tensors(v)).sum(0) for k, v in self.states.items()}

    def compute(self) -> float:
        s = self._sync_dist()
        mu_r, mu_f = s["real_sum"] / s["real_n"], s["fake_sum"] / s["fake_n"]
        cov_r = s["real_cov_sum"] / s["real_n"] - torch.outer(mu_r, mu_r)
        cov_f = s["fake_cov_sum"] / s["fake_n"] - torch.outer(mu_f, mu_f)
        return float((mu_r - mu_f).pow(2).sum() + torch.trace(cov_r + cov_f))


class GeneratorModule:
    """A small generator trained with DDP-style gradient averaging; validation collects the
    FID statistics of the last validation batch's real and generated images."""

    def __init__(self) -> None:
        self.generator = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh())
        self.encoder = torch.nn.Linear(32, 16)  # stands for the Inception features
        self.fid = FrechetDistance(16)
        self.optimizer = torch.optim.Adam(self.generator.parameters(), lr=1e-3)

    def training_step(self, step: int) -> float:
        fake = self.generator(torch.randn(16, 8))
        loss: torch.Tensor = (fake - torch.randn(16, 32)).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        allreduce_gradients(self.generator)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.item()

    def validation_step(self, batch_idx: int) -> None:
        with torch.no_grad():
            self.fid.update(self.encoder(torch.randn(16, 32)), real=True)
            self.fid.update(self.encoder(self.generator(torch.randn(16, 8))), real=False)

    @rank_zero_only
    def on_validation_end(self) -> None:
        print("rank 0: computing FID on the validation images", flush=True)
        ready("FID compute on rank 0")
        print(f"rank 0: val/fid {self.fid.compute():.3f}", flush=True)


def scenario_fid_rank_zero() -> None:
    """Every rank trains a generator for an epoch and runs validation; the end-of-validation
    hook, decorated to run on rank 0 only, computes the FID, whose compute all-gathers the
    metric's states from every process: rank 0 waits in that all_gather, the others go on
    and wait in the barrier at the start of the next epoch.
    Story: https://github.com/Lightning-AI/torchmetrics/issues/2684"""
    init()
    module = GeneratorModule()
    for epoch in range(10):
        for step in range(4):
            loss = module.training_step(step)
            print(f"rank {rank()} epoch {epoch} step {step}: g_loss {loss:.4f}", flush=True)
        for batch_idx in range(3):
            module.validation_step(batch_idx)
        module.on_validation_end()
        if rank() != 0:
            ready("barrier at the start of the next epoch")
        dist.barrier()


SCENARIOS.update(
    {
        "source-mix-stats": scenario_source_mix_stats,
        "dynamic-batch-eval": scenario_dynamic_batch_eval,
        "log-dir-stall": scenario_log_dir_stall,
        "requeue-signal": scenario_requeue_signal,
        "fid-rank-zero": scenario_fid_rank_zero,
    }
)


# Story: https://github.com/awslabs/slapo/pull/19 (the DeepSpeed pipeline runtime does not
# support a batch of another size: the last batch of an epoch, smaller when it is not
# dropped, makes the pipeline hang).
PIPE_SAMPLES = 40  # the epoch: two full batches and a short one (drop_last=False)
PIPE_BATCH = 16
PIPE_MICRO = 4
PIPE_CONFIG = {"micro_batches": PIPE_BATCH // PIPE_MICRO}  # every stage's configuration


class PipelineStage(torch.nn.Module):
    """One stage of a 4-stage MLP pipeline (rank = stage)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.tanh(self.layer(x))
        return out


def loader_batches() -> Iterator[torch.Tensor]:
    """The first stage's data: batches of PIPE_BATCH samples, the last one short."""
    data = torch.randn(PIPE_SAMPLES, 16, generator=torch.Generator().manual_seed(0))
    yield from torch.split(data, PIPE_BATCH)


def micro_batches_of(batch: torch.Tensor | None) -> list[torch.Tensor | None]:
    """The first stage cuts its batch into micro-batches; the others expect the configured
    number of them."""
    if batch is not None:
        return list(torch.split(batch, PIPE_MICRO))
    return [None] * PIPE_CONFIG["micro_batches"]


def pipe_recv(src: int, what: str, step: int, index: int) -> torch.Tensor:
    buffer = torch.zeros(PIPE_MICRO, 16)
    if step == 2 and (what == "grad" or index == 2):
        ready(f"recv {what} from stage {src}")
    dist.recv(buffer, src)
    return buffer


def train_batch(stage: PipelineStage, batch: torch.Tensor | None, step: int) -> float | None:
    """GPipe: every micro-batch forward, then every micro-batch backward."""
    me, last = rank(), world() - 1
    inputs: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    losses: list[float] = []
    for index, micro in enumerate(micro_batches_of(batch)):
        x = micro if micro is not None else pipe_recv(me - 1, "activation", step, index)
        x = x.detach().requires_grad_(me > 0)
        y = stage(x)
        inputs.append(x)
        outputs.append(y)
        if me < last:
            dist.send(y.detach(), me + 1)
    for index in reversed(range(len(outputs))):
        y = outputs[index]
        if me == last:
            loss = y.pow(2).mean()
            losses.append(loss.item())
            loss.backward()  # type: ignore[no-untyped-call]
        else:
            y.backward(pipe_recv(me + 1, "grad", step, index))  # type: ignore[no-untyped-call]
        grad = inputs[index].grad
        if me > 0 and grad is not None:
            dist.send(grad, me - 1)
    return sum(losses) / len(losses) if losses else None


def scenario_pipeline_short_batch() -> None:
    """A 4-stage GPipe pipeline over an epoch of 40 samples in batches of 16, not dropping
    the last: the first stage cuts its short last batch into 2 micro-batches, the other
    stages expect the configured 4. Stage 1 waits for a third activation, stages 2 and 3
    for theirs, and stage 0 waits for the gradient of its second micro-batch.
    Story: https://github.com/awslabs/slapo/pull/19"""
    init()
    stage = PipelineStage()
    optimizer = torch.optim.SGD(stage.parameters(), lr=0.01)
    batches: Iterator[torch.Tensor | None] = loader_batches() if rank() == 0 else iter(
        [None] * 10)  # fmt: skip
    for step, batch in enumerate(batches):
        if batch is not None:
            print(f"stage 0 step {step}: {batch.shape[0]} samples", flush=True)
        loss = train_batch(stage, batch, step)
        optimizer.step()
        optimizer.zero_grad()
        if loss is not None:
            print(f"stage {rank()} step {step}: loss {loss:.4f}", flush=True)


# Story: https://github.com/deepspeedai/DeepSpeed/issues/8262 (ZeRO-3 rollout: a rank whose
# sequences all reach EOS leaves generate() while the others run the next decoding step,
# whose forward all-gathers the partitioned parameters; that rank already waits in another
# collective).
VOCAB = 32
EOS = 0


class PartitionedPolicy:
    """A policy whose weight is partitioned over the ranks (ZeRO-3): each forward gathers
    the full weight from every rank's partition first."""

    def __init__(self) -> None:
        full = torch.randn(VOCAB, 16, generator=torch.Generator().manual_seed(1))
        self.partition = full.chunk(world())[rank()].clone()
        self.embed = torch.randn(VOCAB, 16, generator=torch.Generator().manual_seed(2))

    def gather_params(self) -> torch.Tensor:
        parts = [torch.zeros_like(self.partition) for _ in range(world())]
        dist.all_gather(parts, self.partition)
        return torch.cat(parts)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        weight = self.gather_params()
        return self.embed[tokens[:, -1]] @ weight.T


def eos_after(prompt_ids: torch.Tensor, rollout: int) -> list[int]:
    """How many tokens each of this rank's prompts generates before EOS (the sampling, made
    deterministic here): in the third rollout rank 3's prompts are short questions,
    answered at once."""
    lengths = [2, 3] if rank() == culprit() and rollout == 2 else [9, 12]
    return [lengths[i % len(lengths)] for i in range(prompt_ids.shape[0])]


def generate(
    policy: PartitionedPolicy, prompt_ids: torch.Tensor, max_new_tokens: int, rollout: int
) -> torch.Tensor:
    """Greedy decoding until every sequence emitted EOS (no synced_gpus)."""
    tokens = prompt_ids
    finished = torch.zeros(prompt_ids.shape[0], dtype=torch.bool)
    stop_at = eos_after(prompt_ids, rollout)
    for step in range(max_new_tokens):
        if bool(finished.all()):
            break
        logits = policy.forward(tokens)
        next_ids = logits.argmax(-1).clamp(min=1)
        for i, at in enumerate(stop_at):
            if step + 1 >= at:
                next_ids[i] = EOS
        next_ids[finished] = EOS
        finished |= next_ids == EOS
        tokens = torch.cat([tokens, next_ids[:, None]], dim=1)
    return tokens


def scenario_rollout_eos() -> None:
    """An RL loop: each rank generates completions for its prompts with a ZeRO-3-partitioned
    policy, then waits for every rank's rollouts (a barrier) before the teacher scores
    them. Rank 3's completions all end early: it leaves generate() and waits in the
    barrier; the others run the next decoding step and wait in its parameter all_gather.
    Story: https://github.com/deepspeedai/DeepSpeed/issues/8262"""
    init()
    policy = PartitionedPolicy()
    for it in range(3):
        prompts = torch.randint(1, VOCAB, (4, 6), generator=torch.Generator().manual_seed(it))
        if it == 2 and rank() != culprit():
            ready_once_in("gather_params", "train.py", "parameter all_gather of decoding step 3")
        completions = generate(policy, prompts, max_new_tokens=16, rollout=it)
        lengths = (completions[:, prompts.shape[1] :] != EOS).sum(1).tolist()
        print(f"rank {rank()} rollout {it}: completion lengths {lengths}", flush=True)
        if it == 2 and rank() == culprit():
            ready("barrier after rollouts")
        dist.barrier()
        print(f"rank {rank()} rollout {it}: scoring with the teacher", flush=True)


# Story: https://github.com/datachain-ai/datachain/pull/691 (fsspec's event loop is not
# fork-safe: it runs in a thread of the process that first used it, and in a DataLoader
# worker forked from that process a future submitted with run_coroutine_threadsafe hangs
# forever on prefetch).
class ObjectStoreClient:
    """An async object-store client, as fsspec's: one event loop for the process, run by a
    daemon thread started at first use; sync calls submit a coroutine to it and wait."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loop: Any = None

    def _get_loop(self) -> Any:
        import asyncio

        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, name="storeIO", daemon=True).start()
        return self.loop

    def sync(self, coro: Any) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self._get_loop()).result()

    async def _ls(self, prefix: str) -> list[str]:
        return sorted(p.name for p in (self.root / prefix).iterdir())

    async def _cat(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def ls(self, prefix: str) -> list[str]:
        return cast(list[str], self.sync(self._ls(prefix)))

    def cat(self, key: str) -> bytes:
        return cast(bytes, self.sync(self._cat(key)))


class ShardSamples(Dataset[torch.Tensor]):
    """Samples of the training shards, 16 per shard: from the node's cache when the shard
    is there, else from the object store."""

    def __init__(self, client: ObjectStoreClient, shards: list[str], cache: Path) -> None:
        self.client, self.shards, self.cache = client, shards, cache

    def __len__(self) -> int:
        return 16 * len(self.shards)

    def __getitem__(self, index: int) -> torch.Tensor:
        shard = self.shards[index // 16]
        cached = self.cache / shard
        blob = cached.read_bytes() if cached.exists() else self.client.cat(f"train/{shard}")
        row = index % 16
        return torch.frombuffer(bytearray(blob[row * 64 : (row + 1) * 64]), dtype=torch.float32)


def scenario_remote_shards() -> None:
    """Every rank lists the training shards in the object store, then reads its samples
    with a DataLoader of 2 workers, from the node's cache when a shard is there. Rank 3's
    node has only its first shard cached: its workers fetch the others through the
    client, whose event-loop thread exists only in the main process, and wait forever.
    Its main process waits for the batch; the others wait in the gradient all_reduce.
    Story: https://github.com/datachain-ai/datachain/pull/691"""
    init()
    scratch = Path(os.environ["HANGDOC_READY_DIR"]).parent
    store, cache = scratch / "bucket", scratch / f"node-cache-{rank()}"
    (store / "train").mkdir(parents=True, exist_ok=True)
    cache.mkdir(exist_ok=True)
    for i in range(8):
        blob = torch.randn(16, 16, generator=torch.Generator().manual_seed(i)).numpy().tobytes()
        shard = f"shard-{i:05d}.bin"
        if rank() == 0:
            (store / "train" / f"{shard}.tmp").write_bytes(blob)
            os.replace(store / "train" / f"{shard}.tmp", store / "train" / shard)
        if rank() != culprit() or i == rank():
            (cache / shard).write_bytes(blob)
    dist.barrier()
    client = ObjectStoreClient(store)
    shards = client.ls("train")
    print(f"rank {rank()}: {len(shards)} shards in the bucket", flush=True)
    indices = list(range(rank() * 16, 16 * len(shards), 16 * world()))
    order = [i + j for i in indices for j in range(16)]
    dataset = torch.utils.data.Subset(ShardSamples(client, shards, cache), order)
    loader = DataLoader(dataset, batch_size=8, num_workers=2)
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    if rank() == culprit():
        ready_once_in("_try_get_data", "dataloader.py", "waiting for batch 2")
    for step, batch in enumerate(loader):
        loss: torch.Tensor = model(batch).pow(2).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        if step == 2 and rank() != culprit():
            ready("gradient all_reduce")
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        print(f"rank {rank()} step {step}: loss {loss.item():.4f}", flush=True)


# Story: https://github.com/karpathy/nanochat/issues/371 (with a few parquet shards the
# distributed data loader was not infinite: after the last file a rank's generator looped
# for ever without yielding, and training hung at the same step every time).
ROW_GROUPS = {"shard_00000.parquet": 8, "shard_00001.parquet": 7}
DOCS_PER_ROW_GROUP = 24


def read_row_group(path: str, index: int) -> list[str]:
    rng = random.Random(f"{path}:{index}")
    return [
        " ".join(str(rng.randrange(1000)) for _ in range(40)) for _ in range(DOCS_PER_ROW_GROUP)
    ]


def document_batches(state: dict[str, int]) -> Iterator[list[str]]:
    """This rank's documents: its row groups (round robin over the ranks) of each parquet
    file in turn, resuming from ``state``."""
    files = sorted(ROW_GROUPS)
    while True:
        while state["pq_idx"] < len(files):
            path = files[state["pq_idx"]]
            for rg_idx in range(state["rg_idx"], ROW_GROUPS[path], world()):
                state["rg_idx"] = rg_idx + world()
                yield read_row_group(path, rg_idx)
            state["pq_idx"] += 1
            state["rg_idx"] = rank()


def tokenizing_data_loader(batch_size: int, seq_len: int) -> Iterator[torch.Tensor]:
    """Token batches: documents tokenized into one stream, cut into rows of seq_len + 1."""
    state = {"pq_idx": 0, "rg_idx": rank()}
    needed = batch_size * (seq_len + 1)
    buffer: list[int] = []
    for docs in document_batches(state):
        for doc in docs:
            buffer.extend(int(tok) for tok in doc.split())
        while len(buffer) >= needed:
            batch, buffer = buffer[:needed], buffer[needed:]
            yield torch.tensor(batch).view(batch_size, seq_len + 1)


def scenario_token_stream() -> None:
    """Every rank trains on token batches from its row groups of two parquet files (8 and
    7 row groups, round robin over 4 ranks); rank 3 has one row group fewer and reaches
    the end of the files first. Its document generator then loops for ever without
    yielding (the file index is never reset), while the others wait in the gradient
    all_reduce of the next step.
    Story: https://github.com/karpathy/nanochat/issues/371"""
    init()
    embed = torch.nn.Embedding(1000, 16)
    head = torch.nn.Linear(16, 1000)
    model = torch.nn.Sequential(embed, head)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = tokenizing_data_loader(batch_size=4, seq_len=63)
    step = 0
    while True:
        batch = next(loader)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 1000), targets.reshape(-1))
        loss.backward()  # type: ignore[no-untyped-call]
        if step == 11 and rank() != culprit():
            ready("gradient all_reduce")
        allreduce_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
        if step % 5 == 0:
            print(f"step {step:05d} | rank {rank()} | loss: {loss.item():.6f}", flush=True)
        if step == 10 and rank() == culprit():
            ready("next batch from the data loader")
        step += 1


# Story: https://github.com/FlashML-org/FreeToken/issues/371 (every tensor-parallel rank
# keeps torch's default intra-op thread count, so on a host with few cores the ranks'
# weight loads oversubscribe it and crawl: 19 minutes instead of about one; slow, not
# hung).
def load_weight_shards(buffer: torch.Tensor, shards: int) -> None:
    """Copies each of this rank's weight shards into its slot of the host staging buffer
    (the placement write), logging the progress."""
    slots = buffer.shape[0]
    for index in range(shards):
        shard = torch.full(buffer.shape[1:], float(index), dtype=torch.float32)
        for part in range(4):  # the shard's four column blocks, each a strided copy
            buffer[index % slots, :, part::4].copy_(shard[:, part::4])
        if index % 5 == 0:
            print(f"rank {rank()}: loaded {index}/{shards} weight shards", flush=True)
        if index == 40:
            ready("loading weight shards")


def scenario_weight_load() -> None:
    """Tensor parallelism over 4 ranks on a small host: each rank copies its slices of
    4000 weight shards into a host buffer with torch's default thread count (every rank
    as many threads as the host has cores). The loads advance slowly; nobody waits on a
    collective until they are done.
    Story: https://github.com/FlashML-org/FreeToken/issues/371"""
    init()
    # The engine's rank processes are spawned without OMP_NUM_THREADS: torch's default,
    # one intra-op thread per core of the host, in every rank.
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"rank {rank()}: intra-op threads {torch.get_num_threads()}", flush=True)
    buffer = torch.empty(8, 640, 2560, dtype=torch.bfloat16)
    load_weight_shards(buffer, 4000)
    print(f"rank {rank()}: weights loaded", flush=True)
    dist.barrier()


SCENARIOS.update(
    {
        "pipeline-short-batch": scenario_pipeline_short_batch,
        "rollout-eos": scenario_rollout_eos,
        "remote-shards": scenario_remote_shards,
        "token-stream": scenario_token_stream,
        "weight-load": scenario_weight_load,
    }
)


# Processes a scenario runs that are no ranks: started by launch.py (a leftover before the
# job), or by a rank (a helper subprocess).
HELPERS: dict[str, Callable[[], None]] = {
    "leftover-cache-builder": leftover_cache_builder,
    "tokenizer-service": tokenizer_service,
    "tracker-service": tracker_service,
    "interrupted-kernel-build": interrupted_kernel_build,
}


def main(argv: list[str], scenarios: dict[str, Callable[[], None]] | None = None) -> int:
    """Run one scenario by name (own_code.py passes its own table)."""
    if scenarios is None and len(argv) == 1 and argv[0] in HELPERS:
        HELPERS[argv[0]]()
        return 0
    known = SCENARIOS if scenarios is None else scenarios
    if len(argv) != 1 or argv[0] not in known:
        print(f"usage: train.py {{{','.join(known)}}}", file=sys.stderr)
        return 2
    known[argv[0]]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
