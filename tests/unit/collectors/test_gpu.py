"""collectors/gpu.py with a fake nvidia-smi and dmesg: what it writes, what the manifest
says without a driver, and that the log parser reads the file back into GPU rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.payloads.host import GpuRow, GpuStatus
from hangdoc.collectors import gpu
from hangdoc.collectors.extras import EXTRA_COLLECTORS, ExtraContext, RankTarget

SAMPLES = Path(__file__).resolve().parents[3] / "fixtures" / "gpu"
GPUS, APPS = (SAMPLES / "h100-one-full.csv").read_text().split("\n\n")
XID = (
    "[Sat Nov 21 20:11:02 2026] NVRM: Xid (PCI:0000:5d:00): 79, pid=4104, name=python3, "
    "GPU has fallen off the bus.\n"
)


class FakeTools:
    """Answers like nvidia-smi and dmesg would; records what was run."""

    def __init__(self, *, smi_code: int = 0, dmesg_code: int = 0) -> None:
        self.smi_code = smi_code
        self.dmesg_code = dmesg_code
        self.calls: list[list[str]] = []

    def __call__(self, cmd: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        self.calls.append(list(cmd))
        if cmd[0] == "dmesg":
            return self.dmesg_code, "[x] usb 1-1: new device\n" + XID, "dmesg: not permitted"
        if self.smi_code:
            return self.smi_code, "", "Unable to determine the device handle for GPU0000:5D:00.0"
        query = cmd[1]
        return 0, (GPUS if query.startswith("--query-gpu") else APPS) + "\n", ""


def _ctx(tmp_path: Path) -> ExtraContext:
    target = RankTarget(pid=4101, rank=0, local_rank=0, world_size=4, host="node1")
    rank_dir = tmp_path / "rank0"
    rank_dir.mkdir(parents=True, exist_ok=True)
    return ExtraContext(target=target, rank_dir=rank_dir, dump_dir=tmp_path, timeout_s=5.0)


def test_registered_as_an_extra_collector() -> None:
    assert ("gpu", gpu.collect_gpu) in EXTRA_COLLECTORS


def test_without_a_driver_the_manifest_says_so_once(tmp_path: Path) -> None:
    tools = FakeTools()
    kwargs = {"run": tools, "which": lambda _: None, "nvml": lambda: None,
              "driver_file": tmp_path / "no-driver"}  # fmt: skip
    steps = gpu.collect_gpu(_ctx(tmp_path), **kwargs)
    assert [(s["step"], s["status"]) for s in steps] == [("gpu", "skipped")]
    assert "no NVIDIA driver" in (steps[0]["reason"] or "")
    assert tools.calls == []
    assert gpu.collect_gpu(_ctx(tmp_path), **kwargs) == []
    assert not (tmp_path / "gpu").exists()


def test_nvidia_smi_output_and_xid_lines_are_written(tmp_path: Path) -> None:
    tools = FakeTools()
    steps = gpu.collect_gpu(
        _ctx(tmp_path), run=tools, which=lambda _: "/usr/bin/nvidia-smi", nvml=lambda: None
    )
    assert [(s["step"], s["status"]) for s in steps] == [("gpu", "ok"), ("gpu-xid", "ok")]
    csv = (tmp_path / "gpu" / "nvidia-smi.csv").read_text()
    assert csv.startswith("index, uuid, name") and "\n\npid, process_name" in csv
    assert (tmp_path / "gpu" / "kernel-nvrm.log").read_text() == XID
    assert any(c[1].startswith("--query-compute-apps=pid,") for c in tools.calls if len(c) > 1)


def test_the_log_parser_reads_the_csv_back(tmp_path: Path) -> None:
    gpu.collect_gpu(
        _ctx(tmp_path), run=FakeTools(), which=lambda _: "nvidia-smi", nvml=lambda: None
    )
    ev = load_paths([tmp_path / "gpu" / "nvidia-smi.csv"])
    rows = [e.payload for e in ev.job_log_events if e.kind == "gpu_status"]
    assert all(isinstance(r, GpuStatus) for r in rows)
    statuses = [r for r in rows if isinstance(r, GpuStatus)]
    assert {r.row for r in statuses} == {GpuRow.GPU, GpuRow.PROCESS}
    full = next(r for r in statuses if r.row is GpuRow.GPU and r.index == 3)
    assert full.memory_used_mib == 81208.0 and full.utilization_pct == 0.0


def test_failures_are_recorded_not_raised(tmp_path: Path) -> None:
    tools = FakeTools(smi_code=9, dmesg_code=1)
    steps = gpu.collect_gpu(
        _ctx(tmp_path), run=tools, which=lambda _: "nvidia-smi", nvml=lambda: None
    )
    assert [(s["step"], s["status"]) for s in steps] == [("gpu", "failed"), ("gpu-xid", "failed")]
    assert "device handle" in (steps[0]["reason"] or "")
    assert "dmesg failed" in (steps[1]["reason"] or "")


def test_nvml_is_preferred_when_it_answers(tmp_path: Path) -> None:
    tools = FakeTools()
    text = gpu.GPU_HEADER + "\n0, GPU-x, H100, 0000:04:00.0, 3 %, 10 MiB, 80 MiB\n"
    steps = gpu.collect_gpu(_ctx(tmp_path), run=tools, which=lambda _: None, nvml=lambda: text,
                            driver_file=Path("/"))  # fmt: skip
    assert steps[0]["status"] == "ok"
    assert (tmp_path / "gpu" / "nvidia-smi.csv").read_text() == text
    assert all(c[0] == "dmesg" for c in tools.calls)


def test_run_command_reports_missing_tools() -> None:
    code, _, err = gpu.run_command(["/nonexistent/nvidia-smi"], 1.0)
    assert code == 127 and "cannot run" in err
