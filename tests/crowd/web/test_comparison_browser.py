"""The comparison page, played end to end in headless Chromium.

A player selects candidates by their text (and may change the selection) and submits; the
stored answer must name that text's canonical index whatever order the server drew. Before
an answer is stored, nothing the browser receives may carry the policies that wrote the
candidates or a training item's label.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from crowd.storage import Database, Item, Response
from tests.crowd.web.conftest import (
    BROWSER_MARKS,
    ResponseLog,
    carries_json,
    click_step,
    json_keys,
    open_and_join,
)

pytestmark = BROWSER_MARKS

POLICIES = ("policyzebra", "policyquokka")
REAL = (("harbour", "south", 2), ("forest", "north", 0), ("market", "west", 3))
CONFIG = {"template": "sentiment", "overlap_share": 0}
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


class Bodies(ResponseLog):
    """Every document, script and API body the page receives, plus the live DOM on demand."""

    def take(self) -> list[tuple[str, str, bool]]:
        bodies = [(response.url, body, carries_json(response)) for response, body in self.read()]
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


def pick_text(page: Any, text: str) -> Any:
    """Select the candidate showing `text`, then submit the pick; returns the /step reply."""
    page.locator("#candidates label.candidate", has_text=text).click()
    response = click_step(page, "#submit-pick")
    page.wait_for_selector("#feedback:not(.hidden)")
    return json.loads(response.text())


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
    local_study: Callable[..., int],
    db: Database,
) -> None:
    training = record("practice", kind="training", best=3)
    records = [*(record(item_id) for item_id, _, _ in REAL), training]
    study_id = local_study("comparison", records, CONFIG)
    bodies = Bodies(page)

    open_and_join(page, live_server.url, study_id, "Grace")

    # The training example comes first; the page shows instructions, query, four candidates.
    assert page.inner_text("#query") == "The practice story begins"
    assert "most positive and happy" in page.inner_text("#instructions")
    shown = page.locator("#candidates label.candidate").all_inner_texts()
    assert sorted(text.strip() for text in shown) == sorted(
        c["text"] for c in training["candidates"]
    )
    assert page.inner_text("#progress") == "Item 1 of 4"
    assert_nothing_secret(bodies.take())

    # A click selects; nothing is stored before the submit, and the selection can change.
    assert page.is_disabled("#submit-pick")
    page.locator("#candidates label.candidate", has_text="practice option north").click()
    assert page.is_enabled("#submit-pick")
    with db.session() as session:
        assert session.scalars(select(Response)).all() == []
    view = pick_text(page, "practice option east")  # canonical 1; the label is 3
    # The label reaches the browser only now, with the answer stored.
    revealed = [json_keys(json.loads(body)) for url, body, is_json in bodies.take() if is_json]
    assert any("right_text" in keys for keys in revealed)
    assert stored(db, "practice")["best"] == 1
    assert view["feedback"]["correct"] is False
    assert "Not quite" in page.inner_text("#result")
    assert page.inner_text("#right-text") == "practice option west"
    assert page.is_visible("#right")

    # Real items, each answered by the text of a different canonical candidate.
    for number, (item_id, word, canonical) in enumerate(REAL, 2):
        with page.expect_response(lambda r: r.url.endswith("/next")):
            page.click("#next")
        page.wait_for_selector("#task:not(.hidden)")
        assert page.inner_text("#query") == f"The {item_id} story begins"
        assert page.inner_text("#progress") == f"Item {number} of 4"
        assert page.is_disabled("#submit-pick"), "a new item starts with nothing selected"
        assert_nothing_secret(bodies.take())
        view = pick_text(page, f"{item_id} option {word}")
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
