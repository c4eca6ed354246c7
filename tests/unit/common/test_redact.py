"""Redaction: every credential shape is hidden, ordinary diagnostics are kept."""

from __future__ import annotations

import json
import time

import pytest

from hangdoc.common.redact import (
    REDACTED,
    allowlist_env,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_json_bytes,
    redact_text,
)

# (case id, text containing a secret, the secret that must disappear)
SECRETS = [
    ("hf", "token hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 set", "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    (
        "github-classic",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "0123456789abcdefghijABCDEFGHIJ012345",
    ),
    (
        "github-oauth",
        "gho_0123456789abcdefghijABCDEFGHIJ012345",
        "0123456789abcdefghijABCDEFGHIJ012345",
    ),
    (
        "github-server",
        "ghs_0123456789abcdefghijABCDEFGHIJ012345",
        "0123456789abcdefghijABCDEFGHIJ012345",
    ),
    (
        "github-fine",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "11ABCDEFG0123456789_abcdefghij",
    ),
    ("aws-key-id", "id=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws-session-id", "ASIAY34FZKBOKMUTVV7A in use", "ASIAY34FZKBOKMUTVV7A"),
    (
        "aws-secret",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
    ),
    ("openai", "OPENAI=sk-proj-abcdefghijklmnopqrstuvwx0123", "abcdefghijklmnopqrstuvwx0123"),
    (
        "openai-plain",
        "using sk-abcdefghijklmnopqrstuvwxyz012345",
        "abcdefghijklmnopqrstuvwxyz012345",
    ),
    ("slack", "xoxb-1234567890-abcdefghijkl", "1234567890-abcdefghijkl"),
    ("gitlab", "glpat-abcdefghij0123456789", "abcdefghij0123456789"),
    ("google", "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "SyA-abcdefghijklmnopqrstuvwxyz01234"),
    ("wandb", "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.sflKxwRJSMeKKF2QT4fw",
        "sflKxwRJSMeKKF2QT4fw",
    ),
    ("url", "pip: https://alice:hunter2@pypi.internal/simple", "hunter2"),
    ("url-at-in-password", "redis://:p@ss@cache:6379/0", "p@ss"),
    ("bearer-header", "Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
    ("basic-header", 'curl -H "Authorization: Basic dXNlcjpwYXNz"', "dXNlcjpwYXNz"),
    ("bearer-bare", "sending Bearer Zm9vYmFyYmF6cXV4", "Zm9vYmFyYmF6cXV4"),
    ("assignment", "export DB_PASSWORD=correcthorse", "correcthorse"),
    ("json-field", '{"api_key": "k-123 456"}', "k-123 456"),
    ("option", "--hf-token=notashape", "notashape"),
    (
        "pem",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7",
    ),
    ("pem-truncated", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B", "MIIEvQIBADANBgkq"),
]


@pytest.mark.parametrize(
    ("text", "secret"), [(t, s) for _, t, s in SECRETS], ids=[c for c, _, _ in SECRETS]
)
def test_redact_text_hides_each_credential_shape(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert REDACTED in out
    assert redact_text(out) == out  # idempotent


def test_redact_text_keeps_what_identifies_the_credential() -> None:
    # GIVEN secrets whose surroundings help a reader
    # THEN the user, host, scheme and provider prefix survive
    assert redact_text("https://alice:pw@host/x") == f"https://alice:{REDACTED}@host/x"
    assert redact_text("Authorization: Bearer abcdefghijk") == f"Authorization: Bearer {REDACTED}"
    assert redact_text("hf_" + "a" * 34) == f"hf_{REDACTED}"
    assert redact_text("ghp_" + "a" * 36) == f"ghp_{REDACTED}"


@pytest.mark.parametrize(
    "text",
    [
        "commit 0123456789abcdef0123456789abcdef01234567",
        "connect to https://host:8080/path?x=1",
        "NCCL_IB_HCA=mlx5_0,mlx5_1 NCCL_SOCKET_IFNAME=eth0",
        "task-0123456789abcdefghijklmnop finished",
        "File /srv/train.py, line 42, in save_checkpoint",
        "[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout",
        "",
    ],
)
def test_redact_text_leaves_diagnostics_alone(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("PGPASSWORD", True),
        ("SSH_AUTH_SOCK", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("SSL_KEY_PATH", True),  # a path, but redacted to be safe
        ("--hf-token", True),
        ("COOKIE_JAR", True),
        ("SENTRY_DSN", True),
        ("apiKey", True),  # camelCase words
        ("HFToken", True),
        ("X-Amz-Signature", True),
        ("AZURE_STORAGE_CONNECTION_STRING", True),
        ("JSESSIONID", True),
        ("db_passwords", True),  # plural
        ("PWD", False),
        ("OLDPWD", False),
        ("NCCL_IB_HCA", False),
        ("MASTER_ADDR", False),
        ("CUDA_VISIBLE_DEVICES", False),
        # a word holding a secret word at its start or middle is another word
        ("KEYBOARD_LAYOUT", False),
        ("author", False),
        ("tests_passed", False),
        ("TOKENIZERS_PARALLELISM", False),
        # an exception class: what follows it is its message, not a value it holds
        ("KeyError", False),
        ("torch.distributed.DistStoreError", False),
        ("TokenExpiredWarning", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_redact_env_hides_secret_names_and_scans_other_values() -> None:
    env = {
        "HF_TOKEN": "anything-at-all",
        "PIP_INDEX_URL": "https://u:pw123@pypi/simple",
        "PWD": "/srv/job",
        "NCCL_DEBUG": "INFO",
    }
    assert redact_env(env) == {
        "HF_TOKEN": REDACTED,
        "PIP_INDEX_URL": f"https://u:{REDACTED}@pypi/simple",
        "PWD": "/srv/job",
        "NCCL_DEBUG": "INFO",
    }


def test_allowlist_env_keeps_diagnosis_variables_only_and_redacts_them() -> None:
    env = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "10.0.0.1",
        "NCCL_DEBUG": "INFO",
        "TORCHELASTIC_RUN_ID": "job",
        "TORCH_HUB_TOKEN": "abc",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NAME": "not-listed",
        "HOME": "/root",
        "PATH": "/usr/bin",
        "AWS_SECRET_ACCESS_KEY": "xyz",
    }
    out = allowlist_env(env)
    assert out == {
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "10.0.0.1",
        "NCCL_DEBUG": "INFO",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "RANK": "3",
        "SLURM_JOB_ID": "77",
        "TORCHELASTIC_RUN_ID": "job",
        "TORCH_HUB_TOKEN": REDACTED,
    }
    assert list(out) == sorted(out)
    assert allowlist_env(env, redact=False)["TORCH_HUB_TOKEN"] == "abc"


def test_redact_argv_hides_the_word_after_a_secret_option() -> None:
    argv = ["python", "train.py", "--hf-token", "plainvalue", "--password=x", "--lr", "0.1", "-v"]
    assert redact_argv(argv) == [
        "python",
        "train.py",
        "--hf-token",
        REDACTED,
        f"--password={REDACTED}",
        "--lr",
        "0.1",
        "-v",
    ]


def test_redact_json_bytes_keeps_clean_bytes_and_rewrites_dirty_ones() -> None:
    clean = b'[{"pid": 1, "thread_name": "MainThread", "frames": []}]\n'
    assert redact_json_bytes(clean) == clean
    dirty = json.dumps([{"pid": 1, "thread_name": "hf_" + "x" * 30, "frames": []}]).encode()
    out = redact_json_bytes(dirty)
    assert b"x" * 30 not in out
    assert json.loads(out)[0]["thread_name"] == f"hf_{REDACTED}"
    assert redact_json_bytes(b"not json hf_" + b"x" * 30) == f"not json hf_{REDACTED}".encode()


@pytest.mark.parametrize(
    "line",
    [
        "KeyError: 'model.layers.0.self_attn.q_proj.weight'",
        "[rank3]: KeyError: 'learning_rate'",
        "    raise KeyError(key)\nKeyError: 'hf_token'",  # a config entry's name, not a token
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients",
        "export TOKENIZERS_PARALLELISM=false",
        "author: alice; tests passed: 12",
    ],
)
def test_a_traceback_line_is_not_taken_for_a_secret(line: str) -> None:
    # GIVEN a line whose names only happen to hold a secret word (Key in KeyError)
    # WHEN redacted THEN nothing is hidden: the key a KeyError names is the diagnosis
    assert redact_text(line) == line


def test_secrets_beside_an_exception_line_are_still_hidden() -> None:
    text = "KeyError: 'step' while DB_PASSWORD=hunter2 and token hf_AbCdEfGhIjKlMnOpQrStUvWx"
    out = redact_text(text)
    assert "KeyError: 'step'" in out
    assert "hunter2" not in out and "AbCdEfGhIjKlMnOpQrStUvWx" not in out


@pytest.mark.parametrize("case", SECRETS, ids=[c[0] for c in SECRETS])
def test_a_shape_is_clean_only_where_redaction_changes_nothing(case: tuple[str, str, str]) -> None:
    """shape_is_clean (texts that differ only in their digits decided once) never calls a
    text with a secret clean, whatever digits it holds, the digits of a trigger included
    ("ya29."): every secret of the table, its digits changed, and a clean line after it."""
    from hangdoc.common.redact import shape_is_clean

    shapes: dict[bytes, bool] = {}
    _, text, _ = case
    for variant in (text, text.translate(str.maketrans("0123456789", "9876543210"))):
        for probe in (f"rank 3 step 12 {variant}", "rank 3 step 12 all good"):
            if shape_is_clean(probe, shapes):
                assert redact_text(probe) == probe
        assert not shape_is_clean(f"rank 3 step 12 {variant}", shapes)
    # a line that differs only in digits from one known clean is clean, read from the cache
    assert shape_is_clean("rank 4 step 99 all good", shapes)
    assert redact_text("rank 4 step 99 all good") == "rank 4 step 99 all good"


def test_any_of_finds_a_word_where_the_plain_alternation_does() -> None:
    """The triggers' merged pattern finds a trigger at the same place as the alternation
    of them, in texts made of the triggers' own characters and pieces (prefixes, a word
    cut short, two words run together) where a merge that dropped or misplaced a branch
    would differ; and in the shapes' pattern likewise."""
    import random
    import re

    from hangdoc.common import redact

    shapes = {t.translate(redact._ZERO_DIGITS) for t in redact._ALL_TRIGGERS}
    nested = ("pass", "passwd", "password", "passphrase", "pa")
    for words, merged in (
        (redact._ALL_TRIGGERS, redact._ANY_TRIGGER),
        (shapes, redact._ANY_SHAPE_TRIGGER),
        (nested, redact.any_of(nested)),
    ):
        plain = re.compile("|".join(re.escape(w) for w in words))
        pieces = [w[:cut] for w in words for cut in range(1, len(w) + 1)]
        chars = [*sorted({c for w in words for c in w}), " ", "0", "\n"]
        rng = random.Random(20)
        texts = [*words, "", "nothing here", "PASSWORD".lower()]
        for _ in range(4000):
            parts = rng.choices(pieces, k=rng.randint(1, 4)) + rng.choices(
                chars, k=rng.randint(0, 5)
            )
            rng.shuffle(parts)
            texts.append("".join(parts))
        for text in texts:
            found, expected = merged.search(text), plain.search(text)
            assert (found and found.start()) == (expected and expected.start()), text
        assert any(plain.search(t) is None for t in texts)  # (both answers were asked)
    assert redact.any_of([]).search("anything") is None


def test_a_long_run_of_letters_is_scanned_in_linear_time() -> None:
    # GIVEN a hostile line: a run of 900,000 letters holding a secret word, no separator
    # (the parsers' fuzz test made one; the NAME=value scan once tried it from each letter)
    text = "Key" * 300_000
    started = time.perf_counter()
    # THEN it is redacted (nothing to hide) at once, and a name after it still is
    assert redact_text(text) == text
    assert redact_text(text + " HF_TOKEN=abc123").endswith("HF_TOKEN=<redacted>")
    assert time.perf_counter() - started < 5.0
