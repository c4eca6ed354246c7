"""The one place that decides what a secret looks like.

Every collector and renderer that writes an environment variable, a command line or a
log excerpt passes it through here first, so that a dump attached to a ticket never
carries a token. The rules lean towards redacting too much: a hidden ``SESSION_ID`` costs
nothing in a hang diagnosis, a leaked ``HF_TOKEN`` costs a credential rotation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

REDACTED = "<redacted>"

# A variable or option whose NAME contains one of these (case-insensitive) has its value
# hidden, whatever the value looks like. ``KEY`` also catches ``*_KEY_PATH``: a path is
# harmless, but telling the two apart by name is guesswork, and guessing wrong leaks.
SECRET_NAME_PARTS: tuple[str, ...] = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "SIGNATURE",
    "CONNECTION_STRING",
    "WEBHOOK",
    "DSN",
)

# Names that contain a part above but are known to be harmless and useful.
NOT_SECRET_NAMES: frozenset[str] = frozenset({"PWD", "OLDPWD"})

# Kept by allowlist_env: what a hang diagnosis needs from a rank's environment.
ALLOWED_ENV_NAMES: frozenset[str] = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "ROLE_RANK",
        "ROLE_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING",
        "OMP_NUM_THREADS",
        "PYTHONUNBUFFERED",
        "SLURM_JOB_ID",
        "SLURM_PROCID",
        "SLURM_NODEID",
        "SLURM_JOB_NODELIST",
        "HOSTNAME",
    }
)
# PYTORCH_ is here for PYTORCH_CUDA_ALLOC_CONF, which an OOM diagnosis needs.
ALLOWED_ENV_PREFIXES: tuple[str, ...] = ("TORCHELASTIC_", "NCCL_", "TORCH_", "PYTORCH_", "GLOO_")


def is_secret_name(name: str) -> bool:
    """True when a variable or option called ``name`` should have its value hidden."""
    upper = name.upper().lstrip("-")
    if upper in NOT_SECRET_NAMES:
        return False
    # Options are spelled with dashes (--hf-token); compare in the env-var spelling.
    upper = upper.replace("-", "_")
    return any(part in upper for part in SECRET_NAME_PARTS)


# --- value patterns ------------------------------------------------------------------

_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----.*?(?:-----END \1-----|\Z)",
    re.DOTALL,
)
# scheme://user:password@host; the password may itself contain '@' (greedy up to the
# last '@' before the path), and the user may be empty (redis://:pw@host).
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^:/@\s]*):([^/\s]+)@")
_AUTH_HEADER = re.compile(
    r"((?:Proxy-)?Authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(Bearer|Basic|Token|Digest|Negotiate|Bot)\s+)?([^\s\"',;]+)",
    re.IGNORECASE,
)
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "bot"})
_BEARER = re.compile(r"\b(Bearer)\s+([A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE)

# Provider token shapes: (pattern, kept prefix). The prefix stays so that a reader can
# still tell *which* credential was present (an HF token vs a GitHub token) without it.
_TOKEN_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "hf_"),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), "github_pat_"),
    (re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{20,}"), r"\1"),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), "glpat-"),
    (re.compile(r"\b((?:AKIA|ASIA)[A-Z0-9]{16})\b"), ""),
    (re.compile(r"\b(sk-(?:proj-|svcacct-|admin-|ant-)?)[A-Za-z0-9_\-]{20,}"), r"\1"),
    (re.compile(r"\b((?:sk|rk)_(?:live|test)_)[A-Za-z0-9]{16,}"), r"\1"),
    (re.compile(r"\b(xox[abprs]-)[A-Za-z0-9\-]{10,}"), r"\1"),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), "AIza"),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"), ""),
)

# NAME=value, NAME: value, "name": "value", --name=value. The value is redacted only
# when the name looks secret (decided in _redact_assignment).
_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)"
    r"(?P<sep>[\"']?\s*[:=]\s*)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&}\]]+)"
)


def _redact_assignment(match: re.Match[str]) -> str:
    name, sep, value = match.group("name", "sep", "value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    bare = value[1:-1] if quote else value
    if not is_secret_name(name) or bare in ("", REDACTED) or bare.lower() in _AUTH_SCHEMES:
        # An auth scheme word ("Authorization: Bearer <redacted>") was handled above.
        return match.group(0)
    return f"{name}{sep}{quote}{REDACTED}{quote}"


def _redact_auth_header(match: re.Match[str]) -> str:
    head, scheme, _ = match.groups()
    return f"{head}{scheme + ' ' if scheme else ''}{REDACTED}"


def _keep_prefix(prefix: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return match.expand(prefix) + REDACTED

    return replace


def _redact_pem(match: re.Match[str]) -> str:
    kind = match.group(1)
    return f"-----BEGIN {kind}-----{REDACTED}-----END {kind}-----"


def redact_text(text: str) -> str:
    """Hide credentials inside free text: a log line, an env value, a command-line word.

    Idempotent: redacting twice gives the same text as redacting once.
    """
    if not text:
        return text
    text = _PEM.sub(_redact_pem, text)
    text = _AUTH_HEADER.sub(_redact_auth_header, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", text)
    for pattern, prefix in _TOKEN_SHAPES:
        text = pattern.sub(_keep_prefix(prefix), text)
    return _ASSIGNMENT.sub(_redact_assignment, text)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of ``env`` where secret-named variables are hidden and every value is scanned."""
    return {
        name: REDACTED if is_secret_name(name) else redact_text(value)
        for name, value in env.items()
    }


def allowlist_env(env: Mapping[str, str], *, redact: bool = True) -> dict[str, str]:
    """The diagnosis-relevant part of a rank's environment, sorted by name, redacted.

    A dump records why a rank behaves as it does (its rank, NCCL settings, visible
    devices), not the whole environment: fewer variables, fewer ways to leak.
    """
    kept = {
        name: env[name]
        for name in sorted(env)
        if name in ALLOWED_ENV_NAMES or name.startswith(ALLOWED_ENV_PREFIXES)
    }
    return redact_env(kept) if redact else kept


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Redact a command line word by word, including ``--password VALUE`` (two words).

    A command line is a list, so the name of an option and its value can be separate
    entries that ``redact_text`` alone would never see together.
    """
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        out.append(redact_text(word))
        if word.startswith("-") and "=" not in word and len(word) > 1 and is_secret_name(word):
            hide_next = True
    return out


def redact_json_bytes(data: bytes) -> bytes:
    """Redact every string inside a JSON document (a py-spy dump: thread names, frames...).

    The bytes come back untouched when nothing needed hiding, so a tool's raw output
    stays raw.
    """
    try:
        parsed = json.loads(data)
    except ValueError:  # not JSON after all: redact it as text rather than pass it through
        text = data.decode("utf-8", "replace")
        cleaned_text = redact_text(text)
        return data if cleaned_text == text else cleaned_text.encode("utf-8")
    changed = False

    def walk(value: object) -> object:
        nonlocal changed
        if isinstance(value, str):
            cleaned = redact_text(value)
            changed = changed or cleaned != value
            return cleaned
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    cleaned = walk(parsed)
    return (json.dumps(cleaned, indent=2) + "\n").encode("utf-8") if changed else data
