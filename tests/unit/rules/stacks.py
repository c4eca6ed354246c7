"""Typed builders of Evidence for rule tests: real frame shapes (file paths and function
names as py-spy prints them for torch 2.13 on Python 3.11), without any file on disk."""

from __future__ import annotations

from hangdoc.analyzer.model import (
    Evidence,
    Frame,
    IoCounters,
    OutputSizes,
    ProcessEvidence,
    ProcSample,
    ProcState,
    StackSample,
    ThreadStack,
    ThreadState,
)

SITE = "/opt/venv/lib/python3.11/site-packages"
C10D = f"{SITE}/torch/distributed/distributed_c10d.py"
LOGGER = f"{SITE}/torch/distributed/c10d_logger.py"
TRAIN = "/srv/job/train.py"


def c10d(op: str, line: int = 4287) -> list[Frame]:
    return [
        Frame(op, C10D, line),
        Frame("_exception_logger.<locals>.wrapper", LOGGER, 83),
    ]


def user(*names: str, start: int = 40) -> list[Frame]:
    return [Frame(name, TRAIN, start + i) for i, name in enumerate(names)] + [
        Frame("<module>", TRAIN, 200)
    ]


IN_ALL_GATHER = c10d("all_gather") + user("train_step", "main")
IN_ALL_REDUCE = c10d("all_reduce", 3252) + user("train_step", "main")
IN_BARRIER = c10d("barrier", 5356) + user("main")
SAVING = [
    Frame("Event.wait", "/usr/lib/python3.11/threading.py", 629),
    Frame("StuckFile.write", TRAIN, 66),
    Frame("_save", f"{SITE}/torch/serialization.py", 1259),
    Frame("save", f"{SITE}/torch/serialization.py", 1003),
    *user("save_checkpoint", "main", start=72),
]
TEARDOWN = [
    Frame("_PollLikeSelector.select", "/usr/lib/python3.11/selectors.py", 415),
    Frame("Popen.wait", "/usr/lib/python3.11/multiprocessing/popen_fork.py", 40),
    Frame("BaseProcess.join", "/usr/lib/python3.11/multiprocessing/process.py", 149),
    Frame(
        "_MultiProcessingDataLoaderIter._shutdown_workers",
        f"{SITE}/torch/utils/data/dataloader.py",
        1654,
    ),
    Frame("_MultiProcessingDataLoaderIter.__del__", f"{SITE}/torch/utils/data/dataloader.py", 1704),
    *user("train", "main", start=130),
]
EVAL_GATHER = [
    *c10d("all_gather"),
    Frame("all_gather_object", C10D, 3513),
    *user("evaluate", "main", start=156),
]
SLEEPING_USER = user("compute", "main", start=179)


def process(
    rank: int,
    *samples: list[Frame],
    world: int | None = 4,
    host: str = "node1",
    pid: int | None = None,
    proc_samples: list[ProcSample] | None = None,
    exited: bool = False,
) -> ProcessEvidence:
    pid = pid if pid is not None else 1000 + rank
    stack_samples = [
        StackSample(
            index=i,
            time=100.0 + 3 * i,
            threads=(
                ThreadStack(
                    frames=tuple(frames),
                    os_thread_id=pid,
                    name="MainThread",
                    is_main=True,
                    source=f"rank{rank}/pyspy.{i}.json",
                ),
            ),
            source=f"rank{rank}/pyspy.{i}.json",
        )
        for i, frames in enumerate(samples)
    ]
    return ProcessEvidence(
        rank=rank,
        host=host,
        pid=pid,
        local_rank=rank,
        world_size=world,
        local_world_size=world,
        stack_samples=stack_samples,
        proc_samples=proc_samples or [],
        sources=[f"rank{rank}/process.json"],
        exited=exited,
    )


def proc_sample(
    index: int, pid: int, *, rchar: int = 0, cpu: int = 0, switches: int = 0, stdout: int = 0
) -> ProcSample:
    return ProcSample(
        index=index,
        time=100.0 + 3 * index,
        state=ProcState.SLEEPING,
        threads=(ThreadState(tid=pid, cpu_ticks=cpu, voluntary_ctxt_switches=switches),),
        io=IoCounters(rchar=rchar, wchar=rchar, syscr=0, syscw=0),
        output_sizes=OutputSizes(stdout=stdout),
    )


def evidence(*procs: ProcessEvidence) -> Evidence:
    return Evidence(processes=list(procs))
