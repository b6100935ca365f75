"""Shared pieces of the headless-Chromium tests of the HIT pages.

Fixtures: `browser` (one Chromium per test module), `page` (a fresh context per test) and
`local_study` (a published study the browser can play as a local worker). Helpers the test
modules import: `BROWSER_MARKS`, `ResponseLog`, `json_keys`, `open_and_join`, `click_step`,
`guess_machine`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 5_000
# One annotation per item and no attention checks: a single player sees every item once.
ONE_PASS: dict[str, Any] = {"annotations_per_item": 1, "attention_rate": 0.0}

BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"headless browser tests need {CHROMIUM}"),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def local_study(make_study: Callable[..., int]) -> Callable[..., int]:
    """Create and publish a study on the "local" provider only; returns its id."""

    def factory(hit_type: str, items: list[dict[str, Any]], config: dict[str, Any]) -> int:
        return make_study(items=items, config=dict(config), providers=("local",), hit_type=hit_type)

    return factory


class ResponseLog:
    """The responses a page receives; `read` gives the bodies of those the browser shows."""

    KINDS = ("document", "script", "xhr", "fetch")

    def __init__(self, page: Any) -> None:
        self.page = page
        self.pending: list[Any] = []
        page.on("response", self._seen)

    def _seen(self, response: Any) -> None:
        self.pending.append(response)

    def read(self) -> list[tuple[Any, str]]:
        """(response, body) of each document, script and API response since the last read."""
        pending, self.pending[:] = list(self.pending), []
        read = []
        for response in pending:
            if response.request.resource_type not in self.KINDS:
                continue
            try:
                body = response.text()
            except Exception:  # a redirect or a body the browser dropped: nothing to read
                body = ""
            read.append((response, body))
        return read


def carries_json(response: Any) -> bool:
    return "json" in (response.headers.get("content-type") or "")


def json_keys(value: Any) -> set[str]:
    """Every key of every object nested in a JSON value."""
    if isinstance(value, dict):
        return set(value) | {key for child in value.values() for key in json_keys(child)}
    if isinstance(value, list):
        return {key for child in value for key in json_keys(child)}
    return set()


def open_and_join(page: Any, base_url: str, study_id: int, name: str) -> None:
    """Open the study's page, join under `name` from its intro and wait for the first task."""
    page.goto(f"{base_url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.fill("#name", name)
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")


def click_step(page: Any, target: Any) -> Any:
    """Click `target` (a selector or a locator), assert its /step request succeeded and
    return that response."""
    with page.expect_response(lambda r: r.url.endswith("/step")) as info:
        if isinstance(target, str):
            page.click(target)
        else:
            target.click()
    assert info.value.ok, info.value.text()
    return info.value


def guess_machine(page: Any) -> Any:
    """On a boundary passage: say the newest sentence is machine-written and confirm it (the
    guess is final); returns the /step response."""
    page.click("#machine")
    page.wait_for_selector("#confirm:not(.hidden)")
    return click_step(page, "#confirm-yes")
