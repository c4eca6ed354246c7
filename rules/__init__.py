"""The rule registry: one module per rule (``hdNNN_slug.py``), listed in ``_MODULES``.

Ids are never reused; a retired rule keeps its module as a stub. The registry
validates ids and doc sections when it is first built.
"""

from __future__ import annotations

import functools
import importlib

from hangdoc.rules.base import Rule, validate_rule

_MODULES: tuple[str, ...] = (
    "hd000_no_cause",
    "hd001_rank_outside_collective",
    "hd002_collective_type_mismatch",
    "hd003_missing_rank",
    "hd004_progress",
    "hd005_all_in_same_collective",
    # Flight recorder matching (issue 3).
    "hd010_fr_missing_rank",
    "hd011_fr_collective_type_mismatch",
    "hd012_fr_size_mismatch",
    "hd013_fr_dtype_mismatch",
    "hd014_fr_p2p_unmatched",
    "hd015_fr_rank_without_dump",
    "hd016_fr_wait_cycle",
    "hd017_fr_all_waiting",
    # Logs (issue 4).
    "hd030_rank_died_first",
    "hd031_cuda_oom_first",
    "hd032_lagging_rank",
    "hd033_timeout_op_mismatch",
    "hd034_timeout_size_mismatch",
    "hd035_detail_mismatch",
    "hd036_frtrace_report",
    "hd037_monitored_barrier",
    "hd038_timeout_cause_unknown",
    "hd039_slow_rank_work",
    "hd040_uneven_data_counts",
    "hd200_nccl_transport_error",
    "hd201_nccl_init_incomplete",
    "hd202_nccl_bootstrap_interface",
    "hd203_nccl_config_mismatch",
    "hd204_nccl_coll_divergence",
    "hd205_nccl_ras_report",
    "hd300_gpu_xid",
    "hd301_gpu_ecc_or_lost",
    "hd302_gpu_p2p_topology",
    # Causes in the stacks and the node (issue 7).
    "hd100_dataloader_worker",
    "hd101_lock_deadlock",
    "hd102_gil_held",
    "hd103_io_stall",
    "hd104_slow_save",
    "hd105_p2p_deadlock",
    "hd106_uneven_data",
    "hd107_save_collective",
    # The job's own logs compared across ranks (issue 15).
    "hd060_logs_diverge",
    "hd350_gpu_activity",
    "hd351_gpu_memory_limit",
)


@functools.cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    seen: set[str] = set()
    for name in _MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        rule_cls: type[Rule] = module.RULE
        validate_rule(rule_cls)
        if rule_cls.id in seen:
            raise ValueError(f"duplicate rule id {rule_cls.id}")
        seen.add(rule_cls.id)
        found.append(rule_cls)
    return tuple(sorted(found, key=lambda r: r.id))


def get_rule(rule_id: str) -> type[Rule] | None:
    wanted = rule_id.strip().upper()
    for rule in all_rules():
        if rule.id == wanted or rule.name == rule_id.strip().lower():
            return rule
    return None
