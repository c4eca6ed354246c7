"""Set-up errors that were read as nothing or as a crash (issue 21, "NCCL's own resource
and setup errors that no branch was written for"), each read by what prints it.

* pdsh's "<host>: " tag doubled before an NCCL header (a launcher that tags each line with
  its host, run under pdsh, which tags it again): the NCCL line and its return chain are
  read, so a WARN of a net plugin (aws-ofi-nccl's register_mr_buffers) unwinding through
  transport.cc is a set-up failure (HD206).
* A bare time of day before every line (Jenkins' Timestamper, "HH:mm:ss "): peeled as a
  collector's stamp is.
* c10d's bare socket RuntimeError of torch ≤ 1.x (SYSCHECK's std::system_error, whose
  what() is strerror: "RuntimeError: Broken pipe") is the store's connection failing,
  set-up where its traceback shows new_group; Python's own BrokenPipeError is not it.
* A test runner's test case (``test_…`` in a ``test_*.py`` module) is not the job
  evaluating a model; the job's own ``test_epoch`` in its training script still is.
* vLLM's get_open_port (the port the workers' init_process_group dials) is set-up.
* vLLM 0.5.4's V0 worker logs "Exception in worker <name> while processing method
  <method>: <e>, <tb>" (vllm/executor/multiproc_worker_utils.py _run_worker_process,
  logger.error, 0.5.4): the method names the stage, so an NCCL error of a set-up class in
  init_device is the communicators' creation failing; in execute_model it is not.

Hosts, pids, paths and line numbers are made up.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Frame
from hangdoc.analyzer.parsers.logs.parser import recognise_line
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.tb_stage import frame_stage
from hangdoc.analyzer.parsers.prefixes import peel
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from hangdoc.analyzer.payloads.torch_pg import StoreError, StoreTimeout
from hangdoc.analyzer.views.activity import frame_tag
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.vocabulary import EventKind


def _diagnose(tmp_path: Path, name: str, lines: list[str]) -> list[tuple[str, Category]]:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines))
    return [(f.rule, f.category) for f in analyze(load_paths([path])).findings]


# --- pdsh's tag doubled --------------------------------------------------------------

_HOST = "10.1.2.3: 10.1.2.3: node-a:149:298 [5] "
_OFI = [
    _HOST + "register_mr_buffers:465 NCCL WARN NET/OFI Unable to register memory (type = 1) "
    "for device 0. RC: 12, Error: Cannot allocate memory",
    _HOST + "NCCL INFO include/net.h:23 -> 2",
    _HOST + "NCCL INFO transport/net.cc:223 -> 2",
    _HOST + "NCCL INFO transport.cc:111 -> 2",
    _HOST + "NCCL INFO group.cc:137 -> 2 [Async thread]",
]


def test_a_doubled_pdsh_tag_before_an_nccl_header_is_peeled() -> None:
    tag = peel_line(_OFI[1])
    assert tag.text == "node-a:149:298 [5] NCCL INFO include/net.h:23 -> 2"
    hit = recognise_line(_OFI[0])
    assert hit is not None and hit.kind is EventKind.NCCL_WARN and hit.pid == 149


def test_a_doubled_tag_is_kept_where_no_nccl_header_follows() -> None:
    line = "10.1.2.3: 10.1.2.3: loss 0.5 at step 4"
    assert peel_line(line).text == line


def test_a_net_plugin_warn_unwinding_through_set_up_is_a_set_up_failure(
    tmp_path: Path,
) -> None:
    found = _diagnose(tmp_path, "console.txt", _OFI)
    assert found[0] == ("HD206", Category.NCCL_INIT)


def test_the_same_warn_unwinding_through_no_set_up_code_is_not_set_up(tmp_path: Path) -> None:
    # the plugin's WARN with a chain through the proxy's progress (a running collective)
    lines = [
        _OFI[0],
        _HOST + "NCCL INFO include/net.h:23 -> 2",
        _HOST + "NCCL INFO proxy.cc:1000 -> 2",
    ]
    assert ("HD206", Category.NCCL_INIT) not in _diagnose(tmp_path, "console.txt", lines)


# --- a bare time of day ----------------------------------------------------------------


def test_a_bare_time_of_day_is_peeled() -> None:
    assert peel("02:21:53 RuntimeError: Broken pipe").text == "RuntimeError: Broken pipe"
    assert peel_line("02:21:53 RuntimeError: Broken pipe").text == "RuntimeError: Broken pipe"
    assert peel("10:28:25.123 x").text == "x"  # a collector's, with its fraction


def test_what_is_not_a_time_of_day_stays() -> None:
    for line in ("2:21:53 RuntimeError: x", "02:21 RuntimeError: x", "02:21:53RuntimeError"):
        assert peel(line).text == line


# --- c10d's bare socket RuntimeError ---------------------------------------------------

_NEW_GROUP = [
    "02:21:53 Traceback (most recent call last):",
    '02:21:53   File "test_dist.py", line 252, in test_get_rank_size_group',
    "02:21:53     group_id = dist.new_group(group)",
    '02:21:53   File "/opt/conda/lib/python3.6/site-packages/torch/distributed/c10d/'
    'distributed_c10d.py", line 1075, in new_group',
    "02:21:53     input_ranks)",
    '02:21:53   File "/opt/conda/lib/python3.6/site-packages/torch/distributed/c10d/'
    'distributed_c10d.py", line 275, in _new_process_group_helper',
    "02:21:53     pg = ProcessGroupGloo(store, rank, world_size)",
]


def test_c10d_bare_broken_pipe_is_the_store_connection() -> None:
    hit = recognise_line("RuntimeError: Broken pipe")
    assert hit is not None and hit.kind is EventKind.STORE_TIMEOUT
    assert isinstance(hit.payload, StoreTimeout)
    assert hit.payload.error is StoreError.STORE_CONNECTION


def test_pythons_own_broken_pipe_is_no_store_error() -> None:
    hit = recognise_line("BrokenPipeError: [Errno 32] Broken pipe")
    assert hit is None or hit.kind is not EventKind.STORE_TIMEOUT


def test_a_broken_pipe_while_new_group_builds_its_group_is_set_up(tmp_path: Path) -> None:
    found = _diagnose(tmp_path, "ci_log.txt", [*_NEW_GROUP, "02:21:53 RuntimeError: Broken pipe"])
    assert found[0] == ("HD201", Category.NCCL_INIT)


def test_a_broken_pipe_in_the_training_loop_is_not_set_up(tmp_path: Path) -> None:
    lines = [
        "Epoch 3 step 1200 loss 0.41",
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in train_one_epoch',
        "    dist.all_reduce(loss)",
        '  File "/opt/conda/lib/python3.6/site-packages/torch/distributed/c10d/'
        'distributed_c10d.py", line 838, in all_reduce',
        "    work = _default_pg.allreduce([tensor], opts)",
        "RuntimeError: Broken pipe",
    ]
    assert ("HD201", Category.NCCL_INIT) not in _diagnose(tmp_path, "train.log", lines)


# --- a test runner's test case ----------------------------------------------------------


def _tag(function: str, file: str) -> Activity | None:
    found = frame_tag(Frame(function=function, file=file, line=1))
    return found[0] if found is not None else None


def test_a_test_case_of_a_test_module_is_not_evaluation() -> None:
    assert _tag("test_get_rank_size_group", "test_distributed.py") is None
    assert _tag("test_all_reduce", "/src/tests/dist_test.py") is None


def test_the_jobs_own_test_loop_is_still_evaluation() -> None:
    assert _tag("test_epoch", "train.py") is Activity.EVAL
    assert _tag("test", "test_model.py") is Activity.EVAL  # no test runner collects "test"


# --- vLLM's get_open_port ----------------------------------------------------------------


def test_vllms_open_port_picker_is_set_up() -> None:
    frame = '  File "/env/lib/python3.10/site-packages/vllm/utils.py", line 572, in get_open_port'
    assert frame_stage(frame) is CodeStage.SETUP
    other = '  File "/env/lib/python3.10/site-packages/vllm/utils.py", line 90, in get_ip'
    assert frame_stage(other) is None


def test_address_in_use_picking_the_port_is_a_set_up_failure(tmp_path: Path) -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "/env/lib/python3.10/site-packages/vllm/utils.py", line 572, in get_open_port',
        '    s.bind(("", 0))',
        "OSError: [Errno 98] Address already in use",
    ]
    found = _diagnose(tmp_path, "error.txt", lines)
    assert found[0] == ("HD030", Category.NCCL_INIT)


# --- vLLM 0.5.4's worker record ---------------------------------------------------------

_V054 = (
    "(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] "
    "Exception in worker VllmWorkerProcess while processing method {method}: NCCL error: "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), Traceback (most recent "
    "call last):"
)


def _record(tmp_path: Path, method: str) -> ExceptionRaised:
    path = tmp_path / "worker_error.txt"
    path.write_text(_V054.format(method=method) + "\n")
    events = [e for e in load_paths([path]).job_log_events if e.kind is EventKind.EXCEPTION]
    assert len(events) == 1
    raised = events[0].payload
    assert isinstance(raised, ExceptionRaised)
    return raised


def test_vllm_054_worker_record_names_its_methods_stage(tmp_path: Path) -> None:
    assert _record(tmp_path, "init_device").stage is CodeStage.DEVICE_INIT
    found = _diagnose(tmp_path, "w.txt", [_V054.format(method="init_device")])
    assert found[0] == ("HD206", Category.NCCL_INIT)


def test_vllm_054_worker_record_of_a_step_is_not_set_up(tmp_path: Path) -> None:
    assert _record(tmp_path, "execute_model").stage is not CodeStage.DEVICE_INIT
    found = _diagnose(tmp_path, "w.txt", [_V054.format(method="execute_model")])
    assert ("HD206", Category.NCCL_INIT) not in found


# --- NeMo 0.x's factory ------------------------------------------------------------------

_FACTORY = '  File "/workspace/NeMo/nemo/core/neural_factory.py", line 193, in {function}'
_FIRST_ALL_REDUCE = [
    "Traceback (most recent call last):",
    '  File "bert_pretraining.py", line 246, in <module>',
    "    add_time_to_log_dir=False,",
    _FACTORY.format(function="__init__"),
    "    torch.distributed.all_reduce(cuda_set_t, op=torch.distributed.ReduceOp.MIN)",
    '  File "/opt/conda/lib/python3.6/site-packages/torch/distributed/distributed_c10d.py", '
    "line 938, in all_reduce",
    "    work = _default_pg.allreduce([tensor], opts)",
    "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:535, unhandled system "
    "error, NCCL version 2.7.5",
]


def test_nemo_factorys_constructor_is_set_up() -> None:
    assert frame_stage(_FACTORY.format(function="__init__")) is CodeStage.SETUP
    assert frame_stage(_FACTORY.format(function="train")) is CodeStage.TRAIN


def test_a_system_error_of_the_factorys_first_all_reduce_is_set_up(tmp_path: Path) -> None:
    found = _diagnose(tmp_path, "console.txt", _FIRST_ALL_REDUCE)
    assert found[0] == ("HD206", Category.NCCL_INIT)


def test_the_same_error_from_the_factorys_training_is_not_set_up(tmp_path: Path) -> None:
    lines = [
        line.replace("in __init__", "in train").replace("cuda_set_t", "loss")
        for line in _FIRST_ALL_REDUCE
    ]
    assert ("HD206", Category.NCCL_INIT) not in _diagnose(tmp_path, "console.txt", lines)
