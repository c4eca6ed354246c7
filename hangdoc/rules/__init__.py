"""The rule registry: one module per rule (``hdNNN_slug.py``), one row per rule in ``_MODULES``.

A row names the module and the hangdoc version (and issue) the rule came with. Ids are
never reused: a rule that is removed keeps its module as a stub, or its id goes to
``RETIRED`` with the reason, and no new rule may take it (``check_new_id``). The registry
validates ids and doc sections when it is first built. Every registered rule has its
cases in ``fixtures/rule_cases/HDnnn.toml`` (tests/unit/rules/test_rule_cases.py).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping

from hangdoc.rules.base import Rule, validate_rule


class RuleRow(str):
    """One registered rule: its module under ``hangdoc.rules``, and ``since``, when it came.

    A row is the module name itself (a ``str``), so ``name in _MODULES`` keeps working.
    """

    since: str  # "<hangdoc version> (<issue or commit>)"

    def __new__(cls, module: str, since: str) -> RuleRow:
        row = super().__new__(cls, module)
        row.since = since
        return row

    @property
    def module(self) -> str:
        return str(self)


_SKELETON = "0.1.0 (skeleton)"
_FR = "0.1.0 (issue 3)"
_LOGS = "0.1.0 (issue 4)"
_CAUSES = "0.1.0 (issue 7)"

_MODULES: tuple[RuleRow, ...] = (
    RuleRow("hd000_no_cause", _SKELETON),
    RuleRow("hd001_rank_outside_collective", _SKELETON),
    RuleRow("hd002_collective_type_mismatch", _SKELETON),
    RuleRow("hd003_missing_rank", _SKELETON),
    RuleRow("hd004_progress", _SKELETON),
    RuleRow("hd005_all_in_same_collective", _SKELETON),
    # Flight recorder matching (issue 3).
    RuleRow("hd010_fr_missing_rank", _FR),
    RuleRow("hd011_fr_collective_type_mismatch", _FR),
    RuleRow("hd012_fr_size_mismatch", _FR),
    RuleRow("hd013_fr_dtype_mismatch", _FR),
    RuleRow("hd014_fr_p2p_unmatched", _FR),
    RuleRow("hd015_fr_rank_without_dump", _FR),
    RuleRow("hd016_fr_wait_cycle", _FR),
    RuleRow("hd017_fr_all_waiting", _FR),
    # Logs (issue 4).
    RuleRow("hd030_rank_died_first", _LOGS),
    RuleRow("hd031_cuda_oom_first", _LOGS),
    RuleRow("hd032_lagging_rank", _LOGS),
    RuleRow("hd033_timeout_op_mismatch", _LOGS),
    RuleRow("hd034_timeout_size_mismatch", _LOGS),
    RuleRow("hd035_detail_mismatch", _LOGS),
    RuleRow("hd036_frtrace_report", _LOGS),
    RuleRow("hd037_monitored_barrier", _LOGS),
    RuleRow("hd038_timeout_cause_unknown", _LOGS),
    RuleRow("hd039_slow_rank_work", _LOGS),
    RuleRow("hd040_uneven_data_counts", _LOGS),
    RuleRow("hd200_nccl_transport_error", _LOGS),
    RuleRow("hd201_nccl_init_incomplete", _LOGS),
    RuleRow("hd202_nccl_bootstrap_interface", _LOGS),
    RuleRow("hd203_nccl_config_mismatch", _LOGS),
    RuleRow("hd204_nccl_coll_divergence", _LOGS),
    RuleRow("hd205_nccl_ras_report", _LOGS),
    RuleRow("hd300_gpu_xid", _LOGS),
    RuleRow("hd301_gpu_ecc_or_lost", _LOGS),
    RuleRow("hd302_gpu_p2p_topology", _LOGS),
    # Causes in the stacks and the node (issue 7).
    RuleRow("hd100_dataloader_worker", _CAUSES),
    RuleRow("hd101_lock_deadlock", _CAUSES),
    RuleRow("hd102_gil_held", _CAUSES),
    RuleRow("hd103_io_stall", _CAUSES),
    RuleRow("hd104_slow_save", _CAUSES),
    RuleRow("hd105_p2p_deadlock", _CAUSES),
    RuleRow("hd106_uneven_data", _CAUSES),
    RuleRow("hd107_save_collective", _CAUSES),
    # The job's own logs compared across ranks (issue 15).
    RuleRow("hd060_logs_diverge", "0.1.0 (issue 15)"),
    RuleRow("hd108_lone_stack", "0.1.0 (issue 14)"),
    RuleRow("hd061_activity_before_timeout", "0.1.0 (issue 15)"),
    RuleRow("hd109_dataloader_worker_died", "0.1.0 (issue 14)"),
    RuleRow("hd206_nccl_setup_error", "0.1.0 (issue 14)"),
    RuleRow("hd110_fs_stall_reported", "0.1.0 (issue 14)"),
    RuleRow("hd207_stuck_in_group_creation", "0.1.0 (issue 14)"),
    RuleRow("hd045_timeout_set_too_low", "0.1.0 (issue 14)"),
    RuleRow("hd046_benign_warning_only", "0.1.0 (issue 14)"),
    RuleRow("hd048_p2p_wait_evidence", "0.1.0 (issue 14)"),
    RuleRow("hd350_gpu_activity", _CAUSES),
    RuleRow("hd351_gpu_memory_limit", _CAUSES),
    RuleRow("hd303_gpu_driver_hung_task", "0.1.0 (issue 14)"),
    # What a blocked thread waits on, from the kernel (issue 21).
    RuleRow("hd111_file_lock_holder", "0.1.0 (issue 21)"),
    # Silence as evidence: the rank that cannot report (issue 21).
    RuleRow("hd049_unheard_rank", "0.1.0 (issue 21)"),
    # Ranks out of step in different collectives (issue 21).
    RuleRow("hd041_timeouts_apart", "0.1.0 (issue 21)"),
    RuleRow("hd042_horovod_ops_crossed", "0.1.0 (issue 21)"),
    # Ranks held at a main-process-first gate (issue 21, first-sight batch g's family).
    RuleRow("hd043_rank_zero_first_gate", "0.1.0 (issue 21)"),
    # How a rank died and what it means: the launcher's terminal hung up (issue 21).
    RuleRow("hd050_launcher_hung_up", "0.1.0 (issue 21)"),
    # ... and the DataLoader's pin-memory thread erring as the process exits (issue 21).
    RuleRow("hd112_pin_memory_at_exit", "0.1.0 (issue 21)"),
    # A checkpoint file left empty beside its siblings, in a directory listing (issue 21).
    RuleRow("hd113_empty_checkpoint_file", "0.1.0 (issue 21)"),
    # An inference server that answered requests after its health check failed (issue 21).
    RuleRow("hd047_served_after_health_check", "0.1.0 (issue 21)"),
    # Two threads of each rank inside a collective at once: no order across ranks (issue 21).
    RuleRow("hd114_threads_in_collectives", "0.1.0 (issue 21)"),
)

# Ids of rules that were removed, with why and when: never to be given to another rule.
RETIRED: Mapping[str, str] = {}


def module_names() -> tuple[str, ...]:
    """The registered rule modules, in registry order."""
    return tuple(str(row) for row in _MODULES)


def rule_rows() -> tuple[tuple[type[Rule], RuleRow], ...]:
    """Each registered rule with its registry row (``since``), sorted by id."""
    return _registry()


def check_ids(rules: Iterable[type[Rule]], retired: Mapping[str, str] = RETIRED) -> None:
    """A rule id is taken once: never by two rules, never by a rule after its retirement."""
    seen: set[str] = set()
    for rule_cls in rules:
        if rule_cls.id in retired:
            raise ValueError(f"rule id {rule_cls.id} is retired ({retired[rule_cls.id]})")
        if rule_cls.id in seen:
            raise ValueError(f"duplicate rule id {rule_cls.id}")
        seen.add(rule_cls.id)


def check_new_id(rule_id: str) -> None:
    """Raise unless ``rule_id`` is free for a new rule: not registered, not retired."""
    wanted = rule_id.strip().upper()
    if wanted in RETIRED:
        raise ValueError(f"rule id {wanted} is retired ({RETIRED[wanted]}); pick another")
    if any(rule.id == wanted for rule in all_rules()):
        raise ValueError(f"rule id {wanted} is taken; pick another")


@functools.cache
def _registry() -> tuple[tuple[type[Rule], RuleRow], ...]:
    found: list[tuple[type[Rule], RuleRow]] = []
    for entry in _MODULES:
        # A bare module name (no RuleRow) still loads; the registry test asks for its since.
        row = entry if isinstance(entry, RuleRow) else RuleRow(entry, "")
        module = importlib.import_module(f"{__name__}.{row.module}")
        rule_cls: type[Rule] = module.RULE
        validate_rule(rule_cls)
        found.append((rule_cls, row))
    check_ids(rule for rule, _ in found)
    return tuple(sorted(found, key=lambda item: item[0].id))


@functools.cache
def all_rules() -> tuple[type[Rule], ...]:
    return tuple(rule for rule, _ in _registry())


def get_rule(rule_id: str) -> type[Rule] | None:
    wanted = rule_id.strip().upper()
    for rule in all_rules():
        if rule.id == wanted or rule.name == rule_id.strip().lower():
            return rule
    return None
