"""Every output of ``analyze`` is redacted, whatever the inputs carry; ``--no-redact`` is loud.

The inputs are the loose files of a ticket, each leaking secrets through another
channel: log lines the log parser turns into events, py-spy dumps (text and JSON) with
``--locals`` and thread names, a torchelastic error file, a dump collected with
``--no-redact`` (environment, command line, collector warnings), an archive of such
files. Every output — terminal, HTML, Markdown, findings JSON, the ticket archive — is
scanned byte by byte for every secret, raw and encoded.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from hangdoc.cli import main
from tests.reliability.conftest import Spawn
from tests.reliability.plants import archive_bytes, leaks, plants
from tests.reliability.stats import count

ROOT = Path(__file__).resolve().parents[2]
DUMP = ROOT / "fixtures" / "dumps" / "checkpoint"
PLANTS = plants(seed=11)
# Shapeless values that only their names give away (environment, locals, options).
BY_NAME = {
    "HF_TOKEN": "q8v3n5x2m7c4z9b1",
    "DB_PASSWORD": "p4ss-w0rd-shapeless",
    "api_key": "k3y-n0-shape-777",
}
WATCHDOG = (
    "[rank1]:[E1124 03:30:21.440001001 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=7001, OpType=ALLREDUCE, NumelIn=4096, "
    "NumelOut=4096, Timeout(ms)=600000) ran for 600011 milliseconds before timing out. {}"
)
NCCL_WARN = "gpu-a01:460770:460901 [0] ib_plugin.c:1615 NCCL WARN NET/IB : {} status=12"


def _secrets() -> list[str]:
    return [p.secret for p in PLANTS] + list(BY_NAME.values())


def _ticket_inputs(root: Path) -> list[Path]:
    """The loose files and the dump of a ticket, every one leaking secrets."""
    root.mkdir()
    log = root / "rank1.log"
    lines = []
    for plant in PLANTS:
        flat = plant.text.replace("\n", " ")
        lines += [WATCHDOG.format(flat), NCCL_WARN.format(flat), f"[rank1]: RuntimeError: {flat}"]
        lines.append(f"[rank1]: {plant.text}")
    lines += [f"[rank1]: export {k}={v}" for k, v in BY_NAME.items()]
    log.write_text("\n".join(lines) + "\n")
    # py-spy text with --locals: secret-named locals, a thread named with a token
    token = PLANTS[0].text
    (root / "rank2.txt").write_text(
        "Process 4242: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
        f'Thread 4242 (idle): "uploader {token}"\n'
        "    save_checkpoint (train.py:72)\n"
        "        Arguments:\n"
        f"            api_key: '{BY_NAME['api_key']}'\n"
        "        Locals:\n"
        f'            password: "{BY_NAME["DB_PASSWORD"]}"\n'
        "    main (train.py:140)\n"
    )
    # py-spy JSON with locals
    threads = [{"pid": 4343, "thread_id": 1, "thread_name": f"hub {PLANTS[2].text}",
                "os_thread_id": 4343, "active": False, "owns_gil": False, "frames": [
                    {"name": "login", "filename": "/srv/job/train.py", "module": None,
                     "short_filename": "train.py", "line": 3, "locals": [
                         {"name": "hf_token", "addr": 1, "arg": True,
                          "repr": f"'{BY_NAME['HF_TOKEN']}'"}]}]}]  # fmt: skip
    (root / "rank3.json").write_text(json.dumps(threads, indent=2))
    # torchelastic error file
    error = {"message": {"message": f"RuntimeError: {PLANTS[3].text}", "extraInfo": {
        "py_callstack": f"Traceback...\n{PLANTS[4].text}", "timestamp": "1732000000"}}}  # fmt: skip
    (root / "error.json").write_text(json.dumps(error))
    # a dump collected with --no-redact: secrets in env, command line, a warning
    dump = root / "dump"
    shutil.copytree(DUMP, dump)
    process = json.loads((dump / "rank0" / "process.json").read_text())
    process["env"].update({"TORCH_HUB_TOKEN": BY_NAME["HF_TOKEN"], "NCCL_NOTE": PLANTS[5].text})
    process["cmdline"] = ["python", "train.py", "--db-password", BY_NAME["DB_PASSWORD"]]
    (dump / "rank0" / "process.json").write_text(json.dumps(process))
    manifest = json.loads((dump / "manifest.json").read_text())
    manifest["warnings"].append(f"rank 0: py-spy said {PLANTS[6].text}")
    (dump / "manifest.json").write_text(json.dumps(manifest))
    # the same log again, inside an archive
    with tarfile.open(root / "attached.tar.gz", "w:gz") as tar:
        tar.add(log, arcname="logs/rank1-copy.log")
        tar.add(root / "rank2.txt", arcname="logs/rank2-copy.txt")
    return [dump, log, root / "rank2.txt", root / "rank3.json", root / "error.json",
            root / "attached.tar.gz"]  # fmt: skip


def _analyze(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Path]:
    inputs = _ticket_inputs(tmp_path / "in")
    out = {"html": tmp_path / "r.html", "md": tmp_path / "r.md", "json": tmp_path / "r.json",
           "archive": tmp_path / "ticket.tar.gz"}  # fmt: skip
    code = main(["analyze", *map(str, inputs), "--html", str(out["html"]), "--md", str(out["md"]),
                 "--json", str(out["json"]), "--archive", str(out["archive"]), *extra])  # fmt: skip
    assert code == 0
    terminal = tmp_path / "terminal.txt"
    captured = capsys.readouterr()
    terminal.write_text(captured.out)
    (tmp_path / "stderr.txt").write_text(captured.err)
    out["terminal"] = terminal
    out["stderr"] = tmp_path / "stderr.txt"
    return out


def test_no_output_of_analyze_carries_a_planted_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a ticket's inputs leaking every kind of secret through every channel
    # WHEN analyzed into every output
    out = _analyze(tmp_path, capsys)
    # THEN the inputs were read (this is no empty pass) ...
    doc = json.loads(out["json"].read_text())
    assert doc["redacted"] is True
    kinds = {i["kind"] for i in doc["inputs"]}
    assert {"log", "pyspy_text", "pyspy_json", "hangdoc_process", "archive"} <= kinds
    html = out["html"].read_text()
    assert "redacted" in html  # secrets reached the page's data, as <redacted>
    # ... and no byte of any output holds any secret, in any encoding
    blobs = [(name, path.read_bytes()) for name, path in out.items() if name != "archive"]
    blobs += list(archive_bytes(out["archive"]))
    found = leaks(blobs, _secrets())
    count("secrets: planted in analyze inputs", len(_secrets()))
    count("secrets: outputs scanned (analyze)", len(blobs))
    assert found == []


def test_no_redact_is_loud_and_does_what_it_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(tmp_path, capsys, "--no-redact")
    # loud: a banner on stderr, a note in every report, a flag in the ticket marker
    assert "--no-redact" in out["stderr"].read_text()
    assert "redaction is OFF" in out["html"].read_text()
    assert "redaction is OFF" in out["terminal"].read_text()
    assert "redaction is OFF" in out["md"].read_text()
    assert json.loads(out["json"].read_text())["redacted"] is False
    with tarfile.open(out["archive"]) as tar:
        marker = next(m for m in tar.getmembers() if m.name.endswith("hangdoc-ticket.json"))
        handle = tar.extractfile(marker)
        assert handle is not None
        assert json.loads(handle.read())["redacted"] is False
    # and it really keeps the inputs as they are
    assert leaks(archive_bytes(out["archive"]), _secrets())
    # reading that archive back (redacting, by default) says it may hold secrets
    capsys.readouterr()
    assert main(["analyze", str(out["archive"])]) == 0
    assert "made with --no-redact" in " ".join(capsys.readouterr().out.split())


def test_ticket_archive_leaves_out_what_it_cannot_redact(tmp_path: Path) -> None:
    # GIVEN a binary blob that hangdoc cannot read, and a UTF-16 py-spy dump with a token
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "core.bin").write_bytes(b"\x7fELF\x00\x01" + PLANTS[0].text.encode() + b"\x00" * 64)
    dump = (ROOT / "tests/unit/parsers/samples/pyspy/dump.txt").read_text()
    dump = dump.replace('"MainThread"', f'"MainThread {PLANTS[1].text}"', 1)
    (inputs / "rank1.log").write_bytes(dump.encode("utf-16"))
    archive = tmp_path / "t.tar.gz"
    # WHEN archived
    assert main(["analyze", str(inputs), "-q", "--archive", str(archive)]) == 0
    # THEN neither secret is in it, the blob is listed as left out, and analyze says so
    assert leaks(archive_bytes(archive), [PLANTS[0].secret, PLANTS[1].secret]) == []
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        marker = next(m for m in tar.getmembers() if m.name.endswith("hangdoc-ticket.json"))
        handle = tar.extractfile(marker)
        assert handle is not None
        left_out = json.loads(handle.read())["left_out"]
    assert not any(n.endswith("core.bin") for n in names)
    assert [Path(item["path"]).name for item in left_out] == ["core.bin"]
    assert any(n.endswith("rank1.log") for n in names)  # converted, redacted, kept
    again = tmp_path / "again.json"
    assert main(["analyze", str(archive), "-q", "--json", str(again)]) == 0


def test_collect_no_redact_is_loud_and_recorded_in_the_manifest(
    spawn: Spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hangdoc.collectors.collect import NO_REDACT_WARNING

    # GIVEN a rank with a token in its environment, collected with --no-redact
    target = spawn(0, env={"TORCH_HUB_TOKEN": BY_NAME["HF_TOKEN"]})
    dump = tmp_path / "d"
    code = main(["collect", "--pid", str(target.pid), "--out", str(dump), "--samples", "1",
                 "--interval", "0", "--no-redact"])  # fmt: skip
    # THEN the command says so on stderr, the manifest records it, the value is kept
    assert code == 0
    assert "--no-redact" in capsys.readouterr().err
    manifest = json.loads((dump / "manifest.json").read_text())
    assert NO_REDACT_WARNING in manifest["warnings"]
    process = json.loads((dump / "rank0" / "process.json").read_text())
    assert process["env"]["TORCH_HUB_TOKEN"] == BY_NAME["HF_TOKEN"]
    # AND the analysis of that dump shows the collector's warning, and still redacts
    report = tmp_path / "r.json"
    assert main(["analyze", str(dump), "-q", "--html", str(tmp_path / "r.html"),
                 "--json", str(report)]) == 0  # fmt: skip
    html = (tmp_path / "r.html").read_text()
    assert "--no-redact" in html
    assert BY_NAME["HF_TOKEN"] not in html


def test_log_sniffer_recognises_a_utf16_log() -> None:
    from hangdoc.analyzer.parsers.logs import LogParser

    line = WATCHDOG.format("") + "\n"
    assert LogParser().sniff(line.encode("utf-8"))
    assert LogParser().sniff(line.encode("utf-16"))
