"""Frame signatures: which frames mean "in a collective", "saving a checkpoint", and so on.

Data, not logic: ``activity.py`` applies these. A signature matches a frame when the
frame's file ends with one of ``files`` (compared on whole path components, so a text
dump's bare ``distributed_c10d.py`` matches ``torch/distributed/distributed_c10d.py``)
and its function's last dotted part is in ``functions`` (``*`` = any function of that
file). Native frames match on ``native_substrings``.

Extend here when a framework adds a wrapper; keep one entry per framework file so the
report can say which framework the call went through.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from hangdoc.analyzer.views.activity_table import Activity


@dataclass(frozen=True, slots=True)
class Signature:
    activity: Activity
    framework: str
    files: tuple[str, ...]
    functions: frozenset[str] = frozenset({"*"})
    native_substrings: tuple[str, ...] = ()


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


_C10D_COLLECTIVES = _f(
    "all_reduce", "all_reduce_coalesced", "all_reduce_multigpu",
    "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_coalesced",
    "all_gather_object", "all_gather_multigpu",
    "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter_multigpu",
    "broadcast", "broadcast_object_list", "broadcast_multigpu",
    "barrier", "monitored_barrier",
    "reduce", "gather", "gather_object", "scatter", "scatter_object_list",
    "all_to_all", "all_to_all_single",
    "send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list", "recv_object_list",
)  # fmt: skip

_DS_COLLECTIVES = _f(
    "all_reduce", "inference_all_reduce", "all_reduce_coalesced", "all_gather",
    "all_gather_into_tensor", "allgather_fn", "all_gather_coalesced", "reduce_scatter_tensor",
    "reduce_scatter_fn", "reduce_scatter", "broadcast", "barrier", "monitored_barrier",
    "all_to_all_single", "all_to_all", "send", "recv", "isend", "irecv", "gather", "scatter",
    "reduce",
)  # fmt: skip

SIGNATURES: tuple[Signature, ...] = (
    # --- collectives -------------------------------------------------------------------
    Signature(Activity.COLLECTIVE, "torch.distributed", ("torch/distributed/distributed_c10d.py",),
              _C10D_COLLECTIVES),
    Signature(Activity.COLLECTIVE, "torch.distributed", (
        "torch/distributed/_functional_collectives.py",
        "torch/distributed/_functional_collectives_impl.py",
    ), _f("wait_tensor", "all_reduce", "all_gather_tensor", "reduce_scatter_tensor",
          "all_to_all_single", "broadcast", "_wait_tensor", "wait")),
    Signature(Activity.COLLECTIVE, "torch.nn.parallel (DDP)", ("torch/nn/parallel/distributed.py",),
              _f("_sync_buffers", "_sync_module_buffers", "_distributed_broadcast_coalesced",
                 "_default_broadcast_coalesced", "_sync_params_and_buffers")),
    Signature(Activity.COLLECTIVE, "DeepSpeed",
              ("deepspeed/comm/comm.py", "deepspeed/comm/torch.py"), _DS_COLLECTIVES),
    Signature(Activity.COLLECTIVE, "Accelerate", ("accelerate/utils/operations.py",),
              _f("gather", "gather_object", "broadcast", "broadcast_object_list", "reduce",
                 "pad_across_processes", "_gpu_gather", "_gpu_gather_one", "_gpu_broadcast")),
    Signature(Activity.COLLECTIVE, "Accelerate",
              ("accelerate/state.py", "accelerate/accelerator.py"),
              _f("wait_for_everyone", "gather", "gather_for_metrics", "reduce",
                 "pad_across_processes")),
    Signature(Activity.COLLECTIVE, "Lightning", (
        "lightning/fabric/utilities/distributed.py",
        "lightning_fabric/utilities/distributed.py",
    ), _f("_sync_ddp", "_sync_ddp_if_available", "_all_gather_ddp_if_available",
          "_gather_all_tensors")),
    Signature(Activity.COLLECTIVE, "Lightning", (
        "lightning/fabric/strategies/ddp.py", "lightning/pytorch/strategies/ddp.py",
        "pytorch_lightning/strategies/ddp.py", "lightning/fabric/strategies/fsdp.py",
        "lightning/pytorch/strategies/fsdp.py",
    ), _f("barrier", "all_reduce", "broadcast", "reduce", "all_gather")),
    Signature(Activity.COLLECTIVE, "torchmetrics", ("torchmetrics/utilities/distributed.py",),
              _f("gather_all_tensors", "_simple_gather_all_tensors")),
    Signature(Activity.COLLECTIVE, "Composer", ("composer/utils/dist.py",),
              _f("all_reduce", "all_gather", "all_gather_object", "barrier", "broadcast",
                 "broadcast_object_list")),
    # A native frame blocked on the c10d store (gdb/pstack/py-spy --native): the store's
    # client calls of torch/csrc/distributed/c10d/TCPStore.cpp (TCPStore::doGet, doWait,
    # get, wait, check; detail::TCPClient::receiveValue / receiveBits), the PrefixStore
    # that init_process_group wraps it in (PrefixStore.cpp), and the store barrier of
    # group creation. Listed before "native c10d" below, which would call them collectives:
    # a rank whose innermost torch frame is a store read is in the rendezvous.
    Signature(Activity.RENDEZVOUS, "native c10d store", (), frozenset(),
              ("c10d::TCPStore::", "c10d::detail::TCPClient::", "c10d::PrefixStore::get",
               "c10d::PrefixStore::wait", "c10d::PrefixStore::check", "c10d::Store::wait",
               "c10d::Store::get", "store_based_barrier", "storeBarrier")),
    Signature(Activity.COLLECTIVE, "native c10d", (), frozenset(),
              ("c10d::", "ProcessGroupNCCL", "ProcessGroupGloo", "gloo::", "ncclAllReduce",
               "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv")),
    # --- rendezvous / group creation -------------------------------------------------------
    Signature(Activity.RENDEZVOUS, "torch.distributed", ("torch/distributed/distributed_c10d.py",),
              _f("init_process_group", "new_group", "_new_group_with_tag", "_store_based_barrier",
                 "new_subgroups", "new_subgroups_by_enumeration", "init_device_mesh")),
    Signature(Activity.RENDEZVOUS, "torch.distributed", (
        "torch/distributed/rendezvous.py",
    )),
    Signature(Activity.RENDEZVOUS, "torch.distributed.elastic", (
        "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py",
        "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",
        "torch/distributed/elastic/utils/store.py",
        "torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py",
        "torch/distributed/elastic/rendezvous/etcd_rendezvous.py",
    )),
    # --- dataloader ---------------------------------------------------------------------
    Signature(Activity.DATALOADER_TEARDOWN, "torch.utils.data", ("torch/utils/data/dataloader.py",),
              _f("_shutdown_workers", "__del__", "_clean_up_worker")),
    Signature(Activity.DATALOADER_FETCH, "torch.utils.data", ("torch/utils/data/dataloader.py",),
              _f("__next__", "_next_data", "_get_data", "_try_get_data", "__iter__",
                 "_get_iterator", "__init__", "_reset", "_try_put_index")),
    Signature(Activity.DATALOADER_FETCH, "torch.utils.data", ("torch/utils/data/_utils/fetch.py",)),
    Signature(Activity.DATALOADER_WORKER, "torch.utils.data",
              ("torch/utils/data/_utils/worker.py",), _f("_worker_loop")),
    # --- checkpoint save ----------------------------------------------------------------
    Signature(Activity.CHECKPOINT_SAVE, "torch.save", ("torch/serialization.py",),
              _f("save", "_save", "_legacy_save", "_open_zipfile_writer", "write_record")),
    Signature(Activity.CHECKPOINT_SAVE, "torch.distributed.checkpoint", (
        "torch/distributed/checkpoint/state_dict_saver.py",
        "torch/distributed/checkpoint/filesystem.py",
        "torch/distributed/checkpoint/_async_process_executor.py",
        "torch/distributed/checkpoint/_async_thread_executor.py",
    ), _f("save", "save_state_dict", "_save_state_dict", "async_save", "write_data",
          "_write_files_from_queue", "_write_item", "finish", "_execute_save")),
    Signature(Activity.CHECKPOINT_SAVE, "Transformers", ("transformers/modeling_utils.py",),
              _f("save_pretrained")),
    Signature(Activity.CHECKPOINT_SAVE, "Transformers", ("transformers/trainer.py",),
              _f("_save_checkpoint", "save_model", "_save", "_save_optimizer_and_scheduler",
                 "_save_rng_state", "_save_tpu")),
    Signature(Activity.CHECKPOINT_SAVE, "DeepSpeed", ("deepspeed/runtime/engine.py",),
              _f("save_checkpoint", "_save_checkpoint", "_save_zero_checkpoint",
                 "save_16bit_model", "_save_moe_checkpoint")),
    Signature(Activity.CHECKPOINT_SAVE, "DeepSpeed", (
        "deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py",),
              _f("save", "commit")),
    Signature(Activity.CHECKPOINT_SAVE, "Accelerate", ("accelerate/accelerator.py",),
              _f("save_state", "save_model", "save")),
    Signature(Activity.CHECKPOINT_SAVE, "Accelerate", ("accelerate/checkpointing.py",),
              _f("save_accelerator_state", "save_custom_state")),
    Signature(Activity.CHECKPOINT_SAVE, "safetensors", ("safetensors/torch.py",),
              _f("save_file", "save_model", "save")),
    Signature(Activity.CHECKPOINT_SAVE, "Lightning", (
        "lightning/pytorch/trainer/trainer.py", "pytorch_lightning/trainer/trainer.py",
        "lightning/fabric/plugins/io/torch_io.py",
        "lightning/pytorch/callbacks/model_checkpoint.py",
        "pytorch_lightning/callbacks/model_checkpoint.py",
    ), _f("save_checkpoint", "_save_checkpoint", "_save_topk_checkpoint", "_save_last_checkpoint")),
    Signature(Activity.CHECKPOINT_SAVE, "Megatron", ("megatron/checkpointing.py",
                                                "megatron/training/checkpointing.py"),
              _f("save_checkpoint")),
    # Megatron-Core's dist_checkpointing (megatron/core/dist_checkpointing): serialization's
    # save, the async save's caller and queue (strategies/async_utils.py: every rank
    # all-reduces its writer's "is alive" in sync_all_async_calls, then the call index in
    # maybe_finalize_async_calls), and the torch-DCP plan/finalize it runs
    # (strategies/state_dict_saver.py).
    Signature(Activity.CHECKPOINT_SAVE, "Megatron", (
        "megatron/core/dist_checkpointing/serialization.py",
        "megatron/core/dist_checkpointing/strategies/async_utils.py",
        "megatron/core/dist_checkpointing/strategies/state_dict_saver.py",
    ), _f("save", "sync_all_async_calls", "is_current_async_call_done", "schedule_async_call",
          "schedule_async_request", "maybe_finalize_async_calls", "execute_sync", "async_loop",
          "save_state_dict_async_plan", "save_state_dict_async_finalize")),
    # --- checkpoint load ----------------------------------------------------------------
    Signature(Activity.CHECKPOINT_LOAD, "torch.load", ("torch/serialization.py",),
              _f("load", "_load", "_legacy_load")),
    # --- evaluation ---------------------------------------------------------------------
    Signature(Activity.EVAL, "Transformers", ("transformers/trainer.py",),
              _f("evaluate", "evaluation_loop", "prediction_loop", "predict",
                 "_maybe_log_save_evaluate")),
    Signature(Activity.EVAL, "Lightning", (
        "lightning/pytorch/loops/evaluation_loop.py", "pytorch_lightning/loops/evaluation_loop.py",
    )),
    # --- optimizer, CUDA, compile ---------------------------------------------------------
    Signature(Activity.OPTIMIZER_STEP, "torch.optim", ("torch/optim/optimizer.py",),
              _f("wrapper", "step", "_use_grad", "_group_tensors_by_device_and_dtype")),
    Signature(Activity.CUDA_SYNC, "torch.cuda", ("torch/cuda/__init__.py", "torch/cuda/streams.py"),
              _f("synchronize", "wait_event", "wait_stream", "query")),
    Signature(Activity.COMPILE, "torch.compile", ("torch/_dynamo/*", "torch/_inductor/*")),
    # --- waiting on something generic -------------------------------------------------------
    Signature(Activity.NETWORK_IO, "network", ("socket.py", "ssl.py", "http/client.py",
                                          "urllib3/connectionpool.py", "requests/sessions.py")),
    Signature(Activity.LOCK_WAIT, "threading", ("threading.py",),
              _f("wait", "acquire", "join", "_wait_for_tstate_lock")),
    Signature(Activity.LOCK_WAIT, "queue", ("queue.py",), _f("get", "put", "join")),
    Signature(Activity.SUBPROCESS_WAIT, "subprocess", ("subprocess.py",
                                                 "multiprocessing/popen_fork.py"),
              _f("wait", "_wait", "communicate", "poll", "run", "call", "check_call",
                 "check_output")),
)  # fmt: skip

# User functions whose names say what they do. Matched on the leaf function name of a
# frame in user code, after the framework signatures above found nothing better.
NAME_HINTS: tuple[tuple[Activity, re.Pattern[str]], ...] = (
    (Activity.CHECKPOINT_SAVE, re.compile(
        r"(?i)(save|write|dump|persist|upload)_?\w*(ckpt|checkpoint|state_?dict|model|weights)"
        r"|(ckpt|checkpoint)\w*_(save|write)|^(save|write)_?(ckpt|checkpoint)$")),
    # A name about a checkpoint is never evaluation: DeepSpeed's save_checkpoint runs
    # _checkpoint_tag_validation (checkpoint words first, as views/meaning.py reads names).
    (Activity.EVAL, re.compile(
        r"(?i)^(?!\w*(?:ckpt|checkpoint))(?:"
        r"_?(evaluate|evaluation|eval|validate|validation|val|test)(_\w+)?$"
        r"|_?\w+_(eval|evaluate|evaluation|validate|validation)$|(run|do)_(eval|validation)\w*$)")),
    (Activity.DATALOADER_FETCH, re.compile(r"(?i)^(get|fetch|next|load)_?(batch|data|sample)\w*$")),
)  # fmt: skip

# Path components that mark library (non-user) code.
LIBRARY_MARKERS: tuple[str, ...] = (
    "/site-packages/",
    "/dist-packages/",
    "<frozen ",
    "/lib/python3",
)

# Top-level packages whose files text dumps print by their path inside site-packages
# (py-spy text: "torch/distributed/distributed_c10d.py"; pystack and tracebacks of
# relative installs alike): such a relative path is a library frame, not the job's code.
LIBRARY_PACKAGES: frozenset[str] = frozenset({
    "torch", "torchvision", "torchaudio", "torchdata", "torchelastic", "functorch",
    "deepspeed", "transformers", "accelerate", "lightning", "pytorch_lightning",
    "lightning_fabric", "megatron", "apex", "transformer_engine", "vllm", "sglang", "ray",
    "trl", "peft", "datasets", "huggingface_hub", "safetensors", "tokenizers", "composer",
    "fairscale", "mmengine", "mmcv", "mmdet", "detectron2", "horovod", "colossalai", "nemo",
    "torchtitan", "torchtune", "torchrec", "triton", "numpy", "pandas", "xformers",
    "flash_attn", "bitsandbytes", "wandb", "tensorboard", "multiprocessing", "concurrent",
    "asyncio", "importlib", "json", "logging", "email", "http", "urllib", "encodings",
})  # fmt: skip

# Short file names of the standard library and torch that a text dump (which has no
# directory) still lets us recognise as library code.
LIBRARY_SHORT_FILES: frozenset[str] = frozenset({
    "threading.py", "queue.py", "socket.py", "selectors.py", "ssl.py", "subprocess.py",
    "connection.py", "queues.py", "synchronize.py", "popen_fork.py", "process.py",
    "pool.py", "runpy.py", "distributed_c10d.py", "c10d_logger.py", "dataloader.py",
    "serialization.py", "fetch.py", "worker.py", "optimizer.py", "module.py",
    "functional.py", "_tensor.py", "reductions.py", "contextlib.py", "__init__.py",
    "weakref.py", "tempfile.py", "shutil.py", "os.py", "io.py", "codecs.py", "logging.py",
    "functools.py", "typing.py", "signal.py", "time.py", "asyncio.py", "events.py",
    "base_events.py", "futures.py", "thread.py", "_base.py", "util.py", "utils.py",
})  # fmt: skip

# Canonical families of collective operations: two ranks in the same family are in the
# same collective on the wire (all_gather_object sends an all_gather first, and so on).
OP_FAMILIES: dict[str, str] = {
    "all_reduce": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "all_reduce_multigpu": "all_reduce", "inference_all_reduce": "all_reduce",
    "all_gather": "all_gather", "all_gather_into_tensor": "all_gather",
    "_all_gather_base": "all_gather", "all_gather_coalesced": "all_gather",
    "all_gather_object": "all_gather", "all_gather_multigpu": "all_gather",
    "allgather_fn": "all_gather", "all_gather_tensor": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_multigpu": "reduce_scatter",
    "reduce_scatter_fn": "reduce_scatter",
    "broadcast": "broadcast", "broadcast_object_list": "broadcast",
    "broadcast_multigpu": "broadcast",
    "barrier": "barrier", "monitored_barrier": "barrier",
    "reduce": "reduce", "gather": "gather", "gather_object": "gather",
    "scatter": "scatter", "scatter_object_list": "scatter",
    "all_to_all": "all_to_all", "all_to_all_single": "all_to_all",
    "send": "send", "isend": "send", "send_object_list": "send",
    "recv": "recv", "irecv": "recv", "recv_object_list": "recv",
    "batch_isend_irecv": "p2p",
    "init_process_group": "init_process_group", "new_group": "new_group",
    "_new_group_with_tag": "new_group", "_store_based_barrier": "new_group",
    "new_subgroups": "new_group", "new_subgroups_by_enumeration": "new_group",
}  # fmt: skip


# --- issue 7: causes that live in the stacks and the node ------------------------------
# Appended signatures (first match wins, so these only add frames nothing above knows).
SIGNATURES = (
    *SIGNATURES,
    # The training step: a rank here is still inside the epoch loop.
    Signature(Activity.TRAIN_LOOP, "torch.autograd", (
        "torch/autograd/graph.py", "torch/autograd/__init__.py", "torch/_tensor.py",
    ), _f("_engine_run_backward", "backward", "run_backward")),
    Signature(Activity.TRAIN_LOOP, "Transformers", ("transformers/trainer.py",),
              _f("_inner_training_loop", "training_step", "train")),
    Signature(Activity.TRAIN_LOOP, "Lightning", (
        "lightning/pytorch/loops/training_epoch_loop.py", "lightning/pytorch/loops/fit_loop.py",
        "lightning/pytorch/loops/optimization/automatic.py",
        "pytorch_lightning/loops/training_epoch_loop.py", "pytorch_lightning/loops/fit_loop.py",
    )),
    Signature(Activity.TRAIN_LOOP, "Accelerate", ("accelerate/accelerator.py",), _f("backward")),
    Signature(Activity.TRAIN_LOOP, "DeepSpeed", ("deepspeed/runtime/engine.py",),
              _f("backward", "step", "_take_model_step", "allreduce_gradients")),
    Signature(Activity.TRAIN_LOOP, "DeepSpeed", ("deepspeed/runtime/pipe/engine.py",),
              _f("train_batch", "_exec_schedule")),
    # Native frames (py-spy --native) of a thread blocked on a Python lock or the GIL.
    Signature(Activity.LOCK_WAIT, "CPython", (), frozenset(), (
        "PyThread_acquire_lock", "lock_PyThread_acquire_lock", "rlock_acquire",
        "acquire_timed", "_PyMutex_LockTimed", "_PySemaphore_Wait",
    )),
    Signature(Activity.GIL_WAIT, "CPython", (), frozenset(), (
        "take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread", "_PyEval_AcquireLock",
    )),
)  # fmt: skip

NAME_HINTS = (
    *NAME_HINTS,
    (Activity.TRAIN_LOOP, re.compile(
        r"(?i)^_?(train|training|fit)(_?(step|one_epoch|epoch|loop|batch|iter|iteration|model))?$"
        r"|^_?(run_)?train(ing)?_(step|epoch|one_epoch|loop|batch|iteration)\w*$"
        r"|^(backward_step|optimizer_step|forward_backward\w*)$")),
)  # fmt: skip

# A thread idle in these frames (innermost Python frame) waits for a collective the
# frame does not name: DDP's reducer all-reduces gradients from inside backward, so a
# DDP rank whose peers are missing sits idle in autograd. Only an *idle* thread counts:
# a backward that computes is active. (file, function, op family, how to call it)
IDLE_COLLECTIVE_FRAMES: tuple[tuple[str, str, str, str], ...] = (
    ("torch/autograd/graph.py", "_engine_run_backward", "all_reduce",
     "DDP backward"),
    ("torch/autograd/__init__.py", "backward", "all_reduce", "DDP backward"),
)  # fmt: skip

# A main thread whose innermost Python frame is one of these hosts the job's code, and runs
# none of it now: Ray's worker processes (actors such as Ray Train's RayTrainWorker) run
# ``Worker.main_loop`` (ray/_private/worker.py, called from
# ray/_private/workers/default_worker.py's module body, every Ray 1.x/2.x), which hands the
# thread to the core worker's task loop; an actor's training function runs in a thread of
# its own (Ray Train's RunnerThread / "TrainingThread(train_fn_per_worker)" in
# ray/train/v2/_internal/execution/worker_group/thread_runner.py), so what the process is
# doing is that thread's stack. (file, function)
HOST_LOOP_FRAMES: tuple[tuple[str, str], ...] = (
    ("ray/_private/worker.py", "main_loop"),
)  # fmt: skip

# User functions that synchronise gradients by hand: their all_reduce is the training
# step's gradient sync.
GRADIENT_SYNC_HINT = re.compile(
    r"(?i)(average|avg|all_?reduce|sync|reduce|mean)_?\w*grad|grad\w*_(average|all_?reduce|sync)"
)


class P2PKind(enum.StrEnum):
    """Which end of a point-to-point transfer a rank is (the c10d call's family)."""

    SEND = "send"
    RECV = "recv"


class PipeDirection(enum.StrEnum):
    """Which way a pipeline-parallel transfer goes: activations or gradients."""

    FORWARD = "forward"
    BACKWARD = "backward"


# Pipeline-parallel helpers whose name says the direction of a point-to-point transfer
# (Megatron p2p_communication, DeepSpeed pipe engine, hand-written schedules):
# (pattern on the function leaf, send or recv, forward or backward).
P2P_DIRECTION_HINTS: tuple[tuple[re.Pattern[str], P2PKind, PipeDirection], ...] = (
    (re.compile(r"(?i)^_?(exec_)?send_?(forward|activations?|acts?|fwd|outputs?)$"), P2PKind.SEND,
     PipeDirection.FORWARD),
    (re.compile(r"(?i)^_?(exec_)?recv_?(forward|activations?|acts?|fwd|inputs?)$"), P2PKind.RECV,
     PipeDirection.FORWARD),
    (re.compile(r"(?i)^_?(exec_)?send_?(backward|grads?|gradients?|bwd)$"), P2PKind.SEND,
     PipeDirection.BACKWARD),
    (re.compile(r"(?i)^_?(exec_)?recv_?(backward|grads?|gradients?|bwd)$"), P2PKind.RECV,
     PipeDirection.BACKWARD),
)  # fmt: skip

# Pipeline p2p helpers named for a transfer but not for its direction, kept where the
# framework's own path is not known to _PIPELINE_DIRS of HD048 (issue 21):
# * Megatron's shape exchange before a transfer, core/pipeline_parallel/p2p_communication.py
#   ``_communicate_shapes`` (batch_isend_irecv of the dims, then of the shape), and its
#   batched/unbatched launchers ``_batched_p2p_ops``/``_p2p_ops``, copied with their names
#   into other pipelines (xDiT's xfuser/core/distributed/group_coordinator.py
#   PipelineGroupCoordinator._communicate_shapes);
# * xDiT's PipelineGroupCoordinator (group_coordinator.py): ``pipeline_send``,
#   ``pipeline_isend``, ``pipeline_recv``, ``_pipeline_irecv``/``_pipeline_isend`` (and the
#   ``_skip`` variants), ``recv_next``/``recv_skip_next`` (posts the irecv from the previous
#   rank), ``get_pipeline_recv_data`` (waits on it).
PIPELINE_P2P_HELPERS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^_(communicate_shapes|batched_p2p_ops|p2p_ops)$"),
    re.compile(r"^_?pipeline_i?(send|recv)(_skip)?$"),
    re.compile(r"^(recv|send)(_skip)?_(next|prev)$"),
    re.compile(r"^get_pipeline_recv(_skip)?_data$"),
)

# A function whose name says it sends or receives (a word of it is send/recv/isend/irecv/
# receive): the caller of a broadcast that is a transfer between two stages. Pipelines
# without send/recv of their own backend emulate a transfer by a broadcast on a two-rank
# group: PipeDream's runtime/communication.py (_send/_recv -> dist.broadcast on the
# pair's sub_process_group, run by send_helper_thread/recv_helper_thread), DeepSpeed's
# runtime/pipe/p2p.py (send/recv -> dist.broadcast on the pair's group when not
# can_send_recv()). Read only for a broadcast's caller: alone, a name such as
# multiprocessing's ``_recv`` says nothing about torch.distributed.
TRANSFER_NAMED = re.compile(r"(?i)(^|_)(i?send|i?recv|receive)(_|$)")

# Host waits for the device's queued work (torch/cuda/__init__.py synchronize,
# torch/cuda/streams.py Stream/Event.synchronize): what the wait is for is the caller's.
# Megatron's _communicate_shapes (and its copies) calls torch.cuda.synchronize() right
# after batch_isend_irecv's works were waited on ("To protect against race condition when
# using batch_isend_irecv()"): a NCCL work's wait only makes the stream wait, so the host
# blocks in the synchronize until the receive's kernel completes. (file, functions)
DEVICE_SYNC_FRAMES: tuple[tuple[str, frozenset[str]], ...] = (
    ("torch/cuda/__init__.py", frozenset({"synchronize"})),
    ("torch/cuda/streams.py", frozenset({"synchronize", "wait_event", "wait_stream"})),
)

# A file lock's acquire (issue 21): its holder is the kernel's to say (views/waits.py).
# Python frames only: glibc's flock is told apart from stdio's _IO_flockfile by a
# pattern (views/wait_frames.py), which a substring cannot do.
SIGNATURES = (
    *SIGNATURES,
    Signature(Activity.FILE_LOCK, "filelock", (
        "filelock/_api.py", "filelock/_unix.py", "filelock/_core/_lock.py",
        "filelock/_native/_unix.py",
    ), _f("acquire", "_acquire", "__enter__", "_poll_acquire")),
    Signature(Activity.FILE_LOCK, "portalocker", ("portalocker/portalocker.py",
                                                  "portalocker/utils.py"),
              _f("lock", "acquire", "_get_lock", "__enter__")),
    Signature(Activity.FILE_LOCK, "fasteners", ("fasteners/process_lock.py",),
              _f("acquire", "_do_open", "__enter__")),
)  # fmt: skip
LIBRARY_PACKAGES = LIBRARY_PACKAGES | frozenset({"filelock", "portalocker", "fasteners"})
# Lock files polled for their existence (views/wait_frames.py POLLED_LOCKS, read from the
# libraries' sources): torch.utils.file_baton.FileBaton.wait, `while
# os.path.exists(self.lock_file_path): time.sleep(...)`, which cpp_extension.load (and the
# fused-kernel builds of Megatron, DeepSpeed, Apex... on top of it) waits in while another
# process builds. The file is the lock: a holder killed mid-build leaves it for good.
SIGNATURES = (
    *SIGNATURES,
    Signature(Activity.LOCK_FILE_POLL, "torch FileBaton", ("torch/utils/file_baton.py",),
              _f("wait")),
)  # fmt: skip

# Argument names of torch.distributed.send/recv (and wrappers) that hold the peer.
P2P_PEER_LOCALS: tuple[str, ...] = ("dst", "src", "peer", "group_dst", "group_src", "dest")

# Kernel wait channels (/proc/PID/task/TID/wchan), by what the thread waits for. Each
# pattern matches the start of the symbol (leading underscores ignored); the first kind
# that matches wins. Short prefixes (``ll_`` of Lustre) only match at the start, so
# ``do_epoll_wait`` is a poll, not Lustre.
WCHAN_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(r"^_*(?:" + "|".join(prefixes) + ")"))
    for kind, prefixes in (
        ("filesystem", (
            "nfs", "rpc_", "fuse", "request_wait_answer", "folio_wait", "wait_on_page",
            "lock_page", "folio_lock", "io_schedule", "jbd2", "xfs_", "ext4_", "btrfs_",
            "ceph", "ll_", "ptlrpc", "cl_sync_io", "osc_", "lov_", "mdc_", "gpfs", "mmfs",
            "percpu_rwsem", "sb_start_write", "blk_mq", "bit_wait_io", "wait_on_bit",
            "filemap_", "do_fsync", "vfs_fsync", "writeback", "wb_wait", "cifs", "smb2",
            "p9_", "v9fs", "beegfs", "wekafs", "lustre", "iomap_dio", "dio_",
        )),
        ("futex", ("futex",)),
        ("pipe", ("pipe_",)),
        ("socket", ("sk_wait", "inet_", "tcp_", "unix_", "sock_", "skb_")),
        ("poll", ("ep_poll", "do_epoll_wait", "poll_schedule", "do_select", "do_sys_poll")),
        ("sleep", ("hrtimer_nanosleep", "do_nanosleep", "clock_nanosleep")),
        ("child", ("do_wait", "kernel_wait4", "wait_for_vfork")),
        ("signal", ("sigsuspend", "do_sigtimedwait")),
    )
)  # fmt: skip

# A save's frames that wait for every rank's writer to finish (issue 21), each with the
# checkpoint-save signature above that it is part of: Megatron-Core's async save
# (megatron/core/dist_checkpointing/strategies/async_utils.py) asks every rank whether its
# background writer is still alive with a one-element all_reduce (sync_all_async_calls,
# from is_current_async_call_done, from AsyncCallsQueue.maybe_finalize_async_calls, which
# "must be called on all ranks"). A rank waiting in that collective has asked; the rank it
# waits for is one whose writer is still writing, not this one.
SAVE_COMPLETION_WAITS: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = (
    (("megatron/core/dist_checkpointing/strategies/async_utils.py",),
     _f("sync_all_async_calls", "is_current_async_call_done", "maybe_finalize_async_calls")),
)  # fmt: skip


# Appended for issue 21 (live-2026-11-28d, pool-worker-killed): the stdlib's calls that
# wait for a result a rank's own worker processes return (CPython 3.8-3.13,
# Lib/multiprocessing and Lib/concurrent/futures): a Pool's results (pool.py: Pool.apply,
# map and starmap call ApplyResult.get, which waits on an Event that the result-handler
# thread sets; IMapIterator.next for imap), a Queue's get (queues.py: Queue.get,
# SimpleQueue.get), a Connection's recv (connection.py), a Manager proxy's call to its
# server process (managers.py BaseProxy._callmethod), and the iterator
# ProcessPoolExecutor.map returns (concurrent/futures/process.py
# _chain_from_iterable_of_lists, above _base.py's Future.result). Not the waits for
# processes to end (Pool.join, connection.wait on their sentinels: a launcher such as
# torch.multiprocessing.spawn waits there for its ranks). Listed after the DataLoader's own
# frames: a DataLoader's Queue.get is its fetch (DATALOADER_FETCH, which names the cause
# first in rules/causes.py).
SIGNATURES = (
    *SIGNATURES,
    Signature(Activity.WORKER_RESULT, "multiprocessing", ("multiprocessing/pool.py",),
              _f("get", "wait", "next", "__next__", "apply", "map", "starmap")),
    Signature(Activity.WORKER_RESULT, "multiprocessing", ("multiprocessing/queues.py",),
              _f("get")),
    Signature(Activity.WORKER_RESULT, "multiprocessing", ("multiprocessing/connection.py",),
              _f("recv", "recv_bytes", "recv_bytes_into")),
    Signature(Activity.WORKER_RESULT, "multiprocessing", ("multiprocessing/managers.py",),
              _f("_callmethod")),
    Signature(Activity.WORKER_RESULT, "concurrent.futures", ("concurrent/futures/process.py",),
              _f("_chain_from_iterable_of_lists")),
)  # fmt: skip
