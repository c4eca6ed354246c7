"""Hostile archives through ``load_paths``: what tests/unit/test_archive_extract.py does
not already cover — caps shared by nested archives, size fields that lie, links used as
stepping stones, and nesting depth. Nothing is written outside the extraction folder,
and every refusal is an input with its reason.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.common.archive import ArchiveLimits
from hangdoc.errors import BadInputError
from tests.reliability.stats import count

ROOT = Path(__file__).resolve().parents[2]
GOOD = (ROOT / "fixtures" / "dumps" / "checkpoint" / "rank0" / "pyspy.0.json").read_bytes()


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def test_nested_archives_share_one_budget(tmp_path: Path) -> None:
    # GIVEN an archive of three archives, each under the cap, together over it
    inner = [_tar(tmp_path / f"inner{i}.tar.gz", [_file(f"rank{i}.json", GOOD),
             _file(f"pad{i}.bin", b"\0" * 400_000)]) for i in range(3)]  # fmt: skip
    outer = _tar(tmp_path / "outer.tar.gz", [_file(p.name, p.read_bytes()) for p in inner])
    limits = ArchiveLimits(max_members=10_000, max_total_bytes=1_000_000)
    # WHEN loaded under that cap
    evidence = load_paths([outer], limits=limits)
    count("archives: hostile archives tried")
    # THEN the first inner archives are read and a later one is refused with the reason
    refused = [
        i for i in evidence.inputs if i.error and ("caps" in i.error or "more than" in i.error)
    ]
    assert refused, [(i.path, i.error) for i in evidence.inputs]
    assert 0 in {p.rank for p in evidence.processes}


def test_a_zip_that_lies_about_its_sizes(tmp_path: Path) -> None:
    # GIVEN a zip whose central directory says 10 bytes for a 2 MB member
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("big.txt", b"x" * 2_000_000)
        archive.writestr("rank0.json", GOOD)
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")  # the first central directory entry: big.txt
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")  # uncompressed size
    path.write_bytes(bytes(data))
    # WHEN loaded THEN the liar is refused by name, the honest member is read
    evidence = load_paths([path])
    count("archives: hostile archives tried")
    bad = [i for i in evidence.inputs if i.path.endswith("big.txt")]
    assert bad and bad[0].error and "not extracted" in bad[0].error
    assert 0 in {p.rank for p in evidence.processes}


def test_a_link_used_as_a_stepping_stone_writes_nothing_outside(tmp_path: Path) -> None:
    # GIVEN a tar whose first member links to a folder outside, and whose next members
    # write through that name, and a hard link to a system file
    outside = tmp_path / "outside"
    outside.mkdir()
    link = tarfile.TarInfo("escape")
    link.type, link.linkname = tarfile.SYMTYPE, str(outside)
    hard = tarfile.TarInfo("passwd")
    hard.type, hard.linkname = tarfile.LNKTYPE, "/etc/passwd"
    path = _tar(tmp_path / "links.tar.gz", [(link, None), _file("escape/pwned", b"x"),
                (hard, None), _file("rank0.json", GOOD)])  # fmt: skip
    # WHEN loaded
    evidence = load_paths([path])
    count("archives: hostile archives tried")
    # THEN both links are refused with their reason and nothing was written outside
    refused = {(i.path.rsplit("!/", 1)[-1], i.error or "") for i in evidence.inputs}
    assert {name for name, error in refused if "refused: link" in error} == {"escape", "passwd"}
    assert list(outside.iterdir()) == []
    assert 0 in {p.rank for p in evidence.processes}


def test_archives_nested_past_the_depth_limit(tmp_path: Path) -> None:
    # GIVEN an archive in an archive in an archive in an archive (with a good file inside)
    current = _tar(tmp_path / "level0.tar.gz", [_file("rank0.json", GOOD)])
    for level in range(1, 5):
        member = _file(current.name, current.read_bytes())
        current = _tar(tmp_path / f"level{level}.tar.gz", [member])
    try:
        evidence = load_paths([current])
    except BadInputError as exc:
        assert "nested too deep" in str(exc)
    else:
        assert any("nested too deep" in (i.error or "") for i in evidence.inputs)
    count("archives: hostile archives tried")
