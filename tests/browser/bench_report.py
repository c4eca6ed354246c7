"""How the HTML report scales: build, render, size, and headless Chromium's load, per size.

    python -m tests.browser.bench_report [--ranks 1024 4096 16384] [--out DIR]

For each size it builds ``grid_job`` (tests/browser/scale_job.py: tp/dp/default groups,
stacks, logs, one planted culprit), renders the page, loads it in headless Chromium from
file:// with the network blocked, and reads back where the first finding starts (px from
the top), the page height, the load time (navigation to the load event) and whether the
browser logged any problem; it saves a screenshot per size in ``--out``. The numbers in
the README come from here.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from hangdoc.analyzer.render.html import render_html
from tests.browser.chromium import Chromium, Page
from tests.browser.scale_job import grid_job

LAYOUT_JS = """(() => {
  const f = document.querySelector('#findings .finding');
  return {first_finding_top: f ? Math.round(f.getBoundingClientRect().top + scrollY) : null,
          page_height: document.documentElement.scrollHeight,
          svgs: document.querySelectorAll('svg').length,
          elements: document.getElementsByTagName('*').length};
})()"""


def measure(page: Page, path: Path) -> dict[str, Any]:
    """Load ``path`` in ``page``; where the first finding is, how tall the page, how long."""
    load_s = page.load(path.as_uri())
    layout = page.eval(LAYOUT_JS)
    return {"load_s": round(load_s, 3), **layout, "problems": page.problems()}


def run(sizes: list[int], out: Path) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    browser = Chromium(out / "profile", out / "chromium.log")
    try:
        browser.send("Browser.getVersion")
        for world in sizes:
            start = time.perf_counter()
            diagnosis = grid_job(world)
            built = time.perf_counter() - start
            start = time.perf_counter()
            html = render_html(diagnosis)
            rendered = time.perf_counter() - start
            path = out / f"report-{world}.html"
            path.write_text(html, encoding="utf-8")
            page = Page(browser)
            row = {"ranks": world, "build_s": round(built, 2), "render_s": round(rendered, 2),
                   "html_bytes": len(html.encode()), **measure(page, path)}  # fmt: skip
            page.screenshot(out / f"report-{world}.png")
            page.screenshot(out / f"report-{world}-full.png", full=True)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        browser.close()
    (out / "bench.json").write_text(json.dumps(rows, indent=1))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="hangdoc-bench-report-"))
    run(args.ranks, out)
    print(f"screenshots and bench.json in {out}")


if __name__ == "__main__":
    main()
