"""The metamorphic check of naming a death's cause (hangdoc/death_variants.py): a death
told with other paths, other names of the job's own code and other words beyond its
exception's type and errno is the same death, so hangdoc names the same cause.

Read on the deaths HD030 answered at first sight in the train split (those labelled a
more specific cause, and those labelled a crash, which must stay crashes) and on every
train case labelled a cause a death's exception can show. At the base of this check
(903980a) 4 of the 8 named causes that paths changed kept their label, 4 of 5 under
other names of the job's code; the rename races read from a checkpoint's file name, the
rotation's from the job's function named save_checkpoint.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from hangdoc.death_variants import (
    VARIANTS,
    Told,
    casebook_deaths,
    first_sight_deaths,
    job_names,
    kept,
    paths,
    tell,
    wording,
)

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def _told(group: str) -> tuple[Told, ...]:
    named, crashes = first_sight_deaths(ROOT)
    names = {"named": named, "crashes": crashes, "casebook": casebook_deaths(ROOT)}[group]
    return tuple(tell(ROOT, names))


def test_the_groups_are_not_empty() -> None:
    named, crashes = first_sight_deaths(ROOT)
    assert len(named) >= 10 and len(crashes) >= 60
    assert len(casebook_deaths(ROOT)) >= 100


@pytest.mark.parametrize("group", ["named", "crashes", "casebook"])
@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
def test_a_death_told_otherwise_keeps_its_cause(group: str, variant: str) -> None:
    told = _told(group)
    right = {t.case for t in told if t.variant == "as is" and t.right}
    lost = [
        f"{t.case}: {t.label} -> {t.got}"
        for t in told
        if t.variant == variant and t.case in right and not t.right
    ]
    k, n = kept(told, variant)
    assert k <= n and (n > 0 or group == "crashes")  # (no crash's exception is of a typed class)
    assert lost == [], lost


# --- the variants themselves: they change the job's specifics, never a library's -----------

_TB = """Traceback (most recent call last):
  File "/home/u/proj/train.py", line 9, in save_checkpoint
    self.rotate_checkpoints(out)
  File "/home/u/.conda/envs/x/lib/python3.10/site-packages/torch/serialization.py", line 5, in save
    os.rename(tmp, dst)
FileExistsError: [Errno 17] File exists: 'out/tmp.pt' -> 'out/last.pt'
"""


def test_paths_change_the_jobs_and_keep_the_librarys() -> None:
    told = paths(_TB)
    assert "out/tmp.pt" not in told and "last.pt" not in told
    assert "site-packages/torch/serialization.py" not in told  # another environment's prefix
    assert "dist-packages/torch/serialization.py" in told
    assert "[Errno 17] File exists: '" in told and "' -> '" in told
    # a library's source place and words with one slash are no paths of the job's
    kept_text = "include/alloc.h:125 NCCL WARN x\nerrors while waiting for send/recv from rank 0"
    assert paths(kept_text) == kept_text


def test_job_names_rename_the_jobs_frames_and_calls_only() -> None:
    told = job_names(_TB)
    assert "save_checkpoint" not in told
    assert "train.py" not in told
    assert 'serialization.py", line 5, in save' in told and "os.rename(tmp, dst)" in told


def test_wording_keeps_the_type_the_errno_and_the_files() -> None:
    assert wording("FileExistsError: [Errno 17] File exists: 'a' -> 'b'") == (
        "FileExistsError: [Errno 17] File exists: 'a' -> 'b'"
    )
    oom = wording("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")
    assert oom.startswith("torch.OutOfMemoryError: ") and "CUDA" not in oom
    generic = "RuntimeError: Parent directory /x does not exist."
    assert wording(generic) == generic  # a generic type's words are the evidence
