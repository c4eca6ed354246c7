"""Set-up failures keep their answer when their messages are replaced by words hangdoc has
never seen (scripts/setup_metamorphic.py; issue 21): the mechanism reads where a failure
happened (the frames, the worker method, the place torch checked, NCCL's set-up output),
so the next report's new variant of a message is still read as set-up.

The floor is the count measured when the mechanism was built (178 of the casebook's 248
set-up cases at 23:27 UTC 2026-11-28; 158 before it): a change that makes the answer
depend on a message's words again fails here. The cases it loses are those whose only
evidence is the words (a bare exception line, an NCCL WARN with no set-up place).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOOR = 178


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "setup_metamorphic", ROOT / "scripts" / "setup_metamorphic.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["setup_metamorphic"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return _script()


def test_messages_are_replaced_and_frames_kept(script: ModuleType) -> None:
    text = "\n".join(
        [
            "[rank3]: Traceback (most recent call last):",
            '[rank3]:   File "/x/torch/distributed/distributed_c10d.py", line 9, in barrier',
            "[rank3]:     work = group.barrier(opts=opts)",
            "[rank3]: torch.distributed.DistBackendError: NCCL error in: "
            "/x/ProcessGroupNCCL.cpp:1970, unhandled system error, NCCL version 2.18.1",
            "[rank3]: Last error:",
            "[rank3]: socketPollConnect: Connect to 10.0.0.1<1234> returned 113",
            "node:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect failed",
            "node:1:2 [0] NCCL INFO transport/net.cc:853 -> 2",
        ]
    )
    out = script.unseen_messages(text).split("\n")
    unseen = script.UNSEEN
    assert (
        out[1] == '[rank3]:   File "/x/torch/distributed/distributed_c10d.py", line 9, in barrier'
    )
    assert out[3] == (
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: "
        f"/x/ProcessGroupNCCL.cpp:1970, {unseen}"
    )
    assert out[5] == f"[rank3]: {unseen}"
    assert out[6] == f"node:1:2 [0] misc/socket.cc:484 NCCL WARN {unseen}"
    assert out[7] == "node:1:2 [0] NCCL INFO transport/net.cc:853 -> 2"
    assert script.unseen_messages(text) == script.unseen_messages(text)  # deterministic


def test_set_up_failures_stay_set_up_with_unseen_messages(script: ModuleType) -> None:
    outcomes = [script.outcome(case) for case in script.setup_cases()]
    kept = [o for o in outcomes if o.after == script.SETUP]
    assert len(kept) >= FLOOR, "\n".join(
        f"{o.case}: {o.after} ({o.rule})" for o in outcomes if o.after != script.SETUP
    )
