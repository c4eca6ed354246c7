# ruff: noqa: E501  (tables of log lines read better unwrapped)
"""Failures with a specific cause that a generic death would hide: NCCL WARNs of
communicator setup typed as CUDA errors, c10d's FileStore failing to open its file, and a
save failing on the file system.

Each line is written from the format string of the code that prints it (named next to
it): documented formats, with made-up hosts, paths and numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs import recognise_line
from hangdoc.analyzer.parsers.logs.errors import finish_payload
from hangdoc.analyzer.parsers.logs.process import SAVE_FRAME
from hangdoc.analyzer.payloads.launch import ExceptionRaised
from hangdoc.analyzer.payloads.nccl import NcclWarn
from hangdoc.analyzer.payloads.torch_pg import StoreError, StoreTimeout
from hangdoc.analyzer.vocabulary import EventKind, save_storage_error, storage_error
from tests.unit.logs.helpers import events, parse


@pytest.mark.parametrize(
    ("line", "setup"),
    [
        # NVIDIA/nccl src/include/checks.h CUDACHECK: WARN("Cuda failure '%s'", …) printed
        # from transport.cc (ncclTransportP2pSetup): setup code.
        ("node1:8120:8120 [2] transport.cc:160 NCCL WARN Cuda failure 'invalid argument'", True),
        # the same macro printed from enqueue.cc: launching a collective, not setup.
        ("node1:8120:8120 [2] enqueue.cc:1015 NCCL WARN Cuda failure 'invalid argument'", False),
    ],
)
def test_a_cuda_failure_is_setup_by_the_file_that_printed_it(line: str, setup: bool) -> None:
    hit = recognise_line(line)
    assert hit is not None and hit.kind is EventKind.CUDA_ERROR
    assert isinstance(hit.payload, NcclWarn) and hit.payload.setup is setup


def test_library_wrapper_warns_and_their_chains_are_setup(tmp_path: Path) -> None:
    log = tmp_path / "nccl_debug.log"
    log.write_text(
        # v2.18.5-1 src/misc/cudawrap.cc initOnceFunc: WARN("Failed to find CUDA library
        # %s (NCCL_CUDA_PATH='%s') : %s", …), run by ncclCudaLibraryInit from
        # ncclCommInitRank* (init.cc): the catalog's row types it a CUDA error.
        "gpu3:711:711 [0] misc/cudawrap.cc:179 NCCL WARN Failed to find CUDA library libcuda.so (NCCL_CUDA_PATH='') : libcuda.so: cannot open shared object file: No such file or directory\n"
        # ≥ 2.19 src/include/cudawrap.h CUCHECK: WARN("Cuda failure %d '%s'", …) printed
        # from transport/nvls.cc (not a file of setup's alone), whose return chain
        # (NCCLCHECK's "file:line -> rc") unwinds through init.cc (ncclNvlsSetup)
        "gpu3:712:712 [1] transport/nvls.cc:254 NCCL WARN Cuda failure 1 'invalid argument'\n"
        "gpu3:712:712 [1] NCCL INFO init.cc:1418 -> 1\n"
        "gpu3:712:712 [1] NCCL INFO init.cc:1687 -> 1\n"
    )
    parsed = parse(log)
    cuda = [e.payload for _, e in events(parsed, "cuda_error")]
    assert len(cuda) == 2
    assert all(isinstance(p, NcclWarn) and p.setup for p in cuda)
    chained = [p for p in cuda if isinstance(p, NcclWarn) and p.rc_chain]
    assert [p.rc_chain for p in chained] == [("init.cc:1418", "init.cc:1687")]


def test_filestore_open_failure_is_a_store_failure() -> None:
    # torch/csrc/distributed/c10d/FileStore.cpp: SYSASSERT(fd_, "open(" + path + ")"), a
    # std::system_error whose what() is "<arg>: <strerror>", raised as RuntimeError.
    hit = recognise_line("RuntimeError: open(/shared/run7/store): No such file or directory")
    assert hit is not None and hit.kind is EventKind.STORE_TIMEOUT
    assert isinstance(hit.payload, StoreTimeout)
    assert hit.payload.error is StoreError.STORE_FILE
    assert hit.payload.message == "No such file or directory"


@pytest.mark.parametrize(
    ("said", "saving", "storage"),
    [
        # caffe2/serialize/inline_container.cc PyTorchStreamWriter::setup's TORCH_CHECK
        ("RuntimeError: Parent directory /scratch/run3/step_2000 does not exist.", "", True),
        # … and its valid(): "PytorchStreamWriter failed " + what + info + ": " + error
        (
            "RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/3: file write failed",
            "",
            True,
        ),
        # CPython OSError_str with two file names (os.replace, os.symlink) of a checkpoint
        ("FileExistsError: [Errno 17] File exists: 'ckpt_4.pt' -> 'out/ckpt_last.pt'", "", True),
        # an errno raised in a traceback that shows a save
        (
            "OSError: [Errno 5] Input/output error",
            'File "trainer.py", line 240, in save_checkpoint',
            True,
        ),
        (
            "PermissionError: [Errno 13] Permission denied: '/out/run1'",
            'File "train.py", line 9, in save_model',
            True,
        ),
        # a checkpoint's directory made or removed (os.makedirs without exist_ok, rmtree of
        # a directory another rank still fills, a rename across devices): never a load's
        ("FileExistsError: [Errno 17] File exists: 'out/checkpoint-2000'", "", True),
        ("OSError: [Errno 39] Directory not empty: 'out/checkpoint-1500'", "", True),
        ("OSError: [Errno 18] Invalid cross-device link: 'x/checkpoint-3' -> 'y/c'", "", True),
        # the same errno on a file that is no checkpoint's says nothing of a save
        ("FileExistsError: [Errno 17] File exists: 'logs/run1'", "", False),
        # one file name alone may be a load's; no save shown
        (
            "FileNotFoundError: [Errno 2] No such file or directory: '/ckpts/checkpoint-500/config.json'",
            "",
            False,
        ),
        # the network's errnos are not the file system's, even in a save
        (
            "ConnectionResetError: [Errno 104] Connection reset by peer",
            'File "x.py", line 3, in save_checkpoint',
            False,
        ),
        # host memory is not storage
        (
            "OSError: [Errno 12] Cannot allocate memory",
            'File "x.py", line 3, in save_checkpoint',
            False,
        ),
    ],
)
def test_save_storage_error(said: str, saving: str, storage: bool) -> None:
    assert (save_storage_error(said, saving) is not None) is storage


def test_an_exception_raised_in_a_save_carries_its_storage_error() -> None:
    raised = ExceptionRaised(
        exc_type="OSError",
        message="[Errno 28] No space left on device",
        saving='File "/usr/lib/python3.11/site-packages/torch/serialization.py", line 652, in _save',
    )
    assert finish_payload(raised, "OSError: [Errno 28] No space left on device").storage
    plain = ExceptionRaised(
        exc_type="FileNotFoundError", message="[Errno 2] No such file or directory: 'a.json'"
    )
    assert finish_payload(plain, "").storage is None


@pytest.mark.parametrize(
    ("frame", "saving"),
    [
        (
            'File "/usr/lib/python3.11/site-packages/torch/serialization.py", line 965, in save',
            True,
        ),
        (
            'File "/usr/lib/python3.11/site-packages/torch/serialization.py", line 1266, in _save',
            True,
        ),
        ('File "trainer.py", line 240, in save_checkpoint', True),
        ("torch.save(state, path)", True),
        # torch.load lives in the same module: a load's missing file is not a save's
        (
            'File "/usr/lib/python3.11/site-packages/torch/serialization.py", line 791, in _open_file',
            False,
        ),
        (
            'File "/usr/lib/python3.11/site-packages/torch/distributed/checkpoint/state_dict_loader.py", line 90, in load',
            False,
        ),
    ],
)
def test_save_frames(frame: str, saving: bool) -> None:
    assert bool(SAVE_FRAME.search(frame)) is saving


@pytest.mark.parametrize(
    ("said", "storage"),
    [
        # datasets/builder.py download_and_prepare's own check of its cache's free space
        (
            "OSError: Not enough disk space. Needed: 3.93 GiB (download: 1.01 GiB, generated: "
            "2.92 GiB, post-processed: Unknown size)",
            True,
        ),
        ("OSError: [Errno 28] No space left on device: '/ckpt/model.pt'", True),
        # the DataLoader's shared memory is the container's --shm-size, not storage
        ("RuntimeError: unable to write to file </torch_31_1>: No space left on device", False),
    ],
)
def test_storage_words(said: str, storage: bool) -> None:
    assert (storage_error(said) is not None) is storage


def test_a_storage_failure_without_a_rank_is_the_one_worker_the_launcher_names(
    tmp_path: Path,
) -> None:
    """The traceback names no rank; torchrun's elastic agent reports the one worker that
    exited with an error of its own (elastic/multiprocessing/api.py "failed (exitcode: 1)
    local_rank: 0"): the storage failure is that worker's, as HD030 reads a crash."""
    log = tmp_path / "console.txt"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/opt/datasets/builder.py", line 810, in download_and_prepare\n'
        "    raise OSError(\n"
        "OSError: [Errno 28] No space left on device: '/cache/ds/tmp.arrow'\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 28466) of binary: /usr/bin/python\n"
    )
    primary = analyze(load_paths([log])).primary
    assert (primary.rule, primary.culprit_ranks) == ("HD110", (0,))


@pytest.mark.parametrize(("connecting_thread", "setup"), [("1288", True), ("1203", False)])
def test_a_cuda_failure_right_after_its_thread_connects_is_set_up(
    tmp_path: Path, connecting_thread: str, setup: bool
) -> None:
    """NCCL prints "Ring NN : a -> b via <transport>" while it connects a communicator's
    transports (init.cc in 2.4); a CUDA failure the same thread WARNs about next, from a
    header's helper (2.4's include/shm.h, shmOpen's cudaHostRegister), fails that set-up
    (HD206), not the rank on its own (HD030). Another thread's failure is not placed so."""
    log = tmp_path / "nccl.log"
    log.write_text(
        f"node-a:1203:{connecting_thread} [4] NCCL INFO Ring 00 : 4[4] -> 5[5] via P2P/IPC\n"
        "node-a:1203:1288 [4] include/shm.h:42 NCCL WARN Cuda failure 'invalid argument'\n"
    )
    primary = analyze(load_paths([log])).primary
    assert (primary.rule == "HD206") is setup


# NVIDIA/nccl src/misc/shmutils.cc (src/os/linux.cc of 2.28): WARN("Error while %s shared
# memory segment %s (size %zi)", create ? "creating" : "attaching to", …), printed as a
# paste keeps it: without its NCCL header, then the traceback of the first collective.
_SHM_WARN = "Error while creating shared memory segment /dev/shm/nccl-Ab12Cd (size 9637888)"


def test_a_shared_memory_segment_nccl_cannot_create_fails_set_up(tmp_path: Path) -> None:
    """NCCL opens /dev/shm segments only while it connects a communicator (the shm
    transport's proxy set-up, its proxy pools, NVLS): before any collective ran, the
    failure is the set-up's (HD206), whichever first collective the traceback shows."""
    path = tmp_path / "console.txt"
    path.write_text(
        f"{_SHM_WARN}\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 1077, in _broadcast_model\n'
    )
    primary = analyze(load_paths([path])).primary
    assert (primary.rule, primary.category.value) == ("HD206", "nccl_init_or_bootstrap_hang")


def test_a_shared_memory_warn_after_collectives_ran_is_no_set_up_failure(tmp_path: Path) -> None:
    """The same WARN after NCCL logged collectives running is not read as set-up."""
    path = tmp_path / "nccl.log"
    path.write_text(
        "node1:8120:8131 [0] NCCL INFO AllReduce: opCount 3 sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x55aa [nranks=2] stream 0x55bb\n"
        f"node1:8120:8131 [0] misc/shmutils.cc:80 NCCL WARN {_SHM_WARN}\n"
    )
    diagnosis = analyze(load_paths([path]))
    assert all(f.rule != "HD206" for f in diagnosis.findings)


def test_a_paste_that_starts_with_an_os_error_naming_its_files_is_its_failure(
    tmp_path: Path,
) -> None:
    """The first line is the end of a traceback the paste cut above it (its class cut
    away too), and another rank's interleaved frames follow: a rename of a checkpoint's
    staging directory failed, a save's failure on the file system (HD110)."""
    log = tmp_path / "tb.txt"
    log.write_text(
        ": [Errno 2] No such file or directory: 'runs/a/tmp-checkpoint-40' -> "
        "'runs/a/checkpoint-40'\n"
        '  File "/opt/lib/trainer.py", line 2300, in _save_checkpoint\n'
        "    self._rotate_checkpoints(use_mtime=False, output_dir=run_dir)\n"
        '  File "/opt/lib/trainer.py", line 1900, in _inner_training_loop\n'
    )
    evidence = load_paths([log])
    raised = [e for e in evidence.job_log_events if e.kind == EventKind.EXCEPTION]
    assert [e.line for e in raised] == [1]
    payload = raised[0].payload
    assert isinstance(payload, ExceptionRaised)
    assert payload.exc_type == "FileNotFoundError" and payload.bare
    diagnosis = analyze(evidence)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category.value == "io_or_filesystem_stall"
    # a first line that is another exception, followed by more lines, is not read so
    other = tmp_path / "other.txt"
    other.write_text('ValueError: bad value\n  File "/opt/x.py", line 3, in f\n')
    assert not [e for _, e in events(parse(other), EventKind.EXCEPTION) if e.line == 1]
