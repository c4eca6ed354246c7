"""A thread holds the GIL and never releases it

## What it means
In one rank, a background thread owned the GIL at every sample, at the same Python
frame, while the main thread sat idle at the same place: the main thread is waiting for
the GIL. Typical holders: a C extension call that blocks (or loops) without releasing
the GIL — a catastrophic regular expression in a log scrubber, a ``ctypes.PyDLL`` or
pybind11 call without ``gil_scoped_release``, a tight loop in native code.

## Why it hangs
Only the GIL holder can run Python code. The interpreter asks a holder to drop the GIL
every few milliseconds, but only between bytecodes: code that stays inside one C call
never sees the request. The main thread cannot reach its next collective, so the other
ranks wait for it until the process-group timeout.

## Evidence used
py-spy's per-thread ``owns_gil`` and ``active`` flags and stacks at every sample (the
same holder, same frame), the main thread idle and unmoved, and from /proc the holder's
state and CPU time (running and burning CPU = spinning; sleeping = blocked in a C call
that kept the GIL).

## How to confirm
`py-spy dump --native --pid PID` twice: the holder sits in the same native call under
the named frame, marked ``active+gil``; `top -H -p PID` shows it at 100 % CPU when it
spins.

## How to fix
Release the GIL around long native work (``Py_BEGIN_ALLOW_THREADS``, pybind11
``py::gil_scoped_release``, ``ctypes.CDLL`` instead of ``PyDLL``); bound regular
expressions (avoid nested quantifiers, cap the input length, or use the ``regex``
module with a timeout); move such work to a subprocess.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.locks import GilHolder, gil_holder
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import proc_source, span_text, victims, victims_text
from hangdoc.rules.refs import stack_refs


class GilHeld(Rule):
    __doc__ = __doc__
    id = "HD102"
    name = "gil-held"
    summary = "a thread holds the GIL and never releases it; the main thread starves"
    categories = (Category.PYTHON_DEADLOCK,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.STACKS, Need.SAMPLES})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        for rank, activity in sorted(ctx.activities.items()):
            if activity.process.exited or activity.in_collective:
                continue
            found = gil_holder(activity.process)
            if found is not None:
                yield self._finding(ctx, rank, found)

    def _finding(self, ctx: RuleContext, rank: int, found: GilHolder) -> Finding:
        proc = ctx.activities[rank].process
        holder = found.holder
        where = holder.innermost_python()
        where_text = where.label() if where is not None else "an unknown frame"
        main = next(t for t in found.starved if t.is_main)
        main_where = main.user_frame() or main.innermost_python()
        waiting = victims(ctx, [rank])
        how = (
            "spinning on a CPU without releasing it"
            if found.spinning
            else "blocked in a C call that kept it"
        )
        state = "/".join(sorted(holder.kernel_states())) or "unknown"
        explanation = (
            f"On rank {rank}, thread {holder.label} held the GIL at all {found.samples} "
            f"samples at {where_text}, {how} (kernel state {state}), while the main thread "
            f"stayed idle at {main_where.label() if main_where else 'the same place'}"
            f"{span_text(ctx, [rank])}. Only the GIL holder can run Python, and a C call "
            "never sees the interpreter's request to drop it, so rank "
            f"{rank} never reaches its next collective"
            + (f" and {plural_ranks(waiting)} wait for it." if waiting else ".")
        )
        refs = [
            EvidenceRef(
                source=holder.stacks[-1].source or proc.primary_source(),
                detail=f"rank {rank} thread {holder.label}: active+gil at {where_text} "
                "at every sample",
                rank=rank,
            ),
            EvidenceRef(
                source=proc_source(proc),
                detail=f"rank {rank} thread {holder.label}: kernel state {state}, "
                f"CPU ticks +{holder.cpu_delta() or 0} between samples",
                rank=rank,
            ),
        ]
        refs.extend(stack_refs([ctx.activities[r] for r in waiting], limit=2))
        return Finding(
            rule=self.id,
            category=Category.PYTHON_DEADLOCK,
            severity=self.severity,
            title=(
                f"rank {rank}: thread {holder.label} holds the GIL and never releases it"
                f"{victims_text(ctx, waiting)}"
            ),
            explanation=explanation,
            fix=(
                f"Find what {where_text} calls that keeps the GIL: release it around long "
                "native work (Py_BEGIN_ALLOW_THREADS, pybind11 gil_scoped_release, "
                "ctypes.CDLL rather than PyDLL), bound regular expressions (no nested "
                "quantifiers, capped input, or the regex module with a timeout), or move "
                "the work to a subprocess."
            ),
            culprit_ranks=(rank,),
            waiting_ranks=waiting,
            evidence=tuple(refs),
            strength=Strength.CONCLUSIVE,  # the holder held the GIL at every sample
        )


RULE = GilHeld
