"""What each rank's blocked main thread waits on (analyzer/views/waits.py): from the kernel
on the recorded hangs of fixtures/dumps (real gloo jobs, fixtures/record.py), placed
against the job; from the innermost frames where no /proc was read (wait_frames.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Frame, PeerRole, StackTextKind, ThreadStack, WaitKind
from hangdoc.analyzer.views.wait_frames import frames_wait
from hangdoc.analyzer.views.waits import JobWaits, WaitSource

ROOT = Path(__file__).resolve().parents[3]
DUMPS = ROOT / "fixtures" / "dumps"


def _waits(name: str) -> JobWaits:
    return JobWaits(load_paths([DUMPS / name]))


def test_a_lock_held_by_a_process_outside_the_job_is_placed_outside_and_before_it() -> None:
    # GIVEN flock-stale: rank 3 blocked in flock on the cache lock that a process the
    # scenario started before the job still holds
    wait = _waits("flock-stale").by_rank()[3]
    # THEN the kernel says so, with the job's own function as where it called it
    assert (wait.kind, wait.source, wait.syscall) == (
        WaitKind.LOCK_FILE,
        WaitSource.KERNEL,
        "flock",
    )
    assert wait.target is not None and wait.target.endswith("data-cache.lock")
    assert wait.caller is not None and wait.caller.function == "cache_lock"
    [holder] = wait.outside()
    assert holder.role is PeerRole.HOLDER and holder.lock == "FLOCK WRITE"
    assert not holder.in_job and holder.rank is None
    assert holder.command is not None and "leftover-cache-builder" in holder.command
    assert holder.before_job_s is not None and holder.before_job_s > 1.0
    assert wait.on_held_lock() and not wait.other_ranks()


def test_a_lock_held_by_another_rank_names_that_rank() -> None:
    waits = _waits("flock-rank")
    held = waits.on_held_locks()
    assert sorted(held) == [0, 1, 2]
    for wait in held.values():
        [holder] = wait.holders
        assert (holder.rank, holder.in_job) == (3, True)
        assert wait.other_ranks() == (holder,) and not wait.outside()


def test_a_pipe_to_the_ranks_own_child_that_waits_back_is_a_cycle() -> None:
    wait = _waits("child-pipe").by_rank()[3]
    assert (wait.kind, wait.syscall) == (WaitKind.PIPE, "read")
    [child] = wait.cycle()
    assert child.role is PeerRole.OTHER_END and child.rank == 3 and child.in_job
    assert child.command is not None and "tokenizer-service" in child.command
    assert child.wait is not None and child.wait.kind is WaitKind.PIPE
    assert not wait.on_held_lock()


def test_ranks_in_a_collective_are_not_on_a_held_lock() -> None:
    waits = _waits("flock-stale")
    assert sorted(waits.on_held_locks()) == [3]


def test_a_dump_from_before_the_waits_were_recorded_has_none_from_the_kernel() -> None:
    # checkpoint: recorded before issue 21; its threads carry no "wait" key
    waits = _waits("checkpoint").by_rank()
    assert all(w.source is WaitSource.FRAMES for w in waits.values())


def test_a_pasted_py_bt_waiting_for_a_lock_or_the_gil_is_read_from_its_frames() -> None:
    # cylc-flow issue 1823 (fixtures/pastes/README.md): gdb's py-bt of a process whose
    # thread sits in "Waiting for a lock (e.g. GIL)" under threading's join
    evidence = load_paths([ROOT / "fixtures/pastes/pybt/cylc_1823.txt"])
    waits = [w for p in evidence.processes if (w := JobWaits(evidence).of(p)) is not None]
    [wait] = waits
    assert (wait.kind, wait.source, wait.target) == (WaitKind.FUTEX, WaitSource.FRAMES, "the GIL")
    assert wait.frame is not None and wait.frame.function == "acquire" and not wait.holders


def _py(function: str, file: str) -> Frame:
    return Frame(function=function, file=file, line=1)


def _native(function: str) -> Frame:
    return Frame(function=function, file="libc.so.6", native=True)


USER = _py("prepare", "train.py")


@pytest.mark.parametrize(
    ("frames", "kind"),
    [
        ([_py("acquire", "/venv/site-packages/filelock/_api.py"), USER], WaitKind.LOCK_FILE),
        ([_native("__GI___flock"), USER], WaitKind.LOCK_FILE),
        ([_native("_IO_flockfile"), USER], None),  # stdio's own lock, not a file lock
        ([_py("select", "selectors.py"), _py("_communicate", "subprocess.py"), USER],
         WaitKind.PIPE),
        ([_py("select", "selectors.py"), USER], WaitKind.POLL),
        ([_py("_try_wait", "subprocess.py"), _py("wait", "subprocess.py"), USER],
         WaitKind.CHILD),
        ([_py("sendall", "socket.py"), USER], WaitKind.SOCKET),
        ([_native("recv"), USER], WaitKind.SOCKET),
        ([_py("wait", "threading.py"), USER], WaitKind.FUTEX),
        ([_native("clock_nanosleep"), USER], WaitKind.SLEEP),
        ([USER], None),
    ],
)  # fmt: skip
def test_innermost_frames_say_what_a_thread_waits_on(frames: list[Frame], kind: WaitKind) -> None:
    said = frames_wait(ThreadStack(frames=tuple(frames)))
    assert (said[0] if said else None) is kind


def test_waiting_for_the_gil_is_pystacks_word_not_py_spys() -> None:
    # pystack prints "(Waiting for the GIL)" (owns_gil=False); py-spy's "idle" thread
    # does not hold the GIL either, which says nothing about waiting for it.
    thread = ThreadStack(frames=(USER,), owns_gil=False)
    said = frames_wait(thread, (StackTextKind.PYSTACK,))
    assert said is not None and said[0] is WaitKind.FUTEX and said[2] == "the GIL"
    assert frames_wait(thread, (StackTextKind.PYSPY,)) is None


def test_a_pipe_only_the_rank_holds_open_is_read_with_its_dead_producer() -> None:
    # GIVEN producer-killed: rank 3 reads a multiprocessing Queue's pipe after its
    # producer process was killed (a zombie, not reaped)
    wait = _waits("producer-killed").by_rank()[3]
    # THEN the kernel shows the pipe with the rank itself as its only other end
    assert (wait.kind, wait.source, wait.syscall) == (WaitKind.PIPE, WaitSource.KERNEL, "read")
    assert wait.holders and {h.rank for h in wait.holders} == {3}
    assert not wait.cycle()


def test_a_read_of_the_terminal_is_a_terminal_wait() -> None:
    wait = _waits("login-prompt").by_rank()[3]
    assert (wait.kind, wait.source, wait.syscall) == (WaitKind.TERMINAL, WaitSource.KERNEL, "read")
    assert wait.target is not None and wait.target.startswith("/dev/pts/")
