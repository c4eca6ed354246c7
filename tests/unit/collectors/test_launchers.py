"""Whole-job collection without a cluster: the line protocol, Slurm's parsing, and the
engine driven by a stand-in launcher whose "nodes" are local processes (one answers,
one crashes, one hangs). The real Slurm run is tests/slurm."""

from __future__ import annotations

import io
import json
import stat
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from hangdoc.collectors.launchers.base import JobTarget, LaunchCommand, Launcher
from hangdoc.collectors.launchers.engine import JobCollectOptions, collect_job
from hangdoc.collectors.launchers.slurm import SlurmLauncher, parse_scontrol, srun_error
from hangdoc.collectors.launchers.stream import (
    CHUNK,
    Emitter,
    Frame,
    PlainLine,
    Receiver,
    done_fields,
    parse_line,
)
from hangdoc.errors import CollectionError, UsageError


def test_frames_round_trip_and_stay_short() -> None:
    out = io.StringIO()
    emitter = Emitter(out, "node-7")
    emitter.hello(1234.5, shared=False)
    emitter.progress(3, 10, "sample 1/2: rank 3\nsecond line")
    payload = bytes(range(256)) * 20
    chunks, size, digest = emitter.data(io.BytesIO(payload))
    emitter.done("ok", [0, 1], "/tmp/a dir/x", "4 process(es)")
    lines = out.getvalue().splitlines()
    assert all(len(line) < 1000 for line in lines)  # srun splits longer lines
    parsed = [parse_line(f"  3: {line}") for line in lines]  # as srun --label writes them
    assert all(isinstance(p, Frame) and p.task == 3 and p.host == "node-7" for p in parsed)
    frames = [p for p in parsed if isinstance(p, Frame)]
    assert frames[1].fields[2] == "sample 1/2: rank 3\\nsecond line"
    sink = io.BytesIO()
    receiver = Receiver(sink, max_bytes=1 << 20)
    for frame in frames:
        if frame.kind == "data":
            receiver.chunk(*frame.fields)
    end = next(f for f in frames if f.kind == "end")
    assert receiver.end(*end.fields) is None
    assert sink.getvalue() == payload and chunks == -(-len(payload) // CHUNK)
    assert (size, digest) == (len(payload), end.fields[2])
    assert done_fields(frames[-1]) == ("ok", [0, 1], "/tmp/a dir/x", "4 process(es)")


def test_lost_or_garbled_chunks_are_detected() -> None:
    out = io.StringIO()
    Emitter(out, "n1").data(io.BytesIO(b"x" * (CHUNK * 3)))
    frames = [f for f in map(parse_line, out.getvalue().splitlines()) if isinstance(f, Frame)]
    lossy = Receiver(io.BytesIO(), 1 << 20)
    for frame in frames[:-1]:
        if frame.fields[0] != "1":  # chunk 1 lost on the way
            lossy.chunk(*frame.fields)
    assert "arrived where 1 was due" in (lossy.end(*frames[-1].fields) or "")
    garbled = Receiver(io.BytesIO(), 1 << 20)
    garbled.chunk("0", "!!!not base64!!!")
    assert "garbled" in (garbled.end("1", "3", "0" * 64) or "")


def test_plain_lines_keep_their_task_label() -> None:
    line = parse_line("12: Traceback (most recent call last):\n")
    assert line == PlainLine("Traceback (most recent call last):", 12)
    assert isinstance(parse_line("@hangdoc1 bad/host hello 1 1"), PlainLine)


def test_scontrol_output_is_parsed() -> None:
    text = ("JobId=124 ArrayJobId=123 ArrayTaskId=4 JobName=train JobState=RUNNING "
            "Reason=None NodeList=gpu[01-02] NumNodes=2 Command=/x/y.sh")  # fmt: skip
    info = parse_scontrol(text)
    assert (info["JobId"], info["JobState"], info["NodeList"]) == ("124", "RUNNING", "gpu[01-02]")
    assert srun_error("srun: error: gpu02: task 1: Exited with exit code 3") == (
        "gpu02", "Exited with exit code 3")  # fmt: skip


def _fake_scontrol(tmp_path: Path, state: str) -> str:
    script = tmp_path / "scontrol"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$2" = hostnames ]; then printf 'gpu01\\ngpu02\\n'; exit 0; fi
        echo "JobId=124 JobName=train JobState={state} NodeList=gpu[01-02] NumNodes=2"
        """))  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_slurm_resolves_a_running_job_and_builds_one_srun(tmp_path: Path) -> None:
    launcher = SlurmLauncher(scontrol=_fake_scontrol(tmp_path, "RUNNING"))
    target = launcher.resolve("124")
    assert target.hosts == ("gpu01", "gpu02") and target.name == "train"
    (command,) = launcher.commands(target, ["hangdoc", "node-collect"])
    argv = list(command.argv)
    assert argv[:4] == ["srun", "--jobid", "124", "--overlap"]
    assert "--nodes=2" in argv and "--ntasks-per-node=1" in argv and "--label" in argv
    assert "--nodelist=gpu[01-02]" in argv and argv[-2:] == ["hangdoc", "node-collect"]
    assert launcher.env_match(target) == (("SLURM_JOB_ID", "124"),)


def test_slurm_refuses_a_job_that_is_not_running(tmp_path: Path) -> None:
    launcher = SlurmLauncher(scontrol=_fake_scontrol(tmp_path, "PENDING"))
    with pytest.raises(CollectionError, match="is PENDING"):
        launcher.resolve("124")
    with pytest.raises(UsageError):
        launcher.resolve("124; rm -rf /")


# A stand-in node: says hello, streams a one-rank dump, says done; or crashes; or hangs.
NODE = textwrap.dedent("""\
    import io, json, sys, tarfile, time
    from hangdoc.collectors.launchers.stream import Emitter
    host, mode = sys.argv[1], sys.argv[2]
    emitter = Emitter(sys.stdout, host)
    emitter.hello(time.time() + 2.0, shared=False)
    if mode == "crash":
        print("Traceback (most recent call last):", flush=True)
        print("RuntimeError: py-spy is not installed", flush=True)
        sys.exit(1)
    if mode == "hang":
        emitter.progress(1, 4, "sample 1/2: rank 9")
        time.sleep(60)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = json.dumps({"format": "hangdoc.dump/1", "host": host}).encode()
        info = tarfile.TarInfo(f"hangdoc-{host}/manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    emitter.data(buf)
    emitter.done("ok", [0, 1], None, "2 process(es)")
""")


class _LocalLauncher(Launcher):
    """One local process per "node", like an ssh launcher."""

    name: ClassVar[str] = "local-test"

    def __init__(self, modes: dict[str, str]) -> None:
        self.modes = modes

    def resolve(self, job_id: str) -> JobTarget:
        return JobTarget(self.name, job_id, tuple(self.modes))

    def commands(self, target: JobTarget, remote: Sequence[str]) -> list[LaunchCommand]:
        return [
            LaunchCommand((sys.executable, "-c", NODE, host, self.modes[host]), (host,))
            for host in target.hosts
        ]


class _Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def node(self, host: str, state: str, detail: str) -> None:
        self.seen.append((host, state))

    def warn(self, message: str) -> None:
        self.seen.append(("warn", message))


def test_engine_keeps_good_nodes_and_lists_failed_ones(tmp_path: Path) -> None:
    # GIVEN three nodes: one answers, one crashes, one never finishes
    launcher = _LocalLauncher({"n-ok": "ok", "n-crash": "crash", "n-hang": "hang"})
    events = _Events()
    opts = JobCollectOptions(out=tmp_path / "job", node_timeout_s=8.0, transfer="stream")
    # WHEN the job is collected
    result = collect_job(launcher, "7", opts, events)
    # THEN the good node's dump is unpacked, the others are listed with their reasons
    nodes = {n["host"]: n for n in result.manifest["nodes"]}
    assert nodes["n-ok"]["status"] == "ok" and nodes["n-ok"]["dir"] == "n-ok"
    assert (tmp_path / "job" / "n-ok" / "manifest.json").is_file()
    assert nodes["n-ok"]["ranks"] == [0, 1] and nodes["n-ok"]["bytes"] > 0
    assert nodes["n-ok"]["clock_offset_s"] == pytest.approx(2.0, abs=1.0)
    assert nodes["n-crash"]["status"] == "failed"
    assert "py-spy is not installed" in (nodes["n-crash"]["reason"] or "")
    assert nodes["n-hang"]["status"] == "timeout"
    assert "no result within 8s" in (nodes["n-hang"]["reason"] or "")
    saved = json.loads((tmp_path / "job" / "job.json").read_text())
    assert saved["complete"] is True and len(saved["nodes"]) == 3
    assert ("n-hang", "progress") in events.seen and ("n-ok", "ok") in events.seen
    assert not (tmp_path / "job" / ".incoming").exists()
    assert not (tmp_path / "job" / ".hangdoc-probe").exists()


def test_engine_refuses_a_non_empty_output(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "x").write_text("")
    with pytest.raises(CollectionError, match="not empty"):
        collect_job(_LocalLauncher({"a": "ok"}), "7", JobCollectOptions(out=tmp_path / "job"))
