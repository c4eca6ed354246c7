"""HD103 (stuck in the file system) and HD104 (a save that is slow but moving): threads in
D state or file-system wait channels, and the offsets of the files a rank writes."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, FileMode, OpenFile, Severity, Strength, Verdict
from hangdoc.analyzer.views.kernel import wchan_kind

from . import causes_stacks as C
from . import stacks as S

PID = 1003
SAVING = [
    C.f("_save", f"{S.SITE}/torch/serialization.py", 1312),
    C.f("save", f"{S.SITE}/torch/serialization.py", 1003),
    C.f("save_checkpoint_to", line=350),
    C.f("scenario_io_stall", line=366),
]
LOCKED = [C.f("MetricsLogger.log", line=301)]


def _ckpt(pos: int) -> OpenFile:
    return OpenFile(fd=23, path="/mnt/ckpt/model.pt", mode=FileMode.WRITE, pos=pos, size=pos,
                    mount="/mnt/ckpt", fstype="nfs4")  # fmt: skip


def _writer(positions: list[int], *, state: str = "D", wchan: str = "nfs_wait_bit_killable",
            frames: list[C.Frame] = SAVING, files: bool = True) -> C.Evidence:  # fmt: skip
    samples = [
        C.Sample([C.T(frames, PID, state=state, wchan=wchan)], files=[_ckpt(p)] if files else [])
        for p in positions
    ]
    return C.evidence(*C.victims(frames=S.IN_BARRIER), C.rank(3, *samples))


def test_writer_in_d_state_whose_file_does_not_grow_is_an_io_stall() -> None:
    diag = analyze(_writer([65536, 65536]), calibrate=False)
    primary = diag.findings[0]
    assert diag.verdict is Verdict.HANG
    assert primary.rule == "HD103"
    assert primary.category is Category.IO_STALL
    assert primary.culprit_ranks == (3,)
    assert primary.waiting_ranks == (0, 1, 2)
    assert "model.pt" in primary.title and "barrier" in primary.title
    assert "/mnt/ckpt/model.pt did not grow" in primary.explanation
    assert "on /mnt/ckpt (nfs4)" in primary.explanation
    assert "did not grow" in primary.explanation
    assert "nfs_wait_bit_killable" in primary.explanation
    # HD001 agrees on the category (causes.py), below HD103
    hd001 = next(f for f in diag.findings if f.rule == "HD001")
    assert hd001.category is Category.IO_STALL and hd001.strength < primary.strength


def test_fuse_wait_in_s_state_counts_like_d_state() -> None:
    # A file-system wait channel at every sample, beside a file that does not grow, is
    # the stall on record as much as D state is (the docstring counts both): above HD001.
    diag = analyze(_writer([0, 0], state="S", wchan="request_wait_answer"), calibrate=False)
    primary = diag.findings[0]
    assert primary.rule == "HD103"
    assert "file-system wait" in primary.title
    assert primary.strength is Strength.CONCLUSIVE
    assert all(f.strength < primary.strength for f in diag.findings if f.rule == "HD001")


def test_one_sample_of_d_state_is_only_an_error_level_guess() -> None:
    diag = analyze(_writer([0]), calibrate=False)
    finding = next(f for f in diag.findings if f.rule == "HD103")
    assert finding.severity is Severity.ERROR
    assert "Only one sample" in finding.explanation
    assert diag.primary_category is Category.IO_STALL  # HD001 (critical) says so too


def test_without_file_facts_the_file_is_unknown() -> None:
    primary = analyze(_writer([0, 0], files=False), calibrate=False).findings[0]
    assert primary.rule == "HD103"
    assert "no open-file facts" in primary.explanation


def test_a_growing_checkpoint_is_a_slow_save_not_a_stall() -> None:
    # GIVEN the same D-state writer, but its file offset advanced between the samples
    diag = analyze(_writer([65536, 65536 + 768 * 1024]), calibrate=False)
    primary = diag.findings[0]
    # THEN the job is slow, not hung, and HD103 stays silent
    assert diag.verdict is Verdict.NOT_HUNG
    assert primary.rule == "HD104"
    assert primary.category is Category.NOT_A_HANG
    assert primary.says_not_hung
    assert "model.pt grew by 768.0 KiB in 3.0 s" in primary.title
    assert all(f.rule != "HD103" for f in diag.findings)


def test_a_growing_file_of_a_rank_that_is_not_saving_proves_nothing() -> None:
    # A background thread's log grows while the main thread is deadlocked elsewhere.
    diag = analyze(
        _writer([0, 4096], state="S", wchan="futex_do_wait", frames=LOCKED), calibrate=False
    )
    assert all(f.rule != "HD104" for f in diag.findings)


@pytest.mark.parametrize(
    ("wchan", "kind"),
    [
        ("percpu_rwsem_wait", "filesystem"),
        ("rpc_wait_bit_killable", "filesystem"),
        ("request_wait_answer", "filesystem"),
        ("folio_wait_bit_common", "filesystem"),
        ("ll_file_io_generic", "filesystem"),
        ("do_epoll_wait", "poll"),  # not Lustre's "ll_"
        ("futex_do_wait", "futex"),
        ("futex_wait_queue_me", "futex"),
        ("pipe_write", "pipe"),
        ("sk_wait_data", "socket"),
        ("hrtimer_nanosleep", "sleep"),
        ("something_else", None),
        (None, None),
    ],
)
def test_wait_channels(wchan: str | None, kind: str | None) -> None:
    assert wchan_kind(wchan) == kind
