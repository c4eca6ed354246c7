"""The one text path (analyzer/parsers/text.py): every line of a text goes to the stack
recognisers and to the log recognisers, and what both find is composed for the same ranks.

Mixed files are built from real text only: the py-spy and faulthandler samples
(tests/unit/parsers/samples, recorded with py-spy 0.4.3 and CPython, README.md there), the
public log fixtures (fixtures/logs/public, each with its source) and pasted stacks and
logs (fixtures/pastes, each with its thread). A split puts the same parts in files of
their own, each under the rank label in force over it. A log is not cut inside: what the
log side learns from one line for another (NCCL's init lines for the ranks of its WARN
lines, a dated stamp for the year of an undated one) is learnt within a file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, InputKind, LogEvent
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile
from hangdoc.analyzer.parsers.faulthandler import FaulthandlerParser
from hangdoc.analyzer.parsers.logs import LogParser
from hangdoc.analyzer.parsers.pyspy_text import PyspyTextParser
from hangdoc.analyzer.parsers.stacks import is_dump_frame
from hangdoc.analyzer.parsers.text import TextParser, text_kind
from hangdoc.analyzer.vocabulary import RankFrom
from tests.unit.parsers.helpers import SAMPLES, Writer
from tests.unit.stacks.helpers import PASTES, paste

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "fixtures" / "logs" / "public"


def _log(name: str) -> str:
    """A public log fixture without its provenance header (the "# hangdoc fixture" lines)."""
    lines = (LOGS / name).read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith("# ")) + "\n"


def _sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def _read(path: Path) -> ParsedFile:
    return TextParser().parse(path, path.name)


def _events(parsed: ParsedFile) -> list[tuple[int | None, str]]:
    return sorted(
        [(p.rank, e.kind) for p in parsed.processes for e in p.log_events]
        + [(None, e.kind) for e in parsed.job_log_events],
        key=str,
    )


# ---- what is read: the stacks and the events of a mixed text --------------------------------


def test_a_pyspy_paste_with_a_watchdog_timeout_and_nccl_warns_below_it(write: Writer) -> None:
    # GIVEN a py-spy dump, then the watchdog's timeouts ([rankN]: lines) and NCCL's IB
    # completion errors, pasted as one text
    text = (
        _sample("pyspy/dump.txt")
        + _log("torch-2.4_pg_status_laggard.log")
        + _log("nccl-2.19_ib_completion_error.log")
    )
    path = write("ticket.txt", text)
    assert text_kind(text.encode()[:SNIFF_BYTES]) is InputKind.PYSPY_TEXT
    parsed = _read(path)
    # THEN the dump is read (as py-spy's own reader reads it) ...
    [dump] = [p for p in parsed.processes if p.text_stacks]
    assert dump.pid == 9106 and [len(s.threads) for s in dump.text_stacks] == [3]
    # ... and so are the lines below it: each rank's timeout, NCCL's transport errors by the
    # ranks its init lines name
    events = _events(parsed)
    assert {r for r, kind in events if kind == "collective_timeout"} == {0, 1, 2}
    assert {r for r, kind in events if kind == "nccl_transport_error"} == {0, 2}


def test_a_log_with_a_gdb_backtrace_and_a_faulthandler_dump_inside(write: Writer) -> None:
    # GIVEN a job's log (NCCL's init lines), rank 0's gdb backtrace under its label, rank 1's
    # faulthandler dump (SIGUSR1) under its own, and NCCL's WARN lines after it
    nccl = _log("nccl-2.19_ib_completion_error.log").splitlines(keepends=True)
    text = (
        "".join(nccl[:14])
        + paste("gdb/nccl_901_rank0.txt")
        + "\n=== rank 1 ===\n"
        + _sample("faulthandler_sigusr1.txt")
        + "".join(nccl[14:])
    )
    parsed = _read(write("console.log", text))
    # THEN both stacks, each on its rank ...
    stacks = {p.rank: [k.value for s in p.text_stacks for k in s.kinds] for p in parsed.processes}
    assert stacks[0] == ["gdb"] and stacks[1] == ["faulthandler"]
    # ... and the log's events, by the ranks NCCL's init lines give its processes
    events = _events(parsed)
    assert {r for r, kind in events if kind == "nccl_init"} == set(range(6))
    assert {r for r, kind in events if kind == "nccl_transport_error"} == {0, 2}


def test_a_traceback_in_the_middle_of_a_deepspeed_log(write: Writer) -> None:
    # GIVEN DeepSpeed's checkpoint lines of rank 0, then the traceback rank 0 died of (its
    # excepthook's [rank0]: prefix), then the peers' watchdog timeouts
    deepspeed = _log("deepspeed_checkpoint_then_timeout.log").splitlines(keepends=True)
    traceback = "".join(f"[rank0]: {line}\n" for line in paste("traceback/mtr_99.txt").splitlines())
    text = "".join(deepspeed[:3]) + traceback + "".join(deepspeed[3:])
    parsed = _read(write("train.log", text))
    # THEN rank 0 has the stack that raised, the exception event and its phases
    [rank0] = [p for p in parsed.processes if p.rank == 0 and p.text_stacks]
    [thread] = [t for s in rank0.text_stacks for t in s.threads]
    assert thread.exception is not None and thread.exception.startswith("ValueError")
    events = _events(parsed)
    assert (0, "exception") in events and (0, "phase") in events
    # AND the peers their timeouts
    assert {r for r, kind in events if kind == "collective_timeout"} == {1, 2}


# ---- the same text split into files: the same Evidence ---------------------------------------


def _evidence(ev: Evidence) -> dict[int | None, tuple[object, ...]]:
    """Each process's stacks (frames), events (kind, text, fields but how their rank was
    found) and whether it exited, by rank; the job's events under None."""

    def event(e: LogEvent) -> tuple[object, ...]:
        return (e.kind, e.text, e.payload, e.host, e.pid, e.local_rank, e.clock)

    out: dict[int | None, tuple[object, ...]] = {}
    for proc in ev.processes:
        stacks = tuple(
            tuple(tuple(f.function for f in t.frames) for t in s.threads) for s in proc.text_stacks
        )
        events = tuple(sorted((event(e) for e in proc.log_events), key=str))
        out[proc.rank] = (proc.pid, stacks, events, proc.exited)
    out[None] = (tuple(sorted((event(e) for e in ev.job_log_events), key=str)),)
    return out


SPLITS = {
    "py-spy, then the watchdog and NCCL": [
        _sample("pyspy/dump.txt"),
        _log("torch-2.4_pg_status_laggard.log") + _log("nccl-2.19_ib_completion_error.log"),
    ],
    "a log, then a gdb backtrace and a faulthandler dump under labels": [
        _log("nccl-2.19_ib_completion_error.log"),
        paste("gdb/nccl_901_rank0.txt") + "\n",
        "=== rank 1 ===\n" + _sample("faulthandler_sigusr1.txt"),
    ],
    "a DeepSpeed log, then a traceback": [
        _log("deepspeed_checkpoint_then_timeout.log"),
        "".join(f"[rank0]: {line}\n" for line in paste("traceback/mtr_99.txt").splitlines()),
    ],
    "ranks' py-spy dumps and log tails under typed labels": [
        "rank 0:\n" + _sample("pyspy/dump.txt"),
        "rank 0:\n" + _log("torch-2.2_remote_error_last_error.log"),
        "rank 1:\n" + _sample("pyspy/dump_native.txt"),
    ],
}


def _joined(parts: list[str]) -> str:
    """The parts as one text: a label a part starts with that repeats the one in force is
    the split's, not the text's."""
    out: list[str] = []
    label = None
    for part in parts:
        first, _, rest = part.partition("\n")
        if first.startswith(("rank ", "=== rank")) and first == label:
            part = rest
        elif first.startswith(("rank ", "=== rank")):
            label = first
        out.append(part)
    return "".join(out)


@pytest.mark.parametrize("name", SPLITS)
def test_the_same_text_split_into_files_gives_the_same_evidence(name: str, tmp_path: Path) -> None:
    parts = SPLITS[name]
    whole = tmp_path / "whole" / "paste.txt"
    whole.parent.mkdir()
    whole.write_text(_joined(parts))
    split = tmp_path / "split"
    split.mkdir()
    for index, part in enumerate(parts):
        (split / f"part{index}.txt").write_text(part)
    one, several = load_paths([whole]), load_paths([split])
    assert _evidence(one) == _evidence(several)
    assert one.seen_ranks() == several.seen_ranks() and one.processes


# ---- ranks: labels over a rank's paste name its log lines too --------------------------------


def test_a_label_gives_its_rank_to_the_lines_under_it(write: Writer) -> None:
    # GIVEN a rank's output pasted under a label, its lines carrying no rank of their own
    # (a monitored barrier's failure), then NCCL's RAS report of the job under another
    text = (
        "rank 0 log:\n"
        + _log("torch-2.0_monitored_barrier_nccl.log")
        + "rank 1 log:\n"
        + _log("nccl-2.26_ras_mismatch.txt")
    )
    parsed = _read(write("ticket.txt", text))
    # THEN rank 0's events are rank 0's, saying how the rank was found ...
    rank0 = {e.kind: e for p in parsed.processes if p.rank == 0 for e in p.log_events}
    assert rank0["monitored_barrier_failure"].rank_from is RankFrom.LABEL
    assert "exception" in rank0  # (moved by its traceback, which the label gave rank 0)
    # ... and a report about the job stays the job's, whoever pasted it (the NCCL version
    # above it is rank 1's: its process printed it)
    assert {e.kind for e in parsed.job_log_events} >= {"ras_report", "ras_mismatch"}
    assert {e.kind for p in parsed.processes if p.rank == 1 for e in p.log_events} == {
        "nccl_version"
    }


def test_a_shared_console_under_one_label_keeps_its_processes_apart(write: Writer) -> None:
    # GIVEN NCCL's WARN lines of two hosts' processes (no init lines) under one label
    nccl = _log("nccl-2.19_ib_completion_error.log").splitlines(keepends=True)
    parsed = _read(write("ticket.txt", "rank 0:\n" + "".join(nccl[14:])))
    # THEN the label does not make them rank 0's: they name other processes than one
    warns = [e for e in parsed.job_log_events if e.kind == "nccl_transport_error"]
    assert len(warns) >= 2
    assert not [e for p in parsed.processes for e in p.log_events if e.kind.startswith("nccl")]


def test_a_line_naming_a_dumped_process_is_that_process_s() -> None:
    # GIVEN a Ray worker's console (casebook vllm-6783, verbatim): every line under Ray's
    # "(RayWorkerWrapper pid=24036)" prefix, faulthandler's dump of the crash among them
    path = ROOT / "fixtures" / "cases" / "vllm-6783-segfault-addproxyop-ncclallreduce"
    parsed = _read(path / "console.txt")
    # THEN the fatal error is the dumped process's, found by the pid the lines name
    [worker] = parsed.processes
    assert worker.pid == 24036 and worker.text_stacks and worker.exited
    [fatal] = [e for e in worker.log_events if e.kind == "fatal_signal"]
    assert fatal.rank_from is RankFrom.PID and not parsed.job_log_events


# ---- dumps: read as their own readers read them -----------------------------------------------

DUMPS = [
    *(SAMPLES / "pyspy").glob("*.txt"),
    SAMPLES / "pyspy" / "dump_tty_ansi.raw",
    *SAMPLES.glob("faulthandler_*.txt"),
    SAMPLES / "torch_debug_dump_traceback.txt",
    SAMPLES / "torch_debug_pyspy_dump.txt",
]


def _dumps(parsed: ParsedFile) -> list[tuple[object, ...]]:
    return [
        (
            p.rank,
            p.pid,
            p.exited,
            tuple(
                (t.name, t.thread_id, t.os_thread_id, t.is_main, t.active, t.owns_gil, t.frames)
                for s in p.text_stacks
                for t in s.threads
            ),
            tuple((c.pid, len(c.threads)) for s in p.text_stacks for c in s.children),
        )
        for p in parsed.processes
        if p.text_stacks
    ]


@pytest.mark.parametrize("path", sorted(DUMPS), ids=lambda p: p.name)
def test_a_dump_reads_as_its_own_reader_reads_it(path: Path, write: Writer) -> None:
    # GIVEN a py-spy or faulthandler dump, alone and under torchrun's prefixes
    prefixed = "".join(f"[default1]:[rank5]:{line}\n" for line in path.read_text().splitlines())
    for variant in (path, write(f"prefixed_{path.name}", prefixed)):
        head = variant.read_bytes()[:SNIFF_BYTES]
        kind = text_kind(head)
        own = PyspyTextParser() if kind is InputKind.PYSPY_TEXT else FaulthandlerParser()
        assert kind in (InputKind.PYSPY_TEXT, InputKind.FAULTHANDLER) and own.sniff(head)
        # THEN the text path reads the same processes, threads and frames
        assert _dumps(_read(variant)) == _dumps(own.parse(variant, variant.name))


def test_a_file_of_every_rank_dump_is_read_whole(write: Writer) -> None:
    # GIVEN a shared console of 6,000 ranks' py-spy dumps (past the stack scan's block cap
    # and its 4 MiB window for other texts)
    dump = _sample("pyspy/dump.txt")
    text = "".join(
        "".join(f"[rank{r}]: {line}\n" for line in dump.replace("9106", str(20000 + r)).split("\n"))
        for r in range(6000)
    )
    path = write("all_ranks.txt", text)
    assert path.stat().st_size > 4 * 1024 * 1024
    parsed = _read(path)
    # THEN every rank is there, once
    assert sorted(p.rank for p in parsed.processes if p.text_stacks) == list(range(6000))


# ---- the line router: a dump's lines are the stacks' alone -----------------------------------


def _corpus() -> list[Path]:
    folders = (LOGS, ROOT / "fixtures" / "logs" / "recorded", PASTES, SAMPLES)
    files = [p for d in folders for p in d.rglob("*") if p.is_file() and p.suffix != ".md"]
    cases = (ROOT / "fixtures" / "cases").glob("*/*")
    return sorted([*files, *(p for p in cases if p.suffix in (".txt", ".log"))])


def test_dump_lines_kept_from_the_log_side_change_none_of_its_events() -> None:
    # GIVEN every log, paste and sample text the project holds: the log side reads each
    # with a dump's frames and headers blanked, and with every line
    def events(path: Path, line_filter: object) -> Counter[tuple[object, ...]]:
        parser = LogParser(line_filter=line_filter)  # type: ignore[arg-type]
        parsed = parser.parse(path, path.name)
        found = [*parsed.job_log_events, *(e for p in parsed.processes for e in p.log_events)]
        return Counter(found)

    blanked = 0
    for path in _corpus():
        lines = path.read_text(errors="replace").splitlines()
        blanked += sum(1 for line in lines if is_dump_frame(line))
        # THEN the events are the same
        assert events(path, lambda _n, line: is_dump_frame(line)) == events(path, None), path
    assert blanked > 500  # (the corpus holds dumps for the router to blank)


def test_frame_lines_and_not_the_lines_the_log_side_reads() -> None:
    assert is_dump_frame("    all_reduce (torch/distributed/distributed_c10d.py:2050)")
    assert is_dump_frame("[rank3]:     all_reduce (torch/distributed/distributed_c10d.py:2050)")
    assert is_dump_frame('  File "/srv/job/fh.py", line 4 in allreduce_wait')
    assert is_dump_frame(
        "#3  0x00007f326f3d9740 in ncclProxyGetPostedOps (added=...) at proxy.cc:713"
    )
    assert is_dump_frame('Thread 9106 (idle): "MainThread"')
    # a traceback's frame (the log side follows tracebacks), torch's failed-collective
    # frames and C++ frames, faulthandler's headers, a job's own line
    assert not is_dump_frame('  File "train.py", line 283, in <module>')
    assert not is_dump_frame("#0 all_reduce from /opt/torch/distributed/distributed_c10d.py:2050")
    assert not is_dump_frame("frame #3: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout() + 0x1")
    assert not is_dump_frame("Current thread 0x00007f3cafc23b80 (most recent call first):")
    assert not is_dump_frame("Saving checkpoint (train.py:12)")
