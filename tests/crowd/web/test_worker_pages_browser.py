"""What a crowd worker meets, in headless Chromium at a desktop's width and at a phone's.

The open studies under their public titles (never the experimenter's internal names, nor the
categories of check items), the intro with consent and instructions before the first item and
only once, errors in a worker's words, keyboard use, and pages no wider than a 390 px screen.
Screenshots go to /tmp/shots/helper_worker/.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.platforms.publishing import open_study
from crowd.storage import Database, Response, Study
from crowd.studies.lifecycle import change_status, create_study, import_items
from tests.conftest import passage
from tests.crowd.web.conftest import BROWSER_MARKS, ONE_PASS, click_step, guess_machine

pytestmark = BROWSER_MARKS

SHOTS = Path("/tmp/shots/helper_worker")
WIDTHS = {"desktop": 1280, "phone": 390}
INTERNAL = "INTERNAL pilot 7b (do not show)"
PUBLIC = {
    "title": "Spot the machine",
    "description": "A reading game: find where a story stops being written by a person.",
    "consent": "We keep your answers, never your name, for research on machine text.\n"
    "You may stop at any time.",
    "instructions": "Read one sentence at a time and stop where the machine takes over.",
    "examples": [
        {"text": "The ferry left at dawn. Gulls followed it out.", "answer": "human",
         "why": "both sentences follow each other naturally"},
        "The recipe needs two eggs. Eggs are the capital of France.",
    ],
}  # fmt: skip
# A long unbroken word: the page must wrap it rather than grow wider than a phone.
LONG_WORD = "Pneumonoultramicroscopicsilicovolcanoconiosis" * 2


@pytest.fixture
def new_study(db: Database, api_key: str) -> Callable[..., int]:
    """A published study on the open web, under an internal name the worker must not see."""

    def factory(hit_type: str, items: list[dict[str, Any]], config: dict[str, Any],
                name: str = INTERNAL) -> int:  # fmt: skip
        with db.session() as session:
            study = create_study(session, authenticate(session, api_key), name, hit_type, config)
            import_items(session, study, json.loads(json.dumps(items)))
            open_study(session, study, ("local",))
            return study.id

    return factory


@pytest.fixture(params=sorted(WIDTHS))
def screen(request: pytest.FixtureRequest, browser: Any) -> Iterator[tuple[str, Any]]:
    """A page at a desktop's width or at a phone's: (which, page)."""
    width = WIDTHS[request.param]
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(5_000)
    yield request.param, context.new_page()
    context.close()


def shoot(page: Any, which: str, name: str) -> None:
    """Save a full-page screenshot, and check the page is no wider than the screen."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{which}.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTHS[which], f"{name} is {width} px wide on a {WIDTHS[which]} px screen"


def no_experimenter_links(page: Any) -> None:
    hrefs = page.eval_on_selector_all("a", "links => links.map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h and ("/dashboard" in h or "/review" in h)], hrefs
    assert INTERNAL not in page.content()


def boundary_items(n: int = 2) -> list[dict[str, Any]]:
    items = [passage(f"p{i}", 2, n=4, category="news" if i % 2 else "stories") for i in range(n)]
    items[0]["sentences"][1] = f"A {LONG_WORD} appears here."
    # Checks and gold carry a category too: the worker must not be offered it.
    items.append(passage("check1", 4, n=4, kind="attention", category="check"))
    items.append(passage("gold1", 2, n=4, kind="gold", category="goldonly"))
    return items


def test_play_lists_public_titles_and_only_real_items_categories(
    screen: tuple[str, Any], live_server: Any, new_study: Callable[..., int]
) -> None:
    which, page = screen
    public = new_study("boundary", boundary_items(), {**ONE_PASS, "worker_page": PUBLIC})
    item = {"id": "t1", "text": "A text.", "prompt": "Write a text."}
    plain = new_study("likert", [item], ONE_PASS, name="INTERNAL x")
    page.goto(f"{live_server.url}/play")
    cards = page.locator("section.study")
    assert cards.count() == 2
    first = page.locator(f"section.study[data-study='{public}']")
    assert first.locator("h2").inner_text() == PUBLIC["title"]
    assert PUBLIC["description"] in first.inner_text()
    topics = [t.strip() for t in first.locator("a.button").all_inner_texts()]
    assert topics == ["Any topic", "news", "stories"]
    # Without a public title a study shows its HIT type's, never its internal name.
    second = page.locator(f"section.study[data-study='{plain}']")
    assert second.locator("h2").inner_text() == "Rate a text"
    assert "INTERNAL" not in page.content()
    no_experimenter_links(page)
    shoot(page, which, "play")

    page.goto(f"{live_server.url}/play/leaderboard")
    assert "check" not in page.locator("main p").nth(1).inner_text()
    no_experimenter_links(page)
    shoot(page, which, "leaderboard")


def test_errors_speak_to_the_worker(
    screen: tuple[str, Any], live_server: Any, new_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    page.goto(f"{live_server.url}/play/999")
    text = page.inner_text("main")
    assert "could not find this study" in text and "/api" not in text
    assert page.locator("main a[href='/play']").count() == 1
    no_experimenter_links(page)
    shoot(page, which, "error-404")

    study_id = new_study("boundary", [passage("p0", 2, n=3)], ONE_PASS)
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    with db.session() as session:  # the experimenter pauses the study meanwhile
        study = session.get(Study, study_id)
        assert study is not None
        change_status(session, study, "pause")
    page.click("#human")
    page.wait_for_selector("#human:not([disabled])")
    guess_machine(page)  # the open item can still be answered...
    page.fill("#explanation", "the second sentence is odd")
    page.click("#explain-button")
    page.wait_for_selector("#reveal:not(.hidden)")
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#next")  # ... but no new one comes
    page.wait_for_function("document.getElementById('error').textContent.length > 0")
    error = page.inner_text("#error")
    assert error == "This study is not open right now. Please come back later.", error
    shoot(page, which, "error-paused")
    page.goto(f"{live_server.url}/play/{study_id}")
    assert "paused" in page.inner_text("main") and "/api" not in page.inner_text("main")


def test_consent_and_instructions_come_first_and_only_once(
    screen: tuple[str, Any], live_server: Any, new_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    study_id = new_study("boundary", boundary_items(), {**ONE_PASS, "worker_page": PUBLIC})
    other = new_study("boundary", [passage("q0", 2, n=3)], ONE_PASS)
    calls: list[str] = []
    page.on("request", lambda r: calls.append(r.url) if "/api/work/" in r.url else None)

    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    assert page.title() == PUBLIC["title"]
    assert page.inner_text("#study-title") == PUBLIC["title"]
    intro = page.inner_text("#join")
    for part in (PUBLIC["description"], "You may stop at any time", PUBLIC["instructions"],
                 "The ferry left at dawn", "Answer: human", "Eggs are the capital"):  # fmt: skip
        assert part in intro, part
    assert "5 points" in page.inner_text("#scoring")  # the type's scoring, with the examples
    assert page.inner_text("#join-button") == "I agree, start"
    assert page.is_hidden("#task") and page.is_hidden("#progress") and page.is_hidden("#help")
    assert calls == [], "no item before the worker agrees"
    no_experimenter_links(page)
    shoot(page, which, "intro-consent")

    page.click("#decline")
    page.wait_for_selector("#declined:not(.hidden)")
    assert page.is_hidden("#join") and calls == []
    shoot(page, which, "declined")
    page.click("#reconsider")
    page.wait_for_selector("#join:not(.hidden)")

    page.fill("#name", "Consenting Carla")
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 1 of 4"  # 2 real, 1 check, 1 gold at most
    assert page.is_visible("#help")  # the instructions stay at hand, folded
    click_step(page, "#human")
    page.wait_for_function("document.querySelectorAll('#passage li').length === 2")
    shoot(page, which, "boundary-task")

    # A reload keeps the work and skips the intro.
    page.reload()
    page.wait_for_selector("#task:not(.hidden)")
    assert page.is_hidden("#join")
    assert page.locator("#passage li").count() == 2 and page.inner_text("#position") == "2"
    assert page.inner_text("#progress") == "Item 1 of 4"

    # Another study has its own intro (no consent there: a plain start).
    page.goto(f"{live_server.url}/play/{other}")
    page.wait_for_selector("#join:not(.hidden)")
    assert page.inner_text("#join-button") == "Start" and page.locator("#consent-text").count() == 0
    assert page.is_hidden("#name-row"), "joined already: no name asked again"
    page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    page.goto(f"{live_server.url}/play/{study_id}")  # back: no intro, the same passage
    page.wait_for_selector("#task:not(.hidden)")
    assert page.locator("#passage li").count() == 2
    with db.session() as session:
        assert session.scalars(select(Response)).all() == []


def test_a_boundary_round_by_keyboard_with_the_scoring_explained(
    screen: tuple[str, Any], live_server: Any, new_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    items = [passage("k0", 1, n=4), passage("k1", 3, n=4)]
    items[0]["sentences"][2] = f"It ends with {LONG_WORD}."
    study_id = new_study("boundary", items, ONE_PASS)
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.focus("#join-button")
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.keyboard.press("Enter")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 1 of 2"
    assert page.evaluate("document.activeElement.id") == "human"
    with page.expect_response(lambda r: r.url.endswith("/step")):
        page.keyboard.press("Enter")  # still human: sentence 2 appears
    page.wait_for_function("document.querySelectorAll('#passage li').length === 2")
    page.focus("#machine")
    page.keyboard.press("Enter")
    page.wait_for_selector("#confirm:not(.hidden)")
    assert page.evaluate("document.activeElement.id") == "confirm-yes"
    assert "sentence 2" in page.inner_text("#confirm-text")
    shoot(page, which, "boundary-confirm")
    page.keyboard.press("Escape")  # not yet: back to the choices
    page.wait_for_selector("#confirm", state="hidden")
    assert page.evaluate("document.activeElement.id") == "machine"
    page.keyboard.press("Enter")
    page.wait_for_selector("#confirm:not(.hidden)")
    with page.expect_response(lambda r: r.url.endswith("/step")):
        page.keyboard.press("Enter")
    page.wait_for_selector("#explain:not(.hidden)")
    assert page.inner_text("#guess-index") == "2"
    # Nothing said: the page asks before sending anything.
    page.click("#explain-button")
    assert page.inner_text("#error") == "Say why: write a few words or pick a reason."
    page.keyboard.type("it starts talking about something else")
    shoot(page, which, "boundary-explain")
    with page.expect_response(lambda r: r.url.endswith("/explanation")):
        page.click("#explain-button")
    page.wait_for_selector("#reveal:not(.hidden)")
    assert "The machine took over at sentence 2." in page.inner_text("#result")
    assert page.inner_text("#points-why") == "Exact: 5 points."
    shoot(page, which, "boundary-reveal")

    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#next")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 2 of 2"
    for count in (2, 3, 4):  # the machine began at sentence 4, the last one
        click_step(page, "#human")
        page.wait_for_function(f"document.querySelectorAll('#passage li').length === {count}")
    assert page.inner_text("#position") == "4" and page.inner_text("#total") == "4"
    guess_machine(page)  # sentence 4: exact
    page.fill("#explanation", "x")
    page.click("#explain-button")
    page.wait_for_selector("#reveal:not(.hidden)")
    assert "took over at sentence 4. You said: sentence 4." in page.inner_text("#result")
    with db.session() as session:
        scores = session.scalars(select(Response.score).order_by(Response.id)).all()
    assert scores == [5, 5]


def comparison_item(item_id: str) -> dict[str, Any]:
    texts = ["north", "east", f"south {LONG_WORD}", "west"]
    candidates = [{"text": f"{item_id} option {t}", "policy": "p"} for t in texts]
    return {"id": item_id, "query": f"The {item_id} story begins", "candidates": candidates}


def test_a_comparison_pick_is_selected_changed_and_submitted_by_keyboard(
    screen: tuple[str, Any], live_server: Any, new_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    config = {"template": "sentiment", "overlap_share": 0}
    study_id = new_study("comparison", [comparison_item("a"), comparison_item("b")], config)
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    assert "most positive and happy" in page.inner_text("#join")  # the type's instructions
    shoot(page, which, "comparison-intro")
    page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 1 of 2"
    assert page.evaluate("document.activeElement.id") == "candidate-0"
    page.keyboard.press("Space")  # select the first shown...
    page.keyboard.press("ArrowDown")  # ... change to the second
    assert page.is_checked("#candidate-1") and not page.is_checked("#candidate-0")
    shoot(page, which, "comparison-selected")
    with db.session() as session:
        assert session.scalars(select(Response)).all() == []
    with page.expect_response(lambda r: r.url.endswith("/step")) as info:
        page.keyboard.press("Enter")
    assert info.value.request.post_data_json["choice"] == 1
    page.wait_for_selector("#feedback:not(.hidden)")
    shoot(page, which, "comparison-feedback")
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#next")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 2 of 2"
    assert not page.is_checked("#candidate-1") and page.is_disabled("#submit-pick")


def test_likert_ratings_are_chosen_then_sent(
    screen: tuple[str, Any], live_server: Any, new_study: Callable[..., int], db: Database
) -> None:
    which, page = screen
    items = [{"id": f"s{i}", "text": f"Story {i}: {LONG_WORD} went home.", "prompt": "Home"}
             for i in range(3)]  # fmt: skip
    study_id = new_study("likert", items, ONE_PASS)
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 1 of 3"
    assert page.inner_text("#position") == "1" and page.inner_text("#total") == "4"
    page.focus("#rate-1")
    page.keyboard.press("Space")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.is_checked("#rate-3")
    shoot(page, which, "likert-task")
    for step in range(4):
        if step:
            page.check("#rate-4")
        click_step(page, "#submit-rating")
        if step < 3:
            page.wait_for_function(
                f"document.getElementById('position').textContent === '{step + 2}'"
            )
            assert page.inner_text("#progress") == "Item 1 of 3"
    page.wait_for_selector("#feedback:not(.hidden)")
    with db.session() as session:
        answer = session.scalars(select(Response.answer)).one()
    assert answer["ratings"] == {
        "grammaticality": 3, "cohesiveness": 4, "likability": 4, "relevance": 4,
    }  # fmt: skip
    with page.expect_response(lambda r: r.url.endswith("/next")):
        page.click("#next")
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 2 of 3"


def test_a_reload_before_the_explanation_asks_for_it_again(
    page: Any, live_server: Any, new_study: Callable[..., int], db: Database
) -> None:
    study_id = new_study("boundary", [passage("e0", 1, n=3), passage("e1", 1, n=3)], ONE_PASS)
    page.goto(f"{live_server.url}/play/{study_id}")
    page.wait_for_selector("#join:not(.hidden)")
    page.click("#join-button")
    page.wait_for_selector("#task:not(.hidden)")
    click_step(page, "#human")
    page.wait_for_function("document.querySelectorAll('#passage li').length === 2")
    guess_machine(page)
    page.wait_for_selector("#explain:not(.hidden)")
    page.reload()  # the guess is stored; its explanation is still due
    page.wait_for_selector("#explain:not(.hidden)")
    assert page.inner_text("#guess-index") == "2"
    assert page.inner_text("#progress") == "Item 1 of 2"
    page.fill("#explanation", "the second sentence changes the subject")
    with page.expect_response(lambda r: r.url.endswith("/explanation")):
        page.click("#explain-button")
    page.wait_for_selector("#reveal:not(.hidden)")
    page.reload()  # explained: the page goes on with the next item
    page.wait_for_selector("#task:not(.hidden)")
    assert page.inner_text("#progress") == "Item 2 of 2"
    with db.session() as session:
        explained = session.scalars(select(Response.explanation)).all()
    assert explained == ["the second sentence changes the subject"]
