"""A save's file-system errno read by what it means (vocabulary.ERRNO_KINDS): the storage
failing, a name's state (ranks racing on one path), or a permission; and the rank of a
failure line that names none, from the one traceback cut in the call it is the error of
(HD110)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.vocabulary import (
    _NOT_FILE_SYSTEM,
    ERRNO_KINDS,
    STORAGE_ERROR_TEXT,
    ErrnoKind,
    errno_kind,
)
from hangdoc.paste_mangling import COMBINED, MANGLINGS, WORD_WRAPS, Mangling

ROOT = Path(__file__).resolve().parents[3]
RACE = ROOT / "fixtures/cases/ms-swift-3049-checkpoint-rename-race"


def test_the_storage_errnos_of_the_storage_text_are_storage_faults() -> None:
    listed = re.search(r"\\\[Errno \(\?:([\d|]+)\)", STORAGE_ERROR_TEXT.pattern)
    assert listed is not None
    for n in listed.group(1).split("|"):
        assert ERRNO_KINDS[int(n)] == ErrnoKind.STORAGE


def test_not_file_system_errnos_are_the_tables() -> None:
    assert frozenset({4, 11, 12, 32, *range(98, 114)}) == _NOT_FILE_SYSTEM


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        ("FileExistsError: [Errno 17] File exists: 'a' -> 'b'", ErrnoKind.NAMESPACE),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'a' -> 'b'", ErrnoKind.NAMESPACE),
        ("OSError: [Errno 39] Directory not empty: 'tmp' -> 'ckpt'", ErrnoKind.NAMESPACE),
        ("OSError: [Errno 18] Invalid cross-device link: 'a' -> 'b'", ErrnoKind.NAMESPACE),
        ("PermissionError: [Errno 13] Permission denied: '/ckpt'", ErrnoKind.PERMISSION),
        ("OSError: [Errno 5] Input/output error: '/ckpt/x.pt'", ErrnoKind.STORAGE),
        ("OSError: [Errno 28] No space left on device", ErrnoKind.STORAGE),
        ("OSError: [Errno 116] Stale file handle", ErrnoKind.STORAGE),
        ("OSError: [Errno 122] Disk quota exceeded", ErrnoKind.STORAGE),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", ErrnoKind.NOT_FILE_SYSTEM),
        ("RuntimeError: no errno here", None),
    ],
)
def test_errno_kinds(said: str, kind: ErrnoKind | None) -> None:
    assert errno_kind(said) == kind


def _hd110(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, tuple[int, ...], str]]:
    paths = []
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        paths.append(path)
    return [
        (f.category, f.culprit_ranks, f.fix)
        for f in analyze(load_paths(paths)).findings
        if f.rule == "HD110"
    ]


_CUT = """[rank{r}]: Traceback (most recent call last):
[rank{r}]:   File "/x/transformers/trainer.py", line 3157, in _save_checkpoint
[rank{r}]:     os.renames(output_dir, checkpoint_dir)
[rank{r}]:   File "<frozen os>", line 272, in renames
"""
_RENAME = (
    "FileExistsError: [Errno 17] File exists: '/out/tmp-checkpoint-ab' -> '/out/checkpoint-9'\n"
)


def test_a_rename_race_is_the_saves_not_the_storages(tmp_path: Path) -> None:
    [(category, culprits, fix)] = _hd110(
        tmp_path, {"errors.txt": _RENAME, "rank1.txt": _CUT.format(r=1)}
    )
    assert category == "io_or_filesystem_stall"  # the casebook README's convention
    assert culprits == (1,)  # the one traceback cut in the rename the error is of
    assert "one process" in fix and "df -h" not in fix


def test_a_storage_error_keeps_the_storage_fix(tmp_path: Path) -> None:
    said = "OSError: [Errno 5] Input/output error: '/out/checkpoint-9/model.safetensors'\n"
    [(_, _, fix)] = _hd110(tmp_path, {"errors.txt": said})
    assert "dmesg -T" in fix


@pytest.mark.parametrize(
    "files",
    [
        # two ranks' tracebacks cut in the rename: which one raised is not shown
        {"errors.txt": _RENAME, "rank1.txt": _CUT.format(r=1), "rank2.txt": _CUT.format(r=2)},
        # an error of one name is not the rename's
        {
            "errors.txt": "OSError: [Errno 5] Input/output error: '/out/checkpoint-9'\n",
            "rank1.txt": _CUT.format(r=1),
        },
    ],
    ids=["two-ranks", "one-name"],
)
def test_no_rank_without_one_matching_traceback(tmp_path: Path, files: dict[str, str]) -> None:
    assert [culprits for _, culprits, _ in _hd110(tmp_path, files)] == [()]


@pytest.mark.parametrize("mangling", [*MANGLINGS, *WORD_WRAPS, *COMBINED], ids=lambda m: m.name)
def test_the_racing_rank_survives_the_paste(mangling: Mangling, tmp_path: Path) -> None:
    if mangling.adds_clock:
        pytest.skip("a made-up clock across a case's files (paste_mangling.Mangling)")
    files = {p.name: mangling.apply(p.read_text()) for p in sorted(RACE.glob("*.txt"))}
    assert [(c, r) for c, r, _ in _hd110(tmp_path, files)] == [("io_or_filesystem_stall", (1,))]
