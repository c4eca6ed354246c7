"""A checkpoint file was left empty beside its siblings of full size

## What it means
A directory listing attached to the ticket (`ls -l` of the checkpoint directory) shows a
checkpoint file of 0 bytes next to files of the same save, written for the other ranks or
shards, that have their full size: `mp_rank_00_model_states.pt` 0 bytes beside a 2.6 GB
`mp_rank_01_model_states.pt`. The save opened that file and never wrote it: the rank
writing it stopped inside its save (blocked, or killed or crashed there) while the others
finished theirs.

## Why it hangs
A save is a step every rank takes at the same point. The rank whose file stayed empty did
not get past its write, so it never reached the collective that follows the save (a
barrier, the next step), and the ranks that finished their files wait there until the
timeout; or it died in the write and the job ended.

## Evidence used
Rows of `ls -l` (GNU coreutils' long format, any locale's date, `--time-style`, `-h`
sizes) naming checkpoint files (`.pt`, `.pth`, `.bin`, `.safetensors`, `.ckpt`,
`.distcp`; DeepSpeed's `*_model_states.pt` and `*_optim_states.pt` among them), read by
analyzer/parsers/logs/listing.py. Files of one save are those of one listing whose names
differ only in their numbers (the rank or shard). It fires where one of them is 0 bytes
and another has data; a lone empty file, or a listing where every file is empty, says
nothing of which rank stopped. The number in a file's name is its model-parallel rank or
shard, not a global rank: no culprit is named.

## How to confirm
Look for the rank that writes the empty file (DeepSpeed's `mp_rank_NN` is the
model-parallel rank whose data-parallel rank 0 writes it): its log or stack should stop
inside the save (`torch.save`, `save_checkpoint`). Check the file system's free space and
quota (`df -h`, `df -i`) and its kernel log for I/O errors.

## How to fix
Find why that rank's write stopped: a full or failing file system (free space, quota), a
rank killed while saving (the host's OOM killer, a scheduler's time limit), or a
collective called inside the save on some ranks only. Save to local disk and copy
afterwards if the shared file system stalls, and keep the previous checkpoint until the
new one is complete.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.host import ListedFile
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext


def _listed(p: Placed) -> ListedFile:
    found = p.event.payload_as(ListedFile)
    return found if found is not None else ListedFile()


class EmptyCheckpointFile(Rule):
    __doc__ = __doc__
    id = "HD113"
    name = "empty-checkpoint-file"
    summary = "a checkpoint file was left empty beside its siblings of full size"
    categories = (Category.CHECKPOINT_SAVE,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        saves: dict[tuple[str, str], list[Placed]] = {}
        for p in ctx.timeline.of(EventKind.FILE_LISTED):
            family = _listed(p).family
            if family is not None:
                saves.setdefault((p.event.source, family), []).append(p)
        for (_, family), files in sorted(saves.items()):
            empty = [p for p in files if _listed(p).size == 0]
            written = [p for p in files if _listed(p).size != 0]
            if not empty or not written:
                continue
            names = ", ".join(str(_listed(p).name) for p in empty[:3])
            full = _listed(written[0])
            size = f"{full.size:,} bytes" if full.size is not None else "its data"
            yield Finding(
                rule=self.id,
                category=Category.CHECKPOINT_SAVE,
                severity=Severity.ERROR,
                title=f"the checkpoint file {names} was left empty while {full.name} of the "
                "same save was written",
                explanation=(
                    f"The directory listing shows {len(empty)} of the {len(files)} files of "
                    f"one save ({family}) with 0 bytes, while {full.name} holds {size}. The "
                    "rank writing the empty file opened it and never wrote it: it stopped "
                    "inside its save (blocked, or killed there) while the others finished "
                    "theirs and went on to wait for it."
                ),
                fix=(
                    "Find why that rank's write stopped: a full or failing file system (df -h, "
                    "quota, kernel I/O errors), a rank killed while saving, or a collective "
                    "called inside the save on some ranks only; keep the previous checkpoint "
                    "until the new one is complete."
                ),
                evidence=tuple(p.ref() for p in (*empty[:3], written[0])),
                strength=Strength.SIGNAL,
            )
            return


RULE = EmptyCheckpointFile
