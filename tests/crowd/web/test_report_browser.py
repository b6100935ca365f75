"""Pages on a phone: a table wider than the screen scrolls within itself and the
page keeps the screen's width (at 390 px and on a desktop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasks.report_html import page as report_page
from tasks.report_html import style, table
from tests.crowd.web.conftest import BROWSER_MARKS

pytestmark = BROWSER_MARKS


@pytest.mark.parametrize("width", [390, 1280])
def test_a_wide_table_scrolls_inside_a_page_that_fits_the_screen(
    browser: Any, tmp_path: Path, width: int
) -> None:
    headers = [f"column number {i} (filtered)" for i in range(14)]
    rows = [[f"value {r}-{c} with words" for c in range(14)] for r in range(3)]
    html = report_page("A report with a wide table", [table(headers, rows)], style())
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        shown = context.new_page()
        shown.goto(path.as_uri())
        assert shown.evaluate("document.documentElement.scrollWidth") == width
        overflow = shown.evaluate(
            "(() => { const t = document.querySelector('table');"
            " return [t.scrollWidth, t.clientWidth]; })()"
        )
        assert overflow[0] > overflow[1]  # the table itself scrolls
    finally:
        context.close()


def test_the_dashboard_fits_a_phone(browser: Any, live_server: Any, api_key: str) -> None:
    """The dashboard's table of studies (wider than 390 px) scrolls inside the page."""
    context = browser.new_context(viewport={"width": 390, "height": 800})
    try:
        shown = context.new_page()
        shown.goto(f"{live_server.url}/dashboard/login")
        shown.fill("input[name=api_key]", api_key)
        shown.click("button[type=submit]")
        shown.wait_for_selector("table")
        # The table is in the DOM before the stylesheet that makes it scroll has applied (on a
        # loaded machine the page was once measured at 402 px then): measure the page a
        # person sees, once it has loaded.
        shown.wait_for_load_state("load")
        assert shown.evaluate("document.documentElement.scrollWidth") == 390
    finally:
        context.close()
