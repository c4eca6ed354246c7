"""A thread's ``wait`` in process.json (collectors/dumpformat.py ``WaitRecord``) read back
by analyzer/parsers/node_facts.py: hangdoc's own format, untrusted on the way in."""

from __future__ import annotations

import copy

from hangdoc.analyzer.loading.redaction import redact_evidence
from hangdoc.analyzer.model import Evidence, PeerRole, ProcessEvidence, ProcSample, WaitKind
from hangdoc.analyzer.parsers.hangdoc_json import thread_state
from hangdoc.collectors.dumpformat import ThreadRecord

RECORD: ThreadRecord = {
    "tid": 41,
    "name": "python",
    "state": "S",
    "wchan": "anon_pipe_read",
    "cpu_ticks": 9,
    "voluntary_ctxt_switches": 3,
    "nonvoluntary_ctxt_switches": 0,
    "wait": {
        "kind": "pipe",
        "syscall": "read",
        "fd": 13,
        "target": "pipe:[81]",
        "peers": [
            {
                "pid": 52,
                "role": "other_end",
                "name": "python",
                "cmdline": ["python", "helper.py"],
                "state": "S",
                "ppid": 41,
                "ancestors": [41, 1],
                "start_time": 1700000000.5,
                "fd": 1,
                "wait": {
                    "kind": "pipe",
                    "syscall": "read",
                    "target": "pipe:[80]",
                    "peers": [{"pid": 41, "role": "other_end", "name": None, "cmdline": None,
                               "state": "S", "ppid": 1, "ancestors": [1], "start_time": None}],
                },
            }
        ],
    },
}  # fmt: skip


def test_a_wait_and_its_peers_are_read_with_the_peers_own_wait_by_pid() -> None:
    state = thread_state(RECORD)
    assert state is not None and state.wait is not None
    wait = state.wait
    assert (wait.kind, wait.syscall, wait.fd, wait.target) == (
        WaitKind.PIPE,
        "read",
        13,
        "pipe:[81]",
    )
    [peer] = wait.peers
    assert (peer.pid, peer.role, peer.command) == (52, PeerRole.OTHER_END, "python helper.py")
    assert peer.ancestors == (41, 1) and peer.fd == 1
    assert peer.wait is not None and peer.wait.peer_pids == (41,)


def test_malformed_waits_read_as_unknown_never_as_a_crash() -> None:
    odd: dict[str, object] = dict(RECORD)
    odd["wait"] = {"kind": "teleport", "syscall": "read", "fd": [13], "peers": [
        {"pid": 7, "role": "stranger"}, {"role": "holder"}, "junk"]}  # fmt: skip
    state = thread_state(odd)
    assert state is not None and state.wait is not None
    assert (state.wait.kind, state.wait.fd, state.wait.peers) == (WaitKind.UNKNOWN, None, ())
    odd["wait"] = {"kind": "pipe"}  # no system call: no wait
    state = thread_state(odd)
    assert state is not None and state.wait is None
    odd["wait"] = "pipe"
    state = thread_state(odd)
    assert state is not None and state.wait is None


def test_a_peers_command_line_is_redacted_with_the_evidence() -> None:
    # A dump collected with --no-redact, read by analyze (which redacts what it loads).
    token = "hf_" + "Zq8rT2" * 6  # shaped like an HF token, valid nowhere
    record = copy.deepcopy(RECORD)
    record["wait"]["peers"][0]["cmdline"] = ["python", "helper.py", "--hf-token", token]
    state = thread_state(record)
    assert state is not None
    process = ProcessEvidence(
        rank=0, pid=41, proc_samples=[ProcSample(index=0, time=None, threads=(state,))]
    )
    redact_evidence(Evidence(processes=[process]))
    [sample] = process.proc_samples
    [thread] = sample.threads
    assert thread.wait is not None
    command = thread.wait.peers[0].command
    assert command is not None and token not in command and "helper.py" in command
