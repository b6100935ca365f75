"""The Likert rating page, played end to end in headless Chromium.

The page must show one question at a time, the prompt or the reference only with the
question that needs them, and never the item's group or its server-side meta: every body the
browser receives before the answer is stored is checked for them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from crowd.storage import Database, Response
from tests.crowd.web.conftest import BROWSER_MARKS, ONE_PASS, ResponseLog, click_step, open_and_join

pytestmark = BROWSER_MARKS

GROUP = "zebragroup"
META_MARKER = "hiddenmetamarker"
STORY_TEXT = "The kettle sang twice before anyone in the old house woke up."
PLAYER = "Rita Rater"
PROMPT = "Write about a house where the kettle boils by itself."


@pytest.fixture
def likert_study(local_study: Callable[..., int]) -> Callable[..., int]:
    def factory(items: list[dict[str, Any]], config: dict[str, Any] | None = None) -> int:
        return local_study("likert", items, {**ONE_PASS, **(config or {})})

    return factory


class Bodies(ResponseLog):
    """The text of every document, script and API response the page receives."""

    def __init__(self, page: Any) -> None:
        super().__init__(page)
        self.seen: list[tuple[str, str]] = []

    def collect(self) -> list[tuple[str, str]]:
        self.seen.extend((response.url, body) for response, body in self.read())
        return self.seen


def assert_hidden(bodies: list[tuple[str, str]], page_html: str, markers: list[str]) -> None:
    assert any("/api/work/" in url for url, _ in bodies)
    for url, body in [*bodies, ("page HTML", page_html)]:
        for marker in markers:
            assert marker not in body, f"{marker!r} reached the browser in {url}"


def rate(page: Any, value: int) -> None:
    """Select `value` on the scale, then send it with the form's button."""
    page.check(f"#rate-{value}")
    click_step(page, "#submit-rating")


def test_a_story_is_rated_one_question_at_a_time_without_leaking_its_group(
    page: Any, live_server: Any, likert_study: Callable[..., int], db: Database
) -> None:
    item = {
        "id": "kettle",
        "text": STORY_TEXT,
        "prompt": PROMPT,
        "group": GROUP,
        "meta": {"quality": {"relevance": 4.75}, "note": META_MARKER},
    }
    study_id = likert_study([item])
    bodies = Bodies(page)
    steps: list[str] = []
    page.on("request", lambda r: steps.append(r.url) if r.url.endswith("/step") else None)
    open_and_join(page, live_server.url, study_id, PLAYER)

    questions = []
    for step, value in enumerate((5, 4, 2, 3)):
        page.wait_for_function(f"document.getElementById('position').textContent === '{step + 1}'")
        assert page.inner_text("#total") == "4"
        assert page.inner_text("#text") == STORY_TEXT
        assert page.locator("#scale input[type=radio]").count() == 5
        assert page.inner_text("#progress") == "Item 1 of 1"
        assert page.is_disabled("#submit-rating"), "nothing is selected yet"
        expected = "Submit ratings" if step == 3 else "Next question"
        assert page.inner_text("#submit-rating") == expected
        assert page.inner_text("#label-low") and page.inner_text("#label-high")
        questions.append(page.inner_text("#question"))
        # The prompt is on the page for the relevance question only.
        if step == 3:
            assert page.is_visible("#prompt-box") and page.inner_text("#prompt") == PROMPT
            assert "relevant" in questions[-1]
        else:
            assert page.is_hidden("#prompt-box") and PROMPT not in page.content()
        assert page.is_hidden("#reference-box")
        if step < 3:
            # Nothing is stored before the last question.
            with db.session() as session:
                assert session.scalars(select(Response)).all() == []
        assert_hidden(bodies.collect(), page.content(), [GROUP, META_MARKER, "4.75"])
        if step == 0:  # a choice, changed before it is sent: nothing goes to the server
            page.check("#rate-1")
            page.check("#rate-2")
            page.wait_for_timeout(200)
            assert steps == [] and page.is_enabled("#submit-rating")
        rate(page, value)

    assert len(set(questions)) == 4
    page.wait_for_selector("#feedback:not(.hidden)")
    assert page.inner_text("#thanks").startswith("Thank you")
    assert_hidden(bodies.collect(), page.content(), [GROUP, META_MARKER])

    with db.session() as session:
        response = session.scalars(select(Response)).one()
        assert response.answer["ratings"] == {
            "grammaticality": 5,
            "cohesiveness": 4,
            "likability": 2,
            "relevance": 3,
        }
        assert [e.get("attribute") for e in response.events] == [
            "grammaticality",
            "grammaticality",
            "cohesiveness",
            "likability",
            "relevance",
        ]

    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#next")
    page.wait_for_selector("#done:not(.hidden)")
    assert page.inner_text("#done-message")


def test_attack_titles_show_title_1_only_for_meaning_preservation(
    page: Any, live_server: Any, likert_study: Callable[..., int], db: Database
) -> None:
    items = [
        {
            "id": f"t{n}",
            "text": f"Markets rally as rates fall {n}",
            "reference": f"Stocks up {n}",
            "group": GROUP,
        }
        for n in range(2)
    ]
    study_id = likert_study(items, {"template": "attack"})
    bodies = Bodies(page)
    open_and_join(page, live_server.url, study_id, PLAYER)
    for _ in items:
        page.wait_for_function("document.getElementById('position').textContent === '1'")
        assert page.is_hidden("#reference-box")
        assert page.inner_text("#text-label") == "Text:"
        assert "fluent" in page.inner_text("#question")
        rate(page, 4)
        page.wait_for_function("document.getElementById('position').textContent === '2'")
        assert page.is_visible("#reference-box")
        assert page.inner_text("#reference").startswith("Stocks up")
        assert page.inner_text("#text-label") == "Title 2:"
        assert page.inner_text("#label-low") == "strongly disagree"
        assert_hidden(bodies.collect(), page.content(), [GROUP])
        rate(page, 2)
        page.wait_for_selector("#feedback:not(.hidden)")
        with page.expect_response(lambda r: r.url.endswith("/next")):
            page.click("#next")
    page.wait_for_selector("#done:not(.hidden)")
    with db.session() as session:
        answers = [r.answer["ratings"] for r in session.scalars(select(Response))]
    assert answers == [{"fluency": 4, "meaning_preservation": 2}] * 2
    # Every API body was JSON and none named a group key.
    api = [body for url, body in bodies.collect() if "/api/work/" in url and body]
    assert all("group" not in json.loads(body) for body in api)
