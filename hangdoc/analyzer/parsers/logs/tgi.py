"""Text Generation Inference's launcher: the shard it names as failed.

TGI's launcher (huggingface/text-generation-inference, launcher/src/main.rs) starts one
``text-generation-server`` process a shard, each with ``RANK`` set to its shard index
(``shard_manager``: ``envs.push(("RANK".into(), rank.to_string().into()))``), so the
index is the rank torch.distributed knows the process by. Each shard's manager sends
``ShardStatus::Failed(rank)`` when its process exits (``p.try_wait()`` returned a status,
whatever it was: its exit code is not printed), and the launcher reports it with
``tracing::error!("Shard {rank} failed to start")`` while it waited for the shards to be
ready (``start_shards``, since 2022-10), or ``tracing::error!("Shard {rank} crashed")``
once they served (``main``'s loop), then shuts the other shards down ("Shutting down
shards"; each manager's "Shard terminated"). The line names the worker that ended first:
the launcher reacts to the first status it receives. Its log is tracing's compact format
(``<time> ERROR text_generation_launcher: Shard 0 failed to start``) or, with
``--json-output``, one JSON object a line whose ``fields.message`` holds the same words.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.launch import Launcher, LauncherReport
from hangdoc.analyzer.vocabulary import EventKind

_SHARD_FAILED = re.compile(r"\bShard (?P<rank>\d+) (?:failed to start|crashed)\b")

NEED = Need.patterns(_SHARD_FAILED)


def match_tgi(text: str) -> Hit | None:
    """TGI's launcher reporting the shard whose process ended, by its rank."""
    if not NEED.admits(text):
        return None
    m = _SHARD_FAILED.search(text)
    if m is None:
        return None
    rank = int(m.group("rank"))
    report = LauncherReport(launcher=Launcher.TGI, rank=rank)
    return Hit(EventKind.WORKER_FAILED, rank=rank, payload=report, key=("tgi-shard", rank))
