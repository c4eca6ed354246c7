"""Fake secrets of every kind ``hangdoc.common.redact`` recognises, and a scanner.

Each :class:`Plant` is a line as a job would print it (``text``) and the part of it
that must never reach a dump, an archive or a report (``secret``). Values are random
per seed, shaped like the real credential and valid nowhere. A secret printed with
no name and no recognisable shape (a bare random word) cannot be told from any other
word; those are covered by name only (environment variables, ``--locals``), never in
free text.
"""

from __future__ import annotations

import base64
import html
import json
import random
import string
import tarfile
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

_ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Plant:
    kind: str
    text: str  # as printed in a log line (may hold the secret's name and prefix)
    secret: str  # what must not survive anywhere


def _word(rng: random.Random, n: int, alphabet: str = _ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def plants(seed: int = 0) -> list[Plant]:
    """One plant per kind the redaction module supports in free text."""
    r = random.Random(seed)
    upper = string.ascii_uppercase + string.digits
    hexd = "0123456789abcdef"
    pem_body = "MIIEow" + _word(r, 40)
    jwt_sig = _word(r, 30)
    out: list[tuple[str, str, Callable[[], str]]] = [
        ("hf-token", "hf_{}", lambda: _word(r, 34)),
        ("hf-org-token", "api_org_{}", lambda: _word(r, 34)),
        ("github-classic", "ghp_{}", lambda: _word(r, 36)),
        ("github-oauth", "gho_{}", lambda: _word(r, 36)),
        ("github-app-user", "ghu_{}", lambda: _word(r, 36)),
        ("github-server", "ghs_{}", lambda: _word(r, 36)),
        ("github-refresh", "ghr_{}", lambda: _word(r, 36)),
        ("github-fine-grained", "github_pat_{}", lambda: _word(r, 60)),
        ("gitlab-pat", "glpat-{}", lambda: _word(r, 20)),
        ("gitlab-deploy", "gldt-{}", lambda: _word(r, 24)),
        ("aws-access-key-id", "{}", lambda: "AKIA" + _word(r, 16, upper)),
        ("aws-session-key-id", "{}", lambda: "ASIA" + _word(r, 16, upper)),
        ("aws-secret-by-name", "AWS_SECRET_ACCESS_KEY={}", lambda: _word(r, 40)),
        ("openai", "sk-proj-{}", lambda: _word(r, 48)),
        ("anthropic", "sk-ant-{}", lambda: _word(r, 48)),
        ("stripe-live", "sk_live_{}", lambda: _word(r, 24)),
        ("stripe-restricted", "rk_test_{}", lambda: _word(r, 24)),
        ("slack-bot", "xoxb-{}", lambda: _word(r, 30)),
        ("google-api-key", "AIza{}", lambda: _word(r, 35)),
        ("google-oauth-access", "ya29.{}", lambda: _word(r, 40)),
        ("google-oauth-client-secret", "GOCSPX-{}", lambda: _word(r, 28)),
        ("pypi", "pypi-AgE{}", lambda: _word(r, 60)),
        ("npm", "npm_{}", lambda: _word(r, 36)),
        ("databricks", "dapi{}", lambda: _word(r, 32, hexd)),
        ("sendgrid", "SG.{}", lambda: _word(r, 22) + "." + _word(r, 43)),
        ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.{}", lambda: jwt_sig),
        ("url-credentials", "https://alice:{}@pypi.internal/simple", lambda: _word(r, 16)),
        ("url-credentials-redis", "redis://:{}@cache:6379/0", lambda: _word(r, 16)),
        ("bearer-header", "Authorization: Bearer {}", lambda: _word(r, 32)),
        ("basic-header", "Proxy-Authorization: Basic {}", lambda: _word(r, 24)),
        ("bearer-bare", "sending Bearer {} upstream", lambda: _word(r, 28)),
        ("azure-sas", "https://acct.blob.core.windows.net/c?sv=2022&sig={}", lambda: _word(r, 40)),
        ("slack-webhook", "https://hooks.slack.com/services/{}", lambda: _word(r, 30)),
        ("discord-webhook", "https://discord.com/api/webhooks/{}", lambda: _word(r, 30)),
        ("password-assignment", "DB_PASSWORD={}", lambda: _word(r, 18)),
        ("nested-assignment", "config: WANDB_API_KEY={}", lambda: _word(r, 40)),
        ("json-field", '{{"api_key": "{}"}}', lambda: _word(r, 20)),
        ("cli-option", "--hf-token={}", lambda: _word(r, 20)),
        ("yaml-next-line", "secret_token:\n  {}", lambda: _word(r, 22)),
        ("pem", "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
         lambda: pem_body),
    ]  # fmt: skip
    result = []
    for kind, template, make in out:
        secret = make()
        result.append(Plant(kind, template.format(secret), secret))
    return result


def encodings(secret: str) -> dict[str, bytes]:
    """The forms a secret could take in an output: raw, JSON- and HTML-escaped, base64
    (at each of the three alignments inside a longer blob), URL-encoded."""
    raw = secret.encode()
    forms = {
        "raw": raw,
        "json": json.dumps(secret)[1:-1].encode(),
        "html": html.escape(secret).encode(),
        "url": urllib.parse.quote(secret, safe="").encode(),
        "url-plus": urllib.parse.quote_plus(secret).encode(),
    }
    for pad in range(3):
        blob = base64.b64encode(b"\0" * pad + raw)
        skip = 4 * ((pad + 2) // 3)  # drop the group that mixes in the padding bytes
        forms[f"base64+{pad}"] = blob[skip:-8]  # and the last ones: they mix with what follows
    return forms


def leaks(blobs: Iterable[tuple[str, bytes]], secrets: Iterable[str]) -> list[str]:
    """Every (where, secret kind, form) at which a secret appears in the blobs."""
    forms = {s: encodings(s) for s in secrets}
    found = []
    for where, blob in blobs:
        for secret, by_form in forms.items():
            for form, needle in by_form.items():
                if len(needle) >= 8 and needle in blob:
                    found.append(f"{where}: {form} form of {secret[:6]}…")
    return found


def tree_bytes(root: Path) -> Iterator[tuple[str, bytes]]:
    """Every regular file under ``root``, and every member of every archive among them."""
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        yield str(path), data
        if path.name.endswith((".tar.gz", ".tgz", ".tar")):
            yield from archive_bytes(path)


def archive_bytes(path: Path) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                yield f"{path}!/{member.name}", handle.read()
