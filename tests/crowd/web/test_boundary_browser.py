"""The boundary ("Real or Fake Text") game page, driven end to end in headless Chromium.

The page must only ever hold the sentences the server has revealed: these tests record every
response body, the live DOM and every script the browser sees, and check that no sentence
beyond the current step and no true boundary reaches the browser before the guess is stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from crowd.storage import Database, Response
from tests.conftest import passage
from tests.crowd.web.conftest import (
    BROWSER_MARKS,
    ONE_PASS,
    ResponseLog,
    carries_json,
    click_step,
    guess_machine,
    json_keys,
    open_and_join,
)

pytestmark = BROWSER_MARKS

PLAYER = "Ada Tester"
SECRET_KEYS = {"boundary", "expected"}


def marked(item_id: str, boundary: int, n: int, word: str) -> dict[str, Any]:
    """A passage whose sentence i carries the unique marker f"{word}{i}" (leak detection)."""
    record = passage(item_id, boundary, n)
    record["sentences"] = [f"Sentence {word}{i} belongs to this story." for i in range(n)]
    return record


class Recorder(ResponseLog):
    """Every response body the page receives, plus DOM and script snapshots, by phase."""

    def __init__(self, page: Any) -> None:
        super().__init__(page)
        self.records: list[dict[str, Any]] = []

    def snapshot(self, phase: str) -> None:
        """Read the bodies of responses seen so far, then the page's HTML and scripts."""
        for response, body in self.read():
            kind = response.request.resource_type
            self.records.append(
                {
                    "phase": phase,
                    "what": f"{kind} {response.request.method} {response.url}",
                    "body": body,
                    "json": carries_json(response),
                }
            )
        self.records.append(
            {"phase": phase, "what": "page HTML", "body": self.page.content(), "json": False}
        )
        sources = self.page.evaluate(
            """async () => Promise.all(Array.from(document.scripts).map(async (s) =>
                s.src ? (await fetch(s.src, {cache: "force-cache"})).text() : s.textContent))"""
        )
        for index, source in enumerate(sources):
            self.records.append(
                {"phase": phase, "what": f"script #{index}", "body": source, "json": False}
            )

    def bodies(self, phases: set[str]) -> list[dict[str, Any]]:
        return [record for record in self.records if record["phase"] in phases]


def assert_no_leak(
    recorder: Recorder, phases: set[str], hidden: list[str], secret_keys: bool
) -> None:
    records = recorder.bodies(phases)
    assert any(r["what"].startswith("xhr") or r["what"].startswith("fetch") for r in records)
    for record in records:
        for marker in hidden:
            assert marker not in record["body"], (
                f"unrevealed sentence marker {marker!r} reached the browser in {record['what']} "
                f"({record['phase']})"
            )
        if secret_keys and record["json"] and record["body"]:
            leaked = json_keys(json.loads(record["body"])) & SECRET_KEYS
            assert not leaked, f"{record['what']} ({record['phase']}) carries {leaked}"


def passage_texts(page: Any, selector: str) -> list[str]:
    return [text.strip() for text in page.locator(f"{selector} li").all_inner_texts()]


def only_response(db: Database) -> Response:
    with db.session() as session:
        responses = session.scalars(select(Response)).all()
        assert len(responses) == 1
        response = responses[0]
        session.expunge(response)
        return response


def test_machine_guess_round_reveals_one_sentence_at_a_time_and_never_leaks(
    page: Any, live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    sentences = marked("story", boundary=3, n=6, word="alpha")["sentences"]
    markers = [f"alpha{i}" for i in range(6)]
    study_id = local_study("boundary", [marked("story", boundary=3, n=6, word="alpha")], ONE_PASS)
    started = datetime.now().astimezone()
    recorder = Recorder(page)

    open_and_join(page, live_server.url, study_id, PLAYER)
    page.wait_for_function("document.querySelectorAll('#passage li').length === 1")
    recorder.snapshot("step0")
    assert passage_texts(page, "#passage") == sentences[:1]
    # One numbering, from 1: the list, the counter and the question agree.
    assert page.inner_text("#position") == "1" and page.inner_text("#total") == "6"
    assert page.inner_text("#current") == "1"
    assert page.inner_text("#progress") == "Item 1 of 1"
    assert page.is_disabled("#machine"), "sentence 1 is always human: no machine guess yet"
    assert_no_leak(recorder, {"step0"}, markers[1:], secret_keys=True)

    for step in (1, 2):
        click_step(page, "#human")
        page.wait_for_function(f"document.querySelectorAll('#passage li').length === {step + 1}")
        recorder.snapshot(f"step{step}")
        assert passage_texts(page, "#passage") == sentences[: step + 1]
        assert page.inner_text("#position") == str(step + 1)
        assert page.inner_text("#current") == str(step + 1)
        # The list numbers its sentences from 1 too: the newest is the counter's number.
        assert page.eval_on_selector("#passage", "ol => ol.start") == 1
        assert_no_leak(recorder, {f"step{step}"}, markers[step + 1 :], secret_keys=True)

    # Nothing is stored before the guess.
    with db.session() as session:
        assert session.scalars(select(Response)).all() == []

    # The guess waits for a confirmation: going back stores nothing.
    page.click("#machine")
    page.wait_for_selector("#confirm:not(.hidden)")
    assert "sentence 3" in page.inner_text("#confirm-text")
    assert page.is_hidden("#choices")
    page.click("#confirm-no")
    page.wait_for_selector("#confirm", state="hidden")
    assert page.is_visible("#choices")
    with db.session() as session:
        assert session.scalars(select(Response)).all() == []
    guess_machine(page)
    page.wait_for_selector("#explain:not(.hidden)")
    recorder.snapshot("explain")
    assert page.inner_text("#guess-index") == "3"
    # The explanation form still shows nothing beyond the guessed sentence.
    assert_no_leak(recorder, {"explain"}, markers[3:], secret_keys=False)
    stored = only_response(db)
    assert stored.answer["guess"] == 2 and stored.explanation is None

    explanation = "alpha2 repeats itself and drifts off topic"
    page.fill("#explanation", explanation)
    page.check("input[name=reason][value=repetition]")
    with page.expect_response(lambda r: r.url.endswith("/explanation")):
        page.click("#explain-button")
    page.wait_for_selector("#reveal:not(.hidden)")
    recorder.snapshot("reveal")

    # The reveal: points, the whole passage, the true boundary highlighted, the guess marked.
    result = page.inner_text("#result")
    assert "The machine took over at sentence 4." in result
    assert "You said: sentence 3." in result
    assert "Points: 0." in result
    assert "Too early" in page.inner_text("#points-why")
    assert passage_texts(page, "#full-passage") == sentences
    machine_rows = page.eval_on_selector_all(
        "#full-passage li", "(lis) => lis.map((li, i) => li.classList.contains('machine') ? i : -1)"
    )
    assert [i for i in machine_rows if i >= 0] == [3, 4, 5]
    assert (
        page.eval_on_selector_all(
            "#full-passage li", "(lis) => lis.findIndex((li) => li.classList.contains('guess'))"
        )
        == 2
    )
    # The boundary did reach the browser, but only now: the recorder would have seen a leak.
    reveal_json = [json.loads(r["body"]) for r in recorder.bodies({"reveal"}) if r["json"]]
    assert any("boundary" in json_keys(body) for body in reveal_json)

    response = only_response(db)
    assert response.answer == {"guess": 2, "all_human": False}
    assert response.score == 0
    assert response.explanation == explanation
    assert response.reasons == ["repetition"]
    reveals = [event for event in response.events if event["type"] == "reveal"]
    assert [event["index"] for event in reveals] == [0, 1, 2]
    times = [datetime.fromisoformat(event["at"]) for event in response.events]
    assert [event["type"] for event in response.events] == [
        "reveal", "reveal", "reveal", "guess", "explanation",
    ]  # fmt: skip
    assert all(t.tzinfo is not None for t in times)
    assert times == sorted(times) and len(set(times)) == len(times), times
    assert started <= times[0] and times[-1] <= datetime.now().astimezone()


def test_all_human_round_needs_no_explanation_and_scores_five(
    page: Any, live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    n = 4
    record = marked("human", boundary=n, n=n, word="beta")
    study_id = local_study("boundary", [record], ONE_PASS)
    open_and_join(page, live_server.url, study_id, PLAYER)
    for step in range(1, n):
        click_step(page, "#human")
        page.wait_for_function(f"document.querySelectorAll('#passage li').length === {step + 1}")
        assert passage_texts(page, "#passage") == record["sentences"][: step + 1]

    # Through the last sentence as human is a final answer: it asks first.
    assert page.inner_text("#human") == "Human to the end"
    page.click("#human")
    page.wait_for_selector("#confirm:not(.hidden)")
    assert "whole passage is human-written" in page.inner_text("#confirm-text")
    click_step(page, "#confirm-yes")
    page.wait_for_selector("#reveal:not(.hidden)")
    assert page.is_hidden("#explain")
    result = page.inner_text("#result")
    assert "This passage was entirely human-written." in result
    assert "You said: all human." in result
    assert "Points: 5." in result
    assert passage_texts(page, "#full-passage") == record["sentences"]
    assert page.locator("#full-passage li.machine").count() == 0

    response = only_response(db)
    assert response.answer == {"guess": n, "all_human": True}
    assert response.score == 5
    assert response.explanation is None and response.explained_at is None


def test_profile_and_leaderboard_show_the_player_after_a_round(
    page: Any, live_server: Any, local_study: Callable[..., int]
) -> None:
    study_id = local_study("boundary", [marked("short", boundary=1, n=3, word="gamma")], ONE_PASS)
    open_and_join(page, live_server.url, study_id, PLAYER)
    click_step(page, "#human")
    page.wait_for_function("document.querySelectorAll('#passage li').length === 2")
    guess_machine(page)  # guess 1, boundary 1: exact, 5 points
    page.wait_for_selector("#explain:not(.hidden)")
    page.fill("#explanation", "gamma1 contradicts the first sentence")
    page.click("#explain-button")
    page.wait_for_selector("#reveal:not(.hidden)")
    assert "Points: 5." in page.inner_text("#result")

    page.goto(f"{live_server.url}/play/profile")
    assert page.inner_text("main h1") == PLAYER
    assert float(page.inner_text("#points")) == 5
    assert page.inner_text("#annotations") == "1"
    assert page.inner_text("#exact") == "1"

    page.goto(f"{live_server.url}/play/leaderboard")
    rows = page.locator("#leaderboard tr").all_inner_texts()
    mine = [row for row in rows if PLAYER in row]
    assert len(mine) == 1, rows
    cells = [cell.strip() for cell in re.split(r"\t", mine[0])]
    assert cells[0] == "1" and cells[1] == PLAYER and float(cells[2]) == 5, cells
