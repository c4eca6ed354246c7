"""Begin and end markers of saves and evaluations (parsers/logs/phases.py).

Each line is built exactly from the producing library's format string (cited beside it):
a begin without its end is what HD061 reads as an unfinished save or evaluation
(views/last_words.py ``unfinished``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.phases import match_phase
from hangdoc.analyzer.vocabulary import Phase
from tests.unit.logs.helpers import fields

LINES = (
    # DeepSpeed engine._save_zero_checkpoint: logger.info('zero checkpoint saved {}')
    ("zero checkpoint saved /ckpt/global_step10/zero_pp_rank_0_mp_rank_00_optim_states.pt",
     Phase.CHECKPOINT_SAVED),
    # DeepSpeed NebulaCheckpointEngine.save: "[Nebula] Saving {name} under tag {tag}..." /
    # "[Nebula] Saved {name} under tag {tag}."
    ("[Nebula] Saving pytorch_model.bin under tag checkpoint-20...", Phase.CHECKPOINT_SAVE),
    ("[Nebula] Saved pytorch_model.bin under tag checkpoint-20.", Phase.CHECKPOINT_SAVED),
    # HF Trainer.log of evaluate()'s metrics, and trainer_pt_utils.log_metrics
    ("{'eval_loss': 0.4123, 'eval_runtime': 61.2, 'epoch': 1.0}", Phase.EVAL_DONE),
    ("***** eval metrics *****", Phase.EVAL_DONE),
    # a training step's dict is training, not an evaluation's end
    ("{'loss': 1.7157, 'grad_norm': 0.0, 'learning_rate': 0.0, 'epoch': 0.02}", Phase.TRAIN),
    # detectron2 inference_on_dataset / DefaultTrainer.test
    ("Start inference on 625 batches", Phase.EVAL),
    ("Evaluation results for coco_2017_val in csv format:", Phase.EVAL_DONE),
    # mmengine LoggerHook: after_val_iter (with eta) and after_val_epoch (the last
    # iteration, the metrics, no eta)
    ("Epoch(val)  [1][ 50/500]    eta: 0:00:30  time: 0.1012  data_time: 0.0021", Phase.EVAL),
    ("Epoch(val) [1][500/500]    accuracy/top1: 76.5000  data_time: 0.0020", Phase.EVAL_DONE),
    # ... and after_test_epoch: no epoch in test mode
    ("Epoch(test) [6019/6019]    NuScenes metric/pred_instances_3d_NuScenes/mAP: 0.6410",
     Phase.EVAL_DONE),
)  # fmt: skip


@pytest.mark.parametrize(("text", "phase"), LINES)
def test_begin_and_end_markers(text: str, phase: Phase) -> None:
    hit = match_phase(text)
    assert hit is not None
    assert fields(hit)["phase"] == phase


def test_deepspeed_rank_with_its_logger_header_peeled() -> None:
    # DeepSpeed log_dist's "[Rank 0]", with or without "[INFO] [logging.py:96:log_dist] "
    for text in (
        "[Rank 0] [Torch] Checkpoint global_step10 is about to be saved!",
        "[INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint global_step10 is about "
        "to be saved!",
    ):
        hit = match_phase(text)
        assert hit is not None and hit.rank == 0


def test_ordinary_lines_are_no_markers() -> None:
    for text in ("evaluating the loss function", "Epoch 3: saving nothing", "inference speed"):
        hit = match_phase(text)
        assert hit is None or fields(hit)["phase"] not in (
            Phase.EVAL_DONE,
            Phase.CHECKPOINT_SAVED,
        )


def test_deepspeeds_begin_line_alone_is_a_save_marker() -> None:
    # deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py create(): "[Torch]
    # Checkpoint {tag} is begin to save!" (older releases) / "is about to be saved!", with
    # log_dist's "[Rank 0]": the line carries none of the other markers' quick-reject words.
    from hangdoc.analyzer.parsers.logs.phases import match_phase

    for line in (
        "[Rank 0] [Torch] Checkpoint pytorch_model is begin to save!",
        "[Rank 0] [Torch] Checkpoint global_step100 is about to be saved!",
    ):
        hit = match_phase(line)
        assert hit is not None and fields(hit)["phase"] == "checkpoint_save" and hit.rank == 0


# HF datasets' bars of its dataset operations (arrow_dataset.py ``hf_tqdm(unit=" examples",
# …)``) as tqdm prints their rate (format_meter: "{rate} examples/s", inverted "{s}s/
# examples"): the dataset being prepared whatever the description, also one a paste cut.
BARS = (
    ("nizer on dataset (num_proc=10): 100%|█████▉| 1368806/1370895 [29:46<01:07, 30.89 examples/s]",
     Phase.PREPROCESS),
    ("Filter (num_proc=8):  45%|████     | 450/1000 [00:10<00:12, 1.23s/ examples]",
     Phase.PREPROCESS),
    # a bar in tqdm's default unit is no dataset's
    ("Epoch 1:  45%|████     | 450/1000 [00:10<00:12, 45.02it/s]", Phase.TRAIN),
)  # fmt: skip


@pytest.mark.parametrize(("text", "phase"), BARS)
def test_a_datasets_bar_is_preprocessing_by_its_unit(text: str, phase: Phase) -> None:
    hit = match_phase(text)
    assert hit is not None
    assert fields(hit)["phase"] == phase


# mmdetection3d's nuScenes and Lyft metrics' prints (nuscenes_metric.py / lyft_metric.py
# format_results, _format_bbox, compute_metrics): the metric step mmengine runs on the main
# process alone, so each is rank 0's, and an evaluation's begin.
MMDET3D_METRIC_LINES = (
    "Formating bboxes of img_bbox",
    "Start to convert detection format...",
    "Results writes to /work/out/results/img_bbox/results_lyft.json",
    "Evaluating bboxes of pts_bbox",
)


@pytest.mark.parametrize("text", MMDET3D_METRIC_LINES)
def test_mmdet3d_metric_lines_begin_rank_zeros_evaluation(text: str) -> None:
    hit = match_phase(text)
    assert hit is not None and fields(hit)["phase"] == Phase.EVAL
    assert hit.rank == 0


def test_a_rank_named_by_the_line_is_kept() -> None:
    hit = match_phase("[Rank 2] Evaluating bboxes of pts_bbox")
    assert hit is not None and hit.rank == 2


def test_a_log_stopping_in_the_main_processs_metric_step_names_rank_0(tmp_path: Path) -> None:
    # A distributed test's log that ends while the main process evaluates the predictions
    # (the other ranks wait in mmengine's broadcast of the metrics): rank 0 is evaluating.
    log = tmp_path / "test.log"
    log.write_text(
        "Formating bboxes of pts_bbox\n"
        "Start to convert detection format...\n"
        "[>>>>>>>>>>>>>>>>>>>>>>>>>>>>] 3012/3012, 12.0 task/s, elapsed: 251s, ETA:     0s\n"
        "Results writes to /work/out/results/pts_bbox/results_lyft.json\n"
        "Evaluating bboxes of pts_bbox\n"
    )
    primary = analyze(load_paths([log]), calibrate=False).primary
    assert primary is not None and primary.category is Category.EVAL_SOME_RANKS
    assert primary.culprit_ranks == (0,)


def test_a_metric_step_that_reported_its_metrics_had_ended(tmp_path: Path) -> None:
    log = tmp_path / "test.log"
    log.write_text(
        "Evaluating bboxes of pts_bbox\n"
        "Epoch(test) [3012/3012]    NuScenes metric/pred_instances_3d_NuScenes/mAP: 0.6410\n"
    )
    diagnosis = analyze(load_paths([log]), calibrate=False)
    assert all(f.category is not Category.EVAL_SOME_RANKS for f in diagnosis.findings)


def test_a_save_whose_log_ends_in_a_cut_traceback_is_still_open(tmp_path: Path) -> None:
    # A rank's log that begins a save and then shows only the killed job's traceback,
    # cut before its exception line (CPython 3.13: multi-line statements, "~~^^" anchors):
    # nothing of the job's own came after the save began.
    log = tmp_path / "console.txt"
    log.write_text(
        "[rank2]:[INFO] [logging.py:107:log_dist] [Rank 2] [Torch] Saving /ckpt/step9/x.pt...\n"
        "[rank2]:Traceback (most recent call last):\n"
        '[rank2]:  File "/srv/job/train.py", line 40, in <module>\n'
        "[rank2]:    loop()\n"
        "[rank2]:    ~~~~^^\n"
        '[rank2]:  File "/srv/job/train.py", line 31, in loop\n'
        "[rank2]:    engine.save_checkpoint(\n"
        "[rank2]:    ~~~~~~~~~~~~~~~~~~~~~~^\n"
        "[rank2]:        args.out, tag=f'step{step}'\n"
        "[rank2]:        ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    )
    primary = analyze(load_paths([log]), calibrate=False).primary
    assert primary is not None and primary.category is Category.CHECKPOINT_SAVE
    assert primary.culprit_ranks == (2,)
