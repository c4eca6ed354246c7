"""What the job's own names say it is doing: checkpointing, evaluating, reading data.

The frame catalog knows library frames (torch.save, DeepSpeed's save_checkpoint…); a job
names its own code its own way (``ShardWriter.persist``, ``run_val_epoch``,
``MyDataset.__getitem__``), and prints its own log lines ("writing shard 3 to /ckpt …").
Both are read here the same way: split the name or line into word tokens and look the
tokens up in one small vocabulary per activity. The vocabulary is about words people use
for an activity, never about one job's strings. The activities are the activity table's
(views/activity_table.py), which also holds what each is called, its category and its fix.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hangdoc.analyzer.model import FileMode, Frame, ProcessEvidence
from hangdoc.analyzer.views.activity_table import Activity

# Words that alone say the activity; words in _WEAK say it only next to another word of
# the same activity ("write" is a checkpoint only with "shard", "model", "state"...).
# fmt: off
_STRONG: dict[Activity, frozenset[str]] = {
    Activity.CHECKPOINT_SAVE: frozenset({
        "checkpoint", "checkpointing", "checkpointer", "ckpt", "ckpts", "statedict",
        "snapshot", "persist", "persisting", "serialize", "serializing", "serialization",
        "safetensors",
    }),
    Activity.EVAL: frozenset({
        "eval", "evaluate", "evaluating", "evaluation", "evaluator", "validate",
        "validating", "validation", "validator", "val", "valid",
    }),
    Activity.DATA: frozenset({
        "dataset", "datasets", "dataloader", "getitem", "collate", "collator", "prefetch",
        "prefetcher", "sampler",
    }),
    Activity.METRICS: frozenset({
        "metric", "metrics", "accuracy", "perplexity", "bleu", "rouge", "auc", "f1",
    }),
    Activity.CALLBACK: frozenset({"callback", "callbacks", "hook", "hooks"}),
}
_WEAK: dict[Activity, frozenset[str]] = {
    Activity.CHECKPOINT_SAVE: frozenset({
        "save", "saving", "saver", "saved", "write", "writing", "writer", "dump", "dumping",
        "flush", "flushing", "shard", "shards", "state", "weights", "model", "upload",
        "uploading", "store",
    }),
    Activity.EVAL: frozenset({"test", "testing", "score", "scoring", "predict", "inference"}),
    Activity.DATA: frozenset({
        "data", "batch", "batches", "fetch", "fetching", "reader", "read", "reading", "load",
        "loading", "loader", "sample", "samples", "shuffle", "tokenize", "tokenizer",
        "records", "iter", "iterator", "iterators", "next", "prefetched", "buffered",
    }),
    Activity.METRICS: frozenset({"gather", "reduce", "stats", "log", "logging", "report"}),
    Activity.CALLBACK: frozenset({"on", "end", "begin", "epoch"}),
}
# fmt: on

# "Activation checkpointing" (DeepSpeed's banner, gpt-neox #985), "gradient checkpointing"
# (torch.utils.checkpoint): trading memory for recomputation in the forward pass.
_RECOMPUTE = frozenset({"activation", "activations", "gradient", "recompute", "recomputation"})
# Reading a checkpoint back ("Loading safetensors checkpoint shards", vLLM's and SGLang's
# weight iterators; "Loading checkpoint shards", transformers' from_pretrained;
# load_checkpoint, resume_from_checkpoint): the checkpoint words name what is read, and the
# activity is a load, which no save's writing follows.
# A save's own words beside them keep it a save ("saving the checkpoint loaded …"). The
# same holds of the weak words ("Loading model weights took 7.5 GiB").
_LOADING = frozenset(
    {"load", "loading", "loaded", "restore", "restoring", "restored", "resume", "resuming"}
)
_SAVING = frozenset({"save", "saving", "saved", "saver", "write", "writing", "writer"})

# A function named for preprocessing (``preprocess_dataset``: tokenizing, mapping the
# dataset) runs the rank's own work before training, not a batch fetched from a DataLoader,
# though its name holds DATA's "dataset". Function names only: a log line's word may report
# the step done (faiss's "Preprocessing in 8.98 s" before its k-means).
_PREPROCESS_NAMES = frozenset({"preprocess", "preprocessing"})

# Names of scripts and folders that drive everything (their names say nothing of one step).
_DRIVER_WORDS = frozenset({"train", "training", "trainer", "main", "run", "launch", "finetune"})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def tokens(text: str) -> list[str]:
    """Lower-case word tokens of an identifier, path or log line: ``ShardWriter.persist``
    → shard, writer, persist; ``run_val_epoch`` → run, val, epoch."""
    out: list[str] = []
    for part in _SPLIT.split(text):
        if not part:
            continue
        out.extend(w.lower() for w in _CAMEL.split(part) if w and not w.isdigit())
    return out


def meaning_of(words: Iterable[str], *, strong_only: bool = False) -> Activity | None:
    """The activity these tokens name: a strong word, or two weak words of one activity
    (checkpoint words first: "save model" is a checkpoint, not data)."""
    seen = set(words)
    for meaning, strong in _STRONG.items():
        if meaning is Activity.CHECKPOINT_SAVE and seen & _RECOMPUTE:
            continue  # activation/gradient checkpointing: recomputation, not a save
        if (
            meaning is Activity.CHECKPOINT_SAVE
            and seen & strong
            and seen & _LOADING
            and not seen & _SAVING
        ):
            return Activity.CHECKPOINT_LOAD  # a checkpoint read back, not written
        if seen & strong:
            return meaning
    if strong_only:
        return None
    for meaning, weak in _WEAK.items():
        if meaning is Activity.CALLBACK:
            continue  # "on", "end" are too common to mean a callback by themselves
        if len(seen & weak) >= 2:
            if meaning is Activity.CHECKPOINT_SAVE and seen & _LOADING and not seen & _SAVING:
                # "Loading model weights took 7.5 GiB" (vLLM's model runner): the weak
                # words name what is read, as the strong ones do above.
                return Activity.CHECKPOINT_LOAD
            return meaning
    return None


# In a line of text, two weak words say an activity only this close together (at most two
# words between: "saving the model", "writing shard 3"); far apart they belong to other
# phrases ("… exception dump flag from the global store", torch's heartbeat monitor).
_NEAR = 3


def line_meaning(words: Sequence[str], *, strong_only: bool = False) -> Activity | None:
    """The activity a line of text names (its tokens in order): a strong word, or two
    weak words of one activity within ``_NEAR`` tokens of each other. An identifier's
    words sit together by construction; a sentence's words need to, to be one phrase."""
    found = meaning_of(words, strong_only=True)
    if found is not None or strong_only:
        return found
    if meaning_of(words) is None:
        return None
    for start in range(len(words)):
        found = meaning_of(words[start : start + _NEAR + 1])
        if found is not None:
            return found
    return None


class SignalKind(enum.StrEnum):
    """Where a piece of evidence for a meaning was read."""

    FRAME = "frame"  # the job's own frame names
    KERNEL = "kernel"  # a file the process writes (/proc)
    LOG = "log"  # the job's last log line


@dataclass(frozen=True, slots=True)
class Signal:
    """One independent piece of evidence for a meaning, with what it was."""

    meaning: Activity
    kind: SignalKind
    text: str


_CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".distcp", ".bin", ".pkl")


def frame_signal(frames: Iterable[Frame]) -> Signal | None:
    """The innermost of the job's own frames whose names (function, class, file, folder)
    say what it does. ``frames`` are the job's frames only, innermost first: a library's
    names say what the library does, and the catalog reads those."""
    for frame in frames:
        own = tokens(frame.function)
        meaning = Activity.PREPROCESS if _PREPROCESS_NAMES & set(own) else meaning_of(own)
        stem = set(tokens(frame.short_file.rsplit(".", 1)[0]))
        if meaning is None and not stem & _DRIVER_WORDS:
            # A file name speaks for every function in it: a strong word there counts,
            # and a weak one only with a weak word of the function ("__next__" in
            # iterators.py), never in a script that also trains ("train_eval.py").
            folders = set(tokens(" ".join(frame.file.split("/")[-3:-1])))
            meaning = meaning_of(stem | folders, strong_only=True) or meaning_of(set(own) | stem)
        if meaning is not None:
            return Signal(meaning, SignalKind.FRAME, frame.label())
    return None


def kernel_signal(process: ProcessEvidence) -> Signal | None:
    """A file the rank holds open for writing that looks like a checkpoint (its name, its
    suffix), at the last /proc sample; on a network or FUSE file system it says more."""
    if not process.proc_samples:
        return None
    for item in process.proc_samples[-1].open_files:
        if item.mode not in (FileMode.WRITE, FileMode.READ_WRITE) or item.fd in (1, 2):
            continue  # stdout and stderr are logs, whatever their folder is called
        near = "/".join(item.path.split("/")[-2:])  # the file and its folder, not the tree
        named = meaning_of(tokens(near)) is Activity.CHECKPOINT_SAVE
        if named or near.endswith(_CHECKPOINT_SUFFIXES):
            where = f" on {item.fstype}" if item.fstype else ""
            return Signal(
                Activity.CHECKPOINT_SAVE, SignalKind.KERNEL, f"writing {item.path}{where}"
            )
    return None


def log_signal(process: ProcessEvidence) -> Signal | None:
    """What the rank's last log line says it was doing (its own words)."""
    if not process.log_lines:
        return None
    last = process.log_lines[-1]
    meaning = line_meaning(tokens(last.text))
    return Signal(meaning, SignalKind.LOG, last.text[:200]) if meaning is not None else None


def job_meaning(
    user_frames: Iterable[Frame], process: ProcessEvidence
) -> tuple[Activity, tuple[Signal, ...]] | None:
    """The activity the job's own evidence points to, and every independent signal that
    agrees with it: its frames' names first, then the files it writes, then its last log
    line. More agreeing signals, more confidence (the caller decides how much)."""
    signals = [
        s
        for s in (frame_signal(user_frames), kernel_signal(process), log_signal(process))
        if s is not None
    ]
    if not signals:
        return None
    chosen = signals[0].meaning
    return chosen, tuple(s for s in signals if s.meaning is chosen)
