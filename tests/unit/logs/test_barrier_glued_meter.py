"""init_process_group's store-based barrier waits glued after a tqdm meter's live state
(parsers/logs/torch_pg.py ``_glued_meter``; views/barrier_work.py): the meter's count and
elapsed time are kept when it shows a rate, in either of tqdm's formats (with a total, or
none), with or without a logging prefix between the meter and the wait."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs.parser import recognise_line
from hangdoc.analyzer.payloads.torch_pg import StoreError, StoreTimeout

_WAIT = (
    "Waiting in store based barrier to initialize process group for rank: 0, key: "
    "store_based_barrier_key:1 (world_size=7, worker_count=1, timeout=0:30:00)"
)


def _store(text: str) -> StoreTimeout:
    hit = recognise_line(text)
    assert hit is not None
    store = hit.payload
    assert isinstance(store, StoreTimeout)
    assert store.error == StoreError.STORE_BARRIER_WAIT
    return store


@pytest.mark.parametrize(
    ("before", "meter", "elapsed_s"),
    [
        ("15247it [58:54,  4.53it/s]", "15247", 58 * 60 + 54),  # no total (nemo-4418)
        ("Preparing: 812files [1:02:03, 1.20s/files]", "812", 3723),  # inverted rate
        (
            "Map (num_proc=4):  41%|████      | 41000/100000 [12:30<18:00, 54.62 examples/s]"
            "INFO:torch.distributed.distributed_c10d:",
            "41000/100000",
            750,
        ),
    ],
)
def test_a_wait_glued_after_a_meter_keeps_it(before: str, meter: str, elapsed_s: int) -> None:
    store = _store(before + _WAIT)
    assert (store.meter, store.meter_elapsed_s) == (meter, elapsed_s)
    assert store.barrier_timeout_ms == 1_800_000


@pytest.mark.parametrize(
    "before",
    [
        "",  # a plain wait
        "0it [40:00, ?it/s]",  # no rate yet: nothing shows the work advancing
        "[2024-05-01 10:00:00,123] [INFO] ",  # a log stamp in brackets is no meter
    ],
)
def test_a_wait_without_an_advancing_meter_keeps_none(before: str) -> None:
    store = _store(before + _WAIT)
    assert store.meter is None and store.meter_elapsed_s is None
