"""An inference server's HTTP side: its health check failing, and the requests it answered.

SGLang's ``/health_generate`` (python/sglang/srt/entrypoints/http_server.py,
``health_generate``; ``/health`` too from 2025) sends a one-token generation and waits
until the TokenizerManager receives *any* output from the detokenizer after it started
(``last_receive_tstamp > tic``), polling each second for ``HEALTH_CHECK_TIMEOUT`` seconds
(20 by default, ``SGLANG_HEALTH_CHECK_TIMEOUT``). When none came it logs "Health check
failed. Server couldn't get a response from detokenizer for last {HEALTH_CHECK_TIMEOUT}
seconds." (newer: then ". tic start time: {tic_time}. last_heartbeat time: …"), marks the
server UnHealthy and answers 503. So the line says the model produced nothing for that
long: a scheduler stuck, or one busy with something long (kernels compiled on first use,
a long prefill), not which.

The HTTP process is uvicorn, whose access log (uvicorn/logging.py ``AccessFormatter``,
default format ``%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s``)
prints one line a request: ``INFO:     10.0.0.1:43954 - "POST /v1/chat/completions
HTTP/1.1" 200 OK``. uvicorn logs it when the response *starts* (its ``http.response.start``
message): for a plain request that is when the handler returned, so after the model's
answer; for a streaming one (``"stream": true``) it is when the stream opened, before any
token.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.serving import HealthCheckFailed, HttpRequest
from hangdoc.analyzer.vocabulary import EventKind

_HEALTH = re.compile(
    r"Health check failed\. Server couldn't get a response from detokenizer for last "
    r"(?P<timeout>\d+(?:\.\d+)?) seconds\."
    r"(?: tic start time: (?P<tic>[\d:]+)\.)?(?: last_heartbeat time: (?P<last>[\d:]+))?"
)

# uvicorn's access line: client address ("host:port", or "-" when unknown), the request
# line, the status code and its phrase.
_ACCESS = re.compile(
    r'(?:^|\s)(?P<client>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/\d(?:\.\d)?" '
    r"(?P<status>[1-5]\d\d)\b"
)

# The routes whose handler waits for the model's output (TokenizerManager.generate_request):
# SGLang's native ones (http_server.py: /generate, /generate_from_file, /encode, /classify,
# /health_generate) and the OpenAI-compatible ones SGLang and vLLM serve.
_MODEL_ROUTES = frozenset(
    {
        "/generate",
        "/generate_from_file",
        "/encode",
        "/classify",
        "/health_generate",
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/embeddings",
        "/v1/score",
        "/v1/rerank",
        "/v1/responses",
    }
)

# Every line the recogniser makes an event of holds one of these (literals.Need).
NEED = Need.patterns(_HEALTH, _ACCESS)


def match_serving(text: str) -> Hit | None:
    """A failed health check, or one request an ASGI server answered."""
    if not NEED.admits(text):
        return None
    m = _HEALTH.search(text)
    if m is not None:
        payload = HealthCheckFailed(
            message=text[m.start() :].strip()[:200],
            timeout_s=float(m.group("timeout")),
            started=m.group("tic"),
            last_heartbeat=m.group("last"),
        )
        return Hit(EventKind.HEALTH_CHECK_FAILED, payload=payload)
    a = _ACCESS.search(text)
    if a is None:
        return None
    path = a.group("path").split("?", 1)[0]
    request = HttpRequest(
        method=a.group("method"),
        path=path,
        status=int(a.group("status")),
        model_route=path.rstrip("/") in _MODEL_ROUTES,
    )
    # No key: one event a request, in order (what came after a failed health check).
    return Hit(EventKind.HTTP_REQUEST, payload=request)
