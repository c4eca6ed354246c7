"""The README's screenshot: the report of a recorded fixture, as headless Chromium draws it.

    python -m tests.browser.readme_screenshot [--fixture fixtures/dumps/checkpoint]

(from the repository root).
Analyzes the fixture, renders the page, and saves ``docs/report-screenshot.png``: from
the top of the page to the end of the stack picture (verdict, findings, what every rank
was doing), 1,280 px wide, light scheme. Run it again whenever the page's look changes.
"""

from __future__ import annotations

import argparse
import base64
import tempfile
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.render.html import render_html
from tests.browser.chromium import VIEWPORT, Chromium, Page

REPO = Path(__file__).resolve().parents[2]
TARGET = REPO / "docs" / "report-screenshot.png"


def take(fixture: Path, target: Path = TARGET) -> Path:
    """Render ``fixture``'s report and save the screenshot; returns ``target``."""
    html = render_html(analyze(load_paths([fixture])))
    with tempfile.TemporaryDirectory(prefix="hangdoc-shot-") as tmp:
        page_path = Path(tmp) / "report.html"
        page_path.write_text(html, encoding="utf-8")
        browser = Chromium(Path(tmp) / "profile", Path(tmp) / "chromium.log")
        try:
            browser.send("Browser.getVersion")
            page = Page(browser)
            page.load(page_path.as_uri())
            end = page.element_box("#pic-icicle") or page.element_box("#findings")
            assert end is not None, "the page has neither findings nor a stack picture"
            clip = {"x": 0, "y": 0, "width": VIEWPORT["width"],
                    "height": round(end["y"] + end["height"] + 16), "scale": 1}  # fmt: skip
            params = {"format": "png", "captureBeyondViewport": True, "clip": clip}
            shot = page.call("Page.captureScreenshot", params)
            target.write_bytes(base64.b64decode(shot["data"]))
        finally:
            browser.close()
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Relative, so the page shows the fixture's paths as a reader's run would, not ours.
    parser.add_argument("--fixture", type=Path, default=Path("fixtures/dumps/checkpoint"))
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args()
    print(take(args.fixture, args.out))


if __name__ == "__main__":
    main()
