"""The rank a Ray actor's name pins, read where Ray reports that actor dead or killed.

Hand-written lines of documented formats: verl's worker names (verl/single_controller/ray/
base.py ``RayWorkerGroup._create_worker``: ``f"{name_prefix}{cia_name}_{pg_idx}:{local_rank}"``,
the rank counted up over the placement groups, so the name pins the rank in placement
group 0 only); Ray's ActorDiedError (python/ray/exceptions.py: the first line, then
``\\tclass_name:``, ``\\tactor_id:``, ``\\tpid:``, ``\\tname:``, ``\\tnamespace:``, ``\\tip:``,
then the cause's message); the raylet's memory monitor kill ("Memory on the node (IP: …)
where the task (task ID: …, name=…, pid=N, memory used=…) was running was …, which exceeds
the memory usage threshold of 0.95. Ray killed this worker (ID: …) because …", and since
Ray 2.4x "where the lease (lease ID: …").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.ray_actors import actor_name_rank, killed_task
from tests.unit.recognition_kit import MANGLINGS, Mangle
from tests.unit.recognition_kit import answer as _answer


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("07GxnAWorkerDict_0:3", 3),
        ("WorkerDict_0:0", 0),
        ("8szhVkWorkerDict_0:3:WorkerDict.__init__", 3),  # a task of the actor
        ("1HsG1ZWorkerDict_0:12:WorkerDict.actor_rollout_ref_init_model", 12),
    ],
)
def test_verls_worker_in_placement_group_0_is_its_local_rank(name: str, rank: int) -> None:
    assert actor_name_rank(name) == rank


@pytest.mark.parametrize(
    "name",
    [
        "07GxnAWorkerDict_1:3",  # placement group 1: rank 1 * (group size) + 3, size unknown
        "07GxnAWorkerDict_2:0",
        "rollout_colocate_1vLLMAsyncRollout_0:2",  # a rollout replica's own world
        "ActorRolloutRefWorker_0:1",  # not the trainer's colocated class
        "allocate_memory",  # a plain task
        "node_0:3",
        "10.0.0.1:29500",
        "WorkerDict_0:3.5",
    ],
)
def test_other_names_pin_no_rank(name: str) -> None:
    assert actor_name_rank(name) is None


def _actor_died(name: str | None, pid: int = 87687) -> str:
    fields = "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
    fields += "\tactor_id: 5066c201b724a3936948a11201000000\n"
    fields += f"\tpid: {pid}\n"
    if name is not None:
        fields += f"\tname: {name}\n"
    fields += "\tnamespace: b8860f81-d334-496c-a8f4-c7ed6a6b49f3\n\tip: 10.29.214.5\n"
    return (
        "Traceback (most recent call last):\n"
        '  File "/app/verl/trainer/main_ppo.py", line 42, in run\n'
        "    ray.get(self.workers.sleep.remote())\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
        "task.\n" + fields + "The actor is dead because its worker process has died. Worker "
        "exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
        "connection error code 2. End of file.\n"
    )


@pytest.mark.parametrize(("label", "mangle"), MANGLINGS)
def test_a_dead_verl_worker_is_the_rank_its_name_pins(
    tmp_path: Path, label: str, mangle: Mangle
) -> None:
    # GIVEN Ray's report that verl's worker WorkerDict_0:3 died
    text = _actor_died("07GxnAWorkerDict_0:3")
    # WHEN it is read, however pasted
    category, _rule, culprits = _answer(tmp_path, mangle(text))
    # THEN a rank died, and it is rank 3
    assert category is Category.RANK_DEAD, label
    assert culprits == (3,), label


@pytest.mark.parametrize(
    "name",
    [None, "07GxnAWorkerDict_1:3", "my_actor_0:3"],
    ids=["unnamed actor", "placement group 1", "a name of the job's own"],
)
def test_a_dead_actor_whose_name_pins_no_rank_names_no_culprit(
    tmp_path: Path, name: str | None
) -> None:
    category, _rule, culprits = _answer(tmp_path, _actor_died(name))
    assert category is Category.RANK_DEAD
    assert culprits == ()


def test_a_yaml_list_with_class_name_is_not_rays(tmp_path: Path) -> None:
    # GIVEN a configuration dump whose keys look like Ray's fields, but no actor_id second
    text = (
        "class_name: WorkerDict\nname: 07GxnAWorkerDict_0:3\npid: 4242\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
        "task.\n"
    )
    # THEN the death is read, and no rank is named
    category, _rule, culprits = _answer(tmp_path, text)
    assert category is Category.RANK_DEAD
    assert culprits == ()


_OOM_HEAD = (
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
)
_OOM_DETAIL = (
    "Memory on the node (IP: 10.20.49.141, ID: 4748aa6d1bc114b8bf58822d0b162796a1d36a79dee5c167c9"
    "bf91f5) where the {what} ({what} ID: 9e43ace6a1234e13df7b456b01000000, name={name}, "
    "pid=4100606, memory used=56.57GB) was running was 246.41GB / 251.54GB (0.979583), which "
    "exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: c9e16e95ed0c9707dcd"
    "e91d19343981acdcd5808faec8c16c1c9fa0f) because it was the most recently scheduled task; to "
    "see more information about memory usage on this node, use `ray logs raylet.out -ip "
    "10.20.49.141`.\n"
)


@pytest.mark.parametrize("what", ["task", "lease"])
def test_the_memory_monitors_kill_names_the_killed_task(what: str) -> None:
    line = _OOM_DETAIL.format(what=what, name="8szhVkWorkerDict_0:3:WorkerDict.__init__")
    assert killed_task(line) == (4100606, 3)
    plain = _OOM_DETAIL.format(what=what, name="allocate_memory")
    assert killed_task(plain) == (4100606, None)
    assert killed_task(_OOM_HEAD) == (None, None)


@pytest.mark.parametrize(("label", "mangle"), MANGLINGS)
def test_a_verl_worker_the_memory_monitor_killed_is_its_rank(
    tmp_path: Path, label: str, mangle: Mangle
) -> None:
    text = _OOM_HEAD + _OOM_DETAIL.format(
        what="task", name="8szhVkWorkerDict_0:3:WorkerDict.__init__"
    )
    category, _rule, culprits = _answer(tmp_path, mangle(text))
    assert category is Category.RANK_DEAD, label
    assert culprits == (3,), label


def test_a_killed_plain_task_names_no_rank(tmp_path: Path) -> None:
    text = _OOM_HEAD + _OOM_DETAIL.format(what="task", name="allocate_memory")
    category, _rule, culprits = _answer(tmp_path, text)
    assert category is Category.RANK_DEAD
    assert culprits == ()
