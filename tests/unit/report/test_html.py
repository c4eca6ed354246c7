"""The HTML page: escaping, self-containment, determinism, and cost at 4,096 ranks.

What the page *says* is pinned by the report-data goldens; these tests pin how it is
made: nothing from a dump can become markup or script, nothing is fetched, the same
input gives the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hangdoc.analyzer.render.html import render_html, template_environment, write_html
from tests.report_builders import FAKE_RULES, HOSTILE, checkpoint_job, empty_job, hostile_job

DUMPS = Path(__file__).resolve().parents[3] / "fixtures" / "dumps"
RECORDED = (
    [pytest.param(p.name, id=p.name) for p in sorted(DUMPS.iterdir()) if p.is_dir()]
    if DUMPS.is_dir()
    else []
) or [pytest.param("", marks=pytest.mark.skip(reason="no recorded dumps in fixtures/dumps"))]


class _Page(HTMLParser):
    """Tags, attributes, script bodies and visible text of a page, as a browser parses it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((tag, k, v) for k, v in attrs)
        if tag in ("script", "style"):
            self._in = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "style":
            self.styles.append(data)
        else:
            self.text.append(data)


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


def test_hostile_text_is_shown_as_text_and_never_becomes_markup() -> None:
    # GIVEN stacks, logs, env, inputs and findings that carry markup, quotes and unicode
    html = render_html(hostile_job(), rules=FAKE_RULES)
    page = _parse(html)
    # THEN the only scripts are the page's own two (data and code)
    assert page.tags.count("script") == 2
    assert "alert(1)" not in "".join(page.scripts)
    # AND the hostile string reads back verbatim as text, many times over
    assert "".join(page.text).count(HOSTILE) >= 8
    # AND the raw string never appears unescaped in the source
    assert "<script>alert(1)" not in html
    assert '</pre>"quoted"' not in html


def test_hostile_text_in_attributes_stays_inside_the_attribute() -> None:
    html = render_html(hostile_job(), rules=FAKE_RULES, title=HOSTILE)
    page = _parse(html)
    names = {name for _, name, _ in page.attrs}
    # no attribute other than ours appears (an escaped quote cannot open a new one)
    assert names <= {
        "lang", "charset", "http-equiv", "content", "name", "rel", "href", "class", "id",
        "role", "autocomplete", "for", "type", "placeholder", "spellcheck", "hidden",
        "aria-label", "data-rset", "data-row", "data-expand", "data-collapse", "open", "title",
        "viewbox", "preserveaspectratio", "x", "y", "height", "width", "colspan",
    }  # fmt: skip
    assert f"<title>{HOSTILE}</title>" not in html
    assert "ünïcødé_路径" in html


def test_data_reaches_the_script_only_as_json() -> None:
    html = render_html(hostile_job(), rules=FAKE_RULES)
    match = re.search(r'<script type="application/json" id="hd-data">(.*?)</script>', html, re.S)
    assert match is not None
    assert "<" not in match.group(1) and "&" not in match.group(1)
    data = json.loads(match.group(1))
    assert set(data) == {"rank_sets", "rank_index"}


def _sha(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_policy_forbids_every_fetch_and_allows_only_our_script_and_style_by_hash() -> None:
    html = render_html(checkpoint_job(8), rules=FAKE_RULES)
    page = _parse(html)
    policy = next(
        v for t, k, v in page.attrs if t == "meta" and k == "content" and v and "default-src" in v
    )
    assert "default-src 'none'" in policy
    code = [s for s in page.scripts if "use strict" in s]
    assert len(code) == 1 and f"'{_sha(code[0])}'" in policy
    assert len(page.styles) == 1 and f"'{_sha(page.styles[0])}'" in policy


def test_page_references_nothing_outside_itself() -> None:
    html = render_html(checkpoint_job(8), rules=FAKE_RULES)
    page = _parse(html)
    for tag, name, value in page.attrs:
        if name in ("href", "src", "action", "srcset", "poster", "data"):
            assert value is not None and (value.startswith("#") or value == "data:,"), (tag, value)
    assert not re.search(r"https?://|url\(|@import|//[a-z]", "".join(page.styles), re.I)
    assert not re.search(r"https?://|fetch\(|XMLHttpRequest|import\(|eval\(", "".join(page.scripts))
    assert {"img", "iframe", "object", "embed", "link"} & set(page.tags) == {"link"}


def test_same_diagnosis_gives_the_same_bytes() -> None:
    first = render_html(checkpoint_job(64), rules=FAKE_RULES)
    assert render_html(checkpoint_job(64), rules=FAKE_RULES) == first


def test_environment_is_cached_autoescaping_and_strict() -> None:
    env = template_environment()
    assert env is template_environment()
    assert env.autoescape is True
    assert env.undefined.__name__ == "StrictUndefined"


def test_nothing_is_marked_safe() -> None:
    root = Path(__file__).resolve().parents[3] / "analyzer" / "render"
    for path in [*root.glob("*.py"), *root.glob("templates/*")]:
        source = path.read_text(encoding="utf-8")
        assert "|safe" not in source.replace(" ", ""), path
        assert "Markup(" not in source, path


def test_assets_hold_no_template_syntax() -> None:
    # The CSS and JS are included as templates; a stray "{#" would swallow code silently.
    root = Path(__file__).resolve().parents[3] / "analyzer" / "render" / "templates"
    for name in ("report.css", "report.js"):
        text = (root / name).read_text(encoding="utf-8")
        assert not re.search(r"\{[{%#]", text), name
        assert "</" not in text or name.endswith(".css"), name


def test_empty_diagnosis_renders_every_empty_state() -> None:
    html = render_html(empty_job())
    assert "Inconclusive: no rule found a cause" in html
    assert "No stacks were collected" in html
    assert "No rank was found in the inputs" in html


def test_title_defaults_to_the_verdict_and_can_be_given() -> None:
    assert "<title>hangdoc: Hung: rank 2 is writing" in render_html(
        checkpoint_job(8), rules=FAKE_RULES
    )
    assert "<title>ticket 42</title>" in render_html(checkpoint_job(8), title="ticket 42")


def test_write_html_writes_utf8(tmp_path: Path) -> None:
    path = write_html(hostile_job(), tmp_path / "r.html", rules=FAKE_RULES)
    assert "ünïcødé_路径" in path.read_text(encoding="utf-8")


def test_4096_ranks_render_quickly_and_stay_small() -> None:
    # A guard against quadratic behaviour, not a benchmark: the bound is generous.
    diagnosis = checkpoint_job(4096, saver=3, missing=[4000])
    start = time.perf_counter()
    html = render_html(diagnosis, rules=FAKE_RULES)
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0
    assert len(html) < 5_000_000
    assert "Hung: rank 3 is writing a checkpoint" in html


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_dumps_render(name: str) -> None:
    # GIVEN a recorded real hang WHEN analyzed and rendered THEN the cause is on the page
    loader = pytest.importorskip("hangdoc.analyzer.loading.loader")
    from hangdoc.analyzer.engine import analyze

    diagnosis = analyze(loader.load_paths([DUMPS / name]))
    text = "".join(_parse(render_html(diagnosis)).text)
    if diagnosis.primary is not None:
        assert diagnosis.primary.title in text
