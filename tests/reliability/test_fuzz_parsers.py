"""Fuzz every parser in ``PARSERS`` and the loader with hostile variants of real inputs.

Parametrized over the registry itself, so a parser added later is fuzzed without a
change here. For every variant: no sniffer and no parser raises (a parser returns a
ParsedFile with an error instead), and ``load_paths`` either loads — listing the file in
``inputs`` with its kind, and a reason when it was not usable — or raises BadInputError
naming it. ``HANGDOC_FUZZ_EXAMPLES`` sets the cases per parser (60 by default; 5000 for
the long run, see RELIABILITY.md).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers import PARSERS
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile, Parser
from hangdoc.analyzer.parsers.text import TEXT_KINDS, TextParser
from hangdoc.errors import BadInputError
from tests.reliability.fuzzing import ROOT, SEEDS, Seed, Variant, mutate, seeds_of
from tests.reliability.stats import EXAMPLES, count

# A parser must finish a hostile file of a few megabytes in well under this.
PARSE_BUDGET_S = 20.0
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_UNUSABLE = (InputKind.UNKNOWN, InputKind.UNREADABLE)


def _variant(draw: st.DrawFn, seeds: list[Seed]) -> Variant:
    seed = draw(st.sampled_from(seeds))
    partner = draw(st.sampled_from(SEEDS))
    data, how = draw(mutate(seed.data, partner.data))
    return Variant(data, f"{seed.path.relative_to(ROOT.parent)}: {how}")


@st.composite
def variants_for(draw: st.DrawFn, kind: InputKind) -> Variant:
    return _variant(draw, seeds_of(kind))


def check_parser(parser: Parser, path: Path) -> ParsedFile:
    """The parser's contract on one hostile file; returns what it parsed."""
    began = time.monotonic()
    parsed = parser.parse(path, f"fuzz/{path.name}")
    assert isinstance(parsed, ParsedFile)
    # the text path names each text by what it mostly is
    assert parsed.kind is parser.kind or (
        isinstance(parser, TextParser) and parsed.kind in TEXT_KINDS
    )
    assert time.monotonic() - began < PARSE_BUDGET_S
    return parsed


def check_loader(path: Path, display: str) -> None:
    """``load_paths`` on one file: loads and lists it, or refuses naming it."""
    try:
        evidence = load_paths([path])
    except BadInputError as exc:
        assert display in str(exc)
        count("fuzz: load_paths refused (BadInputError)")
        return
    listed = [i for i in evidence.inputs if i.path == display or i.path.startswith(display)]
    assert listed, f"{display} is not in inputs: {[i.path for i in evidence.inputs]}"
    for item in listed:
        if item.kind in _UNUSABLE and item.path == display:
            assert item.error, f"{display} is {item.kind.value} without a reason"
    count("fuzz: load_paths loaded")


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.kind.value)
def test_every_parser_survives_hostile_variants_of_its_format(parser: Parser) -> None:
    @SETTINGS
    @given(variant=variants_for(parser.kind))
    def run(variant: Variant) -> None:
        data = variant.data
        with tempfile.TemporaryDirectory(prefix="hangdoc-fuzz-") as tmp:
            path = Path(tmp) / "case.bin"
            path.write_bytes(data)
            head = data[:SNIFF_BYTES]
            for other in PARSERS:  # no sniffer may raise on anything
                other.sniff(head)
            check_parser(parser, path)
            count(f"fuzz: inputs per parser: {parser.kind.value}")
            check_loader(path, str(path))

    run()


@st.composite
def any_variant(draw: st.DrawFn) -> Variant:
    return _variant(draw, SEEDS)


@SETTINGS
@given(variants=st.lists(any_variant(), min_size=1, max_size=6))
def test_bad_files_beside_a_good_one_do_not_stop_the_analysis(variants: list[Variant]) -> None:
    # GIVEN a folder of hostile files and one good py-spy dump
    good = next(s for s in SEEDS if s.kind is InputKind.PYSPY_JSON)
    with tempfile.TemporaryDirectory(prefix="hangdoc-fuzz-") as tmp:
        root = Path(tmp)
        (root / "rank0.json").write_bytes(good.data)
        for i, variant in enumerate(variants):
            (root / f"bad{i}.bin").write_bytes(variant.data)
        # WHEN the folder is loaded THEN the good file's rank is there and every file is listed
        evidence = load_paths([root])
        count("fuzz: folders of mixed good and bad files")
        assert 0 in {p.rank for p in evidence.processes}
        paths = {i.path for i in evidence.inputs}
        for i in range(len(variants)):
            display = f"{root}/bad{i}.bin"
            assert any(p == display or p.startswith(display + "!") for p in paths), display
        for item in evidence.inputs:
            if item.kind in _UNUSABLE:
                assert item.error, item


# Cases the fuzzer found, kept as plain regression tests.
NESTED = {
    "objects": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "lists": b"[" * 100_000,
    "list-of-threads-then-nesting": b'[{"frames": [], "pid": 1, "thread_id": 2}, ' + b"[" * 9000,
}


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.kind.value)
@pytest.mark.parametrize("shape", sorted(NESTED))
def test_json_nested_past_the_recursion_limit_is_an_error_not_a_crash(
    parser: Parser, shape: str, tmp_path: Path
) -> None:
    # found by the fuzzer: json raises RecursionError, not JSONDecodeError, here
    path = tmp_path / "nested.json"
    path.write_bytes(NESTED[shape])
    parser.sniff(NESTED[shape][:SNIFF_BYTES])
    check_parser(parser, path)
    check_loader(path, str(path))


DUMP = ROOT / "fixtures" / "dumps" / "checkpoint"
DUMP_FILES = sorted(p.relative_to(DUMP).as_posix() for p in DUMP.rglob("*") if p.is_file())
# Files a dump or a whole-job folder may hold beside the collector's own ones.
EXTRA_FILES = ["summary.json", "../job.json"]


@SETTINGS
@given(
    target=st.sampled_from(DUMP_FILES + EXTRA_FILES),
    variant=any_variant(),
    as_archive=st.booleans(),
)
def test_a_dump_with_one_hostile_file_still_loads(
    target: str, variant: Variant, as_archive: bool
) -> None:
    # GIVEN a real dump (in a job folder) in which one file, or a summary.json or the
    # job's job.json, is replaced by a hostile variant
    import shutil
    import tarfile

    with tempfile.TemporaryDirectory(prefix="hangdoc-fuzz-") as tmp:
        job = Path(tmp) / "job"
        dump = job / "node1"
        shutil.copytree(DUMP, dump)
        (dump / target).write_bytes(variant.data)
        root = job
        if as_archive:
            root = Path(tmp) / "job.tar.gz"
            with tarfile.open(root, "w:gz") as tar:
                tar.add(job, arcname="job")
        # WHEN loaded THEN nothing escapes but BadInputError, and the other ranks load
        try:
            evidence = load_paths([root])
        except BadInputError:
            count("fuzz: hostile files inside dumps (refused)")
            return
        count("fuzz: hostile files inside dumps")
        assert evidence.processes
        for item in evidence.inputs:
            if item.kind in _UNUSABLE:
                assert item.error or "/node1/" in item.path, item
