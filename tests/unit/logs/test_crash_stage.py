"""Where an exception was raised, read from its traceback for every exception: the stage
its frames show (tb_stage.frame_stage, ExceptionRaised.stage) and whether a collective of
torch.distributed raised it, in its wait for the others or refusing its own arguments
(ExceptionRaised.in_collective, in_wait). The deaths view and HD030 decide on them: a
set-up's exception names the set-up's failure, a teardown's and a wait's are no death of
their own, an exception of no sign and no stage is stated weaker.

Inputs: the recorded scenarios of fixtures/logs/record.py (setup_crash, teardown_error,
collective_arg_error, rank_crash: torch 2.13's own tracebacks), and single frame lines
in CPython's documented traceback format ('File "…", line N, in func', then the source
line) with the function names of the libraries' sources cited in tb_stage.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, Evidence, Strength
from hangdoc.analyzer.parsers.catalog.loader import CatalogRow, default_catalog
from hangdoc.analyzer.parsers.catalog.template import sample
from hangdoc.analyzer.parsers.logs.errors import catalog_meaning
from hangdoc.analyzer.parsers.logs.tb_stage import (
    collective_frame,
    frame_stage,
    waiting_frame,
    waiting_line,
)
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from hangdoc.analyzer.views.deaths import DeathHow, first_deaths
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.paste_mangling import COMBINED, MANGLINGS, Mangling
from tests.unit.logs.helpers import RECORDED, events, parse

_C10D = "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


@pytest.mark.parametrize(
    ("line", "stage"),
    [
        (f'  File "{_C10D}", line 5863, in new_group', CodeStage.SETUP),
        (f'  File "{_C10D}", line 1, in init_process_group', CodeStage.SETUP),
        (
            '  File "/t/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", '
            "line 156, in _create_tcp_store",
            CodeStage.SETUP,
        ),
        ('  File "/t/torch/nn/parallel/distributed.py", line 150, in __init__', CodeStage.SETUP),
        ('  File "/t/torch/nn/parallel/distributed.py", line 900, in forward', None),
        ("    model = DistributedDataParallel(model, device_ids=[rank])", CodeStage.SETUP),
        ("    torch.cuda.set_device(local_rank)", CodeStage.SETUP),
        ("    _init_dist_connection(self.cluster_environment, backend)", CodeStage.SETUP),
        (
            '  File "/w/composer/trainer/checkpoint.py", line 198, in _download_checkpoint',
            CodeStage.CHECKPOINT_LOAD,
        ),
        (f'  File "{_C10D}", line 2382, in destroy_process_group', CodeStage.TEARDOWN),
        ('  File "/job/engine.py", line 9, in __del__', CodeStage.TEARDOWN),
        ('  File "/job/loop.py", line 9, in save_checkpoint', CodeStage.CHECKPOINT_SAVE),
        ("    torch.save(state, path)", CodeStage.CHECKPOINT_SAVE),
        ("    model.load_state_dict(sd)", CodeStage.CHECKPOINT_LOAD),
        ("    trainer.train(resume_from_checkpoint=ckpt)", CodeStage.TRAIN),
        (
            '  File "/t/torch/utils/data/dataloader.py", line 1, in _next_data',
            CodeStage.DATA,
        ),
        ('  File "/job/data.py", line 9, in __getitem__', CodeStage.DATA),
        ('  File "/t/transformers/trainer.py", line 1, in evaluation_loop', CodeStage.EVAL),
        ('  File "/job/loop.py", line 1, in validation_step', CodeStage.EVAL),
        (
            '  File "/t/torch/distributed/utils.py", line 286, in '
            "_verify_param_shape_across_processes",
            CodeStage.RANK_CHECK,
        ),
        ("    return dist._verify_params_across_processes(pg, tensors)", CodeStage.RANK_CHECK),
        (
            '  File "/t/torch/distributed/fsdp/_exec_order_utils.py", line 1, in _check_order',
            CodeStage.RANK_CHECK,
        ),
        ('  File "/job/run.py", line 1, in main', None),
        ("    model.eval()", None),  # switching a module's mode is not evaluating
        ("    cfg = json.load(fh)", None),  # a bare load is no checkpoint's
        ('  File "/job/args.py", line 1, in validate_args', None),
    ],
)
def test_frame_stage(line: str, stage: CodeStage | None) -> None:
    assert frame_stage(line) == stage


def test_collective_frames() -> None:
    assert collective_frame(f'  File "{_C10D}", line 3252, in all_reduce')
    assert collective_frame('  File "/v/torch/distributed/c10d_logger.py", line 83, in wrapper')
    assert collective_frame(f'  File "{_C10D}", line 1, in barrier')
    assert waiting_frame(f'  File "{_C10D}", line 1, in barrier')
    assert not collective_frame(f'  File "{_C10D}", line 5863, in new_group')
    assert not collective_frame('  File "/job/comm.py", line 1, in all_reduce')
    assert waiting_line("    work.wait()")
    assert not waiting_line("    work = group.broadcast([tensor], opts)")


def _raised(scenario: str) -> dict[int | None, ExceptionRaised]:
    found = {}
    for rank, event in events(parse(RECORDED / f"{scenario}.log"), "exception"):
        assert isinstance(event.payload, ExceptionRaised)
        found[rank] = event.payload
    return found


def test_recorded_tracebacks_read() -> None:
    setup = _raised("setup_crash")[1]
    assert setup.stage is CodeStage.SETUP and not setup.in_collective
    teardown = _raised("teardown_error")[1]
    assert teardown.stage is CodeStage.TEARDOWN
    refused = _raised("collective_arg_error")
    assert refused[1].in_collective and not refused[1].in_wait  # its own argument
    assert refused[0].in_collective and refused[0].in_wait  # waiting for rank 1
    checked = _raised("ddp_model_mismatch")
    assert checked[1].stage is CodeStage.RANK_CHECK  # DDP's shape check found it differs
    assert checked[0].stage is CodeStage.SETUP  # rank 0's broadcast then lost its peer
    crash = _raised("rank_crash")
    assert crash[1].stage is None and not crash[1].in_collective
    assert crash[0].in_wait


def _deaths(scenario: str) -> list[tuple[DeathHow, int | None, bool]]:
    evidence = load_paths([RECORDED / f"{scenario}.log"])
    return [(d.how, d.rank, d.read) for d in first_deaths(Timeline(evidence))]


def test_deaths_by_stage() -> None:
    # Teardown's exception is no death, nor the exit torchrun reports for it.
    assert _deaths("teardown_error") == []
    # A check across ranks reports that they differ; the peer's lost connection follows.
    assert _deaths("ddp_model_mismatch") == []
    # A collective refusing rank 1's argument is rank 1's own failure, its place read;
    # rank 0's wait reporting the closed peer is none.
    assert _deaths("collective_arg_error") == [(DeathHow.EXCEPTION, 1, True)]
    # The job's own exception in its own function: a death, nothing read of its place.
    assert _deaths("rank_crash") == [(DeathHow.EXCEPTION, 1, False)]


def _hd030(paths: list[Path]) -> tuple[Category, tuple[int, ...], Strength] | None:
    for finding in analyze(load_paths(paths)).findings:
        if finding.rule == "HD030":
            return finding.category, finding.culprit_ranks, finding.strength
    return None


def test_hd030_by_stage() -> None:
    assert _hd030([RECORDED / "setup_crash.log"]) == (
        Category.NCCL_INIT,
        (1,),
        Strength.SIGNAL,
    )
    assert _hd030([RECORDED / "teardown_error.log"]) is None
    # Same job, same death, stated one step apart: a collective's refusal says where it
    # failed (signal), an exception of the job's own with no stage does not (hint).
    assert _hd030([RECORDED / "collective_arg_error.log"]) == (
        Category.RANK_DEAD,
        (1,),
        Strength.SIGNAL,
    )
    assert _hd030([RECORDED / "rank_crash.log"]) == (Category.RANK_DEAD, (1,), Strength.HINT)


_SCENARIOS = ("setup_crash", "teardown_error", "collective_arg_error", "ddp_model_mismatch")


@pytest.mark.parametrize("mangling", [*MANGLINGS, *COMBINED], ids=lambda m: m.name)
def test_stage_survives_manglings(tmp_path: Path, mangling: Mangling) -> None:
    """Metamorphic: a paste's layers (quote, indent, wrap, shippers, cut first line…) leave
    what HD030 reads of where the exception was raised as it was: the same answer at the
    same strength, or none where there was none (each of these survives every layer
    whole; the issue asks for the same answer or a less specific one, never another)."""
    for scenario in _SCENARIOS:
        original = _hd030([RECORDED / f"{scenario}.log"])
        text = (RECORDED / f"{scenario}.log").read_text(encoding="utf-8")
        path = tmp_path / f"{scenario}.txt"
        path.write_text(mangling.apply(text), encoding="utf-8", newline="")
        assert _hd030([path]) == original, scenario


@pytest.mark.parametrize(
    ("said", "category"),
    [
        # CUDA's error strings (the catalog's cuda rows, cudaGetErrorString of libcudart)
        (
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            Category.RANK_DEAD,
        ),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", Category.GPU_HARDWARE),
        # the job's own words: no library prints them
        ("ValueError: bad batch shape at step 2: expected 8 got 7", None),
    ],
)
def test_catalog_meaning_of_an_exception(said: str, category: Category | None) -> None:
    meant = catalog_meaning(said)
    assert (meant[0] if meant is not None else None) == category


def _raised_text(message: str) -> str:
    """An uncaught exception with ``message`` as CPython prints it under torch ≥ 2.3's
    rank prefix (the form of fixtures/logs/recorded/rank_crash.log)."""
    return (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/job/train.py", line 10, in <module>\n'
        "[rank1]:     main()\n"
        f"[rank1]: RuntimeError: {message}\n"
    )


def _evidence_of(text: str) -> Evidence:
    """``text`` as a loose file handed to the loader (a paste)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "console.log"
        path.write_text(text, encoding="utf-8")
        return load_paths([path])


def _catalog_rows(projects: set[str]) -> list[CatalogRow]:
    return [row for row in default_catalog().rows if row.project in projects and row.meaning]


def test_cuda_errors_documented_as_the_gpu_are_hd301s(tmp_path: Path) -> None:
    """Every CUDA runtime error string the catalog means as the GPU, its driver or the
    platform, stated (libcudart's cudaGetErrorString rows at strength strong or decisive),
    raised as torch raises it ("CUDA error: <string>"), is HD301's reading, not a crash;
    peer access refused excepted (HD302's)."""
    path = tmp_path / "console.log"
    checked = 0
    for row in _catalog_rows({"cuda"}):
        text = sample(row.parts)
        meaning = row.meaning.for_text(text) if row.meaning else None
        if meaning is None or meaning.category != Category.GPU_HARDWARE.value:
            continue
        if meaning.strength not in ("strong", "decisive") or "peer access" in text:
            continue
        path.write_text(_raised_text(text), encoding="utf-8")
        findings = analyze(load_paths([path])).findings
        assert (findings[0].rule, findings[0].category) == ("HD301", Category.GPU_HARDWARE), text
        assert not any(f.rule == "HD030" for f in findings), text
        checked += 1
    assert checked >= 5


def test_exceptions_the_catalog_means_as_another_failure_are_no_crash() -> None:
    """A torch or gloo message the catalog means as another failure than a crash, with a
    strength of its own (moderate or above: a store's, a transport's, a lock's), raised as
    an exception, is that failure reported: the deaths view keeps it, HD030 leaves it."""
    checked = 0
    for row in _catalog_rows({"torch", "gloo"}):
        text = sample(row.parts)
        meant = catalog_meaning(f"RuntimeError: {text}")
        if meant is None or meant[0] in (Category.RANK_DEAD, Category.UNKNOWN):
            continue
        evidence = _evidence_of(_raised_text(text))
        deaths = first_deaths(Timeline(evidence))
        others = [d for d in deaths if d.known_as is not None]
        if meant[1] in ("moderate", "strong", "decisive"):
            assert all(d.known_as == meant[0] for d in others), text
            assert not any(f.rule == "HD030" for f in analyze(evidence).findings), text
            checked += 1
        else:  # a source file's meaning ("weak"): the crash stays HD030's
            assert not others, text
    assert checked >= 100
