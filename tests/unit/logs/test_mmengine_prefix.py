"""mmengine's logger header (mmengine/logging/logger.py, MMFormatter: "%(asctime)s -
%(name)s - %(levelname)s - %(message)s" with datefmt "%m/%d %H:%M:%S"): the logs of
mmengine, mmdet, mmseg and xtuner. The lines below are written from that format."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs.prefix import peel_line


@pytest.mark.parametrize(
    ("line", "text", "level"),
    [
        ("06/27 08:41:09 - mmengine - INFO - xtuner_dataset_timeout = 1:00:00",
         "xtuner_dataset_timeout = 1:00:00", "I"),
        ("11/25 10:00:01 - mmengine - WARNING - Epoch(val) [1][ 50/500]  eta: 0:01:02",
         "Epoch(val) [1][ 50/500]  eta: 0:01:02", "W"),
    ],
)  # fmt: skip
def test_mmengine_header_is_peeled_with_its_date(line: str, text: str, level: str) -> None:
    tag = peel_line(line)
    assert tag.text == text and tag.level == level and tag.origin == "mmengine"
    assert tag.stamp is not None and tag.stamp.month in (6, 11)


def test_a_fraction_is_not_a_date() -> None:
    # "13/45" is no month/day: the line stays whole
    assert peel_line("13/45 10:00:01 items done").text == "13/45 10:00:01 items done"
