"""A headless Chromium driven over the DevTools pipe, for the report's browser tests and
the report benchmark (``python -m tests.browser.bench_report``).

Chromium is driven through the DevTools protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON): no port, no websocket, no Python dependency.
The browser sees every request the page makes (``Network.requestWillBeSent``), every
console message and exception, and every CSP violation (``Log.entryAdded``), so a test
can assert that nothing leaves the file and nothing fails.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("HANGDOC_CHROMIUM", "/usr/bin/chromium"))
TIMEOUT_S = 60.0
VIEWPORT = {"width": 1280, "height": 900}
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    # Network blocked: no name resolves and every proxied request goes to a closed port.
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
    "--remote-debugging-pipe",
)  # fmt: skip


class Chromium:
    """A headless Chromium and a minimal DevTools client over its pipe."""

    def __init__(self, profile: Path, log: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Park the child's ends above fd 10 so that dup2 onto 3 and 4 cannot clobber them.
        high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD_CLOEXEC, 10)
        high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def wire_pipe() -> None:  # runs in the child before exec
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        with log.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}"],
                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                close_fds=False, preexec_fn=wire_pipe,
            )  # fmt: skip
        os.close(high_r)
        os.close(high_w)
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._cond:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        with self._cond:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    raise TimeoutError(f"no reply to {method}")
                self._cond.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str, since: int) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        with self._cond:
            while True:
                for event in self.events[since:]:
                    if event.get("method") == method and event.get("sessionId") == session:
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {method} event")
                self._cond.wait(left)

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)


class Page:
    """One tab with the DevTools domains this test reads turned on."""

    def __init__(self, browser: Chromium) -> None:
        self.browser = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.first_event = len(browser.events)
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {**VIEWPORT, "deviceScaleFactor": 1, "mobile": False})  # fmt: skip

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.browser.send(method, params, self.session)

    def load(self, url: str) -> float:
        """Navigate and wait for the load event; returns seconds it took."""
        since = len(self.browser.events)
        start = time.perf_counter()
        self.call("Page.navigate", {"url": url})
        self.browser.wait_event("Page.loadEventFired", self.session, since)
        return time.perf_counter() - start

    def eval(self, expression: str) -> Any:
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        result = self.call("Runtime.evaluate", params)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def events(self, method: str) -> list[dict[str, Any]]:
        return [
            e["params"]
            for e in self.browser.events[self.first_event :]
            if e.get("sessionId") == self.session and e.get("method") == method
        ]

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (CSP, failed loads)."""
        out = [
            " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            for p in self.events("Runtime.consoleAPICalled")
            if p["type"] in ("error", "assert")
        ]
        out += [p["exceptionDetails"]["text"] for p in self.events("Runtime.exceptionThrown")]
        out += [
            p["entry"]["text"]
            for p in self.events("Log.entryAdded")
            if p["entry"]["level"] == "error"
        ]
        return out

    def screenshot(self, path: Path, *, full: bool = False) -> Path:
        """A PNG of the viewport, or with ``full`` of the whole page (1280 px wide)."""
        params: dict[str, Any] = {"format": "png"}
        if full:
            height = self.eval("document.documentElement.scrollHeight")
            params["captureBeyondViewport"] = True
            params["clip"] = {"x": 0, "y": 0, "width": VIEWPORT["width"],
                              "height": min(int(height), 16_000), "scale": 1}  # fmt: skip
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def element_box(self, selector: str) -> dict[str, float] | None:
        """Page coordinates and size of the first element matching ``selector``."""
        box: dict[str, float] | None = self.eval(
            f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; const r = e.getBoundingClientRect();
            return {{x: r.left + scrollX, y: r.top + scrollY, width: r.width,
                     height: r.height}}; }})()"""
        )
        return box

    def screenshot_element(self, selector: str, path: Path) -> Path:
        """A PNG of one element (a picture, a section), wherever it is on the page."""
        box = self.element_box(selector)
        assert box is not None, f"no element {selector}"
        clip = {**box, "scale": 1}
        params = {"format": "png", "captureBeyondViewport": True, "clip": clip}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", params)["data"]))
        return path
