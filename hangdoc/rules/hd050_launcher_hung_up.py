"""The launcher received SIGHUP: its terminal went away and it stopped the workers

## What it means
The torchrun (torch.distributed.elastic) agent reported `Received 1 death signal,
shutting down workers` (or `Received Signals.SIGHUP death signal`) and then `Sending
process P closing signal SIGHUP` to each worker. The agent installs a handler for
SIGTERM, SIGINT, SIGHUP and SIGQUIT (torch/distributed/elastic/multiprocessing/api.py
`_terminate_process_handler`, which raises `SignalException`); on it,
`SimpleElasticAgent.run` (agent/server/api.py) logs the death signal and passes the same
signal to every worker. SIGHUP is the hang-up signal: the kernel sends it to a session
when its controlling terminal closes (an ssh connection dropped, a terminal window or a
notebook's terminal closed, a laptop that went to sleep). Nothing in the job hung or
failed first: the launcher was told to stop from outside, and it stopped the workers.

## Why it hangs
It does not. The job was running (its progress bar or steps advancing, as the lines
before the signal often show) until the terminal that owned the launcher hung up; the
workers then exited on the SIGHUP the agent forwarded. To the user it looks like a job
that stopped at a random step with no error.

## Evidence used
The agent's death-signal line with the signal it names (SIGHUP, by number or by name),
read by the torchrun recogniser (analyzer/parsers/logs/elastic.py), or, where the text
does not hold that line, the agent's `Sending process P closing signal SIGHUP` lines
alone: the agent closes its workers with the signal it received only on a death signal
(`SimpleElasticAgent.run`: `self._shutdown(e.sigval)`); a worker's failure, a restart or
the end of the run closes them with the default SIGTERM (`_shutdown()`, death_sig
SIGTERM in multiprocessing/api.py `PContext.close`), so a closing SIGHUP is the agent's
own SIGHUP forwarded. And the absence of
anything that stopped before it: no timeout, no death of a rank (views/deaths.py), no
other rule's error. One line that names the signal, not its sender: a hint
(docs/confidence.md).

## How to confirm
Check whether the session that ran `torchrun` (or `accelerate launch`, `swift`, `llamafactory-cli`,
which call it) was still open at the time of the death signal: an ssh log-out, a dropped
connection or a closed terminal at that moment is the sender. `last`, the ssh client's
log, or the time the terminal disconnected show it.

## How to fix
Run the launcher detached from the terminal: `nohup torchrun … > train.log 2>&1 &`,
inside `tmux` or `screen`, with `setsid`, or as a batch job (`sbatch`, a Kubernetes Job)
instead of an interactive shell. Resuming from the last checkpoint loses only the steps
since it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.launch import LauncherReport, SignalName
from hangdoc.analyzer.views.deaths import first_deaths, is_wave
from hangdoc.analyzer.views.timeline import Placed, before
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs

# The signal a terminal's hang-up sends (signal(7)); SIGTERM, SIGINT and SIGQUIT are a
# scheduler's or a person's, often sent to a job that had already stopped advancing.
_HANG_UP = SignalName.SIGHUP


def _hung_up(p: Placed) -> bool:
    report = p.event.payload_as(LauncherReport)
    return report is not None and report.signal == _HANG_UP


class LauncherHungUp(Rule):
    __doc__ = __doc__
    id = "HD050"
    name = "launcher-hung-up"
    summary = "the launcher received SIGHUP (its terminal closed) and stopped the workers"
    categories = (Category.NOT_A_HANG,)
    severity = Severity.WARNING
    requires = frozenset({Need.LOGS})
    after = True  # speaks only when no other rule found what stopped the job

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        forwarding = [p for p in tl.of(EventKind.AGENT_TERMINATING) if _hung_up(p)]
        # The agent's own report of the signal, else its forwarding alone: it closes the
        # workers with SIGHUP only when it received SIGHUP (module docstring).
        signals = [p for p in tl.of(EventKind.AGENT_SIGNAL) if _hung_up(p)] or forwarding[:1]
        if not signals:
            return
        if any(f.severity in (Severity.CRITICAL, Severity.ERROR) for f in ctx.prior):
            return  # something stopped or failed: the hang-up came after it
        first = signals[0]
        # A timeout or a death that is not certainly after the signal: the job had
        # stopped (or a rank had died) by itself, and the hang-up is not the story.
        stopped = [p for p in tl.events if is_wave(p) and p.kind != EventKind.AGENT_TERMINATING]
        died = [d.placed for d in first_deaths(tl)]
        if any(before(first, p) is not True for p in (*stopped, *died)):
            return
        forwarded = [p for p in forwarding if before(first, p) is not False]
        told = f"; it sent SIGHUP to {len(forwarded)} worker(s)" if forwarded else ""
        yield Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.WARNING,
            title=(
                "the launcher received SIGHUP (its terminal hung up) and shut the workers "
                f"down{told}: stopped from outside, not a hang"
            ),
            explanation=(
                (
                    "The torchrun agent reports a death signal, SIGHUP, and then forwards it "
                    "to its workers: the launcher itself was signalled. "
                    if first.kind == EventKind.AGENT_SIGNAL
                    else "The torchrun agent sends SIGHUP to its workers, which it does only "
                    "with a death signal it received itself (a worker's failure or a restart "
                    "closes them with SIGTERM): the launcher itself was signalled. "
                )
                + "SIGHUP is what a session "
                "receives when its controlling terminal closes (an ssh connection dropped, a "
                "terminal closed). Nothing before it shows a timeout or a rank that died: the "
                "job was running, and stopped because the shell that owned the launcher went "
                "away."
            ),
            fix=(
                "Run the launcher detached from the terminal: nohup torchrun … > train.log "
                "2>&1 &, inside tmux or screen, with setsid, or as a batch job (sbatch); "
                "resume from the last checkpoint."
            ),
            evidence=tuple(limited_refs([first, *forwarded], limit=4)),
            # The line names the signal, not who sent it: the terminal's hang-up is the
            # common reading with others (a person or a tool sending SIGHUP): a hint.
            strength=Strength.HINT,
            says_not_hung=True,
        )


RULE = LauncherHungUp
