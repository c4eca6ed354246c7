"""HD004 calls a job slow when a busy rank works while the others wait; a rank the job
expects (WORLD_SIZE) that nobody collected may be the one they wait for, so then the
movement says nothing about the job. Recorded shape: crash-at-startup under load (rank 3
died before the collection; rank 1 was still on its way into init_process_group)."""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import (
    Evidence,
    Frame,
    ProcessEvidence,
    StackSample,
    ThreadStack,
)

_C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
T0 = 1_700_000_000.0


def _main(pid: int, *frames: Frame) -> ThreadStack:
    return ThreadStack(frames=frames, os_thread_id=pid, name="MainThread", is_main=True)


def _waiting(pid: int) -> ThreadStack:
    return _main(pid, Frame("all_reduce", _C10D, 3252), Frame("train", "/job/train.py", 40))


def _sample(index: int, thread: ThreadStack) -> StackSample:
    return StackSample(index=index, time=T0 + index, threads=(thread,), source=f"s{index}.json")


def _job(world_size: int) -> Evidence:
    processes = []
    for rank in range(3):
        pid = 100 + rank
        if rank == 1:  # busy: its stack moved between the samples
            first = _main(pid, Frame("load_index", "/job/data.py", 12))
            later = _main(pid, Frame("stage_dataset", "/job/data.py", 30))
            samples = [_sample(0, first), _sample(1, later)]
        else:
            samples = [_sample(0, _waiting(pid)), _sample(1, _waiting(pid))]
        processes.append(
            ProcessEvidence(rank=rank, pid=pid, world_size=world_size, stack_samples=samples)
        )
    return Evidence(processes=processes)


def test_a_busy_rank_among_waiters_is_not_slow_when_an_expected_rank_was_never_collected() -> None:
    # GIVEN ranks 0 and 2 waiting, rank 1 moving, and WORLD_SIZE 4: rank 3 never collected
    diagnosis = analyze(_job(world_size=4))
    # THEN nothing says "slow, not hung": the waiters may wait for the missing rank
    assert not any(f.says_not_hung for f in diagnosis.findings)
    progress = [f for f in diagnosis.findings if f.rule == "HD004"]
    assert progress and all(f.category.value == "unknown" for f in progress)


def test_a_busy_rank_among_waiters_is_slow_when_every_expected_rank_was_collected() -> None:
    # GIVEN the same three ranks, and WORLD_SIZE 3: nobody is missing
    diagnosis = analyze(_job(world_size=3))
    # THEN rank 1 is still working while ranks 0 and 2 wait: slow, not hung
    [progress] = [f for f in diagnosis.findings if f.rule == "HD004"]
    assert progress.says_not_hung and progress.culprit_ranks == (1,)
