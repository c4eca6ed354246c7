"""Not a hang, and bare timeouts that must stay unknown (issue 14).

HD045 (a collective timeout configured below a second), HD046 (only the tokenizers fork
warning), HD039 (a busy progress bar whose elapsed time covers the timeout), an object
collective's unpickling error read as a consequence, and HD032 on lines of several
process groups. Inputs: casebook artifacts and pastes (their READMEs give the threads),
and formats re-enacted from them with the values this test needs.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs import recognise_line
from hangdoc.analyzer.payloads.torch_pg import StoreTimeout
from hangdoc.analyzer.views.benign import benign_lines

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "fixtures" / "cases"
PASTES = ROOT / "fixtures" / "pastes" / "logs"

# The store-barrier line of fixtures/pastes/logs/metaseq-52_store_barrier_timeout.txt
# (https://github.com/facebookresearch/metaseq/issues/52) with the limit a
# timedelta(milliseconds=1) prints.
_STORE_1MS = (
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
    "for key: store_based_barrier_key:1 (world_size=2, worker_count=1, "
    "timeout=0:00:00.001000)\n"
)
# The watchdog line of the instructlab PR with the 10-minute default instead of 1 ms.
_WATCHDOG_10MIN = (
    "[rank1]:[E502 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600090 milliseconds before timing out.\n"
)


def _rules(paths: list[Path]) -> dict[str, Category]:
    diagnosis = analyze(load_paths(paths), calibrate=False)
    return {f.rule: f.category for f in diagnosis.findings}


def test_the_store_barriers_timedelta_is_read_in_milliseconds() -> None:
    for limit, ms in (("0:00:00.001000", 1), ("0:30:00", 1_800_000), ("30", None)):
        hit = recognise_line(_STORE_1MS.splitlines()[0].replace("0:00:00.001000", limit))
        assert hit is not None and isinstance(hit.payload, StoreTimeout)
        assert hit.payload.barrier_timeout_ms == ms


def test_one_ms_watchdog_timeout_is_the_setting() -> None:
    console = CASES / "instructlab-520-watchdog-timeout-1ms" / "console.txt"
    diagnosis = analyze(load_paths([console]), calibrate=False)
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD045"
    assert diagnosis.primary.category is Category.NOT_A_HANG
    assert all(f.rule != "HD038" for f in diagnosis.findings)  # the cause is known


def test_sub_second_store_barrier_is_the_setting(tmp_path: Path) -> None:
    log = tmp_path / "console.txt"
    log.write_text(_STORE_1MS)
    diagnosis = analyze(load_paths([log]), calibrate=False)
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD045"


def test_real_limits_and_mixed_limits_do_not_fire(tmp_path: Path) -> None:
    assert "HD045" not in _rules([PASTES / "metaseq-52_store_barrier_timeout.txt"])
    mixed = tmp_path / "mixed.log"
    one_ms = (CASES / "instructlab-520-watchdog-timeout-1ms" / "console.txt").read_text()
    mixed.write_text(one_ms + _WATCHDOG_10MIN)
    assert "HD045" not in _rules([mixed])  # one real limit: the 1 ms line may be a test PG


def test_tokenizers_fork_warning_alone_is_benign() -> None:
    warning = CASES / "vllm-15056-tokenizers-fork-warning-benign" / "console.txt"
    found = _rules([warning])
    assert found.get("HD046") is Category.NOT_A_HANG
    assert len(benign_lines(load_paths([PASTES / "garak-750_tokenizers_fork_progress.txt"]))) == 2


def test_tokenizers_fork_warning_beside_a_timeout_is_not_the_answer(tmp_path: Path) -> None:
    warning = CASES / "vllm-15056-tokenizers-fork-warning-benign" / "console.txt"
    timeout = tmp_path / "rank1.log"
    timeout.write_text(_WATCHDOG_10MIN)
    assert "HD046" not in _rules([warning, timeout])


def test_packing_past_the_timeout_is_slow_work_not_a_crash() -> None:
    case = CASES / "msswift-4340-rank0-packing-broadcast-timeout"
    paths = [case / "traceback_rank6_rank7.txt", case / "packing_and_rank4.txt"]
    diagnosis = analyze(load_paths(paths), calibrate=False)
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD039"
    # rank 6's EOFError in broadcast_object_list's _tensor_to_object: the aborted
    # broadcast delivered no bytes; it is the consequence, not a death
    assert all(f.rule != "HD030" for f in diagnosis.findings)


def test_an_eoferror_outside_object_collectives_is_still_a_death(tmp_path: Path) -> None:
    log = tmp_path / "console.txt"
    log.write_text(
        "[rank6]: Traceback (most recent call last):\n"
        '[rank6]:   File "/job/train.py", line 12, in <module>\n'
        "[rank6]:     state = torch.load(path)\n"
        '[rank6]:   File "/usr/lib/python3.12/site-packages/torch/serialization.py", line 1040,'
        " in load\n"
        "[rank6]:     magic_number = pickle_module.load(f, **pickle_load_args)\n"
        "[rank6]: EOFError: Ran out of input\n" + _WATCHDOG_10MIN
    )
    assert _rules([log]).get("HD030") is Category.RANK_DEAD


def test_seq_numbers_of_several_process_groups_are_not_a_laggard() -> None:
    console = CASES / "pytorch-118369-bare-allreduce-timeout" / "console.txt"
    found = _rules([console])
    assert "HD032" not in found
    assert set(found) <= {"HD038", "HD000"}  # a bare timeout: unknown


def test_a_bar_glued_to_the_timeouts_shows_the_work_advancing(tmp_path: Path) -> None:
    """nanotron 204: rank 0's grouping bar (2:32 into it, far short of the 10-minute
    timeout) with rank 2's watchdog line glued after it. Stamped line by line by a log
    shipper, that watchdog line, wrapped in the paste, no longer reads as a timeout; the
    glue still shows the bar live when the next lines, the timeouts, were printed: slow,
    not hung (fixtures/cases/README.md), as on the paste as given."""
    from hangdoc.paste_mangling import timestamps

    given = CASES / "nanotron-204-rank0-grouping-texts-barrier-timeout" / "console.txt"
    stamped = tmp_path / "console.txt"
    stamped.write_text(timestamps(given.read_text()))
    for path in (given, stamped):
        diagnosis = analyze(load_paths([path]), calibrate=False)
        assert diagnosis.primary is not None and diagnosis.primary.rule == "HD039", path
        assert diagnosis.primary.category is Category.NOT_A_HANG, path


def test_a_meter_cut_by_the_record_written_over_it_is_still_a_bar(tmp_path: Path) -> None:
    """A tqdm meter cut after its bar by the watchdog line written over it ("… 6%|▋ [E
    ProcessGroupNCCL.cpp:414] …", tqdm/std.py's l_bar and a piece of its bar), its
    description yolov5's label scan (utils/dataloaders.py cache_labels: "Scanning '…'
    images and labels... N found, …"): the scan was printing at the timeouts, slow work,
    not a hang. Hand-written from those two formats and torch's watchdog lines."""
    log = tmp_path / "console.txt"
    log.write_text(
        "train: Scanning '/data/o365/labels/train' images and labels...1131 found, 0 missing, "
        "0 empty, 0 corrupt:   6%|▋ [E ProcessGroupNCCL.cpp:414] Some NCCL operations have "
        "failed or timed out.\n"
        "[E ProcessGroupNCCL.cpp:737] [Rank 6] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806610 "
        "milliseconds before timing out.\n"
        "[E ProcessGroupNCCL.cpp:737] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806649 "
        "milliseconds before timing out.\n"
    )
    diagnosis = analyze(load_paths([log]), calibrate=False)
    assert diagnosis.primary is not None and diagnosis.primary.rule == "HD039"
    assert "Scanning" in diagnosis.primary.title and "6%" in diagnosis.primary.title
    # the same bar not cut (its counts and times after it) and printed before the
    # timeouts, seconds into the work: it shows the work only starting (the ranks parted)
    whole = tmp_path / "whole.txt"
    whole.write_text(
        "train: Scanning '/data/o365/labels/train' images and labels...1131 found, 0 missing, "
        "0 empty, 0 corrupt:   6%|▋         | 1131/18000 [00:04<01:02, 270.1it/s]\n"
        + log.read_text().split("\n", 1)[1]
    )
    diagnosis = analyze(load_paths([whole]), calibrate=False)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category is Category.RANK_DIVERGENCE
