"""A synthetic Diagnosis shaped like a large job, for the report's scale tests and benchmark.

``grid_job(world)`` lays ranks out the way real jobs do (tensor-parallel groups of 8,
data-parallel groups across them, the default group) with flight-recorder records in
all three, py-spy stacks and watchdog log lines on every rank, and one planted culprit:
rank ``world - 5`` issued a broadcast where its data-parallel group issued all_reduce.
So the page has what makes reports long at scale (hundreds of groups, thousands of
rank sets, strided sets) and one thing the reader must find first.

Built directly as model objects, not through the loader: 16,384 ranks build in seconds,
and the report is what is measured.
"""

from __future__ import annotations

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.model import (
    Category,
    CollectiveRecord,
    Evidence,
    EvidenceRef,
    Finding,
    Frame,
    HostInfo,
    LogEvent,
    OpState,
    ProcessGroupInfo,
    Severity,
    Strength,
    Verdict,
)
from hangdoc.analyzer.vocabulary import EventKind
from tests.report_builders import T0, diagnose, frames, process, waiting_stack

TP = 8
USER = "/job/train.py"


def broadcast_stack() -> tuple[Frame, ...]:
    return frames(
        ("<module>", USER, 90),
        ("main", USER, 80),
        ("train_step", USER, 42),
        ("sync_buffers", USER, 61),
        ("broadcast", "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", 2701),
    )


def grid_job(world: int) -> Diagnosis:
    """``world`` ranks in tp groups of 8 and dp groups across them; rank world-5 is odd."""
    odd = world - 5
    odd_op = "broadcast"
    tp_groups = world // TP
    procs = []
    for rank in range(world):
        stack = broadcast_stack() if rank == odd else waiting_stack()
        proc = process(rank, stack, world=world, completed=None, gpu_mib=30_000.0, env={})
        tp_name, dp_name = str(1 + rank // TP), str(1 + tp_groups + rank % TP)
        fr = f"{proc.host}/rank{rank}/fr"
        proc.collectives.extend(
            [
                CollectiveRecord("0", 40, "all_reduce", OpState.COMPLETED, source=fr),
                CollectiveRecord(tp_name, 118, "_all_gather_base", OpState.COMPLETED, source=fr),
                CollectiveRecord(dp_name, 117, "all_reduce", OpState.COMPLETED, source=fr),
                CollectiveRecord(
                    dp_name,
                    118,
                    odd_op if rank == odd else "all_reduce",
                    OpState.STARTED,
                    source=fr,
                ),
            ]
        )
        proc.log_events.append(
            LogEvent(
                EventKind.COLLECTIVE_TIMEOUT,
                f"[Rank {rank}] Watchdog caught collective operation timeout: "
                f"WorkNCCL(SeqNum=118, OpType=ALLREDUCE) ran for 600000 milliseconds",
                source=f"{proc.host}/rank{rank}/stderr.log",
                line=400 + rank % 7,
                time=T0 + 600 + (rank % 97) / 50,
            )
        )
        procs.append(proc)
    groups = {"0": ProcessGroupInfo("0", "default_pg", tuple(range(world)))}
    for g in range(tp_groups):
        groups[str(1 + g)] = ProcessGroupInfo(str(1 + g), "tp", tuple(range(g * TP, g * TP + TP)))
    for k in range(TP):
        name = str(1 + tp_groups + k)
        groups[name] = ProcessGroupInfo(name, "dp", tuple(range(k, world, TP)))
    hosts = {f"node{n}": HostInfo(host=f"node{n}", collected_at="2026-11-25T09:00:00Z")
             for n in range(world // 8)}  # fmt: skip
    evidence = Evidence(
        processes=procs, process_groups=groups, hosts=hosts,
        job_log_events=[LogEvent(EventKind.WORKER_FAILED,
                                 "agent: worker group failed (exitcode -6)",
                                 source="torchrun.log", line=7, time=T0 + 700)],
    )  # fmt: skip
    dp = [r for r in range(odd % TP, world, TP) if r != odd]
    finding = Finding(
        rule="HD011", category=Category.COLLECTIVE_TYPE_MISMATCH, severity=Severity.CRITICAL,
        title=f"rank {odd} issued broadcast where the other ranks of its dp group issued "
              "all_reduce (#118)",
        explanation="Collectives of one group are matched by issue order.",
        fix="Make every rank issue the same collective at this point.",
        culprit_ranks=(odd,), waiting_ranks=tuple(dp), strength=Strength.CONCLUSIVE,
        evidence=(EvidenceRef(f"node{odd // 8}/rank{odd}/fr", "broadcast #118", odd),),
    )  # fmt: skip
    return diagnose(evidence, [finding], Verdict.HANG)
