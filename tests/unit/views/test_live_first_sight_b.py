"""The mechanisms built for the blind live hangs of live-2026-11-28b (issue 21, items 4-5):
lock files polled for their existence read as lock-file waits; the ranks' rendezvous
settings compared; the ranks' last log lines compared, numbers masked."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import (
    Category,
    Evidence,
    Frame,
    LogLine,
    ProcessEvidence,
    ThreadStack,
    WaitKind,
)
from hangdoc.analyzer.views.activity_table import TABLE, Activity
from hangdoc.analyzer.views.log_compare import ValueKind, last_line_values
from hangdoc.analyzer.views.rendezvous_settings import odd_rendezvous
from hangdoc.analyzer.views.wait_frames import frames_wait, polls_a_lock_file
from hangdoc.analyzer.views.waits import JobWaits, WaitSource

ROOT = Path(__file__).resolve().parents[3]
BATON = Frame(
    function="FileBaton.wait", file="/venv/site-packages/torch/utils/file_baton.py", line=50
)
LOAD = Frame(function="load", file="/venv/site-packages/torch/utils/cpp_extension.py", line=1927)
USER = Frame(function="build_kernels", file="/job/train.py", line=12)


def test_torchs_file_baton_is_a_polled_lock_file_wait_from_its_frames() -> None:
    # GIVEN a thread in FileBaton.wait under cpp_extension.load (no kernel view)
    said = frames_wait(ThreadStack(frames=(BATON, LOAD, USER)))
    # THEN the frames say it waits for a lock file, one that is polled
    assert said is not None and said[0] is WaitKind.LOCK_FILE and said[1] == BATON
    assert polls_a_lock_file(BATON) and not polls_a_lock_file(USER) and not polls_a_lock_file(None)
    # AND its activity names the cause: a lock file that outlives its holder
    row = TABLE[Activity.LOCK_FILE_POLL]
    assert row.names_cause and row.category is Category.PYTHON_DEADLOCK


def test_a_sleep_in_file_baton_at_every_sample_is_a_lock_file_wait_on_a_live_dump() -> None:
    # GIVEN fused-kernels: rank 3 polls a lock file a killed build left; the kernel shows a
    # sleep (clock_nanosleep), not flock, and /proc/locks nothing
    evidence = load_paths([ROOT / "fixtures/dumps/fused-kernels"])
    wait = JobWaits(evidence).by_rank()[3]
    # THEN the wait is the lock file's, the kernel's sleep joined with the frame
    assert (wait.kind, wait.source, wait.syscall) == (
        WaitKind.LOCK_FILE,
        WaitSource.KERNEL,
        "clock_nanosleep",
    )
    assert wait.frame is not None and wait.frame.function == "FileBaton.wait"
    # AND no holder is made up, nor a file the rank does not hold open
    assert wait.holders == () and wait.target is None and not wait.on_held_lock()


def _envs(envs: dict[int, dict[str, str]]) -> Evidence:
    return Evidence(processes=[ProcessEvidence(rank=r, env=e) for r, e in envs.items()])


def _env(port: str | None, world: str = "4") -> dict[str, str]:
    env = {"MASTER_ADDR": "10.0.0.1", "WORLD_SIZE": world, "RANK": "0"}
    if port is not None:
        env["MASTER_PORT"] = port
    return env


def test_the_rank_whose_rendezvous_setting_differs_from_all_others_is_named() -> None:
    evidence = _envs({0: _env("29500"), 1: _env("29500"), 2: _env("29500"), 3: _env(None)})
    [odd] = odd_rendezvous(evidence, (0, 1, 2, 3))
    assert (odd.key, odd.ranks, odd.values, odd.agreed) == ("MASTER_PORT", (3,), (None,), "29500")
    assert odd.text() == "rank 3 has no MASTER_PORT where ranks 0-2 have MASTER_PORT=29500"
    # a different world size is a setting too
    evidence = _envs({0: _env("1"), 1: _env("1"), 2: _env("1", world="8")})
    assert [(o.key, o.ranks) for o in odd_rendezvous(evidence, (0, 1, 2))] == [("WORLD_SIZE", (2,))]


def test_rendezvous_settings_name_nobody_without_a_clear_majority() -> None:
    # two against two, two ranks only, or no environment collected: nobody stands out
    split = _envs({0: _env("1"), 1: _env("1"), 2: _env("2"), 3: _env("2")})
    assert odd_rendezvous(split, (0, 1, 2, 3)) == []
    assert odd_rendezvous(_envs({0: _env("1"), 1: _env("2")}), (0, 1)) == []
    bare = _envs({0: _env("1"), 1: _env("1"), 2: {}})
    assert odd_rendezvous(bare, (0, 1, 2)) == []


def _logs(last: dict[int, str]) -> Evidence:
    return Evidence(
        processes=[
            ProcessEvidence(
                rank=r, log_lines=[LogLine("starting", f"r{r}", 1), LogLine(t, f"r{r}", 2)]
            )
            for r, t in last.items()
        ]
    )


def test_the_same_names_in_another_order_on_one_rank_is_an_order() -> None:
    found = last_line_values(
        _logs({r: f"rank {r} reducing ['image', 'text']" for r in range(3)}
              | {3: "rank 3 reducing ['text', 'image']"})
    )  # fmt: skip
    assert found is not None and (found.kind, found.ranks, found.others) == (
        ValueKind.ORDER,
        (3,),
        (0, 1, 2),
    )
    assert "['text', 'image']" in found.detail and "rank 0" in found.detail


def test_another_value_on_one_rank_is_a_value_not_an_order() -> None:
    found = last_line_values(
        _logs({0: "mode: train", 1: "mode: train", 2: "mode: train", 3: "mode: eval"})
    )
    assert found is not None and (found.kind, found.ranks) == (ValueKind.VALUE, (3,))


def test_numbers_another_line_or_no_majority_are_no_value() -> None:
    # losses and timings differ on every rank: numbers are masked
    assert (
        last_line_values(_logs({r: f"rank {r} loss {0.1 * r:.3f} took {r}s" for r in range(4)}))
        is None
    )
    # another line altogether is not the same line with another value
    assert (
        last_line_values(_logs({0: "saving", 1: "saving", 2: "saving", 3: "epoch done, now eval"}))
        is None
    )
    # two against two: no value every other rank agrees on
    assert last_line_values(_logs({0: "a x", 1: "a x", 2: "a y", 3: "a y"})) is None
