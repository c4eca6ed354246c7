"""The stage of the job a traceback's frames show: setting up distributed communication,
or the training loop.

A c10d store error does not say what the store served: during set-up it is the
rendezvous (init_process_group's store exchange, new_group's barrier, the elastic
rendezvous), afterwards an object collective, a barrier or the job's own use of the
store. The traceback Python prints right after the store's warning names the call that
waited; its innermost frame (or source line) that names a stage decides, so a
``new_group`` created inside the training loop is still set-up, and a store read inside a
data wrapper called from ``train_one_step`` is training.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.vocabulary import Phase

# A traceback frame line ('File "…", line N, in func'): the function's name.
_FRAME_FUNC = re.compile(r'^\s*File "[^"]*", line \d+, in (?P<func>[\w<>.]+)\s*$')
# A source line under a frame: the names it calls ("trainer.train(", "train_one_step(").
_CALLED = re.compile(r"(?:^|[\s.=(,])(?P<name>[A-Za-z_]\w*)\s*\(")

# torch.distributed's set-up entry points (distributed_c10d.py: init_process_group,
# new_group, new_subgroups, _new_process_group_helper, _store_based_barrier;
# rendezvous.py: rendezvous, _create_c10d_store; device_mesh.py: init_device_mesh;
# elastic's next_rendezvous) and the frameworks' wrappers named after them
# (init_distributed, init_torch_distributed, initialize_model_parallel,
# setup_distributed …).
_SETUP_NAME = re.compile(
    r"_?(?:init_process_group|new_group|new_subgroups\w*|_?new_process_group_helper"
    r"|_?store_based_barrier|_?create_c10d_store|\w*rendezvous\w*|init_device_mesh"
    r"|\w*init\w*_distributed\w*|init_dist|initialize_model_parallel|setup_distributed"
    r"|init_distributed_environment)"
)
# The training loop: a function named after training (train, _inner_training_loop,
# train_one_step, training_step, train_epoch …) or Lightning's fit.
_TRAIN_NAME = re.compile(r"_?(?:\w+_)?train(?:ing)?(?:_\w+)?|fit|_fit_impl|fit_loop")


def _stage_of_name(name: str) -> Phase | None:
    if _SETUP_NAME.fullmatch(name):
        return Phase.INIT
    if _TRAIN_NAME.fullmatch(name):
        return Phase.TRAIN
    return None


def line_stage(text: str) -> Phase | None:
    """The stage one traceback line names: its frame's function, else the innermost call
    of its source line that names one (None when it names none)."""
    frame = _FRAME_FUNC.match(text)
    if frame is not None:
        return _stage_of_name(frame.group("func"))
    found: Phase | None = None
    for m in _CALLED.finditer(text):
        stage = _stage_of_name(m.group("name"))
        if stage is not None:
            found = stage
    return found
