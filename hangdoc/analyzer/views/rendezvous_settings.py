"""The ranks' rendezvous settings compared: the rank whose store address differs.

Every member of a process group must meet at one store: the same MASTER_ADDR and
MASTER_PORT (the env:// rendezvous, torch/distributed/rendezvous.py
``_env_rendezvous_handler``), in a group of the same WORLD_SIZE. A rank started with
another value (a node whose launch line exports no MASTER_PORT, so that the script or
torch falls back to a default or a port of its own) waits at a store nobody else comes
to, and the others wait for it. Where the collector read the ranks' environment
(process.json's ``env``: the launcher's variables), the settings are compared key by key;
a rank whose value (or whose lack of one) differs from a value every other rank agrees on
is named, with both values.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence
from hangdoc.analyzer.ranges import plural_ranks, verb

# The variables the env:// rendezvous reads (torch/distributed/rendezvous.py), in the
# order they are reported.
RENDEZVOUS_KEYS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE")
# The fewest ranks that must agree on a value for another value to stand out.
MIN_AGREEING = 2


@dataclass(frozen=True, slots=True)
class OddSetting:
    """A rendezvous variable on which some ranks differ from all the others."""

    key: str
    ranks: tuple[int, ...]  # the ranks that differ
    values: tuple[str | None, ...]  # their values (None: not set), in ``ranks``' order
    agreed: str | None  # the value every other rank has
    others: tuple[int, ...]

    def text(self) -> str:
        """ "rank 3 has no MASTER_PORT where ranks 0-2 have MASTER_PORT=45157" """
        theirs = sorted(set(self.values), key=lambda v: v or "")
        said = " / ".join(_setting(self.key, v) for v in theirs)
        return (
            f"{plural_ranks(self.ranks)} {verb(self.ranks, 'has', 'have')} {said} where "
            f"{plural_ranks(self.others)} {verb(self.others, 'has', 'have')} "
            + _setting(self.key, self.agreed)
        )


def _setting(key: str, value: str | None) -> str:
    return f"{key}={value}" if value is not None else f"no {key}"


def odd_rendezvous(evidence: Evidence, ranks: tuple[int, ...]) -> list[OddSetting]:
    """The rendezvous variables on which a minority of ``ranks`` (those whose environment
    was collected) differs from a value all the others share."""
    envs: dict[int, dict[str, str]] = {}
    for proc in evidence.processes:
        if proc.rank in ranks and proc.rank not in envs and proc.env:
            envs[proc.rank] = proc.env
    if len(envs) < MIN_AGREEING + 1:
        return []
    out: list[OddSetting] = []
    for key in RENDEZVOUS_KEYS:
        values = {rank: env.get(key) for rank, env in sorted(envs.items())}
        counts = Counter(values.values())
        agreed, n = counts.most_common(1)[0]
        odd = tuple(r for r, v in values.items() if v != agreed)
        if not odd or n < MIN_AGREEING or len(odd) >= n:
            continue
        others = tuple(r for r in values if r not in odd)
        out.append(OddSetting(key, odd, tuple(values[r] for r in odd), agreed, others))
    return out
