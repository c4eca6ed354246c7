"""A traceback cut inside a checkpoint save still says what its thread was doing.

A paste that stops before the exception line has lost its innermost frames, so the frames
left do not say where the thread waited (python_tb.py and headless.py drop such a stack).
They still say what it was inside: CPython prints a traceback outermost first, so every
frame shown encloses the ones cut. When the innermost frame shown is the entry of a
checkpoint writer (``torch.save``, DCP's ``save``, Lightning's ``ModelCheckpoint``,
Transformers', DeepSpeed's, Accelerate's, Megatron's ``save_checkpoint``…), whatever is
deeper is inside that save: the thread was saving a checkpoint, which is what the rules
ask of it (a save that never ends, a collective called from inside one).

The writers are the frame catalog's checkpoint-save signatures (views/catalog.py, which
this layer may not import); a test holds the two the same.
"""

from __future__ import annotations

from hangdoc.analyzer.model import Frame

# (file suffixes, function leaf names): the checkpoint-save signatures of views/catalog.py.
# fmt: off
SAVE_CALLS: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = (
    (("torch/serialization.py",),
     frozenset({"save", "_save", "_legacy_save", "_open_zipfile_writer", "write_record"})),
    (("torch/distributed/checkpoint/state_dict_saver.py",
      "torch/distributed/checkpoint/filesystem.py",
      "torch/distributed/checkpoint/_async_process_executor.py",
      "torch/distributed/checkpoint/_async_thread_executor.py"),
     frozenset({"save", "save_state_dict", "_save_state_dict", "async_save", "write_data",
                "_write_files_from_queue", "_write_item", "finish", "_execute_save"})),
    (("transformers/modeling_utils.py",), frozenset({"save_pretrained"})),
    (("transformers/trainer.py",),
     frozenset({"_save_checkpoint", "save_model", "_save", "_save_optimizer_and_scheduler",
                "_save_rng_state", "_save_tpu"})),
    (("deepspeed/runtime/engine.py",),
     frozenset({"save_checkpoint", "_save_checkpoint", "_save_zero_checkpoint",
                "save_16bit_model", "_save_moe_checkpoint"})),
    (("deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py",),
     frozenset({"save", "commit"})),
    (("accelerate/accelerator.py",), frozenset({"save_state", "save_model", "save"})),
    (("accelerate/checkpointing.py",),
     frozenset({"save_accelerator_state", "save_custom_state"})),
    (("safetensors/torch.py",), frozenset({"save_file", "save_model", "save"})),
    (("lightning/pytorch/trainer/trainer.py", "pytorch_lightning/trainer/trainer.py",
      "lightning/fabric/plugins/io/torch_io.py",
      "lightning/pytorch/callbacks/model_checkpoint.py",
      "pytorch_lightning/callbacks/model_checkpoint.py"),
     frozenset({"save_checkpoint", "_save_checkpoint", "_save_topk_checkpoint",
                "_save_last_checkpoint"})),
    (("megatron/checkpointing.py", "megatron/training/checkpointing.py"),
     frozenset({"save_checkpoint"})),
    (("megatron/core/dist_checkpointing/serialization.py",
      "megatron/core/dist_checkpointing/strategies/async_utils.py",
      "megatron/core/dist_checkpointing/strategies/state_dict_saver.py"),
     frozenset({"save", "sync_all_async_calls", "is_current_async_call_done",
                "schedule_async_call", "schedule_async_request", "maybe_finalize_async_calls",
                "execute_sync", "async_loop", "save_state_dict_async_plan",
                "save_state_dict_async_finalize"})),
)
# fmt: on


def _in_file(path: str, suffix: str) -> bool:
    return path == suffix or path.endswith("/" + suffix)


def is_save_call(frame: Frame) -> bool:
    """The frame is a checkpoint writer's entry: every deeper frame is inside the save."""
    if frame.native:
        return False
    path = frame.file.replace("\\", "/")
    leaf = frame.function_leaf
    return any(
        leaf in functions and any(_in_file(path, f) for f in files)
        for files, functions in SAVE_CALLS
    )
