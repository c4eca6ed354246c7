"""What a selection cut from a paste's first line must not turn into (issue 21 item 3):
the rest of a library's message read as the job's own words, a report whose ranks were
cut off read as naming nobody, a message's second half not recognised.

Inputs are hand-written from documented messages:

* NCCL 2.3's ``comm %p rank %d nranks %d`` (src/init.cu commAlloc, an INFO behind
  ``host:pid:tid [dev] NCCL INFO``), cut inside its level word;
* torch's DataLoader SIGBUS handler, ``ERROR: Unexpected bus error encountered in
  worker. This might be caused by insufficient shared memory (shm).``
  (torch/csrc/DataLoader.cpp, ``SIGNAL_HANDLER(SIGBUS, …)``);
* torch's ProcessGroupGloo monitored barrier, ``Rank %d successfully reached
  monitoredBarrier, but received errors while waiting for send/recv from rank %d.
  Please check rank %d logs for faulty rank.`` (ProcessGroupGloo.cpp), hard-wrapped so
  that the rank's number falls on the next line;
* the heartbeat monitor's ``[PG 0 Rank 1] Failed to get exception dump flag from the
  global store.`` + the store's error (ProcessGroupNCCL.cpp, torch 2.3–2.4), cut;
* a job's own log line as Python's logging formats it (``%(asctime)s - %(name)s -
  %(levelname)s - %(message)s``) with the loss it reports.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.catalog_lines import catalog_hit
from hangdoc.analyzer.parsers.logs.process import match_dataloader_worker
from hangdoc.analyzer.payloads.launch import LoaderWorkerDied, SignalName
from hangdoc.analyzer.payloads.nccl import NcclInit
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.last_words import _beside_losses
from hangdoc.analyzer.views.meaning import line_meaning, meaning_of, tokens
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.paste_mangling import hard_wrap


def test_a_cut_nccl_level_word_is_a_trace_of_its_header() -> None:
    hit = catalog_hit("NFO comm 0x7fc8e824c640 rank 0 nranks 4")
    assert hit is not None and hit.kind is EventKind.NCCL_INIT
    assert isinstance(hit.payload, NcclInit) and (hit.payload.rank, hit.payload.nranks) == (0, 4)
    # without any trace of NCCL's header, these few words may be anyone's
    assert catalog_hit("comm 0x7fc8e824c640 rank 0 nranks 4") is None
    assert catalog_hit("O comm 0x7fc8e824c640 rank 0 nranks 4") is None


def test_the_sigbus_message_is_read_by_its_second_sentence() -> None:
    hit = match_dataloader_worker("ght be caused by insufficient shared memory (shm).")
    assert hit is not None and hit.kind is EventKind.DATALOADER_WORKER_DIED
    assert isinstance(hit.payload, LoaderWorkerDied)
    assert hit.payload.signal is SignalName.SIGBUS and hit.payload.shm


def test_weak_words_far_apart_in_a_line_name_no_activity() -> None:
    cut = "led to get exception dump flag from the global store.Connection reset by peer"
    assert meaning_of(tokens(cut)) is Activity.CHECKPOINT_SAVE  # two weak words anywhere
    assert line_meaning(tokens(cut)) is None  # ... but five words apart
    assert line_meaning(tokens("Saving the model weights to /ckpt")) is Activity.CHECKPOINT_SAVE
    assert line_meaning(tokens("writing shard 3 of 8")) is Activity.CHECKPOINT_SAVE
    assert line_meaning(tokens("Running validation")) is Activity.EVAL  # strong words anywhere


def test_a_heartbeat_line_cut_is_not_the_job_saving(tmp_path: Path) -> None:
    log = tmp_path / "rank1_stderr.log"
    log.write_text(
        "led to get exception dump flag from the global store.Connection reset by peer\n"
        "Exception raised from recvBytes at torch/csrc/distributed/c10d/Utils.hpp:669 "
        "(most recent call first):\n",
        encoding="utf-8",
    )
    primary = analyze(load_paths([log])).primary
    assert primary.category is not Category.CHECKPOINT_SAVE, primary.title


def test_a_strong_word_in_a_reported_loss_name_is_not_the_activity() -> None:
    line = "additional batches, with best_validation_loss 0.2032 and best_inference_error 0.31"
    assert "validation" not in _beside_losses(line)
    assert "inference" in _beside_losses(line)  # not a loss's name
    saving = "Saving latest checkpoint model trained for 3 epochs, best_validation_loss 0.2"
    assert "checkpoint" in _beside_losses(saving)


def test_a_monitored_barrier_report_whose_rank_was_wrapped_away_names_nobody(
    tmp_path: Path,
) -> None:
    line = (
        "[rank2]:[E1121 20:41:00.331206291 ProcessGroupGloo.cpp:67] Rank 2 successfully "
        "reached monitoredBarrier, but received errors while waiting for send/recv from rank 0."
        " Please check rank 0 logs for faulty rank.\n"
    )
    width = line.index("from rank 0") + len("from ra")
    log = tmp_path / "console.txt"
    log.write_text(hard_wrap(line, width), encoding="utf-8")
    diagnosis = analyze(load_paths([log]))
    assert not [f for f in diagnosis.findings if f.rule == "HD037" and not f.culprit_ranks]
