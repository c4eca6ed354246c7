# ruff: noqa: E501  (tables of real listing rows read better unwrapped)
"""Checkpoint files in a directory listing (parsers/logs/listing.py): rows of GNU
coreutils' ``ls -l`` (ls.c print_long_format) in the formats it prints them, each named."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs import recognise_line
from tests.unit.logs.helpers import fields

CASES: list[tuple[str, dict[str, object] | None]] = [
    # CPM-1-Finetune #6: a zh_CN locale's month ("1月"), DeepSpeed's model states.
    (
        "-rw-r--r-- 1 root users          0 1月   6 12:13 mp_rank_00_model_states.pt",
        {"name": "mp_rank_00_model_states.pt", "size": 0, "family": "mp_rank_#_model_states.pt"},
    ),
    # C locale; a file older than six months shows its year instead of its time.
    (
        "-rw-rw-r--. 1 u g 1300147406 Jan  6  2021 zero_pp_rank_3_mp_rank_00_optim_states.pt",
        {"size": 1300147406, "family": "zero_pp_rank_#_mp_rank_#_optim_states.pt"},
    ),
    # --time-style=full-iso
    (
        "-rw-r--r-- 1 u g 4994582216 2024-03-02 11:41:07.123456789 +0100 model-00001-of-00003.safetensors",
        {"name": "model-00001-of-00003.safetensors", "size": 4994582216},
    ),
    # a de_DE locale's day first ("6. Jan")
    ("-rw-r--r-- 1 u g 12 6. Jan 12:13 last.ckpt", {"name": "last.ckpt", "size": 12}),
    # ls -lh: a human-readable size says whether the file is empty, not its bytes
    ("-rw-r--r-- 1 u g 2.5G Jan  6 12:13 pytorch_model.bin", {"size": None}),
    ("-rw-r--r-- 1 u g    0 Jan  6 12:13 __0_0.distcp", {"size": 0}),
    # not a checkpoint's name, a directory, a link: nothing
    ("-rw-r--r-- 1 u g 0 Jan  6 12:13 latest", None),
    ("drwxr-xr-x 2 u g 4096 Jan  6 12:13 global_step20.pt", None),
    ("lrwxrwxrwx 1 u g 20 Jan  6 12:13 last.pt -> global_step20/model.pt", None),
]


@pytest.mark.parametrize(("line", "expected"), CASES)
def test_listing_row(line: str, expected: dict[str, object] | None) -> None:
    hit = recognise_line(line)
    if expected is None:
        assert hit is None or hit.kind != "file_listed"
        return
    assert hit is not None and hit.kind == "file_listed"
    found = fields(hit)
    assert {k: found.get(k) for k in expected} == expected
