"""A set-up barrier that waited while the other ranks' work was shown advancing.

torch's store-based barrier of ``init_process_group`` (torch/distributed/distributed_c10d.py
``_store_based_barrier``, torch < 2.1 and the releases that still log it) has each rank add
itself to a store counter and wait for ``world_size`` of them, logging "Waiting in store
based barrier to initialize process group for rank: R, key: K (world_size=N,
worker_count=M, timeout=T)" every 10 s, and raising "Timed out initializing process group
in store based barrier …" once ``T`` has passed. A rank that has not called
``init_process_group`` yet is not counted. When the ranks not counted are busy with work
of their own before it (preparing a dataset, building a cache), their progress bars run in
the same console: tqdm ends no state of a bar with a newline, so the waiter's lines are
glued after the bar's live state. A bar with a rate whose elapsed time is past the
barrier's own timeout shows that work advancing for longer than the barrier waits: the
set-up was slow, not stuck (fixtures/cases/README.md: work shown advancing at the wait).
A barrier missing a rank with no such bar stays a set-up that did not complete (HD201).
"""

from __future__ import annotations

from hangdoc.analyzer.payloads.torch_pg import StoreError, StoreTimeout
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind


def barrier_waits_on_work(tl: Timeline) -> list[Placed]:
    """The store-based barrier's wait lines glued after a live, advancing progress bar
    whose elapsed time is at least the barrier's own timeout."""
    found: list[Placed] = []
    for p in tl.of(EventKind.STORE_TIMEOUT):
        store = p.event.payload_as(StoreTimeout)
        if store is None or store.error != StoreError.STORE_BARRIER_WAIT:
            continue
        if store.meter_elapsed_s is None or store.barrier_timeout_ms is None:
            continue
        if store.meter_elapsed_s * 1000 >= store.barrier_timeout_ms:
            found.append(p)
    return found


def barrier_keys_on_work(tl: Timeline) -> set[str]:
    """The keys of the store-based barriers ``barrier_waits_on_work`` shows waiting on
    advancing work (their waits and their timeouts are that work's, not a set-up's)."""
    keys: set[str] = set()
    for p in barrier_waits_on_work(tl):
        store = p.event.payload_as(StoreTimeout)
        if store is not None and store.keys is not None:
            keys.add(store.keys)
    return keys
