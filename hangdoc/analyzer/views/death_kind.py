"""What a death's own exception says failed: one table from its typed facts to a category.

A rank that died first is "just a death" (HD030's rank_dead_or_crashed) only when what
ended it names no more specific failure. Its exception does name one often: its errno
(the storage full or gone, a path two writers raced on, the host's memory), the stage its
frames show it was raised in (the ranks setting up communication, a checkpoint saved or
loaded, a DataLoader's worker started), the meaning the message catalog gives its words
(NCCL's, torch's, a store's, a transport's), a CUDA error documented as the GPU's. Those
facts are read once by the parsers (payloads: ``ExceptionRaised.os_failure`` from the
stdlib's errno tables, ``stage`` from parsers/logs/tb_stage.py, ``known_as`` from the
catalog's rows, the signs and the storage and hardware words of parsers/logs/errors.py);
this table decides on them, first row that holds wins. A death no row holds for stays a
crash; one whose row names set-up is HD030's own set-up finding; any other is the failure
its row names, which that category's rule reports (HD031, HD301, HD110, HD109 …) — or,
where none does, nobody: an honest ``unknown`` rather than a crash named for it.

On the 36 cases HD030 named wrongly at first sight (fixtures/first_sight, 2026-11-27b to
28l), the table alone reads the failure that ended the job as the case's label in 23
(18 of 26 train, 5 of 10 test; scripts/death_kinds.py): of the 13 others, 6 are labelled
``unknown`` (the table names categories, never that), 2 are checks across ranks that
report a mismatch (not exceptions of a death), and 5 need more than a death's own facts
(an abort whose what() is the next line, a transport's connect failure, NCCL's "Cuda
failure" with no source place, a child's MemoryError in spawn's start-up).

Whether a row reads the failure or a report's specifics is measured by the metamorphic
check of hangdoc/death_variants.py (tests/casebook/test_death_variants.py, python
scripts/death_variants.py): the same deaths told with other paths, other names of the
job's own code, other words beyond the exception's type and errno. At 903980a, 4 of the 8
named causes whose paths it changed kept their label (a rename's race read from a
checkpoint's file extension, a rotation's from the job's function named save_checkpoint,
a torch.OutOfMemoryError from its message's words); the entry-race and worker-memory rows
and the parser's reading of the call that raised are what keep them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.payloads.base import EventPayload, Sign
from hangdoc.analyzer.payloads.launch import ENTRY_ERRNOS, CodeStage, ExceptionRaised, OsFailure
from hangdoc.analyzer.payloads.nccl import NcclWarn
from hangdoc.analyzer.vocabulary import parse_enum


class Fact(enum.StrEnum):
    """A typed fact of a death other than its errno's family, its stage and its signs."""

    CUDA_OOM = "cuda_oom"  # the GPU's memory ran out (torch's OutOfMemoryError, CUDA's error 2)
    HARDWARE = "hardware"  # words naming the GPU's hardware (ECC, NVLink, off the bus)
    STORAGE_WORDS = "storage_words"  # the storage's own words, or a save's failed call
    # the message catalog's meaning of its words, another failure than a crash (moderate or
    # above): the row's category is the answer
    CATALOG = "catalog"
    # a CUDA call a collective library (NCCL, a framework's custom all-reduce) reported
    # failing from code that runs only while a communicator is set up (NcclWarn.setup,
    # read from the WARN's source place: views/nccl_setup.py): the set-up failed there
    LIBRARY_SETUP = "library_setup"
    # an errno of a directory entry found made, moved or removed by another (ENOENT,
    # EEXIST, ENOTEMPTY, EBUSY, EXDEV) raised by a call that makes, moves or removes one
    # (os.makedirs, os.rename, os.symlink, shutil.rmtree …: ExceptionRaised.entry_call)
    ENTRY_RACE = "entry_race"
    # raised in a DataLoader worker process (ExceptionRaised.in_loader_worker)
    LOADER_WORKER = "loader_worker"
    # words nothing reads: no sign the parser read, no meaning of the message catalog, no
    # hardware or storage words, no errno's family (an exception's message hangdoc has
    # never seen: the next report's new variant)
    UNREAD = "unread"


@dataclass(frozen=True, slots=True)
class KindRow:
    """One row: every condition it sets must hold; the first row that holds decides."""

    name: str  # the row family, as tests and findings name it
    category: Category  # CATALOG rows: the catalog's category instead
    source: str  # where the meaning comes from
    facts: frozenset[Fact] = frozenset()
    signs: frozenset[Sign] = frozenset()  # any one of them
    failures: frozenset[OsFailure] = frozenset()  # any one of them
    stages: frozenset[CodeStage] = frozenset()  # any one of them


# Raised while the ranks set up communication: that set-up failed (HD030's own set-up
# finding names it), whatever the exception; the table's last row.
SET_UP = KindRow(
    "set-up",
    Category.NCCL_INIT,
    "torch.distributed's set-up functions (init_process_group, new_group, the rendezvous "
    "and its TCPStore/FileStore, DDP's construction, the device's set-up: tb_stage.py)",
    stages=frozenset({CodeStage.SETUP}),
)
# Raised, in words nothing reads, where a framework creates its workers' communicators
# before any step (CodeStage.DEVICE_INIT: vLLM's Worker.init_device, whose distributed
# set-up creates them; CodeStage.WORKER_INIT: verl's and SkyRL's init_model, OpenRLHF's
# init_model_from_pretrained, whose process groups' first collectives create them: the
# set-up entry points of parsers/catalog/data/stages/setup_entry_points.json). Those
# methods also do other things (a device's selection, a dtype's check, a memory
# snapshot, a model's load), whose failures have words the catalog knows and keep their
# own meaning (the rows above); an unknown message there is most likely the set-up's,
# and HD030 says so one step weaker than a set-up its frames show.
INIT_UNREAD = KindRow(
    "init-unread",
    Category.NCCL_INIT,
    "the set-up entry points of serving and RL frameworks (vLLM's init_device, verl's "
    "init_model, OpenRLHF's init_model_from_pretrained: setup_entry_points.json), an "
    "exception whose words nothing reads",
    facts=frozenset({Fact.UNREAD}),
    stages=frozenset({CodeStage.DEVICE_INIT, CodeStage.WORKER_INIT}),
)
# The rows whose category is set-up by the stage alone (HD030's own set-up finding).
SET_UP_ROWS = frozenset({SET_UP.name, INIT_UNREAD.name})
# The table. Its order is the order of specificity: what the error's own words say
# (memory, the GPU, a catalog meaning, the storage) before where it was raised.
KIND_TABLE: tuple[KindRow, ...] = (
    KindRow(
        "cuda-oom",
        Category.CUDA_OOM,
        "torch.OutOfMemoryError; CUDA's cudaErrorMemoryAllocation ('out of memory')",
        facts=frozenset({Fact.CUDA_OOM}),
    ),
    KindRow(
        "gpu-stated",
        Category.GPU_HARDWARE,
        "the GPU's hardware words; the catalog's cuda rows of strength strong or decisive",
        facts=frozenset({Fact.HARDWARE}),
    ),
    KindRow(
        "gpu-likely",
        Category.GPU_HARDWARE,
        "the catalog's cuda rows that mean the GPU or driver, moderate or weak",
        signs=frozenset({Sign.GPU_DRIVER_LIKELY, Sign.GPU_DRIVER_POSSIBLE}),
    ),
    KindRow(
        "cuda-after-fork",
        Category.DATALOADER,
        "CUDA's initialization error in a child forked after its parent initialised CUDA",
        signs=frozenset({Sign.CUDA_AFTER_FORK}),
    ),
    KindRow(
        "catalog",
        Category.UNKNOWN,  # the row's own category
        "the message catalog's meaning of the exception's words (NCCL, torch, stores, …)",
        facts=frozenset({Fact.CATALOG}),
    ),
    KindRow(
        "storage-words",
        Category.IO_STALL,
        "strerror's storage words (EIO, ENOSPC …), torch.save's writer, datasets' disk check",
        facts=frozenset({Fact.STORAGE_WORDS}),
    ),
    KindRow(
        "storage-errno",
        Category.IO_STALL,
        "errno(3): the storage failed or is full, by the errno Python or C printed",
        failures=frozenset({OsFailure.STORAGE}),
    ),
    KindRow(
        "worker-start",
        Category.DATALOADER,
        "multiprocessing's start path (fork's ENOMEM/EAGAIN, spawn's pickling)",
        stages=frozenset({CodeStage.WORKER_START}),
    ),
    KindRow(
        "worker-memory",
        Category.DATALOADER,
        "Python's MemoryError and ENOMEM (the host's memory) raised in a DataLoader worker "
        "process (torch/utils/data/_utils/worker.py's loop, or torch/_utils.py's re-raise "
        "of it: 'Caught MemoryError in DataLoader worker process N'): the workers' copies "
        "of the dataset ran the host out of memory",
        facts=frozenset({Fact.LOADER_WORKER}),
        failures=frozenset({OsFailure.HOST_MEMORY}),
    ),
    KindRow(
        "file-in-save",
        Category.IO_STALL,
        "errno(3) of a path (ENOENT, EEXIST, EXDEV, EACCES …) raised saving a checkpoint: "
        "writers racing on a shared directory, a directory not shared between nodes (not "
        "a load's: a checkpoint that is not there is the job's path, not the storage)",
        failures=frozenset({OsFailure.FILE_STATE}),
        stages=frozenset({CodeStage.CHECKPOINT_SAVE}),
    ),
    KindRow(
        "library-setup-call",
        Category.NCCL_INIT,
        "NCCL's CUDACHECK/SYSCHECK places in code that only sets a communicator up "
        "(transport set-up, shm/IPC/NVLS buffers, libcuda's loading: catalog/stages.py)",
        facts=frozenset({Fact.LIBRARY_SETUP}),
    ),
    KindRow(
        "nccl-setup-class",
        Category.NCCL_INIT,
        "ncclGetErrorString's classes a failed set-up returns (init.cc), raised where the "
        "communicators are created (set-up, a serving worker's device init, an RL "
        "worker's model init)",
        signs=frozenset({Sign.NCCL_SETUP_CLASS}),
        stages=frozenset({CodeStage.SETUP, CodeStage.DEVICE_INIT, CodeStage.WORKER_INIT}),
    ),
    # (before set-up: a CUDA error CUDA documents as the caller's own request, raised in
    # the device's set-up — torch.cuda.set_device(local_rank) with an index the node does
    # not have — is the rank's own configuration failing, not communication's set-up)
    KindRow(
        "cuda-caller-request",
        Category.RANK_DEAD,  # a crash: kind_of answers None
        "the catalog's cuda-caller-request family (CUDA's cudaError_t documentation: "
        "cudaErrorInvalidDevice, a kernel image the build lacks, an unsupported limit)",
        signs=frozenset({Sign.CUDA_CALLER_REQUEST}),
    ),
    INIT_UNREAD,
    SET_UP,
    # (after set-up: a store's or a rendezvous' file raced on while the ranks set up is
    # the set-up failing, which the row above names)
    KindRow(
        "entry-race",
        Category.IO_STALL,
        "the Python library reference's calls that make, move or remove a directory entry "
        "(os.makedirs/rename/replace/symlink/rmdir/remove, shutil.rmtree/move, pathlib's), "
        "by the library frame or source line that raised, or CPython's two-path OSError "
        "(posixmodule.c path_error2: link, rename, symlink); with an errno of an entry "
        "another process made, moved or removed (ENOENT, EEXIST, ENOTEMPTY, EBUSY) or a "
        "move across file systems (EXDEV): processes racing on a shared directory, "
        "wherever the job's own code called it",
        facts=frozenset({Fact.ENTRY_RACE}),
    ),
)


@dataclass(frozen=True, slots=True)
class DeathFacts:
    """The typed facts of one death the table reads."""

    facts: frozenset[Fact]
    signs: frozenset[Sign]
    failure: OsFailure | None
    stage: CodeStage | None
    catalog: Category | None  # the catalog's category where Fact.CATALOG holds


def facts_of(payload: EventPayload, stage: CodeStage | None, *, cuda_oom: bool) -> DeathFacts:
    """The facts of a death whose event carries ``payload``, raised in ``stage``."""
    raised = payload if isinstance(payload, ExceptionRaised) else None
    catalog = _catalog(raised)
    facts = {
        fact
        for fact, holds in (
            (Fact.CUDA_OOM, cuda_oom),
            (Fact.HARDWARE, payload.hardware is not None),
            (Fact.STORAGE_WORDS, payload.storage is not None),
            (Fact.CATALOG, catalog is not None),
            (Fact.LIBRARY_SETUP, isinstance(payload, NcclWarn) and payload.setup),
            (Fact.LOADER_WORKER, raised is not None and raised.in_loader_worker),
            (
                Fact.ENTRY_RACE,
                raised is not None
                and raised.entry_call is not None
                and raised.errno in ENTRY_ERRNOS,
            ),
            (Fact.UNREAD, _unread(payload, raised)),
        )
        if holds
    }
    return DeathFacts(
        facts=frozenset(facts),
        signs=frozenset(payload.signs),
        failure=raised.os_failure if raised is not None else None,
        stage=stage,
        catalog=catalog,
    )


def _unread(payload: EventPayload, raised: ExceptionRaised | None) -> bool:
    """An exception whose words nothing reads (Fact.UNREAD)."""
    return (
        raised is not None
        and not payload.signs
        and payload.hardware is None
        and payload.storage is None
        and raised.unread
        and raised.known_as is None
        and raised.os_failure is None
    )


def _catalog(raised: ExceptionRaised | None) -> Category | None:
    if raised is None or raised.known_as is None:
        return None
    meant = parse_enum(Category, raised.known_as)
    return None if meant in (Category.UNKNOWN, Category.RANK_DEAD) else meant


def holds(row: KindRow, facts: DeathFacts) -> bool:
    """Whether every condition ``row`` sets holds of ``facts``."""
    return (
        row.facts <= facts.facts
        and (not row.signs or bool(row.signs & facts.signs))
        and (not row.failures or facts.failure in row.failures)
        and (not row.stages or facts.stage in row.stages)
    )


@dataclass(frozen=True, slots=True)
class DeathKind:
    """The row that decided, and the category it names."""

    row: KindRow
    category: Category


def kind_of(facts: DeathFacts) -> DeathKind | None:
    """The first row of KIND_TABLE that holds, with its category (a CATALOG row's: the
    catalog's); None when none does, or the first that does names a crash (the rank's own
    error): a crash, as far as its own exception says."""
    for row in KIND_TABLE:
        if holds(row, facts):
            if row.category is Category.RANK_DEAD:
                return None  # the row says: a crash, its own error, whatever its stage
            category = facts.catalog if Fact.CATALOG in row.facts else row.category
            return DeathKind(row, category or Category.UNKNOWN)
    return None
