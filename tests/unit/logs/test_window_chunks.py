"""The line window reads a chunk of plain job's lines at once (parsers/logs/window.
_plain_chunk: no rank prefix, library line, benign warning, label or frame end can be
in it, every line's wrap facts known of its shape), and must keep what it keeps reading
them one by one.

Held to: every recorded log, as it is and pasted every way hangdoc/paste_mangling.py
mangles a paste (colour codes, carriage returns, prefixes and wraps among them), the
all-inputs benchmark's rank log, and made logs of step lines with library lines, benign
warnings, rank prefixes, labels, frames and tracebacks among them, give the windows of
the line-by-line reading, for a rank's own file and for a file no rank owns, with the
wrap facts forgotten and remembered; and most of a bench rank log's window is read in
chunks.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs import window, wrap_shape
from hangdoc.analyzer.parsers.logs.prefilter import line_shape
from hangdoc.paste_mangling import COMBINED, MANGLINGS

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import bench_all  # noqa: E402  (the all-inputs benchmark's rank logs)
from fr_synth import Job  # noqa: E402


def _recorded() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]


def _alike(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rank in (3, None):
        wrap_shape.forget()
        with monkeypatch.context() as patched:
            patched.setattr(window, "_plain_chunk", lambda raws, shapes: None)
            by_line = window.read_line_window(path, "x", rank)
        wrap_shape.forget()
        assert window.read_line_window(path, "x", rank) == by_line, (path, rank)
        assert window.read_line_window(path, "x", rank) == by_line, (path, rank)  # known
        # every line's shape remembered (the log parser's passing over asks lines the
        # window's own reading does not: a rank prefix's, a library's)
        for line in path.read_text(errors="replace").splitlines():
            if len(line) <= wrap_shape.MAX_WRAP_SHAPE_LINE:
                wrap_shape.wrap_facts(line)
        assert window.read_line_window(path, "x", rank) == by_line, (path, rank)


@pytest.mark.parametrize("mangling", ["", *(m.name for m in (*MANGLINGS, *COMBINED))])
def test_recorded_logs_give_the_windows_of_the_line_by_line_reading(
    mangling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    change = {m.name: m.apply for m in (*MANGLINGS, *COMBINED)}.get(mangling, lambda t: t)
    paths = _recorded()
    assert len(paths) > 20
    for index, path in enumerate(paths):
        mangled = tmp_path / f"{index}.log"
        mangled.write_bytes(change(path.read_text(errors="replace")).encode(errors="replace"))
        _alike(mangled, monkeypatch)


_AMONG = (
    "2026-11-21 19:23:51,750 - INFO - trainer - node00000:1:1 [0] NCCL INFO Connected all rings"
    " of comm 0x550000000400 rank 4 nranks 256",
    "I1121 19:23:51.750000 123 ProcessGroupNCCL.cpp:12] [PG 0 Rank 3] watchdog thread started",
    "2026-11-21 19:23:51,750 - WARNING - huggingface/tokenizers: The current process just got "
    "forked, after parallelism has already been used. Disabling parallelism to avoid deadlocks...",
    "[rank3]: 2026-11-21 19:23:51,750 - INFO - trainer - epoch 0 step 12 | loss 2.5 | 119 tok/s",
    "=== Rank 5 ===",
    "2026-11-21 19:23:51,750 - INFO - trainer - validation loss 2.1184",
    "Traceback (most recent call last):",
    '  File "/opt/train.py", line 12, in <module>',
    "    main()",
    "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
    "2026-11-21 19:23:51,750 - INFO - trainer - saving (shard 3 of 8)",
    "    _wait_for_pending_works_of_the_process_group_to_finish (trainer/distributed_loop.py:2501)",
    "",
)


def _chunks(lines: list[str]) -> list[tuple[list[str], list[bytes]]]:
    size = window._CHUNK
    return [
        (lines[at : at + size], [line_shape(line) for line in lines[at : at + size]])
        for at in range(0, len(lines), size)
    ]


def test_made_logs_give_the_windows_of_the_line_by_line_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    chunked = 0
    for count in range(3 * len(_AMONG)):
        among = _AMONG[count % len(_AMONG)]  # one kind of line among the step lines
        lines = []
        for step in range(rng.randrange(100, 400)):
            day = rng.choice(["21", "21", "22", "45"] if count % 3 == 2 else ["21", "22"])
            lines.append(
                f"2026-11-{day} 19:23:51,750 - INFO - trainer - epoch 0 step {step} | "
                f"loss 2.{rng.randrange(9999)} | lr 3.00e-04 | grad_norm 1.{rng.randrange(999)} | "
                f"{rng.randrange(99999)} tokens/s"
            )
        for _ in range(3):
            lines.insert(rng.randrange(len(lines)), among)
        log = tmp_path / f"{count}.log"
        log.write_text("\n".join(lines) + "\n")
        _alike(log, monkeypatch)
        chunked += sum(1 for raws in _chunks(lines) if window._plain_chunk(*raws) is not None)
    assert chunked > 15  # chunks were read at once, where they could be


def test_most_of_a_bench_rank_logs_window_is_read_in_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "stdout.rank3.out"
    bench_all.write_log(log, Job(ranks=16), 3, "node00000", 10003, 1_000_000)
    _alike(log, monkeypatch)
    chunked: list[int] = []
    real = window._plain_chunk

    def counting(raws: list[str], shapes: list[bytes]) -> list[str] | None:
        texts = real(raws, shapes)
        chunked.append(0 if texts is None else len(texts))
        return texts

    monkeypatch.setattr(window, "_plain_chunk", counting)
    [lines] = window.read_line_window(log, "x", 3).values()
    assert sum(chunked) > len(lines) * 0.6


def _step(step: int) -> str:
    return (
        f"2026-11-21 19:23:51,750 - INFO - trainer - epoch 0 step {step} | loss 2.5 | "
        "lr 3.00e-04 | grad_norm 1.344 | 11989 tokens/s"
    )


@pytest.mark.parametrize("rank", [3, None])
def test_a_frames_source_line_and_a_label_at_a_chunks_start_are_read_as_line_by_line(
    rank: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a traceback frame that ends a chunk: the next chunk's first line, indented, is its
    # source line (not kept); a label that ends a chunk names the next lines' rank, and
    # a line naming its own rank is that rank's in a file no rank owns
    size = window._CHUNK
    lines = [_step(n) for n in range(5 * size)]
    lines[size - 1] = '  File "/opt/train.py", line 12, in <module>'
    lines[size] = (
        "    result = train_one_epoch(model, loader, optimizer, scheduler, epoch=epoch) + 0"
    )
    lines[3 * size - 1] = "=== Rank 5 ==="
    lines[4 * size + 3] = (
        "2026-11-21 19:23:51,750 - INFO - trainer - Rank 6, world_size 8: loading the dataset "
        "shards from /data/train"
    )
    log = tmp_path / "console.log"
    log.write_text("\n".join(lines) + "\n")
    _alike(log, monkeypatch)


def test_a_chunk_is_refused_by_its_shapes_for_every_word_that_makes_it_unsure() -> None:
    # _plain_chunk asks each distinct shape of the chunk, once, whether it holds a word
    # that makes the chunk unsure (a rank prefix, a benign needle, a library literal),
    # each word as its shape has it (digits 0: "c10d", "Read -1, expected "): a chunk with
    # one such line is refused, the same chunk without it is read at once.
    words = {"[rank", "[default", *window.BENIGN_NEEDLES, *(window._LIBRARY_FIRST or ())}
    assert {"c10d", "[rank"} <= words

    def step(number: int, note: str) -> str:
        return (
            f"2026-11-21 19:23:{number % 60:02d},000 - INFO - trainer - epoch 3 step "
            f"{number} | loss 2.0053 | note {note} | grad_norm 1.605 | 12108 tokens/s"
        )

    for word in sorted(words):
        for at in (0, 17, 63):
            plain = [step(n, "fine") for n in range(64)]
            unsure = [*plain[:at], step(at, word), *plain[at + 1 :]]
            for line in (*plain, *unsure):
                wrap_shape.wrap_facts(line)
            shapes = list(map(line_shape, plain))
            assert window._plain_chunk(plain, shapes) is not None
            assert window._plain_chunk(unsure, list(map(line_shape, unsure))) is None, word
