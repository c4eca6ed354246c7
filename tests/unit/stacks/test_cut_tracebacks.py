"""Tracebacks cut before their exception line (python_tb.py, headless.py): a position of
their thread where the innermost frame shown is a call whose deeper frames can only be
inside it; else read, marked cut (TextStack.cut), as far as the frames go: never the
process's latest stack (its innermost frame shown may be an outer call), its exception or
its death."""

from __future__ import annotations

from pathlib import Path

from tests.unit.stacks.helpers import only_process, scan, threads

CASES = Path(__file__).resolve().parents[3] / "fixtures" / "cases"


def _case(case: str, name: str) -> str:
    return (CASES / case / name).read_text()


def _only_a_cut_position(text: str) -> None:
    """The text's one traceback is read marked cut: no exception, no death, and not what
    its process was last seen doing."""
    proc = only_process(text)
    [stack] = proc.text_stacks
    assert stack.cut
    assert all(t.exception is None for t in stack.threads)
    assert not proc.exited
    assert proc.latest_stacks() is None and not proc.has_stacks()
    assert proc.cut_text_stacks() == [stack]


def test_a_headed_traceback_cut_inside_new_group_is_kept() -> None:
    # colossalai issue 2500: new_group → _new_process_group_helper → ProcessGroupGloo(...)
    text = _case("colossalai-2500-64gpu-gloo-new-group-timeout", "traceback.txt")
    proc = only_process(text)
    [thread] = threads(proc)
    assert [f.function for f in thread.frames[:2]] == ["_new_process_group_helper", "new_group"]
    assert thread.exception is None
    # where it was (every frame cut is inside group creation): its latest stack, not cut
    assert proc.latest_stacks() is proc.text_stacks[0] and not proc.text_stacks[0].cut


def test_a_headed_traceback_cut_in_a_collective_wrapper_is_only_a_cut_position() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/test.py", line 9, in run\n'
        "    dist.all_reduce(tensor)\n"
        '  File "/x/torch/distributed/c10d_logger.py", line 75, in wrapper\n'
        "    return func(*args, **kwargs)\n"
    )
    _only_a_cut_position(text)


def test_a_headed_traceback_cut_in_user_code_is_only_a_cut_position() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 209, in <module>\n'
        "    main()\n"
        '  File "train.py", line 169, in main\n'
        "    build()\n"
    )
    _only_a_cut_position(text)


def test_a_headless_traceback_cut_in_os_makedirs_is_kept() -> None:
    # NVIDIA-NeMo/Automodel PR 3686: rank 8's FileExistsError line is cut.
    text = _case("automodel-3686-rank8-ckpt-makedirs-race", "traceback.txt")
    proc = only_process(text)
    assert proc.rank == 8
    [thread] = threads(proc)
    assert [f.function for f in thread.frames[:2]] == ["makedirs", "_create_dirs"]


# Cut inside a checkpoint writer (saves.py): hand-written in CPython's traceback format
# (traceback.format_list: 'File "…", line N, in f' over the source line).
def test_a_headed_traceback_cut_inside_lightnings_save_checkpoint_is_kept() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 40, in <module>\n'
        "    trainer.fit(model)\n"
        '  File "/env/lib/python3.10/site-packages/lightning/pytorch/callbacks/'
        'model_checkpoint.py", line 380, in on_validation_end\n'
        "    self._save_topk_checkpoint(trainer, monitor_candidates)\n"
        '  File "/env/lib/python3.10/site-packages/lightning/pytorch/trainer/trainer.py", '
        "line 1365, in save_checkpoint\n"
        "    self.strategy.save_checkpoint(checkpoint, filepath)\n"
    )
    [thread] = threads(only_process(text))
    assert [f.function for f in thread.frames[:2]] == ["save_checkpoint", "on_validation_end"]
    assert thread.exception is None


def test_a_headless_traceback_cut_inside_torch_save_is_kept() -> None:
    text = (
        '  File "/w/train.py", line 88, in checkpoint\n'
        "    torch.save(state, path)\n"
        '  File "/env/lib/python3.11/site-packages/torch/serialization.py", line 628, in save\n'
        "    _save(obj, opened_zipfile, pickle_module, pickle_protocol)\n"
    )
    [thread] = threads(only_process(text))
    assert [f.function for f in thread.frames] == ["save", "checkpoint"]


def test_a_traceback_cut_in_the_jobs_own_save_function_is_only_a_cut_position() -> None:
    # a name is not a writer's entry: the job's save_model may call a collective first
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 209, in <module>\n'
        "    main()\n"
        '  File "train.py", line 169, in save_model\n'
        "    dist.barrier()\n"
    )
    _only_a_cut_position(text)


def test_the_parsers_checkpoint_writers_are_the_frame_catalogs() -> None:
    # saves.py mirrors views/catalog.py's checkpoint-save signatures (the parser layer may
    # not import the views): the two must name the same frames.
    from hangdoc.analyzer.parsers.stacks.saves import SAVE_CALLS
    from hangdoc.analyzer.views.activity_table import Activity
    from hangdoc.analyzer.views.catalog import SIGNATURES

    catalog = {
        (sig.files, sig.functions) for sig in SIGNATURES if sig.activity is Activity.CHECKPOINT_SAVE
    }
    assert set(SAVE_CALLS) == catalog


def test_a_pin_memory_thread_cut_while_receiving_a_shared_batch_is_kept() -> None:
    # DeepSpeed issue 887: "Exception in thread Thread-1:" through _pin_memory_loop and
    # rebuild_storage_fd, the paste ends inside multiprocessing's resource_sharer
    text = _case("deepspeed-887-pin-memory-reset-at-exit", "console.txt")
    [thread] = threads(only_process(text))
    assert thread.name == "Thread-1"
    assert not thread.is_main
    assert [f.function for f in thread.frames[:4]] == [
        "detach",
        "rebuild_storage_fd",
        "get",
        "_pin_memory_loop",
    ]
    assert thread.exception is None


def test_a_pin_memory_thread_cut_before_any_receipt_is_only_a_cut_position() -> None:
    # the loop's frame alone: where the thread was below it, nothing says
    text = (
        "Exception in thread Thread-1:\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.6/threading.py", line 864, in run\n'
        "    self._target(*self._args, **self._kwargs)\n"
        '  File "/x/torch/utils/data/_utils/pin_memory.py", line 21, in _pin_memory_loop\n'
        "    r = in_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)\n"
    )
    _only_a_cut_position(text)


def test_a_headless_rank_traceback_cut_in_the_dataloaders_receipt_is_kept() -> None:
    # DEIMv2 issue 93: "[rank1]:" frames from the training loop down to _try_get_data's
    # _data_queue.get → _ForkingPickler.loads → rebuild_storage_fd, no header and no
    # exception line: every frame cut is inside the receipt of a worker's shared batch
    text = _case("deimv2-93-rank1-dataloader-ancdata", "rank1_traceback.txt")
    proc = only_process(text)
    assert proc.rank == 1
    [thread] = threads(proc)
    assert [f.function for f in thread.frames[:3]] == ["rebuild_storage_fd", "get", "_try_get_data"]
    assert proc.latest_stacks() is proc.text_stacks[0] and not proc.text_stacks[0].cut
    from hangdoc.analyzer.views.workers import receives_worker_batch

    assert receives_worker_batch(thread)


def test_a_headless_traceback_cut_above_the_receipt_is_dropped() -> None:
    # the iterator's outer frames only: where it failed below them, nothing says
    text = (
        '  File "/x/torch/utils/data/dataloader.py", line 701, in __next__\n'
        "    data = self._next_data()\n"
        '  File "/x/torch/utils/data/dataloader.py", line 1448, in _next_data\n'
        "    idx, data = self._get_data()\n"
        '  File "/x/torch/utils/data/dataloader.py", line 1412, in _get_data\n'
        "    success, data = self._try_get_data()\n"
    )
    assert not any(p.has_stacks() for p in scan(text).processes)


def test_the_parsers_pin_memory_frames_are_the_views() -> None:
    # GIVEN the parser's frames of a pin-memory thread receiving a shared batch, which
    # keep a cut traceback, and the view's, which HD112 reads
    from hangdoc.analyzer.parsers.stacks import pin_memory
    from hangdoc.analyzer.views import workers

    # THEN they are the same frames
    assert pin_memory.PIN_MEMORY_LOOP == workers.PIN_MEMORY_LOOP
    assert pin_memory.SHARED_RECEIPT == workers.SHARED_RECEIPT
    assert pin_memory.MAIN_RECEIPT == workers.MAIN_RECEIPT
    assert pin_memory.SHARER_REQUEST == workers.SHARER_REQUEST


# Cut inside a framework's collective API (cut.py): every deeper frame is inside it.
def test_a_headed_traceback_cut_inside_deepspeeds_all_reduce_is_kept() -> None:
    # MOSS #275: rank 0's save_checkpoint all-reduces the tag (_checkpoint_tag_validation);
    # the stored copy stops at deepspeed/comm/comm.py's all_reduce.
    text = _case("moss-275-rank0-only-save-allreduce", "rank0_console.txt")
    [thread] = threads(only_process(text))
    assert [f.function for f in thread.frames[:4]] == [
        "all_reduce",
        "log_wrapper",
        "_checkpoint_tag_validation",
        "save_checkpoint",
    ]
    assert thread.exception is None


def test_a_headed_traceback_cut_inside_accelerates_wait_for_everyone_is_kept() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 50, in <module>\n'
        "    accelerator.wait_for_everyone()\n"
        '  File "/env/lib/python3.10/site-packages/accelerate/accelerator.py", line 2366, '
        "in wait_for_everyone\n"
        "    wait_for_everyone()\n"
    )
    [thread] = threads(only_process(text))
    assert [f.function for f in thread.frames] == ["wait_for_everyone", "<module>"]


def test_a_traceback_cut_in_a_framework_function_that_is_no_collective_is_only_cut() -> None:
    # deepspeed/comm/comm.py also holds get_rank, init_distributed …: not collectives
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 12, in <module>\n'
        "    deepspeed.init_distributed()\n"
        '  File "/env/lib/python3.10/site-packages/deepspeed/comm/comm.py", line 670, '
        "in get_world_size\n"
        "    return cdb.get_world_size(group)\n"
    )
    _only_a_cut_position(text)


def test_the_parsers_collective_wrappers_are_the_frame_catalogs() -> None:
    # cut.py mirrors views/catalog.py's collective signatures that name files (the parser
    # layer may not import the views): the two must name the same frames.
    from hangdoc.analyzer.parsers.stacks.cut import COLLECTIVE_CALLS
    from hangdoc.analyzer.views.activity_table import Activity
    from hangdoc.analyzer.views.catalog import SIGNATURES

    catalog = {
        (sig.files, sig.functions)
        for sig in SIGNATURES
        if sig.activity is Activity.COLLECTIVE and sig.files
    }
    assert set(COLLECTIVE_CALLS) == catalog
