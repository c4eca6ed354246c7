"""The report in a real browser: Debian's headless Chromium, from file://, network blocked.

Chromium is driven through the DevTools protocol over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON): no port, no websocket, no Python dependency.
The browser sees every request the page makes (``Network.requestWillBeSent``), every
console message and exception, and every CSP violation (``Log.entryAdded``), so the test
can assert that nothing leaves the file and nothing fails.

Screenshots (the first screen, each picture) are saved under each test's tmp dir for a
person to look at; the tests assert on the DOM and SVG, never on pixels. The README's
screenshot is ``python -m tests.browser.readme_screenshot``; the scale numbers are
``python -m tests.browser.bench_report``. ``scripts/install_chromium.sh`` installs the
browser; without it these tests skip.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hangdoc.analyzer.render.html import render_html
from hangdoc.analyzer.render.report_data import build_report_data
from tests.browser.chromium import CHROMIUM, Chromium, Page
from tests.browser.scale_job import grid_job
from tests.report_builders import FAKE_RULES, checkpoint_job, hostile_job

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"{CHROMIUM} not found: run scripts/install_chromium.sh (Debian's chromium)",
    ),
]


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


# --- answer first, pictures ---------------------------------------------------------------

FIRST_SCREEN_PX = 1000

LAYOUT_JS = """(() => {
  const top = s => { const e = document.querySelector(s);
    return e ? Math.round(e.getBoundingClientRect().top + scrollY) : null; };
  const size = s => [...document.querySelectorAll(s)].map(e => {
    const r = e.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; });
  return {finding: top('#findings .finding'), stacks: top('#stacks'), groups: top('#groups'),
          height: document.documentElement.scrollHeight, viewport: innerHeight,
          svgs: size('figure.pic > svg'), tables: document.querySelectorAll('table.wave').length,
          folded: (document.getElementById('groups-healthy') || {}).innerText || null,
          mismatch: size('#pic-wavefront rect.c-mismatch'),
          culprit: size('#pic-wavefront rect.c-culprit'),
          boxes: size('#pic-icicle g.box rect'), culprit_box: size('#pic-icicle g.culprit rect'),
          first: size('#pic-lanes rect.first'), marks: size('#pic-lanes rect.ev').length,
          texts: [...document.querySelectorAll('ul.pic-text')].map(u => u.innerText),
          labels: [...document.querySelectorAll('figure.pic > svg')].map(
            s => s.getAttribute('role') + ':' + s.getAttribute('aria-label'))};
})()"""


def _fr_synth() -> ModuleType:
    """``scripts/fr_synth.py``, imported by path (it is a script, not a package module)."""
    name = "fr_synth"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "fr_synth.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _shoot_all(page: Page, out: Path, name: str) -> list[Path]:
    """The page's first screen and each picture as PNGs, for a person to look at."""
    shots = [page.screenshot(out / f"{name}.png")]
    for pic in ("#pic-icicle", "#pic-wavefront", "#pic-lanes"):
        if page.element_box(pic) is not None:
            shots.append(page.screenshot_element(pic, out / f"{name}-{pic[5:]}.png"))
    return shots


def test_1024_rank_flight_recorder_report_answers_on_the_first_screen(
    browser: Chromium, tmp_path: Path
) -> None:
    # GIVEN the report of 1,024 real-format FR dumps (137 process groups, three planted faults)
    loader = pytest.importorskip("hangdoc.analyzer.loading.loader")
    from hangdoc.analyzer.engine import analyze

    dumps = tmp_path / "fr1024"
    _fr_synth().Job(1024, entries=200).write(dumps)
    diagnosis = analyze(loader.load_paths([dumps]))
    page = Page(browser)
    page.load(_write(tmp_path, "fr1024.html", render_html(diagnosis)))
    state: dict[str, Any] = page.eval(LAYOUT_JS)
    _shoot_all(page, tmp_path, "fr1024")
    # THEN the first finding starts on the first screen (it was ~21,000 px down)
    assert state["finding"] is not None and state["finding"] < FIRST_SCREEN_PX
    assert state["finding"] < state["groups"]
    # AND the 135 matched groups are one line, the two odd ones a table each
    assert state["folded"].startswith("135 groups fully matched")
    assert state["tables"] == 2
    assert state["height"] < 10_000
    # AND the wavefront shows the type mismatch as a visible cell, the culprit marked
    assert state["mismatch"] and all(w >= 3 and h >= 10 for w, h in state["mismatch"])
    assert state["culprit"] and all(w >= 3 for w, _ in state["culprit"])
    assert any("ranks 680-687 behind by 3" in t for t in state["texts"])
    assert page.problems() == []


def test_pictures_are_drawn_with_labels_and_text_equivalents(
    browser: Chromium, tmp_path: Path
) -> None:
    # GIVEN a 64-rank checkpoint hang with stacks, FR records and logs
    diagnosis = checkpoint_job(64, saver=5)
    data = build_report_data(diagnosis, rules=FAKE_RULES)
    page = Page(browser)
    page.load(_write(tmp_path, "report.html", render_html(diagnosis, rules=FAKE_RULES)))
    state: dict[str, Any] = page.eval(LAYOUT_JS)
    shots = _shoot_all(page, tmp_path, "ck64")
    # THEN three pictures, each an image with a label, wide and tall enough to read
    assert len(state["svgs"]) == 3 and all(w >= 600 and h >= 50 for w, h in state["svgs"])
    assert all(label.startswith("img:") and len(label) > 20 for label in state["labels"])
    # AND the icicle draws every box, the culprit's branch visible though it is 1 of 64
    assert len(state["boxes"]) == len(data["pictures"]["icicle"]["boxes"])
    ((width, height),) = state["culprit_box"]
    assert width >= 10 and height >= 20
    # AND the lanes mark the first failure with a line across them
    ((_, line_height),) = state["first"]
    assert line_height > 10 * len(data["pictures"]["lanes"]["lanes"])
    assert state["marks"] == len(data["pictures"]["lanes"]["marks"])
    # AND each picture has its words under it
    assert state["texts"][0].startswith("63 ranks (0-4,6-63) end in wrapper")
    assert all(shot.stat().st_size > 2_000 for shot in shots)
    assert page.problems() == []


def test_16384_ranks_answer_first_stay_small_and_load_in_seconds(
    browser: Chromium, tmp_path: Path
) -> None:
    # GIVEN 16,384 ranks: 2,057 process groups, 16,384 log lines, one odd rank
    html = render_html(grid_job(16384))
    page = Page(browser)
    load_s = page.load(_write(tmp_path, "report16k.html", html))
    state: dict[str, Any] = page.eval(LAYOUT_JS)
    page.screenshot(tmp_path / "report16k.png")
    print(f"\n16384 ranks: {len(html.encode()) / 1e6:.2f} MB, browser load {load_s:.2f} s, "
          f"first finding at {state['finding']} px of {state['height']}")  # fmt: skip
    # THEN the first finding is on the first screen, the page small and quick to open
    assert state["finding"] < FIRST_SCREEN_PX
    assert len(html.encode()) < 3_000_000
    assert load_s < 10.0
    assert state["folded"].startswith("2056 groups fully matched")
    # AND a log row 16,384 ranks share stays a few lines tall (the "Where" column of
    # file names wrapped every 17 characters: 380 px at 512 ranks)
    rows = page.eval("[...document.querySelectorAll('#timeline tbody tr')]"
                     ".map(r => Math.round(r.getBoundingClientRect().height))")  # fmt: skip
    assert rows and max(rows) < 120, rows
    assert state["mismatch"] and state["mismatch"][0][0] >= 3

    # AND the rank filter understands strided sets
    def rows_for(query: str) -> list[str]:
        rows: list[str] = page.eval(f"""(() => {{
          document.getElementById('hd-rank').value = {json.dumps(query)};
          document.getElementById('hd-filter').requestSubmit();
          return [...document.querySelectorAll('#groups tr[data-rset]')]
            .filter(e => e.offsetParent !== null).map(e => e.cells[1].innerText); }})()""")
        return rows

    assert rows_for("16379") == ["16379"]
    assert rows_for("11") == ["3-16371:8"]  # 11 is in 3,11,19,…
    assert rows_for("12") == []
    assert rows_for("9-13:2") == ["3-16371:8"]  # a typed stride meets a shown one at 11
    assert page.problems() == []
