"""HD100: a DataLoader worker (stuck, D state, zombie, stopped) blocks its rank; the
worker's py-spy stacks and /proc facts are joined on its pid."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, ChildProcess, FileMode, OpenFile, ProcState, Strength

from . import causes_stacks as C
from . import stacks as S

MAIN_FETCH = [
    C.f("wait", "/usr/lib/python3.11/multiprocessing/connection.py", 947),
    C.f("Queue.get", C.QUEUES, 113),
    C.f("_MultiProcessingDataLoaderIter._try_get_data", C.DATALOADER, 1291),
    C.f("_MultiProcessingDataLoaderIter._next_data", C.DATALOADER, 1478),
    C.f("_BaseDataLoaderIter.__next__", C.DATALOADER, 734),
    C.f("scenario_dataloader_worker", line=268),
]
IN_DATASET = [
    C.f("ForkLockDataset.__getitem__", line=248),
    C.f("_MapDatasetFetcher.fetch", C.FETCH, 52),
    C.f("_worker_loop", C.WORKER, 349),
]
IDLE_WORKER = [C.f("Queue.get", C.QUEUES, 113), C.f("_worker_loop", C.WORKER, 318)]
PID = 1003
WORKERS = (3001, 3002)


def _rank3(
    worker_frames: list[list[C.Frame]],
    facts: list[ChildProcess] | None = None,
    main: list[C.Frame] = MAIN_FETCH,
) -> C.Evidence:
    """Rank 3 waits on its loader; worker stacks per sample; facts for every sample."""
    samples = [
        C.Sample(
            [C.T(main, PID, wchan="do_select")],
            children=list(facts or []),
            child_stacks=[(w, [C.T(frames, w)]) for w in WORKERS],
        )
        for frames in worker_frames
    ]
    return C.evidence(*C.victims(), C.rank(3, *samples))


def _fact(
    pid: int, state: str, wchan: str | None, *, threads_in_d: int = 0,
    files: tuple[OpenFile, ...] = (),
) -> ChildProcess:  # fmt: skip
    return ChildProcess(pid=pid, ppid=PID, name="python", state=ProcState(state), wchan=wchan,
                        threads_in_d=threads_in_d, files=files)  # fmt: skip


def test_worker_stuck_in_the_dataset_on_a_lock_is_named() -> None:
    facts = [_fact(w, "S", "futex_do_wait") for w in WORKERS]
    diag = analyze(_rank3([IN_DATASET, IN_DATASET], facts))
    primary = diag.findings[0]
    assert primary.rule == "HD100"
    assert primary.category is Category.DATALOADER
    assert primary.culprit_ranks == (3,)
    assert "worker pid 3001" in primary.title
    assert "ForkLockDataset.__getitem__ (train.py:248)" in primary.title
    assert "all_reduce" in primary.title
    assert "waiting on a lock" in primary.explanation
    assert "worker pid 3002 (blocked)" in primary.explanation
    assert primary.strength is Strength.CONCLUSIVE  # above HD001, which says the same category


def test_worker_in_d_state_names_the_file_it_reads() -> None:
    shard = OpenFile(fd=7, path="/mnt/nfs/shard-0042.tar", mode=FileMode.READ, pos=4096,
                     fstype="nfs4", mount="/mnt/nfs")  # fmt: skip
    facts = [
        _fact(3001, "D", "rpc_wait_bit_killable", threads_in_d=1, files=(shard,)),
        _fact(3002, "S", "futex_do_wait"),
    ]
    primary = analyze(_rank3([IN_DATASET, IN_DATASET], facts)).findings[0]
    assert primary.rule == "HD100"
    assert "uninterruptible I/O" in primary.title
    assert "/mnt/nfs/shard-0042.tar on /mnt/nfs (nfs4)" in primary.explanation
    assert "file-system I/O" in primary.explanation


@pytest.mark.parametrize(("state", "words"), [("Z", "died (zombie"), ("T", "is stopped")])
def test_zombie_and_stopped_workers(state: str, words: str) -> None:
    facts = [_fact(3001, state, None), _fact(3002, "S", "do_select")]
    primary = analyze(_rank3([IDLE_WORKER, IDLE_WORKER], facts)).findings[0]
    assert primary.rule == "HD100"
    assert words in primary.title


def test_idle_or_moving_workers_do_not_fire() -> None:
    moving = [[C.f("ForkLockDataset.__getitem__", line=240 + i), *IN_DATASET[1:]] for i in range(2)]
    for frames in ([IDLE_WORKER, IDLE_WORKER], moving):
        diag = analyze(_rank3(frames))
        assert all(f.rule != "HD100" for f in diag.findings)
        assert diag.findings[0].category is Category.DATALOADER  # HD001 still says so


def test_teardown_blocked_by_a_worker() -> None:
    primary = analyze(_rank3([IN_DATASET, IN_DATASET], main=S.TEARDOWN)).findings[0]
    assert primary.rule == "HD100"
    assert "shutting down its DataLoader workers" in primary.title


def test_worker_id_from_locals() -> None:
    frames = [*IN_DATASET[:2], C.f("_worker_loop", C.WORKER, 349, worker_id="1")]
    primary = analyze(_rank3([frames, frames])).findings[0]
    assert "worker 1 (pid 3001)" in primary.title
