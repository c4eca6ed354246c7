"""Payloads of an inference server's own lines (parsers/logs/serving.py): its health check
failing, and the HTTP requests it answered."""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.payloads.base import EventPayload


@dataclass(frozen=True, slots=True)
class HealthCheckFailed(EventPayload):
    """HEALTH_CHECK_FAILED: a health check waited ``timeout_s`` seconds for the model's
    output and got none (SGLang's ``health_generate``)."""

    timeout_s: float | None = None  # HEALTH_CHECK_TIMEOUT as printed
    started: str | None = None  # "tic start time: HH:MM:SS", as printed, for people
    last_heartbeat: str | None = None  # the last output the server received, as printed


@dataclass(frozen=True, slots=True)
class HttpRequest(EventPayload):
    """HTTP_REQUEST: one access-log line of an ASGI server (uvicorn's AccessFormatter:
    ``client - "METHOD path HTTP/v" status phrase``)."""

    method: str = ""
    path: str = ""  # without its query string
    status: int = 0
    # The route answers with the model's output (a generation, an embedding, a score, or
    # /health_generate's one-token generation): its success says the model answered; a
    # route served by the HTTP process alone (/health in old SGLang, /metrics, model
    # info) says only that the HTTP process lives.
    model_route: bool = False

    @property
    def succeeded(self) -> bool:
        """A 2xx status: the server began a successful response."""
        return 200 <= self.status < 300
