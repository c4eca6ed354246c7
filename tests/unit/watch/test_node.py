"""What a node of a Slurm job tells the login node: framed lines under srun's length."""

from __future__ import annotations

import io
import json

from hangdoc.collectors.launchers.stream import Emitter, Frame, parse_line, unescape
from hangdoc.collectors.watch.node import MAX_JSON, NodeHandler, compact, node_collect_running


def test_a_stall_line_stays_short_and_keeps_what_matters() -> None:
    summary = {
        "host": "node1", "quiet_since": 1.0, "detected_at": 2.0, "confirmed_at": 3.0,
        "ranks": [{"rank": r, "pid": 1000 + r} for r in range(8)],
        "exited": [{"rank": 9, "pid": 9, "at": 1.0, "how": "killed by signal 9 (SIGKILL)",
                    "outputs": ["/very/long/path/" + "x" * 700 + ".out"]}],
        "notes": ["rank 3 used 100% of a core while nothing moved " * 5],
    }  # fmt: skip
    text = compact(summary)
    assert len(text) <= MAX_JSON
    doc = json.loads(text)
    assert doc["quiet_since"] == 1.0 and len(doc["ranks"]) == 8
    assert doc["exited"] == [
        {"rank": 9, "pid": 9, "at": 1.0, "how": "killed by signal 9 (SIGKILL)"}
    ]


def test_node_news_round_trips_through_the_frame_protocol() -> None:
    out = io.StringIO()
    handler = NodeHandler(Emitter(out, "node1"), job_id="123", grace_s=1.0)
    handler.say("rank 0 (pid 10) is watched\nsecond line")
    handler.resumed(["nothing was handed over"])  # no stall said: no "moving" line
    frames = [parse_line(line) for line in out.getvalue().splitlines()]
    assert len(frames) == 1 and isinstance(frames[0], Frame)
    assert (frames[0].host, frames[0].kind, frames[0].fields[0]) == ("node1", "watch", "say")
    assert unescape(frames[0].fields[1]) == "rank 0 (pid 10) is watched\nsecond line"


def test_no_collection_of_an_unknown_job_runs_here() -> None:
    assert node_collect_running("999999999") is False
