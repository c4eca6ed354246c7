"""Where a traceback cut before its exception line still says where its thread was.

A paste that stops before the exception line has lost its innermost frames (python_tb.py
and headless.py drop such a stack: the frames left would pass an outer call for where the
thread was). CPython prints a traceback outermost first, so every frame shown encloses the
ones cut; when the innermost frame shown is a call whose deeper frames can only be inside
it, the thread was in that call:

* torch.distributed's own API (``distributed_c10d.py``);
* a framework's collective API, the wrappers the frame catalog names as collectives
  (DeepSpeed's ``deepspeed/comm/comm.py`` and its ``TorchBackend``, Accelerate's
  ``wait_for_everyone`` and gathers, Lightning's strategies, torchmetrics, Composer): each
  issues torch.distributed's collective below it (``deepspeed/comm/comm.py`` all_reduce →
  ``cdb.all_reduce`` → ``torch.distributed.all_reduce``);
* the standard library's file-system calls (os.makedirs, os.replace, shutil.*): below them
  there is only the system call;
* a checkpoint writer's entry (saves.py).

The framework wrappers are the frame catalog's collective signatures (views/catalog.py,
which this layer may not import); a test holds the two the same.
"""

from __future__ import annotations

from hangdoc.analyzer.model import Frame
from hangdoc.analyzer.parsers.stacks.saves import is_save_call

# torch.distributed's API: every function of the file (headless.py's since issue 14).
# Not c10d_logger.py's ``wrapper`` (the exception and time loggers that wrap each
# collective, and init_process_group, since torch 2.1): the frame names no call, and the
# frame catalog does not read it as a collective, so a stack cut there would read as a
# rank outside any collective (pytorch-131781's rank 8). headless.py keeps its older
# reading of it (WRAPPED_FILE).
_TORCH_COLLECTIVE_FILES = ("torch/distributed/distributed_c10d.py",)
WRAPPED_FILE = "torch/distributed/c10d_logger.py"
# (file suffixes, function leaf names): the collective signatures of views/catalog.py.
# fmt: off
COLLECTIVE_CALLS: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = (
    (("torch/distributed/distributed_c10d.py",),
     frozenset({"all_reduce", "all_reduce_coalesced", "all_reduce_multigpu", "all_gather",
                "all_gather_into_tensor", "_all_gather_base", "all_gather_coalesced",
                "all_gather_object", "all_gather_multigpu", "reduce_scatter",
                "reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter_multigpu",
                "broadcast", "broadcast_object_list", "broadcast_multigpu", "barrier",
                "monitored_barrier", "reduce", "gather", "gather_object", "scatter",
                "scatter_object_list", "all_to_all", "all_to_all_single", "send", "recv",
                "isend", "irecv", "batch_isend_irecv", "send_object_list",
                "recv_object_list"})),
    (("torch/distributed/_functional_collectives.py",
      "torch/distributed/_functional_collectives_impl.py"),
     frozenset({"wait_tensor", "all_reduce", "all_gather_tensor", "reduce_scatter_tensor",
                "all_to_all_single", "broadcast", "_wait_tensor", "wait"})),
    (("torch/nn/parallel/distributed.py",),
     frozenset({"_sync_buffers", "_sync_module_buffers", "_distributed_broadcast_coalesced",
                "_default_broadcast_coalesced", "_sync_params_and_buffers"})),
    (("deepspeed/comm/comm.py", "deepspeed/comm/torch.py"),
     frozenset({"all_reduce", "inference_all_reduce", "all_reduce_coalesced", "all_gather",
                "all_gather_into_tensor", "allgather_fn", "all_gather_coalesced",
                "reduce_scatter_tensor", "reduce_scatter_fn", "reduce_scatter", "broadcast",
                "barrier", "monitored_barrier", "all_to_all_single", "all_to_all", "send",
                "recv", "isend", "irecv", "gather", "scatter", "reduce"})),
    (("accelerate/utils/operations.py",),
     frozenset({"gather", "gather_object", "broadcast", "broadcast_object_list", "reduce",
                "pad_across_processes", "_gpu_gather", "_gpu_gather_one", "_gpu_broadcast"})),
    (("accelerate/state.py", "accelerate/accelerator.py"),
     frozenset({"wait_for_everyone", "gather", "gather_for_metrics", "reduce",
                "pad_across_processes"})),
    (("lightning/fabric/utilities/distributed.py",
      "lightning_fabric/utilities/distributed.py"),
     frozenset({"_sync_ddp", "_sync_ddp_if_available", "_all_gather_ddp_if_available",
                "_gather_all_tensors"})),
    (("lightning/fabric/strategies/ddp.py", "lightning/pytorch/strategies/ddp.py",
      "pytorch_lightning/strategies/ddp.py", "lightning/fabric/strategies/fsdp.py",
      "lightning/pytorch/strategies/fsdp.py"),
     frozenset({"barrier", "all_reduce", "broadcast", "reduce", "all_gather"})),
    (("torchmetrics/utilities/distributed.py",),
     frozenset({"gather_all_tensors", "_simple_gather_all_tensors"})),
    (("composer/utils/dist.py",),
     frozenset({"all_reduce", "all_gather", "all_gather_object", "barrier", "broadcast",
                "broadcast_object_list"})),
)
# fmt: on
# The standard library's file-system calls (os.makedirs, os.mkdir, os.replace, shutil.*):
# below them there is only the system call, so a cut traceback that stops there still says
# where the thread was (automodel PR 3686: "[rank8]: File "<frozen os>", line 225, in
# makedirs" under a checkpoint save, its FileExistsError line cut).
_FS_FILES = ("<frozen os>", "/os.py", "/shutil.py", "<frozen shutil>")


def _in_file(path: str, suffix: str) -> bool:
    return path == suffix or path.endswith("/" + suffix)


def is_collective_call(frame: Frame) -> bool:
    """The frame is torch.distributed's collective API or a framework's collective
    wrapper: every deeper frame is inside that collective."""
    if frame.native:
        return False
    path = frame.file.replace("\\", "/")
    if path.endswith(_TORCH_COLLECTIVE_FILES):
        return True
    leaf = frame.function_leaf
    return any(
        leaf in functions and any(_in_file(path, f) for f in files)
        for files, functions in COLLECTIVE_CALLS
    )


def leaf_call(frame: Frame) -> bool:
    """The innermost frame shown of a cut traceback is a call whose deeper frames can only
    be inside it: a collective, a file-system call, a checkpoint writer's entry."""
    return is_collective_call(frame) or frame.file.endswith(_FS_FILES) or is_save_call(frame)
