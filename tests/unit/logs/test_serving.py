"""An inference server's HTTP side (parsers/logs/serving.py). The lines are written from
their format strings: SGLang's ``health_generate`` (python/sglang/srt/entrypoints/
http_server.py: "Health check failed. Server couldn't get a response from detokenizer for
last {HEALTH_CHECK_TIMEOUT} seconds. tic start time: {tic_time}. last_heartbeat time:
{last_receive_time}", the tail absent in older releases) and uvicorn's access log
(uvicorn/logging.py ``AccessFormatter``: ``%(levelprefix)s %(client_addr)s -
"%(request_line)s" %(status_code)s``)."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs.serving import match_serving
from hangdoc.analyzer.payloads.serving import HealthCheckFailed, HttpRequest
from hangdoc.analyzer.vocabulary import EventKind


@pytest.mark.parametrize(
    ("line", "timeout", "last"),
    [
        (
            "[2025-09-24 05:48:14] Health check failed. Server couldn't get a response from "
            "detokenizer for last 20 seconds. tic start time: 05:47:54. last_heartbeat time: "
            "05:42:53",
            20.0,
            "05:42:53",
        ),
        (
            "Health check failed. Server couldn't get a response from detokenizer for last 60 "
            "seconds.",
            60.0,
            None,
        ),
    ],
)
def test_a_failed_health_check_is_read_with_its_timeout(
    line: str, timeout: float, last: str | None
) -> None:
    hit = match_serving(line)
    assert hit is not None and hit.kind is EventKind.HEALTH_CHECK_FAILED
    assert isinstance(hit.payload, HealthCheckFailed)
    assert hit.payload.timeout_s == timeout
    assert hit.payload.last_heartbeat == last


@pytest.mark.parametrize(
    ("line", "method", "path", "status", "model_route", "succeeded"),
    [
        (
            '[2025-09-24 05:48:56] INFO:     10.109.14.1:43954 - "POST /v1/chat/completions '
            'HTTP/1.1" 200 OK',
            "POST",
            "/v1/chat/completions",
            200,
            True,
            True,
        ),
        (
            'INFO:     10.109.14.1:60098 - "GET /health HTTP/1.1" 503 Service Unavailable',
            "GET",
            "/health",
            503,
            False,
            False,
        ),
        (
            'INFO:     127.0.0.1:51240 - "POST /generate?stream=1 HTTP/1.1" 200 OK',
            "POST",
            "/generate",
            200,
            True,
            True,
        ),
        ('INFO:     - - "GET /metrics HTTP/1.1" 200 OK', "GET", "/metrics", 200, False, True),
        (
            'INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
            "POST",
            "/v1/completions",
            500,
            True,
            False,
        ),
    ],
)
def test_an_access_line_is_one_request_with_its_route_and_status(
    line: str, method: str, path: str, status: int, model_route: bool, succeeded: bool
) -> None:
    hit = match_serving(line)
    assert hit is not None and hit.kind is EventKind.HTTP_REQUEST
    request = hit.payload
    assert isinstance(request, HttpRequest)
    assert (request.method, request.path, request.status) == (method, path, status)
    assert request.model_route is model_route
    assert request.succeeded is succeeded


@pytest.mark.parametrize(
    "line",
    [
        "Health check server started",
        "Dummy health check server failed to start: boom",
        'the user wrote "GET /health" in a comment',
        "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    ],
)
def test_other_lines_are_neither(line: str) -> None:
    assert match_serving(line) is None
