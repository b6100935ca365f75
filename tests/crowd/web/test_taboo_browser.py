"""Adversarial Taboo in headless Chromium: two people in two browser contexts play a whole
game through the waiting room, and a person plays the agent attacker. Every response the
defender's browser receives is read: the target word is in none of them until the game is
over and stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from crowd.storage import Database, Response, TabooGame
from tests.crowd.web.conftest import BROWSER_MARKS, ResponseLog

pytestmark = BROWSER_MARKS

WORD = "banana"


def open_and_choose(page: Any, base_url: str, study: int, name: str, button: str) -> None:
    page.goto(f"{base_url}/play/{study}")
    page.wait_for_selector("#join:not(.hidden)")
    page.fill("#name", name)
    page.click("#join-button")
    page.wait_for_selector("#choose:not(.hidden)")
    page.click(button)


def role(page: Any) -> str:
    page.wait_for_selector("#game:not(.hidden)")
    return "attacker" if page.is_visible("#target-line") else "defender"


def say(page: Any, text: str) -> None:
    page.wait_for_selector("#utterance:not([disabled])")
    page.fill("#utterance", text)
    with page.expect_response(lambda r: r.url.endswith("/move")) as info:
        page.click("#say")
    assert info.value.ok, info.value.text()


def lines(page: Any) -> int:
    return int(page.eval_on_selector_all("#transcript li", "items => items.length"))


def leaks(log: ResponseLog) -> list[str]:
    """Bodies the defender's browser got before the end that name the word."""
    found = []
    for response, body in log.read():
        try:
            over = json.loads(body).get("over") is True
        except (ValueError, AttributeError):
            over = False
        if WORD in body.lower() and not over:
            found.append(f"{response.url}: {body[:200]}")
    return found


def test_two_people_play_a_full_game_in_two_browser_contexts(
    browser: Any, live_server: Any, make_study: Callable[..., int], db: Database
) -> None:
    study = make_study([{"id": "w1", "word": WORD}],
                       {"taboo": {"judge": None, "rules": {"max_turns": 4}}},
                       providers=("local",), hit_type="taboo")  # fmt: skip
    contexts = [browser.new_context(), browser.new_context()]
    pages = [context.new_page() for context in contexts]
    for page in pages:
        page.set_default_timeout(8000)
    logs = [ResponseLog(page) for page in pages]
    open_and_choose(pages[0], live_server.url, study, "Ann", "#play-human")
    pages[0].wait_for_selector("#waiting:not(.hidden)")
    open_and_choose(pages[1], live_server.url, study, "Bob", "#play-human")
    roles = [role(page) for page in pages]
    assert sorted(roles) == ["attacker", "defender"]
    attacker = pages[roles.index("attacker")]
    defender = pages[roles.index("defender")]
    defender_log = logs[roles.index("defender")]
    assert attacker.text_content("#target") == WORD
    assert not defender.is_visible("#target-line")

    # Four turns; the other side's message arrives without a reload.
    say(attacker, "What yellow fruit do monkeys like to peel?")
    defender.wait_for_function("document.querySelectorAll('#transcript li').length === 1")
    say(defender, "Monkeys like many fruits, I think.")
    attacker.wait_for_function("document.querySelectorAll('#transcript li').length === 2")
    say(attacker, "Which one is long, curved and yellow?")
    defender.wait_for_function("document.querySelectorAll('#transcript li').length === 3")
    say(defender, "That could be a lemon, or corn.")
    # The turns are up: the defender must guess. The guess form shows all game long, so
    # wait for the page to hide the message form (the render after the move's reply).
    defender.wait_for_selector("#say-form", state="hidden")
    assert defender.is_visible("#guess-form")
    assert "guess the word" in defender.text_content("#status")
    assert not leaks(defender_log)
    defender.fill("#guess", "lemon")
    defender.click("#guess-button")
    for page in pages:
        page.wait_for_selector("#over:not(.hidden)")
    assert defender.text_content("#revealed") == WORD
    assert "tie" in attacker.text_content("#result").lower()
    assert not leaks(defender_log)
    with db.session() as session:
        game = session.scalars(select(TabooGame)).one()
        assert game.pairing == "human-human" and game.outcome == "tie"
        assert len(game.state["utterances"]) == 4 and game.state["guess"] == "lemon"
        assert len(session.scalars(select(Response)).all()) == 2
    for context in contexts:
        context.close()


def test_a_person_defends_against_the_agent_attacker(
    browser: Any, live_server: Any, make_study: Callable[..., int], db: Database
) -> None:
    study = make_study([{"id": "w1", "word": WORD}],
                       {"taboo": {"judge": None, "human_role": "defender"}},
                       providers=("local",), hit_type="taboo")  # fmt: skip
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(8000)
    log = ResponseLog(page)
    open_and_choose(page, live_server.url, study, "Cat", "#play-agent")
    assert role(page) == "defender"
    page.wait_for_function("document.querySelectorAll('#transcript li').length >= 1")
    assert "computer" in page.text_content("#role-line")
    for reply in ("I am not sure what you mean.", "Perhaps, tell me more."):
        if page.is_visible("#over"):
            break
        before = lines(page)
        say(page, reply)
        page.wait_for_function(
            f"document.querySelectorAll('#transcript li').length > {before + 1}"
            " || !document.getElementById('over').classList.contains('hidden')"
        )
    if not page.is_visible("#over"):
        page.fill("#guess", "umbrella")
        page.click("#guess-button")
    page.wait_for_selector("#over:not(.hidden)")
    assert page.text_content("#revealed") == WORD
    assert not leaks(log)
    with db.session() as session:
        game = session.scalars(select(TabooGame)).one()
        assert game.pairing == "human-agent" and game.outcome is not None
        assert game.attacker_agent == "retrieval"
    context.close()
