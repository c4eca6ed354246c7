"""The one place that decides what a secret looks like.

Every collector and renderer that writes an environment variable, a command line or a
log excerpt passes it through here first, so that a dump attached to a ticket never
carries a token. The rules lean towards redacting too much: a hidden ``SESSION_ID`` costs
nothing in a hang diagnosis, a leaked ``HF_TOKEN`` costs a credential rotation.

Three ways a secret is recognised, each by what the value is: by the name that holds it
(``HF_TOKEN=…``, ``--password X``, a JSON key, a py-spy local: the name's words, never a
word that only contains one, so ``KeyError: 'lr'`` is an exception's message, not a
key), by its shape (provider token formats, PEM keys, JWTs), and by its place
(credentials in URLs, ``Authorization`` headers, signed-URL ``sig=``). Users:
collect (environment, command lines, py-spy JSON, copied logs, and a last pass over
whatever extra collectors wrote), the analyzer (``analyzer/loading/redaction.py`` redacts the
loaded Evidence, so every report is), and the ticket archive. Text is scanned only where
a pattern's trigger literal occurs: 20 MB of log costs ~0.5 s, not ~8 s.
tests/reliability/ holds the property tests (see RELIABILITY.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"

# A variable or option whose NAME has one of these words has its value hidden, whatever
# the value looks like. A name is read as words (``HF_TOKEN``, ``hfToken``, ``--hf-token``:
# hf, token); a word counts as itself, plural, or as the end of a word written without
# separators (``PGPASSWORD``, ``APIKEY``, ``oauth``), never as some other word's start or
# middle (``keyboard``, ``author``, ``passed``, ``tokenizers``). ``KEY`` also catches
# ``*_KEY_PATH``: a path is harmless, but telling the two apart by name is guesswork, and
# guessing wrong leaks.
SECRET_NAME_WORDS: tuple[str, ...] = (
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "pass",
    "pwd",
    "key",
    "credential",
    "auth",
    "authorization",
    "cookie",
    "session",
    "sessionid",
    "private",
    "signature",
    "webhook",
    "dsn",
)
# Secrets named by two words: AZURE_STORAGE_CONNECTION_STRING, connectionString.
SECRET_NAME_PHRASES: tuple[tuple[str, ...], ...] = (("connection", "string"),)

# Names that hold a word above but are known to be harmless and useful.
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


# The words of an identifier: runs of capitals before a capitalised word (HFToken: HF,
# Token), capitalised or lowercase words, capitals, numbers.
_NAME_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# A Python exception or warning class (``KeyError``, ``torch.distributed.DistStoreError``):
# in "KeyError: 'model.embed'" the text after it is the exception's message, not a value
# that the name holds, so the class name's words (Key) say nothing about it.
_EXCEPTION_CLASS = re.compile(
    r"(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning)"
)
_WORD_SET = frozenset(SECRET_NAME_WORDS) | {f"{w}s" for w in SECRET_NAME_WORDS}
_WORD_ENDS = tuple(sorted(_WORD_SET, key=len, reverse=True))


def is_secret_name(name: str) -> bool:
    """True when a variable, option or key called ``name`` should have its value hidden.

    Decided by the name's words, not by a substring: ``HF_TOKEN``, ``apiKey``,
    ``--db-password``, ``PGPASSWORD`` are secret; ``KeyError`` (an exception class),
    ``KEYBOARD_LAYOUT``, ``author``, ``TOKENIZERS_PARALLELISM`` are not.
    """
    bare = name.lstrip("-")
    if bare.upper() in NOT_SECRET_NAMES or _EXCEPTION_CLASS.fullmatch(bare):
        return False
    words = [w.lower() for w in _NAME_WORDS.findall(bare)]
    if any(w in _WORD_SET or w.endswith(_WORD_ENDS) for w in words):
        return True
    return any(
        tuple(words[i : i + len(phrase)]) == phrase
        for phrase in SECRET_NAME_PHRASES
        for i in range(len(words) - len(phrase) + 1)
    )


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
# Signed URLs: Azure SAS ``sig=``; the other clouds' names (X-Amz-Signature, X-Goog-
# Signature, X-Amz-Credential) contain a secret name part and are caught as assignments.
_URL_SIGNATURE = re.compile(r"([?&]sig=)[^&\s\"'#]+", re.IGNORECASE)
# Webhook URLs are the credential themselves: keep the host, hide the path.
_WEBHOOK_URL = re.compile(
    r"(https://(?:hooks\.slack\.com/services|(?:discord|discordapp)\.com/api/webhooks)/)"
    r"[A-Za-z0-9_/\-]+"
)
# A py-spy ``--locals`` entry in JSON: {"name": "hf_token", "addr": .., "arg": .., "repr":
# "'…'"}. The value's own text rarely looks secret; its variable's name does.
_PYSPY_LOCAL = re.compile(
    r"(\"name\"\s*:\s*\"(?P<name>[^\"\\]{1,200})\""
    r"(?:\s*,\s*\"(?:addr|arg)\"\s*:\s*[^,{}\[\]\"]{0,40})*\s*,\s*\"repr\"\s*:\s*)"
    r"\"(?P<value>(?:[^\"\\]|\\.)*)\""
)

# Provider token shapes: (pattern, kept prefix, triggers). The prefix stays so that a
# reader can still tell *which* credential was present (an HF token vs a GitHub token);
# a trigger is a lowercase literal without which the pattern cannot match.
_TOKEN_SHAPES: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "hf_", ("hf_",)),
    (re.compile(r"\bapi_org_[A-Za-z0-9]{20,}"), "api_org_", ("api_org_",)),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), "github_pat_", ("github_pat_",)),
    (
        re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{20,}"),
        r"\1",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    (
        re.compile(r"\b(gl(?:pat|dt|ptt|rt)-)[A-Za-z0-9_\-]{20,}"),
        r"\1",
        ("glpat-", "gldt-", "glptt-", "glrt-"),
    ),
    (re.compile(r"\b((?:AKIA|ASIA)[A-Z0-9]{16})\b"), "", ("akia", "asia")),
    (re.compile(r"\b(sk-(?:proj-|svcacct-|admin-|ant-)?)[A-Za-z0-9_\-]{20,}"), r"\1", ("sk-",)),
    (re.compile(r"\b((?:sk|rk|pk)_(?:live|test)_)[A-Za-z0-9]{16,}"), r"\1", ("_live_", "_test_")),
    (re.compile(r"\b(xox[abprse]-)[A-Za-z0-9\-]{10,}"), r"\1", ("xox",)),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), "AIza", ("aiza",)),
    (re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), "ya29.", ("ya29.",)),
    (re.compile(r"\bGOCSPX-[0-9A-Za-z_\-]{20,}"), "GOCSPX-", ("gocspx-",)),
    (re.compile(r"\bpypi-AgE[A-Za-z0-9_\-]{20,}"), "pypi-", ("pypi-",)),
    (re.compile(r"\bnpm_[A-Za-z0-9]{30,}"), "npm_", ("npm_",)),
    (re.compile(r"\bdapi[0-9a-f]{32}(?:-\d+)?\b"), "dapi", ("dapi",)),
    (re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), "SG.", ("sg.",)),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"), "", ("eyj",)),
)

# NAME=value, NAME: value, "name": "value", --name=value. The value is redacted only
# when the name looks secret (decided in _redact_assignment).
# A value ending in ':' is the next key, not a value ("NET/IB : secret_token: …"); a value
# may sit on the next line ("password:\n  value", YAML), and there it must not be the next
# line's own name ("Locals:\n  token= '…'"). Possessive: no shorter value is tried. A name
# does not start right after a letter or "_": the match from that letter ends where this
# one would (no name character starts a separator), so it answers first and alike, and a
# long identifier with no separator is not tried from each of its letters (a hostile file's
# run of letters made the scan quadratic: the parsers' fuzz test, 2026-11-29).
_NAME_START = r"(?<![A-Za-z_])"
_ASSIGNMENT = re.compile(
    _NAME_START + r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)"
    r"(?P<sep>[\"']?[ \t]*[:=][ \t]*(?P<nl>\r?\n\s*)?)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|(?(nl)[^\s\"',;&}\]]++(?<![:=])|[^\s\"',;&}\]]++(?<!:)))"
)

# Second pass for the next-line form when the first pass took the key for a value
# ("stderr: secret_token:\n  …": "secret_token:" was the value of "stderr").
_NEXT_LINE_ASSIGNMENT = re.compile(
    _NAME_START + r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)"
    r"(?P<sep>[\"']?[ \t]*[:=][ \t]*\r?\n\s*)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&}\]]++(?<![:=]))"
)


def _redact_assignment(match: re.Match[str]) -> str:
    name, sep, value = match.group("name", "sep", "value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    bare = value[1:-1] if quote else value
    if not is_secret_name(name):
        # The value may hold an assignment of its own: "config: DB_PASSWORD=x",
        # "opts=--token=x", an env dump's "VAR=NAME=x".
        inner = _ASSIGNMENT.sub(_redact_assignment, bare) if ("=" in bare or ":" in bare) else bare
        return match.group(0) if inner == bare else f"{name}{sep}{quote}{inner}{quote}"
    if bare in ("", REDACTED) or bare.lower() in _AUTH_SCHEMES:
        # An auth scheme word ("Authorization: Bearer <redacted>") was handled above.
        return match.group(0)
    return f"{name}{sep}{quote}{REDACTED}{quote}"


def _redact_auth_header(match: re.Match[str]) -> str:
    head, scheme, _ = match.groups()
    return f"{head}{scheme + ' ' if scheme else ''}{REDACTED}"


def _redact_pyspy_local(match: re.Match[str]) -> str:
    if not is_secret_name(match.group("name")) or match.group("value") == REDACTED:
        return match.group(0)
    return f'{match.group(1)}"{REDACTED}"'


def _keep_prefix(prefix: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return match.expand(prefix) + REDACTED

    return replace


def _redact_pem(match: re.Match[str]) -> str:
    kind = match.group(1)
    return f"-----BEGIN {kind}-----{REDACTED}-----END {kind}-----"


_Replacement = Callable[[re.Match[str]], str]
# (pattern, replacement, triggers): a pattern runs only on text that contains one of its
# triggers (lowercase literals). Checking a literal is C-speed; running twenty regexes
# over every byte of a 16 MB log is not (measured: 8 s for 20 MB before, 0.3 s after).
_Rule = tuple[re.Pattern[str], _Replacement, tuple[str, ...]]
# Every secret name holds one of its words (or a phrase's first word) as a substring.
_NAME_TRIGGERS: tuple[str, ...] = tuple(
    sorted({*SECRET_NAME_WORDS, *(phrase[0] for phrase in SECRET_NAME_PHRASES)})
)
# Patterns that span lines run over the whole text.
_MULTILINE_RULES: tuple[_Rule, ...] = (
    (_PEM, _redact_pem, ("-----begin",)),
    (_PYSPY_LOCAL, _redact_pyspy_local, ('"repr"',)),
)
# The rest match within a line (or a line and the next: "password:\n  value").
_LINE_RULES: tuple[_Rule, ...] = (
    (_AUTH_HEADER, _redact_auth_header, ("authorization",)),
    (_BEARER, lambda m: f"{m.group(1)} {REDACTED}", ("bearer",)),
    (_URL_CREDENTIALS, lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", ("://",)),
    (_WEBHOOK_URL, lambda m: f"{m.group(1)}{REDACTED}", ("hooks.slack", "/api/webhooks")),
    (_URL_SIGNATURE, lambda m: f"{m.group(1)}{REDACTED}", ("sig=",)),
    *((pattern, _keep_prefix(prefix), triggers) for pattern, prefix, triggers in _TOKEN_SHAPES),
    (_ASSIGNMENT, _redact_assignment, _NAME_TRIGGERS),
    (_NEXT_LINE_ASSIGNMENT, _redact_assignment, _NAME_TRIGGERS),
)
_ALL_LINE_TRIGGERS: tuple[str, ...] = tuple(sorted({t for _, _, ts in _LINE_RULES for t in ts}))
_ALL_TRIGGERS: tuple[str, ...] = tuple(
    sorted({*_ALL_LINE_TRIGGERS, *(t for r in _MULTILINE_RULES for t in r[2])})
)


def any_of(words: Iterable[str]) -> re.Pattern[str]:
    """A pattern that finds any of ``words`` (literals) where a plain alternation of them
    would, their common prefixes merged into one branch (``pass(?:phrase|w(?:d|ord))?``):
    re tries an alternation's branches one by one at each place, and most letters of a
    text start some trigger, so the merged form scans 2.9 times faster (the 5,118 event
    shapes of the 4,096-rank benchmark: 11 ms against 32). Only whether and where some
    word is found is the alternation's; which word a match is may differ (the callers
    ask only whether one is found)."""
    trie: dict[str, Any] = {}
    for word in set(words):
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def branches(node: dict[str, Any]) -> list[str]:
        return [re.escape(char) + rest(child) for char, child in sorted(node.items()) if char]

    def rest(node: dict[str, Any]) -> str:
        alternatives = branches(node)
        if not alternatives:
            return ""
        body = alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"
        return f"(?:{body})?" if "" in node else body

    return re.compile("|".join(branches(trie)) or "(?!)")


# One regex over every trigger: most short texts (a frame, a thread name) hold none.
_ANY_TRIGGER = any_of(_ALL_TRIGGERS)
# A text's shape: its ASCII digits made "0" (the ranks of a job print the same lines
# with other numbers, a host's or an address's among them). The triggers' shapes: a
# text that holds a trigger has a shape that holds the trigger's shape (a digit of
# "ya29." is a "0" in both), so a shape without any holds texts without a trigger.
_ZERO_DIGITS = str.maketrans("123456789", "000000000")
_ZERO_DIGIT_BYTES = bytes.maketrans(b"123456789", b"000000000")
_ANY_SHAPE_TRIGGER = any_of(t.translate(_ZERO_DIGITS) for t in _ALL_TRIGGERS)
# Below this many characters a text is redacted in one go; above, only the lines that
# hold a trigger are (a log of millions of lines has a few that matter).
_SMALL_TEXT = 4096


def _apply(rules: tuple[_Rule, ...], text: str, lower: str) -> str:
    for pattern, replace, triggers in rules:
        if any(t in lower for t in triggers):
            text = pattern.sub(replace, text)
    return text


def _line_chunks(text: str, lower: str) -> list[tuple[int, int]]:
    """Merged (start, end) spans of the lines holding a trigger, each with the line after
    it (and the blank lines between), so a value on the next line stays in the chunk."""
    spans: list[tuple[int, int]] = []
    for trigger in _ALL_LINE_TRIGGERS:
        pos = lower.find(trigger)
        while pos != -1:
            start = text.rfind("\n", 0, pos) + 1
            line_end = text.find("\n", pos)
            if line_end == -1:
                spans.append((start, len(text)))
                break
            spans.append((start, _after_next_line(text, line_end)))
            pos = lower.find(trigger, line_end)  # the next occurrence on a later line
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _after_next_line(text: str, newline: int) -> int:
    """The end of the first non-blank line after the newline at ``newline``."""
    end = newline
    while True:
        nxt = text.find("\n", end + 1)
        line_end = len(text) if nxt == -1 else nxt
        if text[end + 1 : line_end].strip() or nxt == -1:
            return line_end
        end = nxt


# A colour code (ESC[…m, or "[36m" pasted without its ESC) ends in a letter, so a token
# right after one has no word boundary: "\x1b[33mhf_…" would slip past "\bhf_". A
# private-use character is put after each code while redacting, and taken out after.
_COLOUR = re.compile(r"\x1b?\[[0-9;]{0,12}m")
_MARK = "\ue000"


def redact_text(text: str) -> str:
    """Hide credentials inside free text: a log line, an env value, a command-line word.

    Idempotent: redacting twice gives the same text as redacting once. Fast on clean
    text: a pattern only runs where one of its trigger literals occurs.
    """
    if not text:
        return text
    if "[" in text and _MARK not in text and _COLOUR.search(text):
        marked = _COLOUR.sub(lambda m: m.group(0) + _MARK, text)
        return _redact_plain(marked).replace(_MARK, "")
    return _redact_plain(text)


def shape_is_clean(text: str, shapes: dict[bytes, bool]) -> bool:
    """True when ``text`` holds no trigger literal, so that ``redact_text`` gives it back
    as it is; decided once per shape (``shapes``: shape → clean, kept by the caller) for
    texts that differ only in their digits, tens of thousands in a job's log events.
    False says nothing: redact the text. (The shape is looked up as UTF-8 bytes, made
    in C 5 times faster than by ``str.translate``; the bytes of an ASCII digit are that
    digit's only, so the two shapes say the same. The triggers are searched for in the
    text's lowercase, as ``redact_text`` searches: a letter outside ASCII may have an
    ASCII one as its lowercase.)"""
    shape = text.encode("utf-8", "surrogatepass").translate(_ZERO_DIGIT_BYTES)
    clean = shapes.get(shape)
    if clean is None:
        found = _ANY_SHAPE_TRIGGER.search(text.translate(_ZERO_DIGITS).lower())
        clean = shapes[shape] = found is None
    return clean


def _redact_plain(text: str) -> str:
    lower = text.lower()
    if len(text) <= _SMALL_TEXT and _ANY_TRIGGER.search(lower) is None:
        return text
    if len(lower) != len(text):  # a character whose lowercase is longer: no offsets
        return _apply(_LINE_RULES, _apply(_MULTILINE_RULES, text, lower), lower)
    redacted = _apply(_MULTILINE_RULES, text, lower)
    if redacted is not text:
        text, lower = redacted, redacted.lower()
    if len(text) <= _SMALL_TEXT:
        return _apply(_LINE_RULES, text, lower)
    out: list[str] = []
    done = 0
    for start, end in _line_chunks(text, lower):
        out.append(text[done:start])
        out.append(_apply(_LINE_RULES, text[start:end], lower[start:end]))
        done = end
    out.append(text[done:])
    return "".join(out)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of ``env`` where secret-named variables are hidden and every value is scanned."""
    return {
        name: REDACTED if is_secret_name(name) else redact_text(value)
        for name, value in env.items()
    }


def redact_local(name: str, value: str) -> str:
    """A py-spy ``--locals`` value: hidden whole when its variable's name looks secret.

    Called by the py-spy parsers as they build each frame (the only producers of
    locals), so frames never need a second walk; rules read locals (a lock's repr, a
    worker id), reports never show them.
    """
    if value and is_secret_name(name):
        return REDACTED
    return redact_text(value)


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


def redact_cmdline(cmdline: str) -> str:
    """A command line kept as one string (``python train.py --token X``), word by word."""
    return " ".join(redact_argv(cmdline.split(" ")))


# Keys of a JSON object that name the value of its "name" entry: py-spy's locals
# ({"name": "hf_token", "repr": "'...'"}) and name/value pairs in general.
_VALUE_KEYS: tuple[str, ...] = ("repr", "value")


def redact_json_value(value: object, key: str | None = None) -> object:
    """A copy of a decoded JSON (or plain-data pickle) value with every secret hidden.

    A string under a secret-looking key (``{"HF_TOKEN": "…"}``) is hidden whole; the
    ``repr``/``value`` of an object whose ``name`` looks secret (a py-spy local) too;
    a list of strings is redacted as a command line (``["--token", "…"]``); every other
    string goes through :func:`redact_text`. Unchanged parts keep their identity.
    """
    if isinstance(value, str):
        if key is not None and value and value != REDACTED and is_secret_name(key):
            return REDACTED
        return redact_text(value)
    if isinstance(value, list | tuple):  # tuples: a plain-data pickle (flight recorder)
        if len(value) > 1 and all(isinstance(v, str) for v in value):
            words = redact_argv([v for v in value if isinstance(v, str)])
            return value if words == list(value) else type(value)(words)
        items = [redact_json_value(v) for v in value]
        unchanged = all(a is b for a, b in zip(items, value, strict=True))
        return value if unchanged else type(value)(items)
    if isinstance(value, dict):
        name = value.get("name")
        secret_entry = isinstance(name, str) and is_secret_name(name)
        out: dict[object, object] = {}
        changed = False
        for k, v in value.items():
            if secret_entry and k in _VALUE_KEYS and v not in (None, "", REDACTED):
                new: object = REDACTED
            else:
                new = redact_json_value(v, k if isinstance(k, str) else None)
            changed = changed or new is not v
            out[k] = new
        return out if changed else value
    return value


def redact_json_bytes(data: bytes) -> bytes:
    """Redact a JSON document (a py-spy dump, a process file) with :func:`redact_json_value`.

    The bytes come back untouched when nothing needed hiding, so a tool's raw output
    stays raw. Bytes that are not JSON (a dump cut short) are redacted as text.
    """
    try:
        parsed = json.loads(data)
        cleaned = redact_json_value(parsed)
    except (ValueError, RecursionError):  # not JSON after all (or nested past the
        # recursion limit): redact it as text rather than pass it through
        text = data.decode("utf-8", "replace")
        cleaned_text = redact_text(text)
        return data if cleaned_text == text else cleaned_text.encode("utf-8")
    if cleaned is parsed:
        return data
    return (json.dumps(cleaned, indent=2) + "\n").encode("utf-8")
