"""The rank a file's name gives (hangdoc/common/rank_names.py): one set of rules for the
stacks, the logs and the flight recorder dumps, each trailing number by its writer's
convention."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.common.rank_names import NamedRank, Trailing, rank_from_name

ONE = Trailing.ONE_PROCESS


@pytest.mark.parametrize(
    ("name", "trailing", "rank"),
    [
        ("rank3.txt", ONE, 3),
        ("rank_3.log", ONE, 3),
        ("rank-3", ONE, 3),
        ("stacks_rank12.json", Trailing.NEVER, 12),
        ("RANK7.TXT", ONE, 7),
        ("r3.txt", ONE, 3),
        ("dump-r5-sample1.txt", ONE, 5),
        ("pyspy-3.json", ONE, 3),
        ("stacks_3.txt", ONE, 3),
        ("pyspy-3.json", Trailing.NEVER, None),  # a trailing number only for one process
        ("worker3.txt", ONE, None),
        ("job-worker-3.txt", ONE, None),  # k8s pod index, not a rank
        ("node_2.txt", ONE, None),
        ("stacks_20250101_120000.txt", ONE, None),  # a timestamp
        ("pyspy.0.json", ONE, None),  # a sample index
        ("ranks.txt", ONE, None),
        ("error.json", ONE, None),
        ("trace-03.txt", ONE, None),
        ("gdb_threads_2_5.txt", ONE, None),  # two numbers: which one would be the rank?
    ],
)
def test_rank_from_a_file_name(name: str, trailing: Trailing, rank: int | None) -> None:
    assert rank_from_name(Path("/x") / name, trailing).rank == rank


@pytest.mark.parametrize(
    ("path", "rank"),
    [
        # torch's flight recorder names a dump <TORCH_FR_DUMP_TEMP_FILE><rank>
        ("dump/rank12/flight_recorder.hook.json", 12),
        ("x/comm_lib_trace_rank_7", 7),
        ("x/nccl_trace_rank_container-node02_5", 5),
        ("x/comm_lib_trace_rank_3.json", 3),
        ("x/fr_trace42", 42),
        ("x/trace.json", None),
    ],
)
def test_rank_appended_by_the_flight_recorder(path: str, rank: int | None) -> None:
    assert rank_from_name(Path(path), Trailing.APPENDED).rank == rank


def test_rank_from_a_folder_name() -> None:
    assert rank_from_name(Path("/x/rank4/stderr.log"), ONE).rank == 4
    assert rank_from_name("d/rank3/fr/dump.pkl").rank == 3  # the folder above the file's


def test_torchruns_worker_folder_gives_a_local_rank_only() -> None:
    named = rank_from_name(Path("/logs/attempt_0/1/stderr.log"), ONE)
    assert named == NamedRank(local_rank=1, how=named.how) and named.rank is None
    assert rank_from_name("run\\attempt_2\\3\\error.json").local_rank == 3  # a Windows path


def test_how_it_was_found_is_said() -> None:
    assert "rank3" in rank_from_name("logs/rank3.log").how
    assert rank_from_name("logs/train.log").how == ""
