"""The comparison page, played end to end in headless Chromium.

A player clicks candidates by their text; the stored answer must name that text's canonical
index whatever order the server drew. Before an answer is stored, nothing the browser receives
may carry the policies that wrote the candidates or a training item's label.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.storage import Database, Item, Response, Study
from crowd.studies import create_study, import_items, publish

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"headless browser tests need {CHROMIUM}"),
]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

TIMEOUT_MS = 5_000
POLICIES = ("policyzebra", "policyquokka")
REAL = (("harbour", "south", 2), ("forest", "north", 0), ("market", "west", 3))
SECRET_KEYS = {"best", "expected", "policies", "policy", "meta", "right_text"}


def record(item_id: str, kind: str = "real", best: int | None = None) -> dict[str, Any]:
    candidates = [
        {"text": f"{item_id} option {word}", "policy": POLICIES[i // 2]}
        for i, word in enumerate(("north", "east", "south", "west"))
    ]
    data: dict[str, Any] = {
        "id": item_id,
        "kind": kind,
        "query": f"The {item_id} story begins",
        "candidates": candidates,
    }
    if best is not None:
        data["best"] = best
    return data


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
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
def comparison_study(db: Database, api_key: str) -> Callable[[list[dict[str, Any]]], int]:
    def factory(records: list[dict[str, Any]]) -> int:
        with db.session() as session:
            experimenter = authenticate(session, api_key)
            study: Study = create_study(
                session, experimenter, "browser comparison", "comparison",
                {"template": "sentiment", "overlap_share": 0},
            )  # fmt: skip
            import_items(session, study, records)
            publish(session, study, ("local",))
            return study.id

    return factory


def json_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for child in value.values() for key in json_keys(child)}
    if isinstance(value, list):
        return {key for child in value for key in json_keys(child)}
    return set()


class Bodies:
    """Every document, script and API body the page receives, plus the live DOM on demand."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.pending: list[Any] = []
        page.on("response", self._seen)

    def _seen(self, response: Any) -> None:
        self.pending.append(response)

    def take(self) -> list[tuple[str, str, bool]]:
        seen, self.pending[:] = list(self.pending), []
        bodies = []
        for response in seen:
            if response.request.resource_type not in ("document", "script", "xhr", "fetch"):
                continue
            try:
                body = response.text()
            except Exception:  # a redirect or a body the browser dropped: nothing to read
                body = ""
            is_json = "json" in (response.headers.get("content-type") or "")
            bodies.append((response.url, body, is_json))
        bodies.append(("page HTML", self.page.content(), False))
        return bodies


def assert_nothing_secret(bodies: list[tuple[str, str, bool]]) -> None:
    assert any(url.endswith("/next") for url, _, _ in bodies)
    for url, body, is_json in bodies:
        for policy in POLICIES:
            assert policy not in body, f"{url} shows provenance {policy!r}"
        if is_json and body:
            leaked = json_keys(json.loads(body)) & SECRET_KEYS
            assert not leaked, f"{url} carries {leaked} before the answer"


def click_text(page: Any, text: str) -> Any:
    button = page.locator("#candidates button.candidate", has_text=text)
    with page.expect_response(lambda r: r.url.endswith("/step")) as info:
        button.click()
    assert info.value.ok, info.value.text()
    page.wait_for_selector("#feedback:not(.hidden)")
    return json.loads(info.value.text())


def stored(db: Database, item_id: str) -> dict[str, Any]:
    with db.session() as session:
        answer = session.scalars(
            select(Response.answer)
            .join(Item, Item.id == Response.item_id)
            .where(Item.external_id == item_id)
        ).one()
        return dict(answer)


def test_player_clicks_by_text_and_the_stored_best_is_its_canonical_index(
    page: Any,
    live_server: Any,
    comparison_study: Callable[[list[dict[str, Any]]], int],
    db: Database,
) -> None:
    training = record("practice", kind="training", best=3)
    study_id = comparison_study([*(record(item_id) for item_id, _, _ in REAL), training])
    bodies = Bodies(page)

    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.fill("#name", "Grace")
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")

    # The training example comes first; the page shows instructions, query, four candidates.
    assert page.inner_text("#query") == "The practice story begins"
    assert "most positive and happy" in page.inner_text("#instructions")
    shown = page.locator("#candidates button.candidate").all_inner_texts()
    assert sorted(shown) == sorted(c["text"] for c in training["candidates"])
    assert_nothing_secret(bodies.take())

    view = click_text(page, "practice option east")  # canonical 1; the label is 3
    # The label reaches the browser only now, with the answer stored.
    revealed = [json_keys(json.loads(body)) for url, body, is_json in bodies.take() if is_json]
    assert any("right_text" in keys for keys in revealed)
    assert stored(db, "practice")["best"] == 1
    assert view["feedback"]["correct"] is False
    assert "Not quite" in page.inner_text("#result")
    assert page.inner_text("#right-text") == "practice option west"
    assert page.is_visible("#right")

    # Real items, each answered by the text of a different canonical candidate.
    for item_id, word, canonical in REAL:
        with page.expect_response(lambda r: r.url.endswith("/next")):
            page.click("#next")
        page.wait_for_selector("#task:not(.hidden)")
        assert page.inner_text("#query") == f"The {item_id} story begins"
        assert_nothing_secret(bodies.take())
        view = click_text(page, f"{item_id} option {word}")
        assert not any(policy in body for _, body, _ in bodies.take() for policy in POLICIES)
        answer = stored(db, item_id)
        assert answer["best"] == canonical
        assert answer["order"][answer["shown"]] == canonical
        assert view["feedback"] == {"message": "Thank you! Your choice is saved."}
        assert page.is_hidden("#right")

    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#next")
    page.wait_for_selector("#done:not(.hidden)")
    assert "seen every item" in page.inner_text("#done-message")
