"""Property tests of ``collectors.redact``: no planted secret survives, whatever surrounds it.

Each case takes one kind of secret (tests/reliability/plants.py), wraps it in the
context logs give it (rank prefixes, colour codes, quotes, CRLF), buries it in a log of
benign lines (long enough to take the large-text path) and checks that redaction hides
it, is idempotent, and agrees with running every pattern over the whole text.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdoc.common import redact
from hangdoc.common.redact import (
    REDACTED,
    redact_argv,
    redact_env,
    redact_json_bytes,
    redact_json_value,
    redact_text,
)
from tests.reliability.plants import Plant, plants
from tests.reliability.stats import EXAMPLES, count

PLANTS = plants(seed=7)
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PREFIXES = [
    "", " ", "[rank3]:", "[default1]:[rank1]: ", "\x1b[31m", "[36m", "\t", "'", '"', "(",
    "export ", "2025-11-24T03:20:21.001125857Z ", "stderr: ", "\r", "value=",
]  # fmt: skip
SUFFIXES = ["", " ", "'", '"', ")", ",", ";", "\x1b[0m", ".", " done", "\r"]
# Benign lines, some holding trigger words ("key", "session", "passed", "://") so the
# large-text path has lines to check that hold nothing.
FILLER = [
    "[rank0]:[W1121 19:32:48.244000 ProcessGroupNCCL.cpp:632] Watchdog caught collective",
    "NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC",
    "epoch 3 step 1200 loss 0.4312 lr 3e-4 keys=17 session_len=9",
    "all tests passed; author: alice",
    "no secret_token configured; token count 17; the secret is safe",
    "password policy checked, auth ok, cookie jar empty, key rotation due",
    "connect to https://pypi.org/simple",
    "",
    "   ",
    "Traceback (most recent call last):",
    '  File "/srv/job/train.py", line 88, in train_step',
]
SECRET_NAMES = [
    "token", "hf_token", "password", "api_key", "secret", "db_passwd", "private_key",
    "cookie", "session_id", "auth_header", "AWS_SECRET_ACCESS_KEY",
]  # fmt: skip
SHAPELESS = st.text(alphabet="abcdefghijkmnpqrstuvwxyz23456789", min_size=12, max_size=24)


def _reference(text: str) -> str:
    """Every pattern over the whole text, no trigger shortcut: what redact_text must equal."""
    if "[" in text and redact._MARK not in text and redact._COLOUR.search(text):
        marked = redact._COLOUR.sub(lambda m: m.group(0) + redact._MARK, text)
        return _reference(marked).replace(redact._MARK, "")
    for pattern, replace, _ in (*redact._MULTILINE_RULES, *redact._LINE_RULES):
        text = pattern.sub(replace, text)
    return text


@SETTINGS
@given(
    plant=st.sampled_from(PLANTS),
    prefix=st.sampled_from(PREFIXES),
    suffix=st.sampled_from(SUFFIXES),
    before=st.lists(st.sampled_from(FILLER), max_size=120),
    after=st.lists(st.sampled_from(FILLER), max_size=120),
    crlf=st.booleans(),
)
def test_a_planted_secret_never_survives_in_text(
    plant: Plant, prefix: str, suffix: str, before: list[str], after: list[str], crlf: bool
) -> None:
    end = "\r\n" if crlf else "\n"
    text = end.join([*before, prefix + plant.text + suffix, *after])
    out = redact_text(text)
    count("redaction: texts with a planted secret")
    assert plant.secret not in out, (plant.kind, out[-300:])
    assert redact_text(out) == out
    assert out == _reference(text)


@SETTINGS
@given(
    lines=st.lists(st.sampled_from(FILLER) | st.text(max_size=80), max_size=200),
)
def test_benign_text_is_left_alone_or_matches_the_reference(lines: list[str]) -> None:
    text = "\n".join(lines)
    out = redact_text(text)
    count("redaction: random texts")
    assert out == _reference(text)
    assert redact_text(out) == out


@SETTINGS
@given(
    name=st.sampled_from(SECRET_NAMES),
    value=SHAPELESS,
    cut=st.floats(min_value=0.0, max_value=1.0),
)
def test_pyspy_locals_are_hidden_by_the_variables_name(name: str, value: str, cut: float) -> None:
    # GIVEN a py-spy --json --locals dump whose local has a secret-looking name
    threads = [{"pid": 1, "thread_id": 2, "thread_name": "MainThread", "frames": [
        {"name": "login", "filename": "/srv/job/train.py", "line": 3, "locals": [
            {"name": "step", "addr": 1, "arg": True, "repr": "3"},
            {"name": name, "addr": 140016033135872, "arg": False, "repr": f"'{value}'"},
        ]}]}]  # fmt: skip
    data = json.dumps(threads, indent=2).encode()
    # WHEN redacted as JSON, and as the text of a dump cut short after the value
    whole = redact_json_bytes(data)
    end = data.index(value.encode()) + len(value) + 2
    cut_at = end + int(cut * (len(data) - end))
    truncated = redact_text(data[:cut_at].decode())
    count("redaction: py-spy --locals dumps")
    # THEN the value is gone from both, the harmless local stays
    assert value.encode() not in whole and value not in truncated
    assert json.loads(whole)[0]["frames"][0]["locals"][0]["repr"] == "3"
    # and in py-spy's text form ("        token: 'value'")
    assert value not in redact_text(f"        Locals:\n            {name}: '{value}'\n")


@SETTINGS
@given(
    name=st.sampled_from(SECRET_NAMES),
    value=SHAPELESS,
    plant=st.sampled_from(PLANTS),
    depth=st.integers(min_value=0, max_value=4),
)
def test_json_documents_hide_secrets_by_key_by_shape_and_in_argv(
    name: str, value: str, plant: Plant, depth: int
) -> None:
    doc: object = {
        "env": {name.upper(): value, "NCCL_DEBUG": "INFO"},
        "argv": ["python", "train.py", f"--{name.replace('_', '-')}", value],
        "log": plant.text,
    }
    for _ in range(depth):
        doc = [doc] if depth % 2 else {"nested": doc}
    out = json.dumps(redact_json_value(doc))
    count("redaction: JSON documents")
    assert value not in out and plant.secret not in out
    assert REDACTED in out and "INFO" in out


@SETTINGS
@given(name=st.sampled_from(SECRET_NAMES), value=SHAPELESS, plant=st.sampled_from(PLANTS))
def test_environments_and_command_lines(name: str, value: str, plant: Plant) -> None:
    env = redact_env({name.upper(): value, "NOTE": plant.text, "RANK": "3"})
    argv = redact_argv(["python", f"--{name}", value, f"--{name}={value}", plant.text])
    count("redaction: environments and argv")
    assert value not in json.dumps(env) + " ".join(argv)
    assert plant.secret not in json.dumps(env) + " ".join(argv)
    assert env["RANK"] == "3"
