"""Framework phase markers and progress bars (FORMATS.md §7).

A timeout is often not a hang: one rank tokenizes a dataset or loads shards for longer
than the collective timeout while the others wait. These lines tell what each rank was
doing last. Most framework lines are printed by rank 0 only, so silence on rank k
proves nothing; markers that name their rank (DeepSpeed ``[Rank 3]``, Lightning
``GLOBAL_RANK: 3``) carry it.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit, as_int
from hangdoc.analyzer.parsers.logs.literals import Need, any_admits, any_of, gate
from hangdoc.analyzer.parsers.logs.mentions import EMPHASIS_MARKERS, find_mention, strip_emphasis
from hangdoc.analyzer.payloads.progress import DataCount, Exhausted, PhaseMarker, Progress
from hangdoc.analyzer.vocabulary import EventKind, Phase

# tqdm's meter (tqdm/std.py format_meter): "{desc}: {pct}%|{bar}| {n}/{total} [{elapsed}<
# {remaining}, {rate}]". The bar with its pipes may be missing: a custom bar_format
# ('{l_bar}{bar:10}{r_bar}', yolov5's and ultralytics' validation bars) pasted without
# its block characters leaves "mAP@.5:.95:  72% 23/32 [01:07<00:25,  2.80s/it]".
_BAR = re.compile(
    r"(?P<label>[^|\r\n]{0,80}?):?\s*(?P<pct>\d{1,3})%(?:\|[^|]*\|)?\s*(?P<n>[\d.]+[kKMG]?)"
    r"/(?P<total>[\d.]+[kKMG]?)"
    r"\s*\[(?P<elapsed>[\d:]+)<(?P<remain>[\d:?]+)"
)
# A meter cut after its bar by the next write, before its counts ("{desc}:   6%|▋ " then
# another process's line): a terminal's overwrite or a console that interleaves writes
# leaves tqdm's l_bar and a piece of its bar (tqdm/std.py format_meter; its bar characters,
# Unicode blocks, or " 123456789#" with ascii=True), at the end of what was split off.
_CUT_METER = re.compile(
    r"(?P<label>[^|\r\n]{0,80}?):?\s*(?P<pct>\d{1,3})%\|[ \u2588-\u258f#1-9]{0,80}$"
)
# Where a bar's own description (its last 80 characters) names no phase, the words before it
# on its line do, up to this many characters (yolov5's "train: Scanning '<a long path>' images
# and labels... 113162 found, 0 missing, 0 empty, 0 corrupt:  6%|…").
_WIDER_LABEL = 240
_LABELS: tuple[tuple[Phase, re.Pattern[str]], ...] = (
    (
        Phase.PREPROCESS,
        re.compile(
            r"token|(?-i:\b[Mm]ap\b)|Filter|filter|Preprocess|preprocess|Grouping|Packing|packing|"
            # the datasets' label scans of yolov5 (utils/dataloaders.py cache_labels:
            # "{prefix}Scanning {path}...") and ultralytics (data/dataset.py cache_labels)
            r"Scanning|"
            r"Creating|"
            r"Generating|"
            r"Download|download|Convert|Extract|Resolving|Formatting|Shuffl|Concatenat|Processing|"
            r"Encoding|"
            r"Computing|Sampling|Building|Indexing",
            re.IGNORECASE,
        ),
    ),
    (Phase.LOAD, re.compile(r"Loading|loading|Fetching", re.IGNORECASE)),
    # mAP columns: the validation bars of yolov5 (val.py: "Class Images Labels P R mAP@.5")
    # and ultralytics ("Box(P R mAP50 mAP50-95)"), mmdet's "bbox_mAP".
    (
        Phase.EVAL,
        re.compile(r"[Ee]val|[Vv]alid|Test|test|Predict|predict|Generat|(?<![A-Za-z])mAP"),
    ),
    (Phase.TRAIN, re.compile(r"Epoch|epoch|Train|train|Iteration|Step|step|^\s*$")),
)
# Markers that only the main process (rank 0) prints: the evaluation step a framework
# runs on it alone (the mmdetection3d metrics' lines: see their entry in _MARKERS).
_MAIN_ONLY = re.compile(
    r"Formating bboxes of \S|Start to convert detection format|Results writes to \S|"
    r"Evaluating bboxes of \S"
)
_MARKERS: tuple[tuple[Phase, re.Pattern[str]], ...] = (
    # A rank that ran out of data before the others, as the trainers that detect it say:
    # torch's Join ("Rank 3 exhausted all inputs.", "Detected at least one rank that
    # exhausted inputs.", torch/distributed/algorithms/join.py and DDP's join hook),
    # AllenNLP's trainer ("Worker 0 completed its entire epoch (training)." before its
    # "done" all_reduce), wenet's join check ("Detected uneven workload distribution: …"),
    # fairseq's all_gather_list when the workers' buffers do not unpickle
    # (fairseq/distributed/utils.py, copied into FARM and others: "… all_gather_list requires
    # all workers to enter the function together, … one worker to finish an epoch while
    # other workers are still iterating over their portions of the data").
    (
        Phase.DATA_EXHAUSTED,
        re.compile(
            r"Rank (?P<rank>\d+) exhausted all inputs|rank that exhausted inputs|"
            r"Worker (?P<worker>\d+) completed its entire epoch|"
            r"Detected uneven workload distribution|"
            r"all_gather_list requires all workers to enter the function together"
        ),
    ),
    # An evaluation that reported its result (the end of an EVAL phase): HF Trainer's
    # metrics ("{'eval_loss': 0.41, 'eval_runtime': …}" from Trainer.log, "***** eval
    # metrics *****" from trainer_pt_utils.log_metrics); mmengine's
    # LoggerHook.after_val_epoch (log_processor.get_log_after_epoch: the last iteration,
    # "Epoch(val) [1][500/500]  accuracy/top1: …", no eta); detectron2's
    # DefaultTrainer.test ("Evaluation results for {} in csv format:").
    (
        Phase.EVAL_DONE,
        re.compile(
            r"\{'eval_[\w/]+': |\*{5} eval metrics \*{5}|"
            r"Epoch\(val\) *\[\d+\]\[ *(\d+)/\1\](?!.*\beta: )|"
            r"Evaluation results for \S+ in csv format|"
            # mmengine's LoggerHook.after_test_epoch (get_log_after_epoch in test mode: no
            # epoch, the last iteration, the metrics): "Epoch(test) [6019/6019]  NuScenes …"
            r"Epoch\(test\) *\[ *(?P<tested>\d+)/(?P=tested)\](?!.*\beta: )"
        ),
    ),
    (
        Phase.CHECKPOINT_SAVE,
        re.compile(
            r"is (?:about to be saved|begin to save)!|Saving model checkpoint|saving checkpoint at "
            r"iteration|"
            r"Saving current state to|Saving the checkpoint|\[Torch\] Saving|saving model to '|"
            r"Saving checkpoint|\[Nebula\] Saving"
        ),
    ),
    (
        Phase.CHECKPOINT_SAVED,
        re.compile(
            r"successfully saved checkpoint|Model weights saved in|\[Torch\] Saved|is ready now!|"
            r"Finished saving|Saved checkpoint|Checkpoint saved|"
            # DeepSpeed engine._save_zero_checkpoint: "zero checkpoint saved {name}"; the
            # Nebula engine (nebula_checkpoint_engine.py save): "[Nebula] Saved {name} under tag"
            r"zero checkpoint saved|\[Nebula\] Saved"
        ),
    ),
    (
        Phase.PREPROCESS,
        re.compile(
            r"Running tokenizer on dataset|Tokenizing|[Pp]reprocessing (?:dataset|data)|Grouping "
            r"texts|"
            r"Packing dataset|Building (?:dataset|index)|Creating (?:dataset|index)|"
            # faiss k-means (faiss/Clustering.cpp, verbose): "Clustering 111099511 points in
            # 128D to 524288 clusters, redo 1 times, 4 iterations" (ColBERT #318 indexing)
            r"Clustering \d+ points in \d+D to \d+ clusters|"
            # kohya-ss/sd-scripts (library/train_util.py cache_latents, strategy_base.py):
            # logger.info("caching latents...") before an unlabelled tqdm over the images; its
            # text encoder outputs likewise ("caching text encoder outputs.")
            r"\b[Cc]aching (?:latents|text encoder outputs)\b"
        ),
    ),
    (
        Phase.LOAD,
        re.compile(
            r"Loading checkpoint shards|[Ll]oading (?:model|weights|checkpoint) (?:from|shards)"
        ),
    ),
    (
        Phase.EVAL,
        re.compile(
            r"\*{5} Running Evaluation \*{5}|Validation DataLoader \d+:|\[Eval batch=|Running "
            r"evaluation|"
            # detectron2 evaluation/evaluator.py inference_on_dataset: "Start inference on {}
            # batches"; mmengine's LoggerHook.after_val_iter: "Epoch(val)  [1][ 50/500]  eta: …"
            r"Start inference on \d+ (?:batches|images)|Epoch\(val\) *\[\d+\]\[ *\d+/\d+\]"
        ),
    ),
    # mmdetection3d's nuScenes and Lyft metrics (mmdet3d/evaluation/metrics/nuscenes_metric.py,
    # lyft_metric.py; the datasets' format_results/evaluate before 1.x): "Formating bboxes of
    # {name}", "Start to convert detection format..." over an mmengine/mmcv progress bar,
    # "Results writes to {path}", then "Evaluating bboxes of {name}". They run inside the
    # metric's compute_metrics, which mmengine's BaseMetric.evaluate calls on the main
    # process only while the other ranks wait in broadcast_object_list (tools/test.py's
    # "if rank == 0: dataset.evaluate(…)" before mmengine): _MAIN_ONLY.
    (
        Phase.EVAL,
        _MAIN_ONLY,
    ),
    (
        Phase.TRAIN,
        re.compile(
            r"\*{5} Running training \*{5}|\{'loss': |^\s*iteration\s+\d+/\s*\d+ \||step=\d+, "
            r"skipped=\d+|"
            r"^\[batch=\d+/\d+\]|\bstep:\s+\d+\s+loss:"
        ),
    ),
)
_INIT = re.compile(
    r"(?:Initializing distributed|initializing ddp|initializing distributed): GLOBAL_RANK: "
    r"(?P<rank>\d+), MEMBER: \d+/(?P<world>\d+)"
    r"|Process rank: (?P<rank2>\d+), device: \S+, n_gpu: \d+, distributed training: True"
    # Ray Train (ray/train/torch/config.py): "Setting up process group for: env:// [rank=0,
    # world_size=5]"; DeepSpeed (deepspeed/comm/comm.py init_distributed): "Initializing
    # TorchBackend in DeepSpeed with backend nccl"; Megatron (megatron/training/initialize.py):
    # "> initializing torch distributed ...".
    r"|Setting up process group for: \S+ \[rank=(?P<rank3>\d+), world_size=(?P<world3>\d+)\]"
    r"|Initializing TorchBackend in DeepSpeed with backend \w+|> initializing torch distributed"
    # A job's own line before init_process_group that states the rank and the world size it
    # passes: "Initializing process group: rank 3 of 8", "initializing distributed, rank 3
    # of 8" (the rank of the world the group is created with, which the store waits for).
    r"|[Ii]nitiali[sz]ing (?:the )?(?:process group|distributed|torch\.distributed)\b"
    r"[^\n]{0,60}?\b[Rr]ank (?P<rank4>\d+) of (?P<world4>\d+)\b"
)
# DeepSpeed's log_dist "[Rank 0] …", after its logger header or with the header peeled
# (parsers/logs/prefix.py _DS_LOGGER).
_DS_RANK = re.compile(r"(?:^|\[[\w.]+\.py:\d+:\w+\] )\[Rank (\d+)\] ")
_KEYS = (
    "process group for",
    "nitializing process group",
    "nitialising process group",
    "nitializing distributed",
    "nitialising distributed",
    "nitializing the",
    "nitialising the",
    "nitializing torch.distributed",
    "nitialising torch.distributed",
    "TorchBackend",
    "initializing torch distributed",
    "exhausted",
    "entire epoch",
    "all_gather_list",
    "Clustering",
    "aching",
    "uneven",
    "%|",
    "% ",
    "ving",
    "aved",
    "Running",
    "Tokeniz",
    "Loading",
    "loading",
    "Validation",
    "Eval",
    "loss",
    "iteration",
    "step",
    "batch",
    "GLOBAL_RANK",
    "Process rank",
    "ready",
    "Grouping",
    "Packing",
    "reprocessing",
    "Building",
    "Creating",
    "Finished",
    "eval",
    "Epoch(val)",
    "Epoch(test)",
    "inference",
    "Evaluation results",
    "Nebula",
    "bboxes of",
    "detection format",
    "Results writes",
    # DeepSpeed's "Checkpoint {tag} is begin to save!" / "is about to be saved!" (the
    # CHECKPOINT_SAVE marker) has none of the words above: without these the line never
    # reached its pattern.
    "to save",
    "be saved",
)


# How much data a rank has, as training scripts print it per rank: "rank 0: 1250 batches",
# "len(dataloader) = 1250", "Number of batches: 1250", "steps per epoch: 1250". The
# rank comes from the line's prefix ([rankN]:, srun "N: ") or its start ("rank 3: …"). A
# count of progress ("after 10 iterations", "step 5 of …") is not a length: the number must
# be the line's start or follow ":"/"=" or a verb of having ("has 1248 batches").
_COUNT_WORDS = "batches|steps|samples|iterations|examples|micro-?batches"
_COUNT = re.compile(
    r"(?:^|[:=] ?|\b(?:has|have|got|of|with|total) )"
    r"(?P<n>\d{1,3}(?:,\d{3})+|\d{1,12}) (?P<what>" + _COUNT_WORDS + r")\b"
    r"|len\((?:self\.)?(?P<obj>\w{0,40}(?:loader|dataset|sampler|batches)\w{0,20})\)\s*[=:]\s*"
    r"(?P<n2>\d{1,12})"
    r"|(?:[Nn]umber of |[Nn]um[_ ]|#\s?)(?P<what3>" + _COUNT_WORDS + r"|batch|step|sample)"
    r"(?: per epoch)?\s*[=:]\s*(?P<n3>\d{1,3}(?:,\d{3})+|\d{1,12})"
    r"|(?P<what4>steps|batches|iterations) per epoch\s*[=:]?\s*(?P<n4>\d{1,12})"
)
_COUNT_KEYS = ("batch", "step", "sample", "iteration", "example", "len(")
# The searches below, each run only on lines holding a literal it cannot match without
# (parsers/logs/literals.py): a training log's step lines pass the keyword lists above
# ("step", "loss") and failed every search, 30 µs a line.
_COUNT_SEARCH = gate(_COUNT).search
_INIT_SEARCH = gate(_INIT).search
_DS_RANK_SEARCH = gate(_DS_RANK).search
_MARKER_GATES = tuple((phase, gate(pattern)) for phase, pattern in _MARKERS)
_SOME_MARKER = any_admits(tuple(g for _, g in _MARKER_GATES))
_HAS_KEY = any_of(_KEYS)
_HAS_COUNT_KEY = any_of(_COUNT_KEYS)
# What every line match_phase and match_count make an event of holds (literals.Need, the
# scanner's prefilter): the needs of the patterns that make a hit (an init line, a bar, a
# marker; a count, read without Markdown emphasis: a line with emphasis may hold any).
PHASE_NEED = Need.patterns(_INIT, _BAR, _CUT_METER, *(pattern for _, pattern in _MARKERS))
COUNT_NEED = Need.patterns(_COUNT) | Need.words(EMPHASIS_MARKERS)
# The rate after a meter's remaining time, in the unit HF datasets gives the bars of its
# dataset operations (arrow_dataset.py: map, filter, save_to_disk … ``hf_tqdm(unit="
# examples", …)``; tensorflow-datasets' preparation bars likewise): tqdm prints it "30.89
# examples/s", or inverted "1.23s/ examples" when slow (tqdm/std.py format_meter). Such a
# bar is the dataset being prepared whatever its description says, or where a paste cut
# the description ("…nizer on dataset (num_proc=10): 100%|…").
_DATASET_RATE = re.compile(r"[^\],\r\n]{0,20},\s*[\d.]+(?: examples/s|s/ examples)\]")
# A rank's name right before a number: the number names the rank, it counts nothing.
_RANK_BEFORE = re.compile(r"rank(?:_id)?\s*[:=#]?\s*$", re.IGNORECASE)


def match_count(text: str) -> Hit | None:
    """A per-rank data count (for comparing ranks: uneven data, FORMATS.md §8).

    Read without a reporter's Markdown emphasis (``len(loader) = **1248**``). Ranks that
    print into one console with no prefix name themselves in the line (``rank 3: …``,
    ``… on [rank: 3]``): that rank is part of the count's identity, so that equal counts
    of several ranks stay several events (the majority a differing rank is compared with)
    until attribution reads the rank (parsers/logs/mentions.py)."""
    if len(text) > 400 or not _HAS_COUNT_KEY(text) or not COUNT_NEED.admits(text):
        return None
    text = strip_emphasis(text)
    m = _COUNT_SEARCH(text)
    while m is not None and (after := _rank_number_end(text, m)) is not None:
        m = _COUNT_SEARCH(text, after)  # the words after a rank's number may hold the count
    if m is None:
        return None
    if m.group("n") is not None:
        what, value = m.group("what"), m.group("n")
    elif m.group("n2") is not None:
        what, value = "len(" + m.group("obj") + ")", m.group("n2")
    elif m.group("n3") is not None:
        what, value = m.group("what3"), m.group("n3")
    else:
        what, value = m.group("what4") + " per epoch", m.group("n4")
    what = what.replace("micro-batches", "microbatches").lower()
    if not what.endswith("s") and "(" not in what and "per epoch" not in what:
        what += "es" if what.endswith("h") else "s"
    count = int(value.replace(",", ""))
    return Hit(
        EventKind.DATA_COUNT,
        payload=DataCount(what=what, value=count),
        key=("count", what, str(count), find_mention(text)),
    )


def _rank_number_end(text: str, m: re.Match[str]) -> int | None:
    """Where the number ends when the count's number is a rank's ("local_rank=0 steps per
    epoch: 1250" holds the count 1250, not "0 steps"), else None."""
    name = next(n for n in ("n", "n2", "n3", "n4") if m.group(n) is not None)
    return m.end(name) if _RANK_BEFORE.search(text, 0, m.start(name)) else None


def match_phase(text: str) -> Hit | None:
    if not _HAS_KEY(text) or not PHASE_NEED.admits(text):
        return None
    content_rank: int | None = None
    if (d := _DS_RANK_SEARCH(text)) is not None:
        content_rank = int(d.group(1))
    if (i := _INIT_SEARCH(text)) is not None:
        said = i.group("rank") or i.group("rank2") or i.group("rank3") or i.group("rank4")
        rank = int(said) if said is not None else content_rank
        marker = PhaseMarker(
            phase=Phase.INIT,
            label="distributed init",
            world_size=as_int(i.group("world") or i.group("world3") or i.group("world4")),
        )
        return Hit(EventKind.PHASE, payload=marker, rank=rank, key=("phase", "init"))
    if ("%|" in text or "<" in text) and (
        (b := _BAR.search(text)) is not None
        or ("%|" in text and (b := _CUT_METER.search(text)) is not None)
    ):
        label = b.group("label").strip().strip("'\"")[-60:]
        wider = text[max(0, b.start("pct") - _WIDER_LABEL) : b.start("pct")]
        phase = next((p for p, pat in _LABELS if pat.search(label)), None)
        if phase is None:
            found = next(((p, m) for p, pat in _LABELS[:-1] if (m := pat.search(wider))), None)
            phase = Phase.TRAIN if found is None else found[0]
            if found is not None:  # the description from the word that names its phase
                label = wider[found[1].start() :].strip().rstrip(":").strip()[:60]
            elif _DATASET_RATE.match(text, b.end()) is not None:
                phase = Phase.PREPROCESS  # HF datasets' own bar, its description not read
        bar = PhaseMarker(
            phase=phase,
            label=label or "progress",
            progress=_progress(b, text) if b.re is _BAR else _cut_progress(b),
            described=bool(label),
        )
        return Hit(EventKind.PHASE, payload=bar, rank=content_rank, key=("bar", label))
    if not _SOME_MARKER(text):
        return None
    for phase, marker_gate in _MARKER_GATES:
        m = marker_gate.search(text)
        if m is not None:
            exhausted = None
            if phase is Phase.DATA_EXHAUSTED:
                if content_rank is None:
                    named = m.group("rank") or m.group("worker")
                    content_rank = int(named) if named else None
                exhausted = _exhausted(m.group(0))
            if content_rank is None and phase is Phase.EVAL and _MAIN_ONLY.search(text):
                content_rank = 0  # printed by the main process alone
            marker = PhaseMarker(
                phase=phase, label=m.group(0).strip()[:60], marker=True, exhausted=exhausted
            )
            return Hit(
                EventKind.PHASE,
                payload=marker,
                rank=content_rank,
                key=("marker", phase.value, text[:80]),
            )
    return None


def _exhausted(said: str) -> Exhausted:
    """Which trainer's words said a rank ran out of data (the DATA_EXHAUSTED patterns)."""
    if said.startswith("Rank ") or "exhausted" in said:
        return Exhausted.JOIN
    if said.startswith("Worker "):
        return Exhausted.EPOCH_END
    if said.startswith("all_gather_list"):
        return Exhausted.OUT_OF_SYNC
    return Exhausted.UNEVEN_WORKLOAD


_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def _count(value: str) -> float | None:
    """A tqdm count ("1250", "1.25k") as a number."""
    try:
        return float(value.rstrip("kKMG")) * _SCALE.get(value[-1], 1.0)
    except ValueError:
        return None


def _seconds(value: str) -> int | None:
    """tqdm's elapsed time ("30:00", "1:02:03") in seconds."""
    total = 0
    for part in value.split(":"):
        if not part.isdigit():
            return None
        total = total * 60 + int(part)
    return total


def _cut_progress(b: re.Match[str]) -> Progress:
    """A meter cut before its counts: its percentage only (no count, no elapsed time)."""
    return Progress(
        pct=int(b.group("pct")), n=None, total=None, elapsed_s=None, meter="", elapsed=""
    )


def _progress(b: re.Match[str], text: str) -> Progress:
    closed = text.find("]", b.end())
    return Progress(
        pct=int(b.group("pct")),
        n=_count(b.group("n")),
        total=_count(b.group("total")),
        elapsed_s=_seconds(b.group("elapsed")),
        meter=f"{b.group('n')}/{b.group('total')}",
        elapsed=b.group("elapsed"),
        glued=closed >= 0 and bool(text[closed + 1 :].strip()),
        remaining_s=_seconds(b.group("remain")),
    )
