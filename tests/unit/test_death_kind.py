"""The death-kind table (analyzer/views/death_kind.py) and the errno reader it decides on
(analyzer/parsers/logs/oserror.py): a test per row family, the reader against the
stdlib's own tables, and the table on the deaths HD030 named wrongly at first sight."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.errors import finish_payload
from hangdoc.analyzer.parsers.logs.oserror import errno_of, os_failure_of
from hangdoc.analyzer.payloads.base import EventPayload, Sign
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised, OsFailure
from hangdoc.analyzer.payloads.nccl import CudaFailure
from hangdoc.analyzer.views.death_kind import (
    KIND_TABLE,
    SET_UP,
    DeathFacts,
    Fact,
    facts_of,
    kind_of,
)

ROOT = Path(__file__).resolve().parents[2]


# --- the errno reader: Python's tables, not a list of cases ------------------------------


@pytest.mark.parametrize("number", sorted(errno.errorcode))
def test_every_errno_number_reads_as_its_name(number: int) -> None:
    said = f"[Errno {number}] {os.strerror(number)}: '/x'"
    assert errno_of("OSError", said) == errno.errorcode[number]


@pytest.mark.parametrize(
    ("exc_type", "name"),
    [
        ("FileExistsError", "EEXIST"),
        ("FileNotFoundError", "ENOENT"),
        ("builtins.ConnectionRefusedError", "ECONNREFUSED"),
        ("IsADirectoryError", "EISDIR"),
    ],
)
def test_an_oserror_subclass_is_its_errno(exc_type: str, name: str) -> None:
    # PEP 3151: OSError(n, …) constructs the subclass, so the class names its errno
    assert errno_of(exc_type, "no number here") == name


def test_strerror_words_after_a_call_name_their_errno() -> None:
    # std::system_error's "<call>: <strerror>", as c10d's FileStore prints it
    assert errno_of("RuntimeError", "flock: No space left on device") == "ENOSPC"
    assert errno_of("RuntimeError", "Cannot allocate memory") == "ENOMEM"
    assert errno_of("RuntimeError", "the model does not converge") is None


def test_families() -> None:
    assert os_failure_of("OSError", "[Errno 5] Input/output error") is OsFailure.STORAGE
    assert os_failure_of("FileExistsError", "") is OsFailure.FILE_STATE
    assert os_failure_of("PermissionError", "") is OsFailure.FILE_STATE  # EACCES or EPERM
    assert os_failure_of("MemoryError", "") is OsFailure.HOST_MEMORY  # the hierarchy
    assert os_failure_of("OSError", "[Errno 12] Cannot allocate memory") is OsFailure.HOST_MEMORY
    # /dev/shm full is the host's memory (a tmpfs), not the storage
    shm = "unable to write to file </torch_123_456>: No space left on device (28)"
    assert os_failure_of("RuntimeError", shm) is OsFailure.HOST_MEMORY
    assert os_failure_of("BlockingIOError", "") is None  # EAGAIN, EALREADY, EINPROGRESS
    assert os_failure_of("ValueError", "bad shape") is None


def test_the_parser_fills_errno_and_family() -> None:
    raised = finish_payload(
        ExceptionRaised(exc_type="FileExistsError", message="[Errno 17] File exists: 'a'"), ""
    )
    assert isinstance(raised, ExceptionRaised)
    assert raised.errno == "EEXIST"
    assert raised.os_failure is OsFailure.FILE_STATE


# --- the table: one test per row family ----------------------------------------------------


def _facts(
    *,
    facts: frozenset[Fact] = frozenset(),
    signs: frozenset[Sign] = frozenset(),
    failure: OsFailure | None = None,
    stage: CodeStage | None = None,
    catalog: Category | None = None,
) -> DeathFacts:
    return DeathFacts(facts, signs, failure, stage, catalog)


@pytest.mark.parametrize("row", KIND_TABLE, ids=lambda r: r.name)
def test_every_row_is_reachable(row: object) -> None:
    """Facts made of a row's own conditions reach that row: no earlier row shadows it."""
    from hangdoc.analyzer.views.death_kind import KindRow

    assert isinstance(row, KindRow)
    facts = _facts(
        facts=row.facts,
        signs=frozenset(sorted(row.signs)[:1]),
        failure=sorted(row.failures)[0] if row.failures else None,
        stage=sorted(row.stages)[0] if row.stages else None,
        catalog=Category.NCCL_NETWORK if Fact.CATALOG in row.facts else None,
    )
    found = kind_of(facts)
    if row.category is Category.RANK_DEAD:
        # a crash row answers "a crash" (None), also where the stage alone would be set-up
        assert found is None
        assert kind_of(dataclasses.replace(facts, stage=CodeStage.SETUP)) is None
        return
    assert found is not None
    assert found.row is row


def test_no_fact_is_no_kind() -> None:
    assert kind_of(_facts()) is None
    assert kind_of(_facts(stage=CodeStage.TRAIN)) is None
    assert kind_of(_facts(failure=OsFailure.HOST_MEMORY)) is None  # a MemoryError alone


def test_memory_and_gpu_rows() -> None:
    assert kind_of(_facts(facts=frozenset({Fact.CUDA_OOM}))).category is Category.CUDA_OOM  # type: ignore[union-attr]
    gpu = kind_of(_facts(signs=frozenset({Sign.GPU_DRIVER_LIKELY}), stage=CodeStage.SETUP))
    assert gpu is not None and gpu.category is Category.GPU_HARDWARE  # words before stage


def test_storage_rows() -> None:
    for stage in (None, CodeStage.TRAIN, CodeStage.CHECKPOINT_LOAD):
        found = kind_of(_facts(failure=OsFailure.STORAGE, stage=stage))
        assert found is not None and found.category is Category.IO_STALL


def test_a_path_is_the_file_systems_only_in_a_save() -> None:
    save = kind_of(_facts(failure=OsFailure.FILE_STATE, stage=CodeStage.CHECKPOINT_SAVE))
    assert save is not None and save.category is Category.IO_STALL
    # a checkpoint that is not there to load is the job's path, not the storage
    assert kind_of(_facts(failure=OsFailure.FILE_STATE, stage=CodeStage.CHECKPOINT_LOAD)) is None
    assert kind_of(_facts(failure=OsFailure.FILE_STATE, stage=CodeStage.DATA)) is None
    # while a FileStore is set up: the set-up's
    assert kind_of(_facts(failure=OsFailure.FILE_STATE, stage=CodeStage.SETUP)).row is SET_UP  # type: ignore[union-attr]


def test_worker_start_rows() -> None:
    for failure in (OsFailure.HOST_MEMORY, OsFailure.PROCESS_LIMIT, None):
        found = kind_of(_facts(failure=failure, stage=CodeStage.WORKER_START))
        assert found is not None and found.category is Category.DATALOADER
    fork = kind_of(_facts(signs=frozenset({Sign.CUDA_AFTER_FORK})))
    assert fork is not None and fork.category is Category.DATALOADER


def test_set_up_rows() -> None:
    for failure in (OsFailure.NETWORK, OsFailure.HOST_MEMORY, None):
        found = kind_of(_facts(failure=failure, stage=CodeStage.SETUP))
        assert found is not None and found.row is SET_UP
    nccl = frozenset({Sign.NCCL_SETUP_CLASS})
    for stage in (CodeStage.DEVICE_INIT, CodeStage.WORKER_INIT):
        found = kind_of(_facts(signs=nccl, stage=stage))
        assert found is not None and found.category is Category.NCCL_INIT
    assert kind_of(_facts(signs=nccl, stage=CodeStage.TRAIN)) is None  # a step's NCCL error
    call = facts_of(CudaFailure(error="invalid argument", setup=True), None, cuda_oom=False)
    found = kind_of(call)
    assert found is not None and found.category is Category.NCCL_INIT
    running = facts_of(CudaFailure(error="invalid argument"), None, cuda_oom=False)
    assert kind_of(running) is None


def test_a_cuda_error_of_the_callers_request_in_set_up_is_a_crash() -> None:
    """cudaErrorInvalidDevice raised by torch.cuda.set_device(local_rank) (the device's
    set-up): the rank asked for a GPU index the node does not have, its own configuration,
    not communication failing to set up, nor the GPU's or driver's failure."""
    raised = finish_payload(
        ExceptionRaised(exc_type="RuntimeError", message="CUDA error: invalid device ordinal"),
        "RuntimeError: CUDA error: invalid device ordinal",
    )
    assert Sign.CUDA_CALLER_REQUEST in raised.signs
    assert kind_of(facts_of(raised, CodeStage.SETUP, cuda_oom=False)) is None
    # the driver's own failure in the same place stays the driver's
    driver = finish_payload(
        ExceptionRaised(exc_type="RuntimeError", message="CUDA error: initialization error"),
        "RuntimeError: CUDA error: initialization error",
    )
    found = kind_of(facts_of(driver, CodeStage.SETUP, cuda_oom=False))
    assert found is not None and found.category is Category.GPU_HARDWARE
    # another exception raised in the device's set-up is still the set-up
    other = finish_payload(
        ExceptionRaised(exc_type="RuntimeError", message="Address already in use"),
        "RuntimeError: Address already in use",
    )
    found = kind_of(facts_of(other, CodeStage.SETUP, cuda_oom=False))
    assert found is not None and found.row is SET_UP


def test_catalog_row_takes_the_catalogs_category() -> None:
    raised = ExceptionRaised(exc_type="RuntimeError", known_as=Category.NCCL_NETWORK.value)
    found = kind_of(facts_of(raised, CodeStage.TRAIN, cuda_oom=False))
    assert found is not None and found.category is Category.NCCL_NETWORK
    crash = ExceptionRaised(exc_type="RuntimeError", known_as=Category.RANK_DEAD.value)
    assert kind_of(facts_of(crash, None, cuda_oom=False)) is None
    assert kind_of(facts_of(EventPayload(), None, cuda_oom=False)) is None


# --- the table on HD030's wrong answers at first sight (train split only) -----------------


def test_the_table_names_the_labelled_failure_of_hd030s_first_sight_misses() -> None:
    """scripts/death_kinds.py: the train-split cases the table alone reads as their label
    stay read so (23 of the 36 when it was written, 18 of them train)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "death_kinds.py"), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    assert len(rows) >= 36  # every later first-sight batch adds its own misses
    caught = [r["case"] for r in train if r["caught"]]
    assert len(caught) >= 18, caught
    # no train case the table reads as another category than its label, unless unknown
    wrong = [
        r["case"]
        for r in train
        if r["category"] is not None and not r["caught"] and r["label"] != "unknown"
    ]
    assert wrong == []


# --- end to end: a pasted traceback, parsed, read by the deaths view ----------------------


def _first_death_kind(tmp_path: Path, text: str) -> tuple[bool, bool, Category | None]:
    """(specific, in_setup, the table's category) of the first death in ``text``."""
    from hangdoc.analyzer.loading.loader import load_paths
    from hangdoc.analyzer.views.deaths import first_deaths
    from hangdoc.analyzer.views.timeline import Timeline

    path = tmp_path / "rank0.log"
    path.write_text(text)
    deaths = first_deaths(Timeline(load_paths([path])))
    assert deaths, "no death read"
    found = deaths[0].kind
    return deaths[0].specific, deaths[0].in_setup, found.category if found else None


_TRACEBACK = """Traceback (most recent call last):
  File "train.py", line 40, in <module>
    main()
  File "train.py", line 31, in main
    {call}
  File "/opt/lib/{lib}.py", line 12, in {func}
    {inner}
{exc}
"""


def test_a_race_on_a_path_while_saving_is_the_file_systems(tmp_path: Path) -> None:
    text = _TRACEBACK.format(
        call="write_state(model, step)",
        lib="ckpt",
        func="save_state",
        inner="os.makedirs(where)",
        exc="FileExistsError: [Errno 17] File exists: '/shared/run/step_100'",
    )
    specific, in_setup, category = _first_death_kind(tmp_path, text)
    assert specific and not in_setup
    assert category is Category.IO_STALL


def test_host_memory_in_set_up_is_the_set_up(tmp_path: Path) -> None:
    text = _TRACEBACK.format(
        call="init_process_group(backend='nccl')",
        lib="dist",
        func="init_process_group",
        inner="store = make_store()",
        exc="MemoryError",
    )
    specific, in_setup, category = _first_death_kind(tmp_path, text)
    assert in_setup and not specific
    assert category is Category.NCCL_INIT


def test_an_error_of_the_jobs_own_code_stays_a_crash(tmp_path: Path) -> None:
    text = _TRACEBACK.format(
        call="loss = step(batch)",
        lib="model",
        func="forward",
        inner="x = x.view(b, -1)",
        exc="ValueError: cannot reshape tensor of 0 elements",
    )
    specific, in_setup, category = _first_death_kind(tmp_path, text)
    assert not specific and not in_setup and category is None


# --- a directory entry raced on: the call that raised, whatever the job named its code ----

_RACES = {
    # shutil.rmtree's own frame (a save rotating old checkpoints out, another rank first)
    "rmtree": (
        "prune(old)",
        "/usr/lib/python3.10/shutil",
        "rmtree",
        "os.rmdir(path)",
        "FileNotFoundError: [Errno 2] No such file or directory: '/out/step_5'",
    ),
    # the source line calls os.makedirs; the job's function says nothing of a save
    "makedirs": (
        "prepare(out)",
        "/srv/app/util",
        "prepare",
        "os.makedirs(out)",
        "FileExistsError: [Errno 17] File exists: '/out/run'",
    ),
    # pathlib's mkdir, called by a method
    "path-mkdir": (
        "prepare(out)",
        "/srv/app/util",
        "prepare",
        "Path(out).mkdir(parents=True)",
        "FileExistsError: [Errno 17] File exists: '/out/run'",
    ),
    # CPython's two-path OSError: only link, rename/replace and symlink print it
    "two-paths": (
        "publish(a, b)",
        "/srv/app/util",
        "publish",
        "move_into_place(a, b)",
        "OSError: [Errno 18] Invalid cross-device link: '/tmp/x' -> '/out/y'",
    ),
}


@pytest.mark.parametrize("race", sorted(_RACES))
def test_an_entry_raced_on_is_the_file_systems_whatever_the_names(
    tmp_path: Path, race: str
) -> None:
    call, lib, func, inner, exc = _RACES[race]
    text = _TRACEBACK.format(call=call, lib=lib, func=func, inner=inner, exc=exc).replace(
        '"/opt/lib/' + lib + '.py"', '"' + lib + '.py"'
    )
    specific, in_setup, category = _first_death_kind(tmp_path, text)
    assert specific and not in_setup
    assert category is Category.IO_STALL


@pytest.mark.parametrize(
    ("inner", "exc"),
    [
        # a reader's path that is not there: the job's path, not the file system
        ("cfg = open(path)", "FileNotFoundError: [Errno 2] No such file or directory: 'a.yaml'"),
        # a permission: no race, nothing says the storage failed
        ("os.makedirs(out)", "PermissionError: [Errno 13] Permission denied: '/out/run'"),
    ],
)
def test_other_path_errors_stay_crashes(tmp_path: Path, inner: str, exc: str) -> None:
    text = _TRACEBACK.format(call="run(cfg)", lib="app", func="run", inner=inner, exc=exc)
    specific, in_setup, category = _first_death_kind(tmp_path, text)
    assert not specific and not in_setup and category is None


def test_an_entry_raced_on_in_set_up_is_the_set_up(tmp_path: Path) -> None:
    text = _TRACEBACK.format(
        call="init_process_group(backend='gloo', init_method=url)",
        lib="dist",
        func="init_process_group",
        inner="os.makedirs(store_dir)",
        exc="FileExistsError: [Errno 17] File exists: '/shared/store'",
    )
    specific, in_setup, category = _first_death_kind(tmp_path, text)
    assert in_setup and not specific and category is Category.NCCL_INIT


def test_torchs_out_of_memory_class_is_a_cuda_oom_whatever_its_words(tmp_path: Path) -> None:
    from hangdoc.analyzer.loading.loader import load_paths

    path = tmp_path / "rank0.log"
    path.write_text("torch.OutOfMemoryError: allocation failed on device 0\n    x = f(y)\n")
    evidence = load_paths([path])
    kinds = {e.kind.value for e in evidence.job_log_events} | {
        e.kind.value for p in evidence.processes for e in p.log_events
    }
    assert "cuda_oom" in kinds
    path.write_text("ray.exceptions.OutOfMemoryError: task 1 was killed\n    x = f(y)\n")
    evidence = load_paths([path])
    kinds = {e.kind.value for e in evidence.job_log_events} | {
        e.kind.value for p in evidence.processes for e in p.log_events
    }
    assert "cuda_oom" not in kinds  # Ray's class of the name is host memory


# --- host memory in a DataLoader worker ---------------------------------------------------

_WORKER = """Traceback (most recent call last):
  File "/srv/app/run.py", line 88, in <module>
    for batch in loader:
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1372, in _process_data
    data.reraise()
  File "/usr/lib/python3/dist-packages/torch/_utils.py", line 705, in reraise
    raise exception
{exc}: Caught {exc} in DataLoader worker process 2.
Original Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop
    data = fetcher.fetch(index)
  File "/srv/app/data.py", line 40, in __getitem__
    img = np.load(path)
{exc}{detail}
"""


def test_host_memory_in_a_dataloader_worker_is_the_workers(tmp_path: Path) -> None:
    text = _WORKER.format(exc="MemoryError", detail="")
    specific, _in_setup, category = _first_death_kind(tmp_path, text)
    assert specific and category is Category.DATALOADER
    # the worker's own traceback alone (the main process's part cut off)
    alone = text[text.index("Original Traceback") + len("Original ") :]
    specific, _in_setup, category = _first_death_kind(tmp_path, alone)
    assert specific and category is Category.DATALOADER


def test_another_error_in_a_dataloader_worker_stays_a_crash(tmp_path: Path) -> None:
    text = _WORKER.format(exc="KeyError", detail=": 'label'")
    specific, _in_setup, category = _first_death_kind(tmp_path, text)
    assert not specific and category is None


def test_c10s_cpu_allocator_in_a_worker_is_host_memory(tmp_path: Path) -> None:
    said = (
        "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: "
        "you tried to allocate 911360 bytes."
    )
    assert os_failure_of("RuntimeError", said) is OsFailure.HOST_MEMORY
    text = _WORKER.format(exc="RuntimeError", detail=f": {said}")
    specific, _in_setup, category = _first_death_kind(tmp_path, text)
    assert specific and category is Category.DATALOADER
