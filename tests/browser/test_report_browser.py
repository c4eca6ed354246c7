"""The report in a real browser: Debian's headless Chromium, from file://, network blocked.

Chromium is driven through the DevTools protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON): no port, no websocket, no Python dependency.
The browser sees every request the page makes (``Network.requestWillBeSent``), every
console message and exception, and every CSP violation (``Log.entryAdded``), so the test
can assert that nothing leaves the file and nothing fails.

``HANGDOC_SAVE_SCREENSHOT=1`` also copies the screenshot to ``docs/report-screenshot.png``.
``scripts/install_chromium.sh`` installs the browser; without it these tests skip.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hangdoc.analyzer.render.html import render_html
from tests.report_builders import FAKE_RULES, checkpoint_job, hostile_job

CHROMIUM = Path(os.environ.get("HANGDOC_CHROMIUM", "/usr/bin/chromium"))
REPO = Path(__file__).resolve().parents[2]
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

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"{CHROMIUM} not found: run scripts/install_chromium.sh (Debian's chromium)",
    ),
]


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

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    base = tmp_path_factory.mktemp("chromium")
    chrome = Chromium(base / "profile", base / "chromium.log")
    try:
        chrome.send("Browser.getVersion")
        yield chrome
    finally:
        chrome.close()


def _write(tmp_path: Path, name: str, html: str) -> str:
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    return path.as_uri()


VERDICT_JS = """(() => {
  const el = document.getElementById('hd-verdict');
  const fix = document.querySelector('.facts .fix');
  const r = el.getBoundingClientRect();
  const s = getComputedStyle(el);
  return {text: el.innerText, bottom: r.bottom, height: r.height, shown: s.display !== 'none'
          && s.visibility !== 'hidden', fix_bottom: fix.getBoundingClientRect().bottom,
          viewport: innerHeight, bg: getComputedStyle(document.body).backgroundColor};
})()"""


def test_report_of_4096_ranks_loads_offline_without_errors(
    browser: Chromium, tmp_path: Path
) -> None:
    # GIVEN the report of a 4,096-rank hang, written to a file
    diagnosis = checkpoint_job(4096, saver=3, missing=[4000])
    start = time.perf_counter()
    html = render_html(diagnosis, rules=FAKE_RULES)
    render_s = time.perf_counter() - start
    url = _write(tmp_path, "report.html", html)
    page = Page(browser)
    # WHEN the browser opens it from file:// with the network blocked
    load_s = page.load(url)
    # THEN the only request is the file itself, and nothing failed
    requests = [p["request"]["url"] for p in page.events("Network.requestWillBeSent")]
    assert requests == [url]
    assert page.events("Network.loadingFailed") == []
    assert page.problems() == []
    # AND the verdict and the fix are visible above the fold
    state = page.eval(VERDICT_JS)
    assert state["shown"] and state["height"] > 0
    assert state["text"] == diagnosis_sentence(diagnosis.findings[0].title)
    assert state["bottom"] <= state["viewport"] and state["fix_bottom"] <= state["viewport"]
    shot = page.screenshot(tmp_path / "report.png")
    assert shot.stat().st_size > 10_000
    if os.environ.get("HANGDOC_SAVE_SCREENSHOT") == "1":
        target = REPO / "docs" / "report-screenshot.png"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, target)
    (tmp_path / "timings.json").write_text(json.dumps({"render_s": render_s, "load_s": load_s}))
    print(f"\n4096 ranks: python render {render_s:.3f} s, browser load {load_s:.3f} s")
    assert load_s < 10.0


def diagnosis_sentence(title: str) -> str:
    return f"Hung: {title}."


def test_rank_filter_and_lookup_work_in_the_page(browser: Chromium, tmp_path: Path) -> None:
    page = Page(browser)
    page.load(
        _write(tmp_path, "report.html", render_html(checkpoint_job(64, saver=5), rules=FAKE_RULES))
    )
    # WHEN the reader asks for rank 5
    state = page.eval("""(() => {
      const all = document.querySelectorAll('[data-rset]').length;
      document.getElementById('hd-rank').value = '5';
      document.getElementById('hd-filter').requestSubmit();
      const shown = [...document.querySelectorAll('[data-rset]')]
        .filter(e => e.offsetParent !== null);
      const card = document.getElementById('hd-rank-card');
      return {all, shown: shown.length, card: card.hidden ? null : card.innerText,
              culprit: document.querySelector('tr.culprit').offsetParent !== null,
              status: document.getElementById('hd-filter-status').textContent};
    })()""")
    # THEN only what concerns rank 5 stays, and its card names host and pid
    assert 0 < state["shown"] < state["all"]
    assert state["culprit"]
    assert state["card"].startswith("Rank 5: host node0, pid 4005 — saving a checkpoint")
    bad = page.eval("""(() => { document.getElementById('hd-rank').value = 'x';
      document.getElementById('hd-filter').requestSubmit();
      return document.getElementById('hd-filter-status').textContent; })()""")
    assert bad == "not a rank list"
    assert page.problems() == []
    assert len(page.events("Network.requestWillBeSent")) == 1


def test_hostile_report_runs_no_injected_script(browser: Chromium, tmp_path: Path) -> None:
    page = Page(browser)
    page.load(_write(tmp_path, "hostile.html", render_html(hostile_job(), rules=FAKE_RULES)))
    result = page.eval("""(() => ({
      scripts: document.scripts.length,
      text: document.getElementById('hd-verdict').innerText
    }))()""")
    assert result["scripts"] == 2
    assert "<script>alert(1)</script></pre>" in result["text"]
    assert page.events("Page.javascriptDialogOpening") == []
    assert page.problems() == []


def test_dark_scheme_and_print_render(browser: Chromium, tmp_path: Path) -> None:
    page = Page(browser)
    page.load(_write(tmp_path, "report.html", render_html(checkpoint_job(16), rules=FAKE_RULES)))
    light = page.eval(VERDICT_JS)["bg"]
    page.call("Emulation.setEmulatedMedia",
              {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})  # fmt: skip
    dark = page.eval(VERDICT_JS)["bg"]
    page.screenshot(tmp_path / "report-dark.png")
    assert light != dark
    pdf = base64.b64decode(page.call("Page.printToPDF", {"printBackground": False})["data"])
    assert pdf.startswith(b"%PDF")
    assert page.problems() == []
