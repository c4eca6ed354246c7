"""Hand-made Diagnoses for the report tests: typed builders, not dict templates.

The rules are written elsewhere and change; the report must be tested on Diagnoses whose
content is fixed here. ``checkpoint_job`` is the canonical scenario (one rank writing a
checkpoint while the rest wait in all_reduce), scalable to 4,096 ranks for the timing
and browser tests; ``hostile_job`` carries markup and unicode in every text the model
holds, for the escaping tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from hangdoc.analyzer.diagnosis import Diagnosis, NotEvaluated
from hangdoc.analyzer.model import (
    Category,
    CollectiveRecord,
    Evidence,
    EvidenceRef,
    Finding,
    Frame,
    GpuState,
    HostInfo,
    InputFile,
    InputKind,
    LogEvent,
    OpState,
    ProcessEvidence,
    ProcessGroupInfo,
    ProcSample,
    ProcState,
    Severity,
    StackSample,
    Strength,
    ThreadStack,
    ThreadState,
    Verdict,
)
from hangdoc.analyzer.views.activity import classify_ranks
from hangdoc.rules.base import Need, Rule, RuleContext

SITE = "/usr/lib/python3/site-packages"
C10D = f"{SITE}/torch/distributed/distributed_c10d.py"
T0 = 1_700_000_000.0
USER = "/job/train.py"
HOSTILE = "<script>alert(1)</script></pre>\"quoted\" 'single' &amp; ünïcødé_路径"


def frames(*specs: tuple[str, str, int]) -> tuple[Frame, ...]:
    """Frames given outermost first (how people read them), stored innermost first."""
    return tuple(Frame(function, file, line) for function, file, line in reversed(specs))


def waiting_stack() -> tuple[Frame, ...]:
    return frames(
        ("<module>", USER, 90),
        ("main", USER, 80),
        ("train_step", USER, 42),
        ("all_reduce", C10D, 2501),
        ("wrapper", f"{SITE}/torch/distributed/c10d_logger.py", 83),
    )


def saving_stack() -> tuple[Frame, ...]:
    return frames(
        ("<module>", USER, 90),
        ("main", USER, 80),
        ("save_checkpoint", USER, 30),
        ("save", f"{SITE}/torch/serialization.py", 965),
        ("write_record", f"{SITE}/torch/serialization.py", 800),
    )


def process(
    rank: int,
    stack: tuple[Frame, ...],
    *,
    world: int,
    host: str | None = None,
    state: str = "S",
    wchan: str = "futex_wait_queue",
    completed: int | None = 41,
    pending_op: str | None = "all_reduce",
    env: dict[str, str] | None = None,
    gpu_mib: float | None = 30_000.0,
) -> ProcessEvidence:
    host = host or f"node{rank // 8}"
    source = f"{host}/rank{rank}/pyspy.json"
    main = ThreadStack(frames=stack, os_thread_id=1000 + rank, name="MainThread",
                       active=True, owns_gil=False, is_main=True, source=source)  # fmt: skip
    helper = ThreadStack(
        frames=frames(("_bootstrap", "/usr/lib/python3.11/threading.py", 995),
                      ("wait", "/usr/lib/python3.11/threading.py", 320)),
        os_thread_id=2000 + rank, name="pt_watchdog", active=False, source=source,
    )  # fmt: skip
    collectives: list[CollectiveRecord] = []
    if completed is not None:
        fr = f"{host}/rank{rank}/flight_recorder.json"
        collectives = [
            CollectiveRecord("0", seq, "all_reduce", OpState.COMPLETED, source=fr)
            for seq in range(max(1, completed - 2), completed + 1)
        ]
        if pending_op is not None:
            collectives.append(CollectiveRecord("0", completed + 1, pending_op, OpState.STARTED,
                                                source=fr))  # fmt: skip
    letter = ProcState(state)
    return ProcessEvidence(
        rank=rank, host=host, pid=4000 + rank, local_rank=rank % 8, world_size=world,
        cmdline="python /job/train.py", env=env if env is not None else _env(rank),
        stack_samples=[StackSample(index=0, time=T0 + 10, threads=(main, helper), source=source)],
        proc_samples=[ProcSample(index=0, time=T0 + 10, state=letter, wchan=wchan, threads=(
            ThreadState(tid=1000 + rank, name="python", state=letter, wchan=wchan),
            ThreadState(tid=2000 + rank, name="pt_watchdog", state=ProcState.SLEEPING,
                        wchan="futex_wait_queue"),
        ))],
        collectives=collectives,
        gpu=[GpuState(index=rank % 8, memory_used_mib=gpu_mib, memory_total_mib=81_920.0)]
        if gpu_mib is not None else [],
        sources=[source],
    )  # fmt: skip


def _env(rank: int) -> dict[str, str]:
    env = {"RANK": str(rank), "LOCAL_RANK": str(rank % 8), "NCCL_DEBUG": "WARN",
           "MASTER_ADDR": "node0", "TORCHELASTIC_ERROR_FILE": f"/tmp/err-{rank}.json"}  # fmt: skip
    if rank == 3:
        env["NCCL_IB_DISABLE"] = "1"
    return env


class FakeCheckpointRule(Rule):
    """A rank is writing a checkpoint while the others wait in a collective.

    ## What it means
    One rank is inside a checkpoint save.

    ## Why it hangs
    The others entered the next collective and wait for it.

    ## Evidence used
    Stacks of every rank.

    ## How to confirm
    Run ``py-spy dump`` twice on the saving rank.

    ## How to fix
    Save on every rank, or put a barrier before the save.
    """

    id: ClassVar[str] = "HD901"
    name: ClassVar[str] = "fake-checkpoint"
    summary: ClassVar[str] = "test rule"
    categories: ClassVar[tuple[Category, ...]] = (Category.CHECKPOINT_SAVE,)
    severity: ClassVar[Severity] = Severity.CRITICAL
    requires: ClassVar[frozenset[Need]] = frozenset({Need.STACKS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        return ()


FAKE_RULES: tuple[type[Rule], ...] = (FakeCheckpointRule,)


def diagnose(evidence: Evidence, findings: list[Finding], verdict: Verdict) -> Diagnosis:
    """What the engine would return for these findings, without running any rule."""
    expected = evidence.expected_world_size()
    seen = evidence.seen_ranks()
    missing = sorted(set(range(expected)) - set(seen)) if expected else []
    return Diagnosis(
        verdict=verdict, findings=findings, evidence=evidence,
        activities=classify_ranks(evidence), expected_world_size=expected, seen_ranks=seen,
        missing_ranks=missing, not_evaluated=[NotEvaluated("HD002", "missing flight recorder")],
    )  # fmt: skip


def checkpoint_job(world: int = 8, *, saver: int = 2, missing: Iterable[int] = ()) -> Diagnosis:
    """Rank ``saver`` writes a checkpoint; every other rank waits in all_reduce #42."""
    gone = set(missing)
    procs = [
        process(r, saving_stack() if r == saver else waiting_stack(), world=world,
                state="D" if r == saver else "S",
                wchan="nfs_wait_bit_killable" if r == saver else "futex_wait_queue",
                completed=40 if r == saver else 41, pending_op=None if r == saver else "all_reduce")
        for r in range(world) if r not in gone
    ]  # fmt: skip
    events = [
        LogEvent("nccl_watchdog_timeout", f"[Rank {r}] Watchdog caught collective operation "
                 f"timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE) ran for 600000 milliseconds",
                 source=f"node{r // 8}/rank{r}/stderr.log", line=120 + r, time=T0 + 5 + r / 1000)
        for r in range(min(world, 64)) if r != saver and r not in gone
    ]  # fmt: skip
    for proc, event in zip([p for p in procs if p.rank != saver][:64], events, strict=False):
        proc.log_events.append(event)
    hosts = {f"node{n}": HostInfo(host=f"node{n}", collected_at="2023-11-14T22:13:30Z")
             for n in range((world + 7) // 8)}  # fmt: skip
    inputs = [InputFile(p.primary_source(), InputKind.PYSPY_JSON, (p.rank or 0,), size=2048)
              for p in procs]  # fmt: skip
    inputs.append(InputFile("node0/core.1234", InputKind.UNREADABLE, error="binary file"))
    evidence = Evidence(
        processes=procs,
        process_groups={"0": ProcessGroupInfo("0", "default_pg", tuple(range(world)))},
        inputs=inputs, hosts=hosts,
        job_log_events=[LogEvent("torchrun_exit", "agent: worker group failed (exitcode -6)",
                                 source="torchrun.log", line=7, time=T0 + 700)],
        notes=["node1/rank9/pyspy.json: truncated"] if world > 9 else [],
    )  # fmt: skip
    waiting = tuple(r for r in range(world) if r != saver and r not in gone)
    primary = Finding(
        rule="HD901", category=Category.CHECKPOINT_SAVE, severity=Severity.CRITICAL,
        title=f"rank {saver} is writing a checkpoint while the other ranks wait in all_reduce",
        explanation=f"Rank {saver} is in torch.save; the others wait for it in all_reduce #42.",
        fix="Call the checkpoint save on every rank, or add a barrier before it.",
        culprit_ranks=(saver,), waiting_ranks=waiting, strength=Strength.CORROBORATED,
        evidence=(EvidenceRef(f"node{saver // 8}/rank{saver}/pyspy.json",
                              "write_record (serialization.py:800)", saver, 12),
                  EvidenceRef("node0/rank0/flight_recorder.json", "all_reduce #42 started", 0)),
    )  # fmt: skip
    other = Finding(
        rule="HD003", category=Category.IO_STALL, severity=Severity.WARNING,
        title=f"rank {saver} is in uninterruptible sleep on NFS",
        explanation="The process state is D in nfs_wait_bit_killable.",
        fix="Check the NFS server.", culprit_ranks=(saver,), strength=Strength.SIGNAL,
        evidence=(EvidenceRef(f"node{saver // 8}/rank{saver}/proc.json", "state D", saver),),
    )  # fmt: skip
    return diagnose(evidence, [primary, other], Verdict.HANG)


def empty_job() -> Diagnosis:
    """No input at all: the report must still render every section's empty state."""
    return diagnose(Evidence(), [], Verdict.INCONCLUSIVE)


def hostile_job() -> Diagnosis:
    """Markup, quotes and unicode in paths, function names, logs, env and finding text."""
    stack = frames(
        ("<module>", f"/job/{HOSTILE}.py", 1), (f"fn_{HOSTILE}", f"/job/{HOSTILE}.py", 2)
    )
    procs = [process(r, stack, world=2, env={"X": HOSTILE if r else "plain"}) for r in range(2)]
    procs[0].log_events.append(LogEvent(HOSTILE, HOSTILE, source=HOSTILE, line=1, time=T0))
    evidence = Evidence(
        processes=procs,
        inputs=[InputFile(f"/dumps/{HOSTILE}", InputKind.UNKNOWN, error=HOSTILE)],
        notes=[HOSTILE],
    )
    finding = Finding(
        rule="HD901", category=Category.UNKNOWN, severity=Severity.ERROR, title=HOSTILE,
        explanation=HOSTILE, fix=HOSTILE, culprit_ranks=(1,),
        evidence=(EvidenceRef(HOSTILE, HOSTILE, 1, 3),),
    )  # fmt: skip
    return diagnose(evidence, [finding], Verdict.HANG)
