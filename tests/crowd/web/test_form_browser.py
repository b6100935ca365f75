"""The form page answered in headless Chromium by keyboard alone, at a desktop's width and at
a phone's: a rating, a multiple choice with its maximum enforced, a text that appears only
when "Something else" is ticked (with its live character count), a ranking moved with its
buttons from the random start order this assignment drew (or confirmed as it came); nothing
is stored before "Submit answers", a field the server refuses is marked, a training item's
feedback lists what was expected, and nothing is wider than the screen.
Screenshots go to /tmp/shots/form-fix/.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from crowd.storage import Database, Response
from tests.crowd.web.conftest import BROWSER_MARKS, ONE_PASS
from tests.tasks.form_helpers import records, sample_config

pytestmark = BROWSER_MARKS

SHOTS = Path("/tmp/shots/form-fix")
DECLARED = ["Accuracy", "Brevity", "Clarity"]  # the sample rank's choices, as declared
WIDTHS = {"desktop": 1280, "phone": 390}
# A long unbroken word: the page must wrap it rather than grow wider than a phone.
LONG_WORD = "Pneumonoultramicroscopicsilicovolcanoconiosis" * 2
SECRET = "hiddenmetamarker"
EXPLANATION = "It names a service the source never mentions."


@pytest.fixture(params=sorted(WIDTHS))
def screen(request: pytest.FixtureRequest, browser: Any) -> Iterator[tuple[str, Any]]:
    width = WIDTHS[request.param]
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(5_000)
    yield request.param, context.new_page()
    context.close()


def shoot(page: Any, which: str, name: str) -> None:
    """Save a full-page screenshot, and check nothing is wider than the screen."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{which}.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTHS[which], f"{name} is {width} px wide on a {WIDTHS[which]} px screen"
    wide = page.evaluate(
        """(limit) => Array.from(document.querySelectorAll('#app *'))
             .filter((e) => e.getBoundingClientRect().right > limit + 1)
             .map((e) => e.tagName + '#' + e.id + '.' + e.className)""",
        WIDTHS[which],
    )
    assert wide == [], f"{name}: wider than the screen: {wide[:5]}"


def rank_labels(page: Any, key: str = "f3") -> list[str]:
    return [text.strip() for text in page.locator(f"#{key}-list .rank-label").all_inner_texts()]


def active(page: Any) -> str:
    return str(page.evaluate("document.activeElement.id || document.activeElement.className"))


def tab_to(page: Any, element_id: str, limit: int = 20) -> None:
    """Press Tab until the element with `element_id` has the focus."""
    for _ in range(limit):
        if page.evaluate("document.activeElement.id") == element_id:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached #{element_id} (at {active(page)})")


def test_a_form_is_answered_by_keyboard_with_a_conditional_field(
    screen: tuple[str, Any], live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    item = records("items.jsonl")[0]
    item["attachments"][1]["content"] += f" A {LONG_WORD} too."
    item["meta"] = {"note": SECRET}
    study_id = local_study("form", [item], {**sample_config(), **ONE_PASS})
    steps: list[Any] = []
    page.on("request", lambda r: steps.append(r) if r.url.endswith("/step") else None)
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    shoot(page, which, "form-intro")
    page.focus("#name")
    page.keyboard.type("Kim")
    page.keyboard.press("Tab")
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.keyboard.press("Enter")  # the join button
    page.wait_for_selector("#task:not(.hidden)")
    assert SECRET not in page.content()
    assert page.locator(".attachment").count() == 2
    assert page.inner_text(".attachment h3 >> nth=0") == "Text 1"
    source = page.locator(".attachment-text").nth(1)
    assert LONG_WORD in source.inner_text()
    assert (
        page.evaluate("getComputedStyle(document.querySelector('.attachment-text')).whiteSpace")
        == "pre-wrap"
    )
    legends = page.locator("fieldset.form-field legend").all_inner_texts()
    assert legends[0] == "How faithful is the summary to the source?"
    assert "Faithful: everything the summary says" in page.inner_text("#f0-help")
    assert page.get_attribute("#f0-1", "aria-label") == "1 (makes things up)"
    assert page.locator("#f1 input[type=checkbox]").count() == 4
    assert page.is_hidden("#f2"), "the explanation waits for 'Something else'"
    shown = rank_labels(page)  # this assignment's start order
    assert sorted(shown) == DECLARED
    shoot(page, which, "form-task")

    # Submitting with nothing answered: marked in the page, nothing sent.
    assert active(page) == "f0-1"  # the first question has the focus
    tab_to(page, "submit-form")
    page.keyboard.press("Enter")
    page.wait_for_function("document.getElementById('f0-error').textContent !== ''")
    assert page.inner_text("#f0-error") == "Please answer this question."
    assert "This order is right" in page.inner_text("#f3-error")
    assert active(page) == "f0-1" and steps == []
    shoot(page, which, "form-missing")

    page.keyboard.press("Space")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    assert page.is_checked("#f0-4")
    assert page.inner_text("#f0-error") == ""
    assert page.inner_text("#error") != "", "the rank is still marked"
    page.keyboard.press("Tab")
    assert active(page) == "f1-0"
    page.keyboard.press("Space")  # It leaves out a key point
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # It states something the source does not
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # It is hard to follow: the third, the maximum
    assert page.is_disabled("#f1-3"), "a fourth choice is refused at the maximum"
    page.keyboard.press("Space")  # untick it again
    assert page.is_enabled("#f1-3")
    page.keyboard.press("Tab")
    assert active(page) == "f1-3"
    page.keyboard.press("Space")  # Something else: the explanation appears
    page.wait_for_selector("#f2:not([hidden])")
    page.keyboard.press("Tab")
    assert active(page) == "f2-text"
    page.keyboard.type(EXPLANATION)
    assert page.inner_text("#f2-count").startswith(f"{len(EXPLANATION)} / 300 characters")
    assert page.get_attribute("#f2-text", "maxlength") == "300"
    # The ranking: the first line down twice (to the bottom), then up once; moving it
    # answers the question.
    first = shown[0]
    page.keyboard.press("Tab")
    assert (
        page.evaluate("document.activeElement.getAttribute('aria-label')") == f"Move {first} down"
    )
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == f"Move {first} up"
    page.keyboard.press("Enter")
    final = [shown[1], shown[0], shown[2]]
    assert rank_labels(page) == final
    assert f"{first}: now 2 of 3." in page.inner_text("#f3")
    assert page.inner_text("#f3-error") == "" and page.inner_text("#error") == ""
    with db.session() as session:
        assert session.scalars(select(Response)).all() == [] and steps == []
    shoot(page, which, "form-filled")

    tab_to(page, "submit-form")
    with page.expect_response(lambda r: r.url.endswith("/step")) as info:
        page.keyboard.press("Enter")
    assert info.value.ok, info.value.text()
    sent = json.loads(info.value.request.post_data)
    assert sent == {
        "step": 0,
        "fields": {
            "faithfulness": 4,
            "problems": ["missing", "invented", "other"],
            "other problem": EXPLANATION,
            "strengths": [1, 0, 2],  # positions in the shown order
        },
    }
    page.wait_for_selector("#feedback:not(.hidden)")
    assert page.inner_text("#thanks") == "Thank you! Your answers are saved."
    assert page.is_hidden("#training-result")
    shoot(page, which, "form-feedback")
    with db.session() as session:
        (response,) = session.scalars(select(Response)).all()
        stored = {**sent["fields"], "strengths": [DECLARED.index(label) for label in final]}
        assert response.answer["fields"] == stored


def test_a_hidden_field_is_not_sent_and_html_attachments_are_shown_sanitised(
    screen: tuple[str, Any], live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    html = (
        "<p>A <b>bold</b> claim<script>window.pwned = 1</script></p>"
        '<img src="x" onerror="window.pwned = 2"><a href="javascript:window.pwned = 3">link</a>'
        "<table><tr><th>Year</th><td>2024</td></tr></table>"
    )
    item = {
        "id": "h",
        "attachments": [
            {"type": "text", "content": "A short summary."},
            {"type": "html", "content": html},
        ],
    }
    study_id = local_study("form", [item], {**sample_config(), **ONE_PASS})
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text(".attachment-html b") == "bold"
    assert page.locator(".attachment-html script, .attachment-html img").count() == 0
    assert page.get_attribute(".attachment-html a", "href") is None
    assert page.evaluate("window.pwned") is None
    page.check("#f0-2")
    page.check("#f1-3")
    page.fill("#f2-text", "typed, then hidden again")
    page.uncheck("#f1-3")
    assert page.is_hidden("#f2")
    shoot(page, which, "form-html")
    # A rank left in its start order is no answer until confirmed.
    page.click("#submit-form")
    assert "This order is right" in page.inner_text("#f3-error")
    page.check("#f3-confirm")
    assert page.inner_text("#f3-error") == ""

    # A value the server refuses (altered on its way, as no page would send it) marks its
    # question with the server's words.
    def too_high(route: Any) -> None:
        body = json.loads(route.request.post_data)
        body["fields"]["faithfulness"] = 9
        route.continue_(post_data=json.dumps(body))

    page.route("**/step", too_high)
    with page.expect_response(lambda r: r.url.endswith("/step")) as refused:
        page.click("#submit-form")
    assert refused.value.status == 422
    page.wait_for_function("document.getElementById('f0-error').textContent !== ''")
    assert page.inner_text("#f0-error") == "must be a whole number from 1 to 5, got 9"
    assert "from 1 to 5" in page.inner_text("#error")
    assert "invalid" in (page.get_attribute("#f0", "class") or "")
    shoot(page, which, "form-refused")
    page.unroute("**/step")
    with page.expect_response(lambda r: r.url.endswith("/step")) as info:
        page.click("#submit-form")
    assert info.value.ok, info.value.text()
    assert json.loads(info.value.request.post_data)["fields"] == {
        "faithfulness": 2,
        "problems": [],
        "strengths": [0, 1, 2],
    }
    page.wait_for_selector("#feedback:not(.hidden)")


def test_a_training_item_shows_what_was_expected_before_next(
    screen: tuple[str, Any], live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    config = sample_config()
    config["fields"][3] = {**config["fields"][3], "required": False}
    item = {
        "id": "t1",
        "kind": "training",
        "attachments": [
            {"type": "text", "content": "The council will vote on the budget on Monday."},
            {"type": "text", "content": "On Monday the council votes on next year's budget."},
        ],
        "expected": {"faithfulness": 4, "problems": ["missing"], "strengths": [2, 0, 1]},
        "tolerance": {"faithfulness": 1},
    }
    study_id = local_study(
        "form", [item, {"id": "r1", "attachments": item["attachments"]}], {**config, **ONE_PASS}
    )
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.locator("#training-result li").count() == 0  # nothing expected shown before
    page.check("#f0-5")
    page.check("#f1-2")  # It is hard to follow
    with page.expect_response(lambda r: r.url.endswith("/step")) as info:
        page.click("#submit-form")
    assert info.value.ok, info.value.text()
    # The optional rank, never touched, is not sent.
    assert json.loads(info.value.request.post_data)["fields"] == {
        "faithfulness": 5,
        "problems": ["unclear"],
    }
    page.wait_for_selector("#feedback:not(.hidden)")
    assert page.inner_text("#thanks").startswith("Not quite: 2 of 3 answers differ")
    results = page.locator("#training-result li").all_inner_texts()
    assert len(results) == 3
    assert "Matches" in results[0] and "Expected: 4/5, give or take 1" in results[0]
    assert "Your answer: 5/5" in results[0]
    assert "Differs" in results[1] and "Expected: It leaves out a key point" in results[1]
    assert "Your answer: It is hard to follow" in results[1]
    assert "Expected: Clarity > Accuracy > Brevity" in results[2]
    assert "Your answer: no answer" in results[2]
    shoot(page, which, "form-training")
    assert active(page) == "next"
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#next")
    page.wait_for_selector("#task:not(.hidden)")
    with db.session() as session:
        (response,) = session.scalars(select(Response)).all()
        assert response.answer["fields"]["strengths"] is None
