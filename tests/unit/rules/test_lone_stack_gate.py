"""HD108 on a lone stack held at a rank-0-first gate: the rank named is the main process
doing the gated work, never the waiter, and only where the stack waits at the gate's
entrance.

Hand-written tracebacks of transformers' TrainingArguments.main_process_first
(src/transformers/training_args.py: ``if not is_main_process: dist.barrier()`` before
it yields, ``if is_main_process: dist.barrier()`` after), entered and left through
contextlib's ``_GeneratorContextManager.__enter__`` / ``__exit__``, glued to a tqdm bar of
the main process's tokenizing (tqdm's format: ``desc: pct%|bar| n/total [elapsed<left,
rate]``).
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.model import Category
from tests.unit.recognition_kit import answer

_BAR = (
    "Running tokenizer on dataset:  47%|█████▊      | 3169000/6811963 [30:11<38:27, "
    "1578.58 examples/s]"
)
_HEAD = (
    "Traceback (most recent call last):\n"
    '  File "/src/train_sft.py", line 25, in main\n'
    '    dataset = preprocess_data(dataset, tokenizer, data_args, training_args, stage="sft")\n'
    '  File "/src/utils/common.py", line 506, in preprocess_data\n'
    '    with training_args.main_process_first(desc="dataset map pre-processing"):\n'
)
_ENTER = (
    '  File "/usr/lib/python3.9/contextlib.py", line 119, in __enter__\n    return next(self.gen)\n'
)
_EXIT = '  File "/usr/lib/python3.9/contextlib.py", line 126, in __exit__\n    next(self.gen)\n'
_GATE = (
    '  File "/site-packages/transformers/training_args.py", line 1891, in main_process_first\n'
    "    torch.distributed.barrier()\n"
    '  File "/site-packages/torch/distributed/distributed_c10d.py", line 3328, in barrier\n'
    "    work = default_pg.barrier(opts=opts)\n"
)


def test_a_waiter_at_the_gates_entrance_names_the_main_process(tmp_path: Path) -> None:
    # GIVEN the main process's live bar, and a waiter's traceback entering the gate
    category, rule, culprits = answer(tmp_path, _BAR + _HEAD + _ENTER + _GATE)
    # THEN slow, not hung, and rank 0 is the one doing the work
    assert (category, rule) == (Category.NOT_A_HANG, "HD108")
    assert culprits == (0,)


def test_the_gates_exit_barrier_is_the_main_processs_own_wait(tmp_path: Path) -> None:
    # GIVEN the same stack on the gate's way out: the main process waits for the others
    _category, _rule, culprits = answer(tmp_path, _BAR + _HEAD + _EXIT + _GATE)
    # THEN rank 0 is not named: it is the one waiting
    assert 0 not in culprits


def test_a_gate_function_without_its_caller_names_no_one(tmp_path: Path) -> None:
    # GIVEN the traceback cut so that the gate's frame is the outermost shown
    cut = "Traceback (most recent call last):\n" + _GATE
    _category, _rule, culprits = answer(tmp_path, _BAR + cut)
    assert culprits == ()
