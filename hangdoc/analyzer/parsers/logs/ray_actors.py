"""The rank a Ray actor's name carries, and the actor Ray's death report names.

Ray names an actor only when its creator gives it a name; most frameworks leave their
training workers unnamed (OpenRLHF's ``ray_actor_type.options(...)`` in
openrlhf/trainer/ray/launcher.py, Ray Train's ``RayTrainWorker``): their names say
nothing. verl names every worker of a worker group (verl/single_controller/ray/base.py,
``RayWorkerGroup._create_worker``, the same since its first public version)::

    name = f"{self.name_prefix}{cia_name}_{pg_idx}:{local_rank}"  # e.g. Worker_2:5

``name_prefix`` is a random six-character string unless the caller passes one, ``cia_name``
the worker class (``WorkerDict``: the colocated class ``create_colocated_worker_cls``
builds for the trainer's actor, rollout, reference and critic roles), ``pg_idx`` the
placement group (one per node, sorted by node address) and ``local_rank`` the bundle in
it. ``_init_with_resource_pool`` counts ``rank`` up over the groups in order, so the
worker's RANK (the environment variable it passes, torch.distributed's global rank) is
``pg_idx * local_world_size + local_rank``: in placement group 0, the local rank itself;
in another group only with the group size, which the name does not carry. Read here: the
colocated ``WorkerDict`` in placement group 0 only. A split resource pool
(``SubRayResourcePool``, verl ≥ 0.6: a rollout replica's workers, named
``rollout_colocate_<i>…``) starts its bundles at an offset, and its ranks are a replica's
own world: those classes are not read.

Ray's ActorDiedError (python/ray/exceptions.py) lists the dead actor under its first line,
one field a line, tab-indented: ``class_name:``, ``actor_id:``, then ``pid:``, ``name:``,
``namespace:``, ``ip:`` when known, then the cause's message. Its memory monitor's kill
(src/ray/raylet: "Task was killed due to the node running low on memory. … (actor ID: …,
name=<actor>:<Class>.<method>, pid=N, memory used=…)") names the task by the actor's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.vocabulary import EventKind

# verl's colocated worker class in placement group 0: "<prefix>WorkerDict_0:<local rank>",
# the prefix glued before it, a task's ":<Class>.<method>" maybe after it.
_VERL_NAME = re.compile(r"WorkerDict_(?P<pg>\d{1,4}):(?P<local>\d{1,4})(?![\d.])")
# Ray's fields of the dead actor, one a line under ActorDiedError's first line.
# (Read whatever the indentation a paste left; the list is Ray's only when ``actor_id``
# follows ``class_name``, as it always does.)
_FIELD = re.compile(r"^\s*(?P<key>class_name|actor_id|pid|name|namespace|ip): ?(?P<value>.*)$")


def actor_name_rank(name: str) -> int | None:
    """The global rank a Ray actor's (or its task's) name pins, or None: verl's
    ``WorkerDict_0:N`` is rank N; any other group or class pins none."""
    m = _VERL_NAME.search(name)
    if m is None or int(m.group("pg")) != 0:
        return None
    return int(m.group("local"))


@dataclass(slots=True)
class RayActorFields:
    """ActorDiedError's list of the dead actor's fields: its pid and the rank its name
    pins make a death report of that rank (the first line, already read, names no one)."""

    pid: int | None = None
    rank: int | None = None
    name: str | None = None
    lines: list[str] = field(default_factory=list)

    @staticmethod
    def start(text: str) -> RayActorFields | None:
        m = _FIELD.match(text)
        return RayActorFields() if m is not None and m.group("key") == "class_name" else None

    def feed(self, text: str) -> bool:
        m = _FIELD.match(text)
        if m is None or m.group("key") == "class_name":
            return False
        if not self.lines and m.group("key") != "actor_id":
            return False  # not Ray's list: its second field is always the actor's id
        value = m.group("value").strip()
        self.lines.append(text.strip())
        if m.group("key") == "pid" and value.isdigit():
            self.pid = int(value)
        elif m.group("key") == "name":
            self.name, self.rank = value, actor_name_rank(value)
        return True

    def finish(self) -> Hit | None:
        if self.rank is None:
            return None
        died = EventPayload(message=f"Ray actor {self.name} died")
        return Hit(
            EventKind.ACTOR_DIED,
            payload=died,
            rank=self.rank,
            text="; ".join(self.lines),
            key=("ray", self.pid),
            named_pid=self.pid,
        )


# The memory monitor's report of the task it killed: "(actor ID: …, name=<task name>,
# pid=N, memory used=…)" (task ID for a plain task); the task's name starts with its
# actor's name.
_KILLED_TASK = re.compile(r"\bname=(?P<name>[^,\s]+), pid=(?P<pid>\d+)")


def killed_task(text: str) -> tuple[int | None, int | None]:
    """The pid of the task the memory monitor's line says it killed, and the rank its
    actor's name pins (each None when the line does not say)."""
    m = _KILLED_TASK.search(text)
    if m is None:
        return None, None
    return int(m.group("pid")), actor_name_rank(m.group("name"))
