"""Where a rank's ``torch.distributed.debug`` worker server listens, from the job's store.

``torch.distributed.debug.start_debug_server()`` (torch ≥ 2.10, experimental) starts on
every rank a ``_WorkerServer`` on an ephemeral TCP port and writes its address into
the job's TCPStore (MASTER_ADDR:MASTER_PORT) under ``debug_server/rank<RANK>`` as
``http://<host>:<port>``; rank 0's frontend reads the addresses from there. hangdoc
does the same: a store client is what every worker and the frontend already are, and
``check`` reads without waiting. The listening ports of the process are never probed
blindly: gloo, NCCL's bootstrap and the store itself listen there too, and an HTTP
request they do not expect could disturb the job.

torch is imported only here, and only when the rank's environment names a store:
``hangdoc collect`` itself does not need torch.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["DebugServerUnavailable", "WorkerAddress", "find_worker_server"]

STORE_PREFIX = "debug_server"  # torch.distributed.debug._store.tcpstore_client


class DebugServerUnavailable(Exception):
    """Why no worker server address could be had; ``skipped``: nothing went wrong."""

    def __init__(self, reason: str, *, skipped: bool) -> None:
        super().__init__(reason)
        self.skipped = skipped


@dataclass(frozen=True, slots=True)
class WorkerAddress:
    host: str
    port: int
    url: str


def store_location(env: dict[str, str]) -> tuple[str, int, str] | None:
    """(MASTER_ADDR, MASTER_PORT, RANK) from the rank's environment, if all are there."""
    host, port, rank = env.get("MASTER_ADDR"), env.get("MASTER_PORT"), env.get("RANK")
    if not host or not port or not port.isdigit() or rank is None or not rank.isdigit():
        return None
    return host, int(port), rank


def find_worker_server(env: dict[str, str], timeout: float) -> WorkerAddress:
    """The rank's worker server address; raises DebugServerUnavailable with the reason."""
    location = store_location(env)
    if location is None:
        raise DebugServerUnavailable(
            "no MASTER_ADDR/MASTER_PORT/RANK in the rank's environment", skipped=True
        )
    host, port, rank = location
    try:
        from torch._C._distributed_c10d import PrefixStore, TCPStore
    except Exception as exc:  # ImportError, or a broken torch install
        raise DebugServerUnavailable(
            f"torch is not importable here ({type(exc).__name__}), so the job's store "
            "cannot be asked for a debug server",
            skipped=True,
        ) from None
    try:
        store = TCPStore(
            host,
            port,
            is_master=False,
            timeout=datetime.timedelta(seconds=max(timeout, 0.5)),
            wait_for_workers=False,
        )
        prefixed = PrefixStore(STORE_PREFIX, store)
        key = f"rank{rank}"
        if not prefixed.check([key]):
            raise DebugServerUnavailable(
                "the job runs no torch.distributed.debug server", skipped=True
            )
        url = prefixed.get(key).decode("utf-8", "replace")
    except DebugServerUnavailable:
        raise
    except Exception as exc:  # the store is gone, refused us, or timed out
        raise DebugServerUnavailable(
            f"store {host}:{port}: {type(exc).__name__}: {exc}", skipped=False
        ) from None
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise DebugServerUnavailable(f"the store holds an odd address: {url!r}", skipped=False)
    return WorkerAddress(parts.hostname, parts.port, url)
