"""Lines that say what the job itself was doing (parsers/logs/phases.py, torch_pg.py):
tqdm bars without their pipes, validation bars named by mAP columns, trainers' messages
that a rank ran out of data, and the gloo monitored barrier seen from a non-zero rank."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.parsers.logs.phases import match_phase
from hangdoc.analyzer.parsers.logs.torch_pg import match_torch
from hangdoc.analyzer.payloads.progress import Exhausted
from hangdoc.analyzer.vocabulary import EventKind, Phase
from tests.unit.logs.helpers import fields

# yolov5 #4409's validation bar (its bar characters lost in the paste).
_YOLO = (
    "               Class     Images     Labels          P          R     mAP@.5 "
    "mAP@.5:.95:  72% 23/32 [01:07<00:25,  2.80s/it]"
)


def test_a_bar_without_its_pipes_is_still_a_progress_bar_and_map_columns_mean_eval() -> None:
    hit = match_phase(_YOLO)
    assert hit is not None and hit.kind is EventKind.PHASE
    assert fields(hit)["phase"] == Phase.EVAL
    assert (fields(hit)["progress.n"], fields(hit)["progress.total"]) == (23, 32)


def test_datasets_map_is_preprocessing_but_a_map_column_is_not() -> None:
    hit = match_phase(
        "Map (num_proc=8):  45%|████▌     | 4500/10000 [00:10<00:12, 450.1 examples/s]"
    )
    assert hit is not None and fields(hit)["phase"] == Phase.PREPROCESS
    split = match_phase(
        "Creating dataset split:  96%|█████████▋| 1927287/2000000 [29:56<01:08, 1060.83it/s]"
    )
    assert split is not None and fields(split)["phase"] == Phase.PREPROCESS


def test_a_percentage_in_a_sentence_is_no_bar() -> None:
    assert match_phase("GPU memory 95% used, 3 of 8 devices") is None


def test_trainers_say_a_rank_ran_out_of_data() -> None:
    allennlp = match_phase(
        "2021-03-02 00:46:12,994 - WARNING - allennlp.training.trainer - Worker 0 completed "
        "its entire epoch (training)."
    )
    assert allennlp is not None and fields(allennlp)["phase"] == Phase.DATA_EXHAUSTED
    assert allennlp.rank == 0 and fields(allennlp)["exhausted"] == Exhausted.EPOCH_END
    join = match_phase("RuntimeError: Rank 3 exhausted all inputs.")
    assert join is not None and join.rank == 3 and fields(join)["exhausted"] == Exhausted.JOIN
    anyone = match_phase(
        "RuntimeError: Detected at least one rank that exhausted inputs. Throwing across all ranks."
    )
    assert anyone is not None and anyone.rank is None
    assert fields(anyone)["exhausted"] == Exhausted.JOIN
    assert match_phase("Epoch 3 completed in 40 s") is None


# fairseq's all_gather_list (fairseq/distributed/utils.py, the same words copied into FARM
# and other trainers) raises this when the workers' gathered buffers do not unpickle.
_FAIRSEQ_OUT_OF_SYNC = (
    "Exception: Unable to unpickle data from other workers. all_gather_list requires all "
    "workers to enter the function together, so this error usually indicates that the "
    "workers have fallen out of sync somehow. Workers can fall out of sync if one of them "
    "runs out of memory, or if there are other conditions in your training script that can "
    "cause one worker to finish an epoch while other workers are still iterating over their "
    "portions of the data."
)


def test_fairseq_all_gather_list_out_of_sync_is_a_data_exhaustion_marker() -> None:
    hit = match_phase(_FAIRSEQ_OUT_OF_SYNC)
    assert hit is not None and fields(hit)["phase"] == Phase.DATA_EXHAUSTED
    assert hit.rank is None and fields(hit)["exhausted"] == Exhausted.OUT_OF_SYNC
    # the source line a traceback shows above it is not the message
    assert (
        match_phase("'Unable to unpickle data from other workers. all_gather_list requires all '")
        is None
    )


def test_an_oom_shown_beside_the_out_of_sync_message_is_the_cause(tmp_path: Path) -> None:
    from tests.unit.logs.helpers import diagnose

    path = tmp_path / "console.txt"
    path.write_text(
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 15.78 GiB total "
        "capacity; 13.20 GiB already allocated)\n" + _FAIRSEQ_OUT_OF_SYNC + "\n"
    )
    assert diagnose(path).findings[0].category.value == "cuda_oom"


def test_the_monitored_barrier_from_a_non_zero_rank_names_rank_0_not_itself() -> None:
    line = (
        "Rank 2 successfully reached monitoredBarrier, but received errors while waiting for "
        "send/recv from rank 0. Please check rank 0 logs for faulty rank."
    )
    hit = match_torch("RuntimeError: " + line)
    assert hit is not None and hit.kind is EventKind.MONITORED_BARRIER
    assert hit.rank == 2 and fields(hit)["ranks"] == (0,) and fields(hit)["reporter"] == "peer"
    assert fields(hit)["join"] is False
    joined = match_torch(
        "WARNING Rank 1 model.join() exit failed, some ranks may have exited early: " + line
    )
    assert joined is not None and fields(joined)["join"] is True
    wenet = match_torch("Detected uneven workload distribution: " + line)
    assert wenet is not None and fields(wenet)["join"] is True


def test_horovods_stall_check_names_the_ranks_that_did_not_submit() -> None:
    from hangdoc.analyzer.parsers.logs.horovod import match_horovod

    # horovod #1012 (operations.cc:588), mpirun prefix already peeled
    hit = match_horovod(
        "[2019-04-13 13:53:31.851547: W horovod/common/operations.cc:588] "
        "HorovodBroadcast_global_step_0 [missing ranks: 1]"
    )
    assert hit is not None and hit.kind is EventKind.MISSING_RANKS
    assert fields(hit)["ranks"] == (1,) and fields(hit)["op"] == "HorovodBroadcast_global_step_0"
    several = match_horovod("HorovodAllreduce_grads_0 [missing ranks: 1, 3]")
    assert several is not None and fields(several)["ranks"] == (1, 3)
    assert match_horovod("no missing ranks here") is None


def test_a_faiss_kmeans_is_single_rank_preprocessing() -> None:
    # ColBERT #318 (faiss/Clustering.cpp, verbose)
    hit = match_phase(
        "Clustering 111099511 points in 128D to 524288 clusters, redo 1 times, 4 iterations"
    )
    assert hit is not None and fields(hit)["phase"] == Phase.PREPROCESS


# Appended (precision6): the meter's estimate of the time left, read like its elapsed time.


def test_a_bar_keeps_its_estimate_of_the_time_left() -> None:
    hit = match_phase("Validating:  83%|########3 | 5/6 [00:14<00:03,  3.19s/it]")
    assert hit is not None
    assert (fields(hit)["progress.elapsed_s"], fields(hit)["progress.remaining_s"]) == (14, 3)


def test_a_bar_without_a_rate_has_no_estimate() -> None:
    hit = match_phase("Validating:   0%|          | 0/6 [00:00<?, ?it/s]")
    assert hit is not None
    read = fields(hit)  # (fields leaves out what is None)
    assert read["progress.elapsed_s"] == 0 and read.get("progress.remaining_s") is None
