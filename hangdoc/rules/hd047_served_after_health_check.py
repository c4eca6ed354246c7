"""An inference server answered requests after its health check failed: busy, not hung

## What it means
An inference server's health check timed out waiting for the model's output (SGLang's
`Health check failed. Server couldn't get a response from detokenizer for last 20
seconds.`, then `"GET /health HTTP/1.1" 503`), and afterwards the same server answered a
request that waits for the model: uvicorn's access log shows `"POST /v1/chat/completions
HTTP/1.1" 200 OK` (or /generate, /v1/completions, /health_generate …) after the failure.
The model stopped answering for a while, then answered again: it was busy (kernels
compiled on first use, DeepGEMM's JIT, a long prefill, a large batch), not deadlocked.

## Why it hangs
It does not. SGLang's health check sends a one-token generation and passes as soon as
*any* output reaches the TokenizerManager; a scheduler occupied longer than
`HEALTH_CHECK_TIMEOUT` (20 s by default) fails it without being stuck. A request served
later shows the scheduler came back. A health check that fails with nothing served after
it stays a possible hang: this rule is then silent.

## Evidence used
The health-check failure and uvicorn's access lines, read by parsers/logs/serving.py
(typed: the timeout, each request's method, route, status, and whether the route waits
for the model). A success (2xx) of a model route after the last failure, in the same file
or later on the same clock. uvicorn logs a request when its response *starts*: for a
streaming request that is when the stream opened, before any token, so one line is a
hint, not proof. Silent when another rule found an error or a crash.

## How to confirm
Look for the server's batch lines (`Prefill batch`, `Decode batch`) or more successful
requests after the failure; time a request by hand (`curl` to /generate with
`"stream": false`) and see it answer. If nothing answers for minutes and the scheduler's
watchdog fires, it is a hang: take py-spy dumps of the scheduler processes.

## How to fix
Nothing to fix for a hang. Give the health check more time (`SGLANG_HEALTH_CHECK_TIMEOUT`,
the orchestrator's probe period and failure threshold), or do the slow work before the
server takes traffic (warm up, precompile DeepGEMM's kernels with
`python -m sglang.compile_deep_gemm`), so a probe does not restart a busy server.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, LogEvent, Severity, Strength
from hangdoc.analyzer.payloads.serving import HttpRequest
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext


def _after(later: LogEvent, earlier: LogEvent) -> bool:
    """``later`` came after ``earlier``: further down the same file, or later on one clock."""
    if later.source == earlier.source and later.line is not None and earlier.line is not None:
        return later.line > earlier.line
    if later.time is None or earlier.time is None or later.clock != earlier.clock:
        return False
    return later.time > earlier.time


def _served(event: LogEvent) -> bool:
    """A request the model answered: a 2xx of a route that waits for the model's output."""
    request = event.payload_as(HttpRequest)
    return request is not None and request.model_route and request.succeeded


class ServedAfterHealthCheck(Rule):
    __doc__ = __doc__
    id = "HD047"
    name = "served-after-health-check"
    summary = "the server answered requests after its health check failed: busy, not hung"
    categories = (Category.NOT_A_HANG,)
    severity = Severity.INFO
    requires = frozenset({Need.LOGS})
    after = True  # speaks only when no other rule found an error or a crash

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        ev = ctx.evidence
        if any(f.severity in (Severity.CRITICAL, Severity.ERROR) for f in ctx.prior):
            return
        events = [*ev.job_log_events, *(e for p in ev.processes for e in p.log_events)]
        failures = [e for e in events if e.kind is EventKind.HEALTH_CHECK_FAILED]
        if not failures:
            return
        served = [e for e in events if e.kind is EventKind.HTTP_REQUEST and _served(e)]
        # Every failure must be followed by a served request: the last one unanswered is a
        # server that may have stopped there.
        if not all(any(_after(s, f) for s in served) for f in failures):
            return
        last = failures[-1]
        after = [s for s in served if _after(s, last)]
        routes = sorted({p.path for s in after if (p := s.payload_as(HttpRequest))})
        yield Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.INFO,
            title=(
                f"the server answered {len(after)} request(s) after its health check failed: "
                "busy, not hung"
            ),
            explanation=(
                f"The health check failed {len(failures)} time(s): the model produced no "
                "output for the check's timeout. Afterwards the server answered "
                f"{len(after)} request(s) that wait for the model ({', '.join(routes)}), so "
                "the model came back: it was busy (kernels compiled on first use, a long "
                "prefill), not stuck. uvicorn logs a request when its response starts; for a "
                "streaming request that is before any token, so this is a hint."
            ),
            fix=(
                "Nothing to fix for a hang: give the health check more time "
                "(SGLANG_HEALTH_CHECK_TIMEOUT, the probe's failure threshold) or do the slow "
                "work (warm-up, kernel precompilation) before the server takes traffic."
            ),
            evidence=(
                EvidenceRef(last.source, last.text[:300], None, last.line),
                *(EvidenceRef(s.source, s.text[:300], None, s.line) for s in after[:2]),
            ),
            # A served request after the failure, whose line may be a stream that opened
            # and then stalled: a hint.
            strength=Strength.HINT,
            says_not_hung=True,
        )


RULE = ServedAfterHealthCheck
