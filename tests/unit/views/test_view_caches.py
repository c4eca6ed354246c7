"""Views that several rules read, kept once per timeline (or per analysis): the cached
answer is the one computed afresh, the same object on every call, one timeline's answer
never another's, and the entry goes with its timeline (issue 20: at 16,384 ranks each pass
over the job's events costs a tenth of a second or more).

The logs are made up: a vLLM worker whose NCCL binding fails in ``ncclCommInitRank`` (a
communicator's set-up, HD206's), and a rank that crashes after its first collectives.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence
from hangdoc.analyzer.views import deaths, nccl_setup
from hangdoc.analyzer.views.gpu_state import gpu_views
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.rules.base import RuleContext

_PYNCCL = "/usr/lib/python3/dist-packages/vllm/distributed/device_communicators/pynccl_wrapper.py"


def _setup_failing(tmp_path: Path) -> Evidence:
    head = "(RayWorkerWrapper pid=880) ERROR 05-02 10:11:12 [worker_base.py:620] "
    lines = [
        "Traceback (most recent call last):",
        f'  File "{_PYNCCL}", line 277, in ncclCommInitRank',
        '    self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),',
        f'  File "{_PYNCCL}", line 256, in NCCL_CHECK',
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    ]
    path = tmp_path / "setup" / "ray.log"
    path.parent.mkdir()
    path.write_text("".join(f"{head}{line}\n" for line in lines))
    return load_paths([path])


def _crashing(tmp_path: Path) -> Evidence:
    lines = [
        "[rank1]:[I1128 10:00:00.000000 11 ProcessGroupNCCL.cpp:2000] epoch 0 step 1 loss 2.5",
        "node1:11:11 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 "
        "count 1024 datatype 7 op 0 root 0 comm 0x55 [nranks=2] stream 0x56",
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/job/train.py", line 40, in <module>',
        "[rank1]:     step(batch)",
        "[rank1]: ValueError: shapes (4, 3) and (2, 3) not aligned",
    ]
    path = tmp_path / "crash" / "rank1.log"
    path.parent.mkdir()
    path.write_text("".join(f"{line}\n" for line in lines))
    return load_paths([path])


def test_deaths_at_is_death_of_each_event_read_once(tmp_path: Path) -> None:
    tl = Timeline(_crashing(tmp_path))
    at = deaths.deaths_at(tl)
    assert at is deaths.deaths_at(tl)
    assert at == tuple(deaths.death_of(p) for p in tl.events)
    assert any(d is not None for d in at)  # the crash is a death: the test reads one
    assert deaths.death_lines(tl) == {
        (p.event.source, p.event.line) for p in tl.events if deaths.death_of(p) is not None
    }


def test_first_running_and_setup_failure_are_each_timelines_own(tmp_path: Path) -> None:
    failing, crashing = Timeline(_setup_failing(tmp_path)), Timeline(_crashing(tmp_path))
    failure = nccl_setup.setup_failure(failing)
    assert failure is not None
    assert nccl_setup.setup_failure(failing) is failure
    # None is an answer kept too, and one timeline's answer is never another's
    assert nccl_setup.setup_failure(crashing) is None
    assert nccl_setup.setup_failure(crashing) is None
    assert nccl_setup.setup_failure(failing) is failure
    assert nccl_setup.first_running(failing) == len(failing.events)  # nothing ran
    assert nccl_setup.first_running(crashing) < len(crashing.events)  # the AllReduce ran
    assert nccl_setup.first_running(crashing) == nccl_setup.first_running(crashing)


def test_the_entries_go_with_their_timeline(tmp_path: Path) -> None:
    tl = Timeline(_setup_failing(tmp_path))
    nccl_setup.setup_failure(tl)
    deaths.first_deaths(tl)
    gone = weakref.ref(tl)
    del tl
    gc.collect()
    assert gone() is None  # no cache holds the timeline (or the evidence it reads)


def test_gpu_views_once_per_analysis(tmp_path: Path) -> None:
    evidence = _crashing(tmp_path)
    ctx = RuleContext(evidence=evidence, activities={})
    assert ctx.gpu_views is ctx.gpu_views
    assert ctx.gpu_views == gpu_views(evidence)
