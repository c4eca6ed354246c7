"""The self-contained HTML report: one file, opened from a ticket, offline, weeks later.

Everything is inlined (CSS, JS, SVG) and a Content-Security-Policy forbids the page any
request at all, so even a bug in escaping cannot load or run anything: the only script
allowed is ours, by hash. Jinja escapes every value (``autoescape=True``); data reaches
the script only through ``tojson`` in a JSON script tag. Nothing is marked safe.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from hangdoc.analyzer.ranges import LEGEND
from hangdoc.analyzer.render.report_data import Documented, build_report_data
from hangdoc.common.atomic import write_text_atomic
from hangdoc.common.version import __version__

if TYPE_CHECKING:
    from hangdoc.analyzer.diagnosis import Diagnosis

_TEMPLATES = "templates"
_SCRIPT = "report.js"
_STYLE = "report.css"


@functools.cache
def template_environment() -> jinja2.Environment:
    """The one Jinja environment, built once: loading and compiling templates is the slow part."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hangdoc.analyzer.render", _TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # Key order must not depend on insertion order anywhere: byte-identical reports.
    env.policies["json.dumps_kwargs"] = {"sort_keys": True}
    return env


@functools.cache
def _csp() -> str:
    """The page's policy: no fetch of any kind; our one script and stylesheet by hash."""
    env = template_environment()
    script = _sha256(env.get_template(_SCRIPT).render())
    style = _sha256(env.get_template(_STYLE).render())
    return (
        "default-src 'none'; "
        f"script-src '{script}'; "
        f"style-src '{style}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


def _sha256(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def render_html(
    diagnosis: Diagnosis,
    *,
    title: str | None = None,
    rules: Sequence[Documented] | None = None,
) -> str:
    """The report page as one string; the same Diagnosis always gives the same bytes."""
    data = build_report_data(diagnosis, rules=rules)
    page_title = title if title is not None else f"hangdoc: {data['headline']['sentence']}"
    script_data = {"rank_sets": data["rank_sets"], "rank_index": data["rank_index"]}
    return (
        template_environment()
        .get_template("report.html.j2")
        .render(
            data=data,
            title=page_title,
            csp=_csp(),
            script_data=script_data,
            version=__version__,
            rank_legend=LEGEND,
        )
    )


def write_html(
    diagnosis: Diagnosis,
    path: str | Path,
    *,
    title: str | None = None,
    rules: Sequence[Documented] | None = None,
) -> Path:
    """Render and write the report (UTF-8); returns the path written.

    Written to a temporary file and renamed, so an interrupted run never leaves a
    half report that looks complete to the person who opens it later.
    """
    target = Path(path)
    write_text_atomic(target.absolute(), render_html(diagnosis, title=title, rules=rules))
    return target
