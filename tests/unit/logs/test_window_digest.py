"""The raw path keeps a rank's log window as the summaries' digest (loading/window_digest.py):
the window's lines must be the records the columns give (text, source, line number,
benign mark), read whole, one by one from either end, or by column, and the templates
the log comparison reads must be the ones it would mask of each line.

Held to: every recorded log, as it is and pasted every way hangdoc/paste_mangling.py
mangles a paste, for a rank's own file and a file no rank owns; the all-inputs
benchmark's rank log; made lines of every kind of number (hex, times, decimals, an
exponent), "%" signs, a line that holds a NUL (kept as records); and every recorded dump
whose ranks have logs, loaded with and without the digests: the same processes, windows,
log comparison and findings.
"""

from __future__ import annotations

import pickle
import random
import sys
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading import loader, text_workers, window_digest
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.loading.window_digest import (
    JobTemplates,
    WindowDigest,
    digest_columns,
    digest_windows,
)
from hangdoc.analyzer.model import LogLine, LogWindow, ProcessEvidence
from hangdoc.analyzer.parsers.logs.window import UNATTRIBUTED, WindowColumns, read_window_columns
from hangdoc.analyzer.views.log_compare import compare_logs, masked
from hangdoc.analyzer.vocabulary import BenignWarning
from hangdoc.paste_mangling import COMBINED, MANGLINGS

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import bench_all  # noqa: E402  (the all-inputs benchmark's rank logs)
from fr_synth import Job  # noqa: E402

LOGGED = sorted(
    p.parent for p in (ROOT / "fixtures").rglob("manifest.json") if any(p.parent.glob("*/logs/*"))
)


def _recorded() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]


def _expanded(masked: tuple[str, ...], runs: tuple[tuple[int, int], ...]) -> list[str]:
    """Each line's masked template, of its window's runs."""
    return [masked[template] for template, count in runs for _ in range(count)]


def _held(columns: dict[int, WindowColumns], source: str) -> None:
    """Each window as digested is its columns' records, read every way."""
    for window in columns.values():  # the cut by shapes is the cut by the pattern
        joined = "\n".join(window.texts)
        if window.texts and joined.isascii():
            by_shape = window_digest._cut_by_shape(window.texts, joined)
            assert by_shape is not None
            assert by_shape == window_digest._cut(window.texts, joined)
    templates = JobTemplates()
    digested = pickle.loads(pickle.dumps(digest_windows(columns)))  # (as a worker sends it)
    windows = templates.windows(digested, source)
    assert windows.keys() == columns.keys()
    procs = []
    for rank, window in windows.items():
        records = columns[rank].lines(source)
        if rank == UNATTRIBUTED or "\x00" in "".join(columns[rank].texts) or not records:
            assert isinstance(window, list)
        else:
            assert isinstance(window, LogWindow)
            proc = ProcessEvidence(rank=rank)
            templates.add_lines(proc, window)
            assert proc.log_lines is window
            procs.append(proc)
        # one by one from the tail, then the head, then whole: the same records
        for index in (-1, -2, -len(records) // 3, 0, 1, len(records) // 2):
            if records and -len(records) <= index < len(records):
                assert window[index] == records[index], (rank, index)
        if isinstance(window, LogWindow):  # its columns, without building it
            assert list(window.sources()) == list(dict.fromkeys(r.source for r in records))
            assert list(window.benign_marks()) == [r for r in records if r.benign is not None]
            assert window._built is None
        assert len(window) == len(records)
        if isinstance(window, LogWindow):  # every line alone, in any order, from a fresh one
            fresh = templates.windows(digested, source)[rank]
            order = list(range(len(records)))
            random.Random(rank).shuffle(order)
            del order[200:]  # (each line read alone counts from an end: a few hundred)
            assert [fresh[i] for i in order] == [records[i] for i in order], rank
        assert window == records, rank
    templates.attach(procs)
    for proc in procs:
        given = proc.log_templates
        assert given is not None and given.describes(proc.log_lines)
        assert _expanded(given.masked, given.runs) == [masked(r.text) for r in proc.log_lines]


@pytest.fixture(params=[512, 3], ids=["blocks of 512", "blocks of 3"])
def block(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Numbers packed in blocks of the size used, and of 3 (a line's numbers over two)."""
    monkeypatch.setattr(window_digest, "NUMBERS_PER_BLOCK", request.param)
    return int(request.param)


@pytest.mark.parametrize("mangling", ["", *(m.name for m in (*MANGLINGS, *COMBINED))])
def test_recorded_logs_digest_to_their_records(mangling: str, tmp_path: Path) -> None:
    change = {m.name: m.apply for m in (*MANGLINGS, *COMBINED)}.get(mangling, lambda t: t)
    paths = _recorded()
    assert len(paths) > 20
    digested = 0
    for index, path in enumerate(paths):
        mangled = tmp_path / f"{index}.log"
        mangled.write_bytes(change(path.read_text(errors="replace")).encode(errors="replace"))
        for rank in (3, None):
            columns = read_window_columns(mangled, rank)
            digested += sum(digest_columns(c) is not None for c in columns.values())
            _held(columns, f"x/{index}.log")
    assert digested > 20


def test_recorded_logs_digest_to_their_records_in_blocks_of_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(window_digest, "NUMBERS_PER_BLOCK", 3)  # (a line's numbers over two)
    test_recorded_logs_digest_to_their_records("", tmp_path)


def test_a_bench_rank_log_digests_to_its_records(tmp_path: Path, block: int) -> None:
    path = tmp_path / "stdout.rank5.out"
    bench_all.write_log(path, Job(ranks=64), 5, "node00000", 4242, 1 << 20)
    columns = read_window_columns(path, 5)
    digest = digest_columns(columns[5])
    assert digest is not None and len(digest.templates) < 10  # a job's few templates
    if block == window_digest.NUMBERS_PER_BLOCK == 512:  # (what a worker sends back)
        assert len(pickle.dumps(digest)) < len(pickle.dumps(columns[5])) / 5
    _held(columns, "x/stdout.rank5.out")


def test_made_lines_of_every_number_digest_to_their_records(block: int) -> None:
    texts = [
        "step 12 | loss 2.5e-3 | lr 1e-05 | 0x7f3a2b | at 19:23:51.750 after 1.5 s",
        "100% done, 0% left: %s %d %% 7",
        "no number here",
        "12",
        "x" * 40 + " 0xdeadbeef 0x 0 00:00 1:2:3 ..5.. 3.",
        "\u00e9t\u00e9 3 \u2028? no: one line",
        "tail  with  double  spaces  4  5",
        "at 0x1f and 1x1f",  # one shape: a hex number, then none
        "at 1x1f and 0x1f",
        "at 0x1f and 1x1f",
        "at 12:34:56.7 and 1.5.6",
        "at 98:76:54.3 and 9.8.7",
    ]
    columns = WindowColumns(
        texts=list(texts),
        numbers=[7, 8, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        marks=[(2, BenignWarning.TOKENIZERS_FORK)],
    )
    digest = digest_columns(columns)
    assert isinstance(digest, WindowDigest)
    assert digest.numbers.count == len(digest.numbers.text().split(" "))
    _held({4: columns, UNATTRIBUTED: WindowColumns(texts=["a 1"], numbers=[3])}, "made.log")
    # a NUL in a line: no digest, the records as before
    nul = WindowColumns(texts=["a\x00b 1", "c 2"], numbers=[1, 2])
    assert digest_columns(nul) is None
    _held({4: nul}, "made.log")
    assert digest_columns(WindowColumns()) is None


def test_lines_added_to_a_process_keep_its_window_unbuilt() -> None:
    columns = WindowColumns(texts=["epoch 1 step 2", "epoch 1 step 3"], numbers=[1, 2])
    digest = digest_columns(columns)
    assert digest is not None
    templates = JobTemplates()
    window = templates.window(digest, "a.log")
    proc = ProcessEvidence(rank=1)
    templates.add_lines(proc, [])
    templates.add_lines(proc, window)
    templates.add_lines(proc, [])  # (what merging a flight recorder's fragment adds)
    assert proc.log_lines is window and window._built is None
    more = LogLine("epoch 1 step 4", "b.log", 1)
    templates.add_lines(proc, [more])  # lines not made here: after the window's, as a list
    assert proc.log_lines == [*columns.lines("a.log"), more]


def _columns(
    texts: list[str], numbers: list[int], marks: dict[int, BenignWarning]
) -> WindowColumns:
    return WindowColumns(texts=texts, numbers=numbers, marks=list(marks.items()))


@pytest.mark.parametrize("seed", range(40))
def test_a_ranks_windows_of_several_files_join_into_one(seed: int, block: int) -> None:
    """A rank's stdout and stderr (or a log in parts): the windows are joined, not built,
    and the joined window is the lines of each in turn, with templates of each."""
    rng = random.Random(seed)
    words = ["epoch 3 step 1250 loss 2.5", "saving 0x7f to /ckpt/step_12", "done", "50% at 1:2:3",
             "x\u2028y 4", "tokenizers fork", "ok"]  # fmt: skip
    templates = JobTemplates()
    proc = ProcessEvidence(rank=2)
    expected: list[LogLine] = []
    parts = rng.randint(1, 4)
    for part in range(parts):
        count = rng.randint(1, 30)
        texts = [
            rng.choice(words) + f" {rng.randint(0, 99999)}" * rng.randint(0, 2)
            for _ in range(count)
        ]
        if rng.random() < 0.3:
            texts = [t.replace(" ", "") for t in texts]  # (no numbers between spaces)
        numbers = sorted(rng.randint(0, 50) for _ in range(count))
        if rng.random() < 0.5:
            numbers = [0] * count  # (a tail: not numbered)
        marks = {i: BenignWarning.TOKENIZERS_FORK for i in range(count) if rng.random() < 0.1}
        columns = _columns(texts, numbers, marks)
        source = rng.choice(["a.log", "b.log", f"p{part}.log"])
        digest = digest_columns(columns)
        assert digest is not None
        templates.add_lines(proc, templates.window(digest, source))
        expected.extend(columns.lines(source))
    window = proc.log_lines
    assert isinstance(window, LogWindow) and window._built is None
    assert len(window) == len(expected)
    order = list(range(len(expected)))
    rng.shuffle(order)
    assert [window[i] for i in order] == [expected[i] for i in order]
    assert list(window.sources()) == list(dict.fromkeys(line.source for line in expected))
    assert list(window.benign_marks()) == [line for line in expected if line.benign is not None]
    templates.attach([proc])
    given = proc.log_templates
    assert given is not None and given.describes(window)
    assert _expanded(given.masked, given.runs) == [masked(line.text) for line in expected]
    assert window == expected


def _without_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    def records_only(columns: dict[int, WindowColumns]) -> dict[int, window_digest.RankWindow]:
        return dict(columns)

    monkeypatch.setattr(loader, "digest_windows", records_only)
    monkeypatch.setattr(text_workers, "digest_windows", records_only)


@pytest.mark.parametrize("dump", LOGGED, ids=lambda p: str(p.relative_to(ROOT)))
def test_recorded_dumps_load_and_answer_alike_with_digests(
    dump: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digested = load_paths([dump], summaries=False)
    comparison = compare_logs(digested)
    answer = analyze(digested)
    with monkeypatch.context() as patched:
        _without_digests(patched)
        plain = load_paths([dump], summaries=False)
    assert not any(isinstance(p.log_lines, LogWindow) for p in plain.processes)
    assert compare_logs(plain) == comparison
    again = analyze(plain)
    assert again.verdict == answer.verdict
    assert [(f.rule, f.category, f.culprit_ranks, f.confidence) for f in again.findings] == [
        (f.rule, f.category, f.culprit_ranks, f.confidence) for f in answer.findings
    ]
    assert [p.log_lines for p in digested.processes] == [p.log_lines for p in plain.processes]
    assert digested.processes == plain.processes


def test_recorded_dumps_keep_every_ranks_window_as_a_digest() -> None:
    kept = 0
    for dump in LOGGED:
        for proc in load_paths([dump], summaries=False).processes:
            if proc.log_lines:
                assert isinstance(proc.log_lines, LogWindow), (dump, proc.rank)
                assert proc.log_templates is not None, (dump, proc.rank)
                kept += 1
    assert kept > 20
