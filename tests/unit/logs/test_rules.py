# ruff: noqa: E501  (the case table reads better unwrapped)
"""Every log rule on real-format fixtures: a positive and a negative case each (and more).

Cases are data, like sqlfluff's YAML cases: the files given to the analysis, the
findings that must be there (rule, category, severity, culprit ranks) and the rules that
must stay silent. Fixture provenance is in each file's header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hangdoc.analyzer.model import Severity, Verdict
from tests.unit.logs.helpers import MULTIRANK, PUBLIC, RECORDED, SAMPLES, diagnose, findings_of


@dataclass(frozen=True)
class Expect:
    rule: str
    category: str
    severity: Severity | None = None
    culprits: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Case:
    name: str
    files: tuple[Path, ...]
    present: tuple[Expect, ...] = ()
    absent: tuple[str, ...] = ()
    verdict: Verdict | None = None
    primary: str | None = None  # primary category
    extra: dict[str, str] = field(default_factory=dict)


P, R, M = PUBLIC, RECORDED, MULTIRANK
CASES = [
    # HD030 rank died first
    Case(
        "crash-before-peers",
        (R / "rank_crash.log",),
        (Expect("HD030", "rank_dead_or_crashed", Severity.CRITICAL, (1,)),),
        ("HD032", "HD038"),
        Verdict.HANG,
        "rank_dead_or_crashed",
    ),
    Case(
        "sigkill",
        (R / "sigkill.log",),
        (Expect("HD030", "rank_dead_or_crashed", Severity.CRITICAL, (1,)),),
        ("HD038",),
        Verdict.HANG,
    ),
    Case(
        "oom-killer-childfailed",
        (P / "torchrun-2.0_childfailed_oom_killer.log",),
        (Expect("HD030", "rank_dead_or_crashed", Severity.CRITICAL, (3,)),),
    ),
    Case(
        "k8s-ray-prefixed-exception",
        (P / "k8s_ansi_prefixed.log",),
        (Expect("HD030", "rank_dead_or_crashed", Severity.CRITICAL, (1,)),),
        ("HD038",),
    ),
    Case(
        "launchers",
        (P / "launchers_slurm_mpirun_ray.log",),
        (Expect("HD030", "rank_dead_or_crashed", Severity.CRITICAL, (5, 6)),),
    ),
    Case(
        "childfailed-sample",
        (SAMPLES / "torchrun" / "childfailed_record_tee.txt",),
        (Expect("HD030", "rank_dead_or_crashed", Severity.CRITICAL, (1,)),),
    ),
    Case("no-death-when-timeouts-only", (R / "missing_rank.log",), (), ("HD030", "HD031")),
    # HD031 CUDA OOM first
    Case(
        "oom-then-timeouts",
        (P / "torch-2.3_cuda_oom_then_timeouts.log",),
        (Expect("HD031", "cuda_oom", Severity.CRITICAL, (2,)),),
        ("HD030", "HD038"),
        Verdict.HANG,
        "cuda_oom",
    ),
    Case(
        "oom-256",
        (M / "oom_256.log",),
        (Expect("HD031", "cuda_oom", Severity.CRITICAL, (137,)),),
        ("HD030", "HD032"),
    ),
    Case(
        "oom-after-timeout-is-consequence",
        (P / "torch-2.1_oom_after_timeout.log",),
        (Expect("HD038", "unknown", Severity.WARNING),),
        ("HD031", "HD030"),
        Verdict.INCONCLUSIVE,
        "unknown",
    ),
    # HD032 lagging rank
    Case(
        "laggard-last-enqueued",
        (P / "torch-2.4_pg_status_laggard.log",),
        (Expect("HD032", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (3,)),),
        ("HD033", "HD034", "HD038"),
    ),
    Case(
        "laggard-512",
        (M / "watchdog_512_laggard.log",),
        (Expect("HD032", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (317,)),),
        ("HD038", "HD201"),
    ),
    Case(
        "gloo-silent-rank",
        (R / "missing_rank.log",),
        (Expect("HD032", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (2,)),),
    ),
    Case(
        "gloo-silent-rank-tee",
        (R / "missing_rank_tee.log",),
        (Expect("HD032", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (2,)),),
    ),
    Case(
        "laggard-saving-checkpoint",
        (P / "deepspeed_checkpoint_then_timeout.log",),
        (Expect("HD032", "checkpoint_save_hang", Severity.ERROR, (0,)),),
        ("HD039",),
        Verdict.HANG,
        "checkpoint_save_hang",
    ),
    Case("no-laggard-when-all-time-out", (M / "silent_1024.log",), (), ("HD032",)),
    # HD033 op mismatch
    Case(
        "op-mismatch",
        (P / "torch-2.5_op_mismatch_same_seq.log",),
        (Expect("HD033", "collective_type_mismatch", Severity.CRITICAL, (2,)),),
        ("HD032", "HD038"),
    ),
    Case("no-op-mismatch", (P / "torch-2.4_pg_status_laggard.log",), (), ("HD033",)),
    # HD034 size mismatch
    Case(
        "numel-mismatch-blocking-wait",
        (P / "torch-2.4_blocking_wait.log",),
        (Expect("HD034", "collective_size_or_dtype_mismatch", Severity.CRITICAL, (2,)),),
    ),
    Case(
        "numel-mismatch-coalesced",
        (P / "torch-2.6_coalesced_numel_mismatch.log",),
        (Expect("HD034", "collective_size_or_dtype_mismatch", Severity.ERROR, (6,)),),
    ),
    Case("no-size-mismatch", (P / "torch-2.5_op_mismatch_same_seq.log",), (), ("HD034",)),
    # HD035 DETAIL
    Case(
        "detail-op",
        (R / "detail_op_mismatch.log",),
        (Expect("HD035", "collective_type_mismatch", Severity.CRITICAL),),
        (),
        Verdict.HANG,
        "collective_type_mismatch",
    ),
    Case(
        "detail-shape",
        (R / "detail_shape_mismatch.log",),
        (Expect("HD035", "collective_size_or_dtype_mismatch", Severity.CRITICAL),),
        (),
        Verdict.HANG,
        "collective_size_or_dtype_mismatch",
    ),
    Case(
        "detail-three-ranks",
        (P / "torch-1.12_detail_inconsistent_collective.log",),
        (Expect("HD035", "collective_type_mismatch", Severity.CRITICAL, (1,)),),
    ),
    Case(
        "detail-seq-only",
        (P / "torch-2.6_detail_barrier_seq.log",),
        (Expect("HD035", "rank_divergence_collective_vs_noncollective", Severity.CRITICAL),),
    ),
    Case(
        "nccl-old-mismatch-warn",
        (P / "nccl-2.4_mismatched_collective_warn.log",),
        (Expect("HD035", "collective_size_or_dtype_mismatch", Severity.ERROR, (11,)),),
    ),
    Case("no-detail", (R / "rank_crash.log",), (), ("HD035",)),
    # HD036 fr_trace text
    Case(
        "frtrace-213",
        (SAMPLES / "fr_trace_mismatch_output.txt",),
        (Expect("HD036", "rank_divergence_collective_vs_noncollective", Severity.CRITICAL, (1,)),),
    ),
    Case(
        "frtrace-old",
        (P / "frtrace-2.5_old_outputs.txt",),
        (
            Expect("HD036", "rank_divergence_collective_vs_noncollective", Severity.CRITICAL, (3,)),
            Expect("HD036", "collective_type_mismatch", Severity.CRITICAL, (2,)),
        ),
    ),
    Case("no-frtrace", (R / "sigkill.log",), (), ("HD036",)),
    # HD037 monitored barrier
    Case(
        "monitored-barrier-gloo",
        (R / "monitored_barrier.log",),
        (Expect("HD037", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (1,)),),
        ("HD030",),
    ),
    Case(
        "monitored-barrier-many",
        (P / "torch-2.0_monitored_barrier_nccl.log",),
        (
            Expect(
                "HD037", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (4, 5, 6, 7)
            ),
        ),
    ),
    Case("no-monitored-barrier", (R / "missing_rank.log",), (), ("HD037",)),
    # HD038 unknown
    Case(
        "silent-1024",
        (M / "silent_1024.log",),
        (Expect("HD038", "unknown", Severity.WARNING),),
        (),
        Verdict.INCONCLUSIVE,
        "unknown",
    ),
    Case(
        "old-watchdog-no-cause",
        (P / "torch-1.13_watchdog_broadcast_old.log",),
        (Expect("HD038", "unknown", Severity.WARNING),),
        (),
        Verdict.INCONCLUSIVE,
        "unknown",
    ),
    Case(
        "heartbeat-only",
        (P / "torch-2.3_heartbeat_monitor.log",),
        (Expect("HD038", "unknown", Severity.WARNING),),
        (),
        Verdict.INCONCLUSIVE,
    ),
    Case(
        "wrapped-no-cause",
        (P / "torch-2.5_terminal_wrapped.log",),
        (Expect("HD038", "unknown", Severity.WARNING),),
        (),
        Verdict.INCONCLUSIVE,
    ),
    Case("no-unknown-when-cause", (M / "oom_256.log",), (), ("HD038",)),
    # HD039 slow work, not a hang
    Case(
        "tokenizing-recorded",
        (R / "slow_preprocess.log",),
        (Expect("HD039", "not_a_hang_slow_or_benign", Severity.ERROR, (0,)),),
        ("HD038",),
        Verdict.NOT_HUNG,
        "not_a_hang_slow_or_benign",
    ),
    Case(
        "tokenizing-public",
        (P / "torch-2.1_watchdog_numel_terminated.log",),
        (Expect("HD039", "not_a_hang_slow_or_benign", Severity.ERROR),),
        ("HD038",),
        Verdict.NOT_HUNG,
    ),
    Case(
        "no-slow-work-when-saving", (P / "deepspeed_checkpoint_then_timeout.log",), (), ("HD039",)
    ),
    # HD200 transport
    Case(
        "ib-completion",
        (P / "nccl-2.19_ib_completion_error.log",),
        (Expect("HD200", "nccl_network_or_transport_error", Severity.ERROR, (4, 5)),),
    ),
    Case(
        "ib-384",
        (M / "ib_384.log",),
        (
            Expect(
                "HD200", "nccl_network_or_transport_error", Severity.ERROR, tuple(range(336, 344))
            ),
        ),
        ("HD038",),
        Verdict.HANG,
        "nccl_network_or_transport_error",
    ),
    Case(
        "remote-error-last-error",
        (P / "torch-2.2_remote_error_last_error.log",),
        # a bare "closed by peer" with nothing running before it: the peer named, the
        # cause unknown (precision7; the rule case HD200 remote-error-last-error says why)
        (Expect("HD200", "unknown", Severity.ERROR),),
    ),
    Case(
        "connect-failure-is-init",
        (P / "nccl-2.2_old_socket_connect.log",),
        (Expect("HD200", "nccl_init_or_bootstrap_hang", Severity.ERROR),),
    ),
    Case("no-transport", (R / "rank_crash.log",), (), ("HD200",)),
    # HD201 init / store
    Case(
        "init-never-started",
        (P / "nccl-2.21_init_incomplete.log",),
        (Expect("HD201", "nccl_init_or_bootstrap_hang", Severity.ERROR, (7,)),),
    ),
    Case(
        "init-128",
        (M / "init_128.log",),
        (Expect("HD201", "nccl_init_or_bootstrap_hang", Severity.ERROR, tuple(range(96, 104))),),
    ),
    Case(
        "store-clients",
        (R / "store_timeout.log",),
        (Expect("HD201", "nccl_init_or_bootstrap_hang", Severity.ERROR),),
        (),
        Verdict.HANG,
        "nccl_init_or_bootstrap_hang",
    ),
    Case(
        "store-unique-id",
        (P / "torch-2.2_store_unique_id_timeout.log",),
        (Expect("HD201", "nccl_init_or_bootstrap_hang", Severity.ERROR, (0,)),),
        ("HD030",),
        Verdict.HANG,
        "nccl_init_or_bootstrap_hang",
    ),
    Case("no-init-problem", (M / "ib_384.log",), (), ("HD201",)),
    # HD202 interface
    Case(
        "bootstrap-lo-multinode",
        (P / "nccl-2.7_bootstrap_lo_multinode.log",),
        (Expect("HD202", "nccl_init_or_bootstrap_hang", Severity.ERROR, (1,)),),
    ),
    Case("no-bad-interface", (P / "nccl-2.19_ib_completion_error.log",), (), ("HD202",)),
    # HD203 config
    Case(
        "duplicate-gpu",
        (P / "nccl-2.18_duplicate_gpu.log",),
        (Expect("HD203", "nccl_init_or_bootstrap_hang", Severity.ERROR),),
    ),
    Case("no-config-problem", (P / "nccl-2.21_init_incomplete.log",), (), ("HD203",)),
    # HD204 COLL
    Case(
        "coll-opcount-lag",
        (P / "nccl-2.8_coll_opcount_lag.log",),
        (Expect("HD204", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (3,)),),
    ),
    Case("no-coll", (P / "nccl-2.19_ib_completion_error.log",), (), ("HD204",)),
    # HD205 RAS
    Case(
        "ras-lagging-rank",
        (P / "nccl-2.26_ras_lagging_rank.txt",),
        (Expect("HD205", "rank_divergence_collective_vs_noncollective", Severity.ERROR, (9,)),),
    ),
    Case(
        "ras-minority-ahead",
        (P / "nccl-2.26_ras_mismatch.txt",),
        (Expect("HD205", "rank_divergence_collective_vs_noncollective", Severity.ERROR, ()),),
    ),
    Case(
        "ras-ok-while-torch-times-out",
        (P / "nccl-2.26_ras_ok_torch_timeout.log",),
        (Expect("HD205", "unknown", Severity.INFO), Expect("HD038", "unknown", Severity.WARNING)),
        ("HD030",),
        Verdict.INCONCLUSIVE,
        "unknown",
    ),
    Case("no-ras", (R / "missing_rank.log",), (), ("HD205",)),
    # HD300 Xid
    Case(
        "xid-79",
        (P / "dmesg_xid_fallen_off_bus.txt",),
        (Expect("HD300", "gpu_hardware_or_driver", Severity.CRITICAL),),
        (),
        Verdict.HANG,
        "gpu_hardware_or_driver",
    ),
    # Application-class Xids (13, 31: NVIDIA's Xid catalog) name no GPU cause; the program's
    # kernel faulted and the driver killed its CUDA context: the process died of it.
    Case(
        "xid-app-only",
        (P / "dmesg_xid_app_only.txt",),
        (
            Expect("HD300", "gpu_hardware_or_driver", Severity.INFO),
            Expect("HD030", "rank_dead_or_crashed", Severity.CRITICAL),
        ),
        (),
        Verdict.HANG,
        "rank_dead_or_crashed",
    ),
    Case("no-xid", (R / "sigkill.log",), (), ("HD300", "HD301")),
    # HD301 ECC / lost
    Case(
        "ecc-error-file",
        (P / "torchelastic_error_legacy.json",),
        (Expect("HD301", "gpu_hardware_or_driver", Severity.CRITICAL),),
        ("HD030",),
        Verdict.HANG,
        "gpu_hardware_or_driver",
    ),
    Case(
        "ecc-counts",
        (P / "nvidia-smi_table_r550.txt",),
        (Expect("HD301", "gpu_hardware_or_driver", Severity.WARNING),),
    ),
    Case("illegal-access-is-not-hardware", (P / "k8s_ansi_prefixed.log",), (), ("HD301", "HD300")),
    # HD302 P2P over PCIe
    Case(
        "p2p-pcie-hang",
        (P / "nccl-2.10_p2p_first_collective_hang.log", P / "nvidia-smi_topo_pcie.txt"),
        (Expect("HD302", "gpu_hardware_or_driver", Severity.ERROR),),
        ("HD038",),
    ),
    Case(
        "p2p-nvlink-fine",
        (P / "nccl-2.10_p2p_first_collective_hang.log", P / "nvidia-smi_topo_nvlink.txt"),
        (),
        ("HD302",),
    ),
    Case("topo-without-hang", (P / "nvidia-smi_topo_pcie.txt",), (), ("HD302",)),
    # HD040 per-rank data counts disagree
    Case(
        "uneven-epoch-bars",
        (P / "tqdm_uneven_epoch_lengths.log",),
        (Expect("HD040", "uneven_data_drop_last", Severity.ERROR, (2,)),),
        (),
        Verdict.HANG,
        "uneven_data_drop_last",
    ),
    Case("even-epoch-bars", (P / "tqdm_even_epoch_lengths.log",), (), ("HD040",)),
    Case("bars-of-one-rank-only", (P / "torch-2.5_terminal_wrapped.log",), (), ("HD040",)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case) -> None:
    diagnosis = diagnose(*case.files)
    for expect in case.present:
        found = [
            f for f in findings_of(diagnosis, expect.rule) if f.category.value == expect.category
        ]
        assert found, (
            f"{expect.rule}/{expect.category} missing: {[(f.rule, f.category.value, f.title) for f in diagnosis.findings]}"
        )
        finding = found[0]
        if expect.severity is not None:
            assert finding.severity is expect.severity, finding.title
        if expect.culprits is not None:
            assert finding.culprit_ranks == expect.culprits, finding.title
        assert finding.title and finding.explanation and finding.fix
        assert finding.evidence, "every claim points back to evidence"
    for rule in case.absent:
        assert not findings_of(diagnosis, rule), [f.title for f in findings_of(diagnosis, rule)]
    if case.verdict is not None:
        assert diagnosis.verdict is case.verdict
    if case.primary is not None:
        assert diagnosis.primary_category.value == case.primary


def test_every_log_rule_has_a_positive_and_a_negative_case() -> None:
    from tests.unit.logs.helpers import log_rules

    positive = {e.rule for c in CASES for e in c.present}
    negative = {r for c in CASES for r in c.absent}
    for rule in log_rules():
        assert rule.id in positive, f"{rule.id} has no positive case"
        assert rule.id in negative, f"{rule.id} has no negative case"


def _two_files(tmp_path: Path, oom_at: str) -> tuple[Path, Path]:
    """One job, two files: rank 2's console (ISO stamps, with a year) and rank 0's
    (glog stamps, no year): the year of one dates the other."""
    oom = tmp_path / "rank2.log"
    oom.write_text(
        f"{oom_at} [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
    )
    waits = tmp_path / "rank0.log"
    waits.write_text(
        "[rank0]:[E301 10:10:00.000000001 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out.\n"
    )
    return oom, waits


def test_crash_in_one_file_is_ordered_before_timeouts_in_another(tmp_path: Path) -> None:
    diagnosis = diagnose(*_two_files(tmp_path, "2025-03-01T10:00:00.000Z"))
    assert diagnosis.findings[0].rule == "HD031"
    assert diagnosis.findings[0].culprit_ranks == (2,)


def test_oom_after_the_timeouts_in_another_file_is_not_the_cause(tmp_path: Path) -> None:
    diagnosis = diagnose(*_two_files(tmp_path, "2025-03-01T10:20:00.000Z"))
    assert not findings_of(diagnosis, "HD031")


def test_transport_errors_after_a_crash_are_only_a_warning(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/w/train.py", line 3, in <module>\n'
        "[rank1]: ZeroDivisionError: division by zero\n"
        "n0:100:101 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "n0:100:102 [0] misc/socket.cc:1 NCCL WARN socketProgress: Connection closed by remote peer n1<4242>\n"
    )
    diagnosis = diagnose(log)
    assert diagnosis.findings[0].rule == "HD030"
    (transport,) = findings_of(diagnosis, "HD200")
    assert transport.severity is Severity.WARNING
