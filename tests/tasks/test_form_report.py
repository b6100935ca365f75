"""The form report: counts and filters, then one section per field with its plot, agreement
and rater groups; it fits a desktop and a phone in headless Chromium (screenshots in
$CROWD_SHOTS, default /tmp/shots/form-analysis)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tasks.form.analysis import analyze, field_types_of
from tasks.form.report import render_report
from tests.crowd.web.conftest import BROWSER_MARKS, browser  # noqa: F401 (the fixture)
from tests.tasks.test_form_analysis import ANSWERS, FIELDS, field, rows_of

SHOTS = Path(os.environ.get("CROWD_SHOTS", "/tmp/shots/form-analysis"))
LONG_ID = "Keyword Feedback on the whole passage, as HELM names it"


def report_data() -> dict[str, Any]:
    experts: dict[str, dict[str, tuple[Any, ...]]] = {
        "e1": {"i1": (5, ["news"], [], [0, 1, 2], "a"), "i2": (1, ["art"], [], [2, 1, 0], "b")},
        "e2": {"i1": (4, ["news"], [], [0, 1, 2], "c"),
               "i2": (2, ["art"], ["typo"], [2, 0, 1], "d")},
    }  # fmt: skip
    rows = rows_of(ANSWERS) + [
        {**r, "response_id": 100 + r["response_id"]} for r in rows_of(experts, group="expert")
    ]
    own = field_types_of(
        [{"id": LONG_ID, "type": "rating", "title": "Keywords <b>used</b>?", "scale": [0, 10]}]
    )
    rows += [
        {**rows[0], "response_id": 200 + n, "worker": w, "item": "i9",
         "fields": {LONG_ID: v}, "field_types": own}
        for n, (w, v) in enumerate([("w1", 8), ("w2", 9), ("w3", 2)])
    ]  # fmt: skip
    rows.append({**rows[0], "response_id": 300, "kind": "attention", "attention_passed": False})
    data = analyze(rows, {"w3"}, {"fields": FIELDS})
    data["rules"] = {"attention": {"workers": 1, "responses": 3}}
    return data


def test_the_report_has_a_section_with_a_plot_per_field(tmp_path: Path) -> None:
    data = report_data()
    html = render_report(data, tmp_path, "Form <study> 1")
    ids = [f["id"] for f in data["full"]["fields"]]
    assert ids == [*(f["id"] for f in FIELDS), LONG_ID]
    sections = re.findall(r'<section class="field" id="field-(\d+)">\s*<h2>([^<]*)', html)
    assert [name.strip() for _, name in sections] == ids
    # Every field but free text has its plot, written beside the report and embedded.
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        f"field-{n}.png" for n in (0, 1, 2, 3, 5)
    ]
    assert html.count('<img src="data:image/png;base64,') == 5
    # Titles are escaped, numbers come from the analysis.
    assert "Form &lt;study&gt; 1" in html and "Keywords &lt;b&gt;used&lt;/b&gt;?" in html
    alpha = field(data["full"], "quality")["agreement"]["alpha"]
    assert f"{alpha:.3f}" in html
    assert "0.0% passed" in html  # the one attention check failed
    assert "crowd vs expert" in html
    assert "Free text: no agreement measure." in html


@BROWSER_MARKS[0]
@BROWSER_MARKS[1]
def test_the_report_fits_a_desktop_and_a_phone(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    html = render_report(report_data(), tmp_path, "Form study 1")
    (tmp_path / "report.html").write_text(html)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto((tmp_path / "report.html").as_uri())
        assert page.locator("section.field").count() == 6
        assert page.locator("section.field img").count() == 5
        # Wide tables scroll inside the page; the page itself is no wider than the screen.
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=str(SHOTS / f"report-{width}.png"), full_page=True)
        context.close()
