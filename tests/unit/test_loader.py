"""load_paths on mixed inputs: dumps, loose files, archives, and everything that can be bad."""

from __future__ import annotations

import pathlib
import tarfile
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import NOTHING_FOUND, load_paths
from hangdoc.analyzer.model import Evidence, InputKind
from tests.builders import RankSpec, main_trace, pyspy_json, write_dump

SAMPLES = Path(__file__).parent / "parsers" / "samples"
DUMP_TXT = (SAMPLES / "pyspy" / "dump.txt").read_text()
SIGUSR1 = (SAMPLES / "faulthandler_sigusr1.txt").read_text()


def _node(root: Path, host: str, ranks: range, world: int = 8) -> Path:
    specs = [
        RankSpec(rank=r, pid=1000 + r, world_size=world, samples=[[main_trace(1000 + r)]])
        for r in ranks
    ]
    return write_dump(root / host, host, specs)


def _tar_gz(path: Path, folder: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return path


def _kinds(ev: Evidence) -> dict[str, InputKind]:
    return {i.path: i.kind for i in ev.inputs}


def test_mixed_inputs(tmp_path: Path) -> None:
    # GIVEN a dump of ranks 0-1, a .tar.gz of another node's dump (ranks 4-5), and a
    # folder of loose files: a py-spy text of rank 2 (by name), a faulthandler dump of
    # rank 3 (by prefix), junk, garbage, an empty file; plus a path that does not exist
    node1 = _node(tmp_path, "node1", range(2))
    archive = _tar_gz(tmp_path / "node2.tar.gz", _node(tmp_path / "build", "node2", range(4, 6)))
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "rank2.txt").write_text(DUMP_TXT.replace("9106", "1002"))
    (loose / "worker.log").write_text("".join(f"[rank3]: {x}\n" for x in SIGUSR1.splitlines()))
    (loose / "README.md").write_text("# notes from the on-call\n")
    (loose / "core.bin").write_bytes(bytes(range(256)) * 10)
    (loose / "empty.txt").write_bytes(b"")
    # WHEN all of them are loaded
    ev = load_paths([node1, archive, loose, tmp_path / "missing"])
    # THEN every rank is there once, with its host where a dump said it
    assert ev.seen_ranks() == [0, 1, 2, 3, 4, 5]
    ranked = ev.ranked()
    assert ranked[0].host == "node1" and ranked[4].host == "node2"
    assert ranked[2].pid == 1002 and ranked[2].text_stacks[0].threads[0].is_main
    assert ranked[3].text_stacks[0].threads[-1].is_main
    assert set(ev.hosts) == {"node1", "node2"}
    assert ev.expected_world_size() == 8
    # every file is an input, with its kind and error
    kinds = _kinds(ev)
    a = str(archive)
    assert kinds[f"{a}!/node2/rank4/pyspy.0.json"] is InputKind.PYSPY_JSON
    assert kinds[f"{a}!/node2/manifest.json"] is InputKind.MANIFEST
    assert kinds[a] is InputKind.ARCHIVE
    assert kinds[f"{loose}/rank2.txt"] is InputKind.PYSPY_TEXT
    assert kinds[f"{loose}/worker.log"] is InputKind.FAULTHANDLER
    assert kinds[f"{loose}/README.md"] in (InputKind.UNKNOWN, InputKind.LOG)
    errors = {i.path: i.error for i in ev.inputs}
    assert kinds[f"{loose}/core.bin"] is InputKind.UNREADABLE and errors[f"{loose}/core.bin"]
    assert errors[f"{loose}/empty.txt"] == "empty file"
    assert errors[str(tmp_path / "missing")] == "no such file or directory"
    assert next(i for i in ev.inputs if i.path == f"{loose}/rank2.txt").ranks == (2,)
    assert any("rank 2 taken from" in n for n in ev.notes)


def test_fragments_of_one_process_merge_in_time_order(tmp_path: Path) -> None:
    # GIVEN rank 0's dump (pid 1000, timed samples) and a pasted py-spy text of pid 1000
    node = _node(tmp_path, "node1", range(1))
    paste = tmp_path / "paste.txt"
    paste.write_text(DUMP_TXT.replace("9106", "1000"))
    ev = load_paths([paste, node])
    # THEN one process: the dump's live sample, and the paste as text beside it
    [proc] = ev.processes
    assert proc.rank == 0 and proc.host == "node1"
    assert [(s.index, s.source) for s in proc.stack_samples] == [
        (0, "node1/rank0/pyspy.0.json".replace("node1", str(node))),
    ]
    assert [(s.index, s.source) for s in proc.text_stacks] == [(0, str(paste))]


def test_conflicting_rank_claims_keep_the_first(tmp_path: Path) -> None:
    # GIVEN rank 3 on node1 (pid 1003) and a file named rank3.json from another pid
    node = _node(tmp_path, "node1", range(3, 4))
    other = tmp_path / "rank3.json"
    other.write_text(pyspy_json([main_trace(4242)]))
    ev = load_paths([node, other])
    # THEN the dump's process keeps rank 3; the other is kept apart, and a note names both
    assert ev.ranked()[3].pid == 1003
    stray = next(p for p in ev.processes if p.pid == 4242)
    assert stray.rank is None
    note = next(n for n in ev.notes if "rank 3 is claimed" in n)
    assert "pid 1003" in note and "pid 4242" in note


def test_second_folder_with_more_samples_of_known_ranks_is_usable(tmp_path: Path) -> None:
    # Files that only add samples to processes already known are still usable
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "rank0.txt").write_text(DUMP_TXT)
    (tmp_path / "b" / "rank0.txt").write_text(DUMP_TXT)
    ev = load_paths([tmp_path / "a", tmp_path / "b"])
    assert [s.index for s in ev.processes[0].text_stacks] == [0, 1]
    assert all(i.error is None for i in ev.inputs)


def test_directory_of_several_node_dumps(tmp_path: Path) -> None:
    for i in range(3):
        _node(tmp_path / "job", f"node{i}", range(2 * i, 2 * i + 2), world=6)
    ev = load_paths([tmp_path / "job"])
    assert ev.seen_ranks() == list(range(6)) and len(ev.hosts) == 3
    assert all(i.error is None for i in ev.inputs)


def test_scale_many_ranks_load_once_each(tmp_path: Path) -> None:
    # 64 nodes x 8 ranks: every rank found once, no spurious conflict
    for n in range(64):
        _node(tmp_path / "job", f"n{n:02d}", range(8 * n, 8 * n + 8), world=512)
    ev = load_paths([tmp_path / "job"])
    assert ev.seen_ranks() == list(range(512)) and len(ev.processes) == 512
    assert not any("claimed" in n for n in ev.notes)


def test_archive_of_a_dump_root_and_traversal_member(tmp_path: Path) -> None:
    node = _node(tmp_path, "node1", range(2))
    path = tmp_path / "dump.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for item in sorted(node.rglob("*")):
            tar.add(item, arcname=str(item.relative_to(node)), recursive=False)
        evil = tarfile.TarInfo("../evil.txt")
        tar.addfile(evil)
    ev = load_paths([path])
    assert ev.seen_ranks() == [0, 1]
    assert _kinds(ev)[f"{path}!/rank0/process.json"] is InputKind.PROCESS
    refused = next(i for i in ev.inputs if i.path == f"{path}!/../evil.txt")
    assert refused.error is not None and "refused" in refused.error
    assert not (tmp_path / "evil.txt").exists()


def test_manifest_given_alone_reads_its_dump(tmp_path: Path) -> None:
    node = _node(tmp_path, "node1", range(1))
    ev = load_paths([node / "manifest.json"])
    assert ev.seen_ranks() == [0] and "node1" in ev.hosts


def test_rank_folder_given_alone(tmp_path: Path) -> None:
    # process.json and pyspy.0.json without their manifest: sniffed as loose files, the
    # stacks attributed by the "rank0/" folder name, merged with process.json's facts
    node = _node(tmp_path, "node1", range(1))
    ev = load_paths([node / "rank0"])
    [proc] = ev.processes
    assert (proc.rank, proc.host, proc.pid) == (0, "node1", 1000)
    assert len(proc.stack_samples) == 1 and len(proc.proc_samples) == 1
    kinds = _kinds(ev)
    assert kinds[f"{node}/rank0/process.json"] is InputKind.PROCESS
    assert kinds[f"{node}/rank0/pyspy.0.json"] is InputKind.PYSPY_JSON


def test_same_file_twice_is_read_once(tmp_path: Path) -> None:
    path = tmp_path / "rank0.txt"
    path.write_text(DUMP_TXT)
    ev = load_paths([path, path, tmp_path])
    assert len(ev.processes) == 1 and len(ev.processes[0].text_stacks) == 1
    node = _node(tmp_path / "d", "node1", range(1))
    for order in ([node, node / "rank0" / "pyspy.0.json"], [node / "rank0" / "pyspy.0.json", node]):
        ev = load_paths(order)
        assert len(ev.processes[0].stack_samples) == 1


def test_unknown_rank_is_said(tmp_path: Path) -> None:
    path = tmp_path / "stacks.txt"
    path.write_text(DUMP_TXT)
    ev = load_paths([path])
    [proc] = ev.processes
    assert proc.rank is None and proc.pid == 9106
    assert any("could not tell which rank" in n for n in ev.notes)


def test_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "rank1.txt"
    good.write_text(DUMP_TXT)
    locked = tmp_path / "rank2.txt"
    locked.write_text(DUMP_TXT)
    real_open = pathlib.Path.open

    def guarded(self: Path, *args: object, **kwargs: object) -> object:
        if self.name == "rank2.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(pathlib.Path, "open", guarded)
    ev = load_paths([good, locked])
    assert ev.seen_ranks() == [1]
    assert {i.path: i.error for i in ev.inputs}[str(locked)] == "permission denied"


def test_nothing_usable_is_reported_not_raised(tmp_path: Path) -> None:
    # GIVEN an empty folder, binary junk, a missing path and text in no known format
    (tmp_path / "empty").mkdir()
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\x02" * 100)
    prose = tmp_path / "notes.txt"
    prose.write_text("we restarted the job twice and it still did not work\n")
    # WHEN loaded THEN nothing is raised: each input has its reason, a first note sums up
    ev = load_paths([tmp_path / "empty", junk, tmp_path / "nope", prose])
    reasons = {Path(i.path).name: i.error for i in ev.inputs}
    assert reasons["empty"] == "empty directory"
    assert reasons["junk.bin"] == "binary data in no format hangdoc reads"
    assert reasons["nope"] == "no such file or directory"
    assert reasons["notes.txt"] == NOTHING_FOUND  # read as text, never refused
    assert ev.notes[0].startswith("nothing usable in the inputs:")
    assert "junk.bin" in ev.notes[0] and "hangdoc collect" in ev.notes[0]
    assert not ev.processes


def test_one_usable_path_is_enough(tmp_path: Path) -> None:
    ok = tmp_path / "r0.txt"
    ok.write_text(DUMP_TXT)
    ev = load_paths([tmp_path / "nope", ok])
    assert ev.seen_ranks() == [0]


def test_samples_folder_loads(tmp_path: Path) -> None:
    ev = load_paths([SAMPLES])
    kinds = [i.kind for i in ev.inputs if i.path.endswith((".txt", ".json", ".raw"))]
    assert InputKind.UNKNOWN not in kinds and InputKind.UNREADABLE not in kinds
    assert len(ev.processes) >= 3


def test_redacted_flag_is_set_by_the_loader(tmp_path: Path) -> None:
    # GIVEN one dump, loaded with redaction (the default) and without
    dump = _node(tmp_path, "node0", range(2))
    on, off = load_paths([dump]), load_paths([dump], redact=False)
    # THEN the Evidence says so in a typed field; the note stays, for people
    assert on.redacted is True and not any("redaction is OFF" in n for n in on.notes)
    assert off.redacted is False and off.notes[0].startswith("redaction is OFF")
