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

import enum
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from hangdoc.analyzer.payloads.launch import CodeStage
from hangdoc.analyzer.vocabulary import Phase

# A traceback frame line ('File "…", line N, in func'): the function's name.
_FRAME_FUNC = re.compile(r'^\s*File "[^"]*", line \d+, in (?P<func>[\w<>.]+)\s*$')
_FRAME_FILE = re.compile(r'^\s*File "(?P<file>[^"]*)", line \d+, in ')
# A source line under a frame: the names it calls ("trainer.train(", "train_one_step(").
# Also a function looked up by its name and called at once, as ctypes bindings do
# (vLLM's and SGLang's pynccl_wrapper: 'self._funcs["ncclCommInitRank"](…').
_CALLED = re.compile(
    r"(?:^|[\s.=(,])(?P<name>[A-Za-z_]\w*)\s*\(|\[[\"'](?P<looked_up>[A-Za-z_]\w*)[\"']\]\("
)

# torch.distributed's set-up entry points (distributed_c10d.py: init_process_group,
# new_group, new_subgroups, _new_process_group_helper, _store_based_barrier;
# rendezvous.py: rendezvous, _create_c10d_store; device_mesh.py: init_device_mesh;
# elastic's next_rendezvous; rpc/__init__.py: init_rpc) and the frameworks' wrappers
# named after them (init_distributed, init_torch_distributed, initialize_model_parallel,
# setup_distributed …).
_SETUP_NAME = re.compile(
    r"_?(?:init_process_group|new_group|new_subgroups\w*|_?new_process_group_helper"
    r"|_?store_based_barrier|_?create_c10d_store|\w*rendezvous\w*|init_device_mesh"
    r"|\w*init\w*_distributed\w*|init_dist|initialize_model_parallel|setup_distributed"
    r"|init_distributed_environment"
    # torch.distributed.rpc's (rpc/__init__.py init_rpc, _init_rpc_backend)
    r"|init_rpc|_init_rpc_backend)"
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
        stage = _stage_of_name(m.group("name") or m.group("looked_up"))
        if stage is not None:
            found = stage
    return found


# The stages of any exception's traceback (frame_stage), beyond the store's two: the
# names the libraries give the calls of each stage.
# * Set-up also: DDP's constructor and the helpers it runs to broadcast the parameters
#   before any step (torch/nn/parallel/distributed.py: DistributedDataParallel.__init__
#   calls _sync_module_states, torch/distributed/utils.py; _sync_params_and_buffers
#   before torch 1.12; its shape check is a check across ranks, below), and the
#   CUDA device's own set-up (torch/cuda/__init__.py: _lazy_init, set_device).
_SETUP_MORE = re.compile(
    r"DistributedDataParallel|_sync_module_states"
    r"|_sync_params_and_buffers|_lazy_init|set_device"
    # the stores the rendezvous creates (elastic's c10d_rendezvous_backend.py
    # _create_tcp_store, rendezvous.py _create_c10d_store) and their constructors
    r"|_?create_\w*store|TCPStore|FileStore"
    # Lightning's (lightning_fabric/utilities/distributed.py _init_dist_connection), FSDP's
    # (torch/distributed/fsdp/_init_utils.py _init_process_group_state,
    # _sync_module_params_and_buffers) and vLLM's (ensure_model_parallel_initialized)
    r"|_?init_dist_connection|_init_process_group_state\w*|_sync_module_params_and_buffers"
    r"|ensure_model_parallel_initialized"
    # NCCL's own API that creates a communicator (nccl.h: ncclGetUniqueId,
    # ncclCommInitRank, ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommInitAll,
    # ncclCommSplit), called through ctypes by vLLM's and SGLang's pynccl wrappers, and
    # vLLM's builder of its parallel groups (vllm/distributed/parallel_state.py:
    # init_model_parallel_group, whose GroupCoordinator creates the communicators)
    r"|ncclGetUniqueId|ncclCommInit\w*|ncclCommSplit|init_model_parallel_group"
    # vLLM's picker of a free port for its workers' rendezvous (vllm/utils.py
    # get_open_port, 0.5–0.11; vllm/utils/network_utils.py get_open_ports_list in 0.33):
    # its callers build the distributed_init_method the workers' init_process_group
    # dials (executor/multiproc_executor.py, ray_executor.py: get_distributed_init_method(
    # ip, get_open_port())) and the data-parallel master ports (v1/engine/core_client.py)
    r"|get_open_ports?(?:_list)?"
)
# Frames whose file says set-up whatever the function: torch.distributed's rendezvous
# (torch/distributed/rendezvous.py, torch/distributed/elastic/rendezvous/) and DDP's
# constructor (torch/nn/parallel/distributed.py, in __init__: it broadcasts the
# parameters from rank 0 before any step, _dist_broadcast_coalesced before torch 1.1).
# NeMo 0.x's NeuralModuleFactory constructor (nemo/core/neural_factory.py __init__, NVIDIA/NeMo
# at 069dd10: every NeMo 0.x script builds one first) calls init_process_group, then an
# all_reduce of whether each rank got its GPU, the default group's first collective, where
# torch creates the NCCL communicator, then broadcasts the experiment's directory.
_SETUP_FRAME = re.compile(
    r'^\s*File "[^"]*(?:torch/(?:distributed/(?:rendezvous\.py|elastic/rendezvous/)[^"]*"'
    r'|nn/parallel/distributed\.py", line \d+, in __init__\s*$)'
    r'|nemo/core/neural_factory\.py", line \d+, in __init__\s*$)'
)
# * Teardown: torch.distributed's destroy_process_group, a destructor, the interpreter's
#   exit handlers (atexit's _exitfunc, concurrent.futures' _python_exit), a shutdown.
_TEARDOWN_NAME = re.compile(
    r"destroy_process_group|__del__|_?shutdown\w*|_exitfunc|_python_exit|_atexit\w*"
)
# * A checkpoint saved: torch.save, save_checkpoint, _save_checkpoint, save_model,
#   save_pretrained, Lightning's _save, DCP's save_state_dict …
_SAVE_NAME = re.compile(r"_*(?:\w+_)?save(?:_\w+)?")
# * A checkpoint loaded or resumed: load_checkpoint, load_state_dict, from_pretrained,
#   resume_from_checkpoint, composer's _download_checkpoint, restore_checkpoint … (not a
#   bare ``load``: json's, pickle's and yaml's too).
_LOAD_NAME = re.compile(
    r"_*(?:\w+_)?(?:load|download|restore)_(?:checkpoint|ckpt)\w*"
    r"|_*(?:\w+_)?load_state_dict\w*|from_pretrained|_*(?:\w+_)?resume\w*|_*load_model\w*"
)
# * A batch fetched: torch/utils/data/dataloader.py's _next_data, _try_get_data,
#   _process_data (the worker's exception re-raised in the main process), the dataset's
#   __getitem__/__getitems__ (_utils/fetch.py), the collate function.
_DATA_NAME = re.compile(r"_next_data|_try_get_data|_process_data|__getitems?__|\w*collate\w*")
# * Evaluation: evaluate, evaluation_loop, validation_step, run_validation, eval_step,
#   test_step, prediction_step …
_EVAL_NAME = re.compile(
    r"_*(?:\w+_)?evaluat\w*|_*(?:\w+_)?validation\w*|_*validate_epoch|_*(?:do|run)_eval\w*"
    r"|_*eval_(?:step|loop|epoch|model|one_epoch)\w*|test_step|prediction_step|val_step"
)


# * A check across the ranks: DDP's construction compares every parameter's shape with
#   rank 0's (torch/distributed/utils.py _verify_param_shape_across_processes, the C++
#   dist._verify_params_across_processes, 1.9-1.10's dist._verify_model_across_ranks:
#   "params[i] in this process with sizes … appears not to match sizes of the same param
#   in process 0"; the set-up entry points' table holds them, stage rank_check, each
#   release's names), FSDP compares the order of its all-gathers
#   (torch/distributed/fsdp/_exec_order_utils.py _check_order: "Forward order differs
#   across ranks"). What they raise is the ranks found to differ.
_RANK_CHECK_NAME = re.compile(r"_check_order")


# * A child process being started, in the process that starts it: CPython's
#   multiprocessing start path (multiprocessing/process.py BaseProcess.start →
#   context.py _Popen → popen_fork.py / popen_spawn_posix.py / popen_forkserver.py /
#   popen_spawn_win32.py Popen.__init__ → _launch: os.fork(), util.spawnv_passfds →
#   _posixsubprocess.fork_exec, the process object pickled for the child). torch's
#   DataLoader starts its workers so (torch/utils/data/dataloader.py
#   _MultiProcessingDataLoaderIter.__init__: ``w.daemon = True; w.start()``). Only the
#   starting side: a spawned child failing in its own start-up (multiprocessing/spawn.py
#   spawn_main → _main, unpickling what its parent sent) may be a rank that
#   torch.multiprocessing started, or a child whose parent died while it started.
_WORKER_START_FRAME = re.compile(
    r'^\s*File "[^"]*multiprocessing/(?:'
    r'(?:popen_fork|popen_spawn_posix|popen_forkserver|popen_spawn_win32)\.py", line \d+, '
    r"in (?:__init__|_launch)"
    r'|util\.py", line \d+, in spawnv_passfds'
    r'|process\.py", line \d+, in start'
    r'|context\.py", line \d+, in _Popen'
    r")\s*$"
)


class Starter(enum.Enum):
    """Who starts the child processes a traceback's frames show being started."""

    DATALOADER = "dataloader"  # torch/utils/data/dataloader.py: its workers
    # the ranks themselves (torch/multiprocessing/spawn.py start_processes, its
    # start_process, spawn), a Pool's or an executor's workers (multiprocessing/pool.py,
    # concurrent/futures/process.py)
    OTHER = "other"


_DATALOADER_FRAME = re.compile(r'^\s*File "[^"]*torch/utils/data/dataloader\.py", line \d+')
_OTHER_STARTER_FRAME = re.compile(
    r'^\s*File "[^"]*(?:torch/multiprocessing/spawn\.py", line \d+, in '
    r"(?:start_processes|start_process|spawn)\s*$"
    r'|multiprocessing/pool\.py"|concurrent/futures/process\.py")'
)


# A DataLoader worker's own loop (torch/utils/data/_utils/worker.py _worker_loop: it
# fetches each batch and wraps what the dataset raised in an ExceptionWrapper "in
# DataLoader worker process N", which the main process re-raises): a traceback with this
# frame was raised in the worker process (the "Original Traceback" torch prints).
_LOADER_WORKER_FRAME = re.compile(
    r'^\s*File "[^"]*torch/utils/data/_utils/worker\.py", line \d+, in _worker_loop\s*$'
)


def loader_worker_frame(text: str) -> bool:
    """Whether a traceback's frame line is a DataLoader worker's own loop."""
    return _LOADER_WORKER_FRAME.match(text) is not None


def frame_starter(text: str) -> Starter | None:
    """Who a traceback's frame line shows starting child processes (None: no one). The
    innermost such frame of a traceback is the one that started the child."""
    if _DATALOADER_FRAME.match(text):
        return Starter.DATALOADER
    if _OTHER_STARTER_FRAME.match(text):
        return Starter.OTHER
    return None


# * A "rank 0 first" gate, entered (the `with` line of the caller, or the gate's own frame
#   over its barrier): transformers' training_args.py TrainingArguments.main_process_first
#   and local_main_process_first ("if not is_main_process: dist.barrier()" before it
#   yields), accelerate's state.py PartialState.main_process_first /
#   local_main_process_first (wait_for_everyone), ultralytics' utils/torch_utils.py and
#   YOLOv5's utils/torch_utils.py torch_distributed_zero_first ("if local_rank not in {-1,
#   0}: dist.barrier(device_ids=[local_rank])"). A rank raising there was held while the
#   main process did the gated work (a dataset's preparation, a cache).
_ZERO_FIRST_NAME = re.compile(r"(?:local_)?main_process_first|torch_distributed_zero_first")


# * A serving worker's device set-up (vllm/v1/worker/gpu_worker.py and V0's
#   vllm/worker/worker.py Worker.init_device, called through worker_base.py's
#   WorkerWrapperBase.init_device by the executors: torch.cuda.set_device, the bf16 check
#   _check_if_gpu_supports_dtype, the free-memory snapshot, then
#   init_worker_distributed_environment → init_distributed_environment and
#   ensure_model_parallel_initialized, which create the NCCL communicators). Its own
#   stage, not set-up: a frame under it that names the distributed set-up says SETUP.
_DEVICE_INIT_NAME = re.compile(r"init_device")
# * An RL framework's worker building its model (CodeStage.WORKER_INIT), the method its
#   controller calls once on each worker before any step: verl's init_model
#   (verl/workers/fsdp_workers.py and megatron_workers.py, every worker class; the process
#   group is created in the worker's __init__ without a device, so its first collective,
#   _build_model_optimizer's barrier or FSDP's sync, creates the NCCL communicator),
#   SkyRL's init_model (skyrl_train/workers: strategy.setup_distributed(), then the
#   model's FSDP wrapping), OpenRLHF's init_model_from_pretrained (trainer/ray:
#   _setup_distributed, then DeepSpeed's initialize, which broadcasts the model).
_WORKER_INIT_NAME = re.compile(r"init_model(?:_from_pretrained)?")


# The set-up entry points read from the sources of torch.distributed and of the
# frameworks (data/stages/setup_entry_points.json: project, file, function, stage, the
# repository and release it was read from). A frame of one of them, in its file where the
# table names one (a constructor, ``__init__``, is set-up only in its own file:
# PyNcclCommunicator's, CustomAllreduce's, GroupCoordinator's, DDP's), shows its stage.
ENTRY_POINTS_FILE = (
    Path(__file__).resolve().parents[1] / "catalog" / "data" / "stages" / "setup_entry_points.json"
)


@dataclass(frozen=True, slots=True)
class EntryPoints:
    """The table, by function: the stage of a name wherever it is defined, and the
    (file suffix, stage) pairs of a name that shows a stage only in its own file."""

    by_name: dict[str, CodeStage]
    in_file: dict[str, tuple[tuple[str, CodeStage], ...]]

    def stage(self, file: str | None, function: str) -> CodeStage | None:
        """The stage of a frame of ``function`` in ``file`` (None: not an entry point)."""
        if file is not None:
            path = file.replace("\\", "/")
            for suffix, stage in self.in_file.get(function, ()):
                if path.endswith(suffix):
                    return stage
        return self.by_name.get(function)


@functools.cache
def entry_points(path: Path = ENTRY_POINTS_FILE) -> EntryPoints:
    """The set-up entry points' table, read once."""
    data = json.loads(path.read_text(encoding="utf-8"))
    by_name: dict[str, CodeStage] = {}
    in_file: dict[str, list[tuple[str, CodeStage]]] = {}
    for entry in data["entries"]:
        stage = CodeStage(entry["stage"])
        if entry["file"] is None:
            by_name[entry["function"]] = stage
        else:
            in_file.setdefault(entry["function"], []).append((entry["file"], stage))
    return EntryPoints(by_name, {name: tuple(pairs) for name, pairs in in_file.items()})


def _code_stage_of_name(name: str) -> CodeStage | None:
    named = entry_points().by_name.get(name)
    if named is not None:
        return named
    if _DEVICE_INIT_NAME.fullmatch(name):
        return CodeStage.DEVICE_INIT
    if _WORKER_INIT_NAME.fullmatch(name):
        return CodeStage.WORKER_INIT
    if _ZERO_FIRST_NAME.fullmatch(name):
        return CodeStage.RANK_ZERO_FIRST
    if _RANK_CHECK_NAME.fullmatch(name):
        return CodeStage.RANK_CHECK
    if _TEARDOWN_NAME.fullmatch(name):
        return CodeStage.TEARDOWN
    if _SETUP_NAME.fullmatch(name) or _SETUP_MORE.fullmatch(name):
        return CodeStage.SETUP
    if _SAVE_NAME.fullmatch(name):
        return CodeStage.CHECKPOINT_SAVE
    if _LOAD_NAME.fullmatch(name):
        return CodeStage.CHECKPOINT_LOAD
    if _DATA_NAME.fullmatch(name):
        return CodeStage.DATA
    if _EVAL_NAME.fullmatch(name):
        return CodeStage.EVAL
    if _TRAIN_NAME.fullmatch(name):
        return CodeStage.TRAIN
    return None


def called_stage(name: str) -> CodeStage | None:
    """The stage a call named by a framework's own report shows, read as a frame's
    function is: vLLM's WorkerWrapperBase.execute_method logs the worker method the driver
    called by its name ("Error executing method init_device. …", V0's "Exception in worker
    … while processing method init_device."), the call the exception of that record was
    raised in, though its traceback (often cut) may show no frame under it."""
    name = name.strip().strip("'\"`")
    if not name.isidentifier() and not all(part.isidentifier() for part in name.split(".")):
        return None  # not a name (a callable's repr, a pickled function)
    return _code_stage_of_name(name.rsplit(".", 1)[-1])


def frame_stage(text: str) -> CodeStage | None:
    """The stage one line of any traceback names: its frame's function, else the
    innermost call of its source line that names one. Read for every line of a
    traceback, outermost first, the last one that names a stage is the stage it was
    raised in."""
    frame = _FRAME_FUNC.match(text)
    if frame is not None:
        if _SETUP_FRAME.match(text):
            return CodeStage.SETUP
        if _WORKER_START_FRAME.match(text):
            return CodeStage.WORKER_START
        function = frame.group("func").rsplit(".", 1)[-1]
        file = _FRAME_FILE.match(text)
        in_file = entry_points().stage(file.group("file") if file else None, function)
        if in_file is not None:
            return in_file
        return _code_stage_of_name(function)
    found: CodeStage | None = None
    for m in _CALLED.finditer(text):
        stage = _code_stage_of_name(m.group("name") or m.group("looked_up"))
        if stage is not None:
            found = stage
    return found


# A frame of torch.distributed's collective API (torch/distributed/distributed_c10d.py:
# all_reduce, broadcast, barrier, all_gather*, reduce_scatter*, gather, scatter, send,
# recv, the object collectives, monitored_barrier …), or the exception logger that wraps
# each of them since torch 2.1 (torch/distributed/c10d_logger.py: _exception_logger's
# ``wrapper``). An exception whose innermost frame is one was raised by the call that
# waited for the other ranks (a timeout, a peer's abort, an asynchronous CUDA error of an
# earlier kernel surfacing at the collective's synchronisation).
_COLLECTIVE_FRAME = re.compile(
    r'^\s*File "[^"]*torch/distributed/(?:distributed_c10d|c10d_logger)\.py", line \d+, '
    r"in (?:wrapper|all_reduce\w*|all_gather\w*|_all_gather_base|broadcast\w*|reduce"
    r"|reduce_scatter\w*|_reduce_scatter_base|gather\w*|scatter\w*|all_to_all\w*|barrier"
    r"|monitored_barrier|send\w*|recv\w*|isend|irecv|batch_isend_irecv|_object_to_tensor"
    r"|_tensor_to_object)\s*$"
)


def collective_frame(text: str) -> bool:
    """Whether a traceback's frame line is one of torch.distributed's collectives."""
    return _COLLECTIVE_FRAME.match(text) is not None


# In a collective, the wait for the other ranks: the frame of a call whose work is the
# waiting (barrier, monitored_barrier), or the source line under a collective's frame that
# waits on its work (distributed_c10d.py: ``work.wait()`` in every synchronous collective).
_WAITING_FRAME = re.compile(r", in (?:barrier|monitored_barrier)\s*$")
_WAITING_LINE = re.compile(r"^\s*\w*\.wait\(")


def waiting_frame(text: str) -> bool:
    """Whether a collective's frame line is one whose work is waiting (a barrier)."""
    return _WAITING_FRAME.search(text) is not None


def waiting_line(text: str) -> bool:
    """Whether a source line under a collective's frame waits on its work."""
    return _WAITING_LINE.match(text) is not None
