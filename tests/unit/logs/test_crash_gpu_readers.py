"""Readers of a rank's death and of GPU driver faults, on verbatim public pastes.

Kernel hung-task reports in the NVIDIA driver (new and old task-line formats), derived
Xids that name their cause, NVML's lost-GPU line, torch.multiprocessing's child-death
messages, mpirun's first-failed-process report, a paste that ends in a bare exception
line, a traceback whose header was cut, Ray's wrapped exception type, and the watchdog's
teardown line naming a GPU hardware error.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs.process import match_exception_line
from hangdoc.analyzer.payloads.host import KernelFrame
from hangdoc.analyzer.views.watchdog import WatchRecord, minority
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import ROOT, events, fields, parse

PASTES = ROOT / "fixtures" / "pastes" / "logs"
CASES = ROOT / "fixtures" / "cases"


def _findings(*paths: Path) -> dict[str, list[object]]:
    diagnosis = analyze(load_paths(list(paths)))
    out: dict[str, list[object]] = {}
    for finding in diagnosis.findings:
        out.setdefault(finding.rule, []).append(finding)
    return out


# ---- kernel: a task in D state inside the NVIDIA driver ----------------------------------


def test_hung_task_new_format_in_nvidia_module() -> None:
    """nvidia-persistenced#15: INFO: task … blocked, then task:… state:D, frames [nvidia]."""
    parsed = parse(PASTES / "nvidia-persistenced-15_hung_task_nvidia_rwlock.txt")
    [(_, hung)] = events(parsed, EventKind.KERNEL_HUNG_TASK.value)
    f = fields(hung)
    assert (f["name"], f["pid"], f["blocked_s"]) == ("gdscheck", 509579, 120)
    assert f["driver"] == ("nvidia",)
    assert KernelFrame("os_acquire_rwlock_read", "nvidia") in f["frames"]
    assert not any("?" in frame.function for frame in f["frames"])  # unsure frames left out


def test_hung_task_old_format_in_nvidia_uvm() -> None:
    """conda#9306: the pre-5.10 task line ("conda  D  0 11003  2638 0x80004002")."""
    parsed = parse(PASTES / "conda-9306_hung_task_old_format_nvidia_uvm.txt")
    [(_, hung)] = events(parsed, EventKind.KERNEL_HUNG_TASK.value)
    f = fields(hung)
    assert (f["name"], f["pid"], f["driver"]) == ("conda", 11003, ("nvidia_uvm",))
    [finding] = _findings(PASTES / "conda-9306_hung_task_old_format_nvidia_uvm.txt")["HD303"]
    assert finding.category.value == "gpu_hardware_or_driver"  # type: ignore[attr-defined]


def test_hung_task_outside_the_gpu_driver_is_not_a_gpu_fault() -> None:
    """gluster-health-report#19: a D-state task in the VFS, no NVIDIA module."""
    path = PASTES / "gluster-health-report-19_hung_task_not_gpu.txt"
    [(_, hung)] = events(parse(path), EventKind.KERNEL_HUNG_TASK.value)
    assert fields(hung)["driver"] == () and fields(hung)["pid"] == 26120
    assert "HD303" not in _findings(path)


def test_hung_task_relative_dmesg_stamps() -> None:
    """returnn#1480: ``dmesg -H`` stamps ("[  +0.000049]") before the task line and frames."""
    path = CASES / "returnn-1480-uvm-ioctl-d-state" / "dmesg.txt"
    [(_, hung)] = events(parse(path), EventKind.KERNEL_HUNG_TASK.value)
    assert (fields(hung)["pid"], fields(hung)["driver"]) == (15277, ("nvidia_uvm",))
    assert "HD303" in _findings(path)


# ---- GPU lines ----------------------------------------------------------------------------


def test_derived_xid_stands_for_its_cause() -> None:
    """open-gpu-kernel-modules#1150: "45, … caused by previous Xid 149" is an NVLink fault."""
    path = CASES / "opengpukernelmodules-1150-nvlink-xid-149-145" / "kernel_log.txt"
    xids = [fields(e) for _, e in events(parse(path), EventKind.GPU_XID.value)]
    assert {f["caused_by_xid"] for f in xids} == {149, 145}
    [finding] = _findings(path)["HD300"]
    assert finding.severity.value == "critical"  # type: ignore[attr-defined]
    assert "Xid 145" in finding.title and "Xid 149" in finding.title  # type: ignore[attr-defined]


def test_lost_gpu_handle_with_a_space() -> None:
    """pytorch#43685: nvidia-smi's "…device handle for GPU 0000:17:00.0: GPU is lost"."""
    path = CASES / "pytorch-43685-syncbn-ddp-gpu-lost" / "nvidia_smi.txt"
    [(_, lost)] = events(parse(path), EventKind.GPU_XID.value)
    assert (fields(lost).get("xid"), fields(lost)["pci"]) == (None, "0000:17:00.0")  # no Xid


def test_watchdog_teardown_names_the_rank_of_a_hardware_error() -> None:
    """kohya sd-scripts#1434: "[Rank 1] NCCL watchdog thread terminated with exception:
    CUDA error: uncorrectable ECC error encountered" makes rank 1 the culprit."""
    [finding] = _findings(CASES / "kohya-1434-uncorrectable-ecc-rank1" / "console.txt")["HD301"]
    assert finding.culprit_ranks == (1,)  # type: ignore[attr-defined]


# ---- how a rank died ---------------------------------------------------------------------


def test_mp_spawn_child_killed() -> None:
    """Prompt4NR#3: ProcessExitedException "process 0 terminated with signal SIGKILL"."""
    path = PASTES / "prompt4nr-3_mp_spawn_sigkill.txt"
    [(_, failed)] = events(parse(path), EventKind.WORKER_FAILED.value)
    assert (fields(failed)["signal"], fields(failed)["local_rank"]) == ("SIGKILL", 0)
    [finding] = _findings(path)["HD030"]
    assert finding.culprit_ranks == (0,)  # type: ignore[attr-defined]


def test_mp_spawn_old_plain_exception() -> None:
    """HigherHRNet#47: torch < 1.8 raised a plain "Exception: process 1 terminated …"."""
    path = PASTES / "higherhrnet-47_mp_spawn_old_exception.txt"
    [finding] = _findings(path)["HD030"]
    assert finding.culprit_ranks == (1,)  # type: ignore[attr-defined]


def test_mpirun_first_process_to_exit() -> None:
    """horovod#1421: "The first process to do so was: Process name: [[29973,1],0] Exit
    code: 1" names MPI rank 0; a bare exit code is weak evidence (an error, ≤ 0.6)."""
    path = PASTES / "horovod-1421_mpirun_first_process_exit.txt"
    [(rank, failed)] = events(parse(path), EventKind.WORKER_FAILED.value)
    assert rank == 0 and fields(failed)["exit_code"] == 1
    diagnosis = analyze(load_paths([path]), calibrate=False)
    [finding] = [f for f in diagnosis.findings if f.rule == "HD030"]
    assert finding.severity.value == "error" and finding.confidence <= 0.6


def test_paste_ending_in_a_bare_exception_line() -> None:
    """pytorch#42107: only the final exception line was pasted; it is a death, weakly."""
    path = CASES / "pytorch-42107-detr-file-deleted-one-rank-dies" / "error.txt"
    [(_, exc)] = events(parse(path), EventKind.EXCEPTION.value)
    assert fields(exc)["exc_type"] == "FileNotFoundError" and fields(exc)["bare"] is True
    diagnosis = analyze(load_paths([path]), calibrate=False)
    [finding] = [f for f in diagnosis.findings if f.rule == "HD030"]
    assert finding.confidence <= 0.6


def test_exception_line_followed_by_more_log_is_not_taken(tmp_path: Path) -> None:
    """A printed "ValueError: …" in the middle of a log is not a death."""
    log = tmp_path / "train.log"
    log.write_text("ValueError: bad sample 17, skipped\nepoch 3 step 200 loss 0.41\n")
    assert not events(parse(log), EventKind.EXCEPTION.value)


def test_abort_with_no_exception_named_is_a_weak_death() -> None:
    """sglang#3204: "Fatal Python error: Aborted" and no timeout anywhere."""
    path = CASES / "sglang-3204-ecc-error-fatal-abort" / "faulthandler_dump.txt"
    diagnosis = analyze(load_paths([path]), calibrate=False)
    [finding] = [f for f in diagnosis.findings if f.rule == "HD030"]
    assert finding.severity.value == "error" and finding.confidence <= 0.6


def test_traceback_with_its_header_cut() -> None:
    """kohya sd-scripts#1434 starts at a frame line: the exception after it is kept."""
    parsed = parse(CASES / "kohya-1434-uncorrectable-ecc-rank1" / "console.txt")
    [(_, exc)] = events(parsed, EventKind.EXCEPTION.value)
    assert fields(exc)["exc_type"] == "RuntimeError"
    assert fields(exc)["where"].startswith('File "/home/Ubuntu/Desktop/kohya_ss')


def test_ray_wrapped_exception_type() -> None:
    """Ray names a task's re-raised exception after its cause (ray/exceptions.py)."""
    line = "ray.exceptions.RayTaskError(RuntimeError): ray::Worker.train() (pid=1876, ip=1.2.3.4)"
    assert match_exception_line(line) == (
        "ray.exceptions.RayTaskError(RuntimeError)",
        "ray::Worker.train() (pid=1876, ip=1.2.3.4)",
    )


# ---- size mismatch between two ranks: who went on ------------------------------------------


def test_size_tie_is_broken_by_the_rank_that_went_on() -> None:
    """ms-swift#10183: rank 3 (64 elements) had enqueued 7220, rank 2 (24084544) stopped at
    7219: rank 2 is the one that diverged."""
    records = {
        2: WatchRecord(
            2, "default", seq=7219, op="BROADCAST", numel_in=24084544, last_enqueued=7219
        ),
        3: WatchRecord(3, "default", seq=7219, op="BROADCAST", numel_in=64, last_enqueued=7220),
    }
    groups: dict[object, list[int]] = {(7219, 24084544): [2], (7219, 64): [3]}
    culprits, major, _, _ = minority(groups, records)
    assert (culprits, major) == ([2], [3])
    [finding] = _findings(
        CASES / "msswift-10183-ddp-buffer-broadcast-size-mismatch" / "console.txt"
    )["HD034"]
    assert finding.culprit_ranks == (2,)  # type: ignore[attr-defined]
