"""How the boundary explanation was entered, reported by the page and judged by the server.

The page (crowdTask.watchTyping in task.js) counts keystrokes, pastes and dropped text in the
explanation box and sends them with the explanation; the server stores them in
qc_flags["typing"] and derives the "pasted" and "typed_too_fast" signals. These tests type,
paste, drop and script the text in headless Chromium and read the stored responses back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from crowd.storage import Database, Response
from tests.conftest import passage
from tests.crowd.web.conftest import (
    BROWSER_MARKS,
    ONE_PASS,
    click_step,
    guess_machine,
    open_and_join,
)

pytestmark = BROWSER_MARKS

PLAYER = "Tim Typist"
TYPED = "sentence one repeats the start"
PASTED = "The sentence shows a sudden shift in tone and an unsupported claim."
SCRIPTED = "This text was set by a script without any keys."


def start_study(local_study: Callable[..., int], n_items: int = 1) -> int:
    """Passages whose machine part starts at sentence 1: a guess there needs an explanation."""
    return local_study("boundary", [passage(f"p{i}", 1, 3) for i in range(n_items)], ONE_PASS)


def reach_explanation(page: Any) -> None:
    """From a fresh passage: keep sentence 0, guess "machine" at 1, wait for the form."""
    page.wait_for_function("document.querySelectorAll('#passage li').length === 1")
    click_step(page, "#human")
    page.wait_for_function("document.querySelectorAll('#passage li').length === 2")
    guess_machine(page)
    page.wait_for_selector("#explain:not(.hidden)")


def send_explanation(page: Any) -> dict[str, Any]:
    """Submit the explanation form; returns the JSON body the page POSTed."""
    with page.expect_response(lambda r: r.url.endswith("/explanation")) as info:
        page.click("#explain-button")
    assert info.value.ok, info.value.text()
    page.wait_for_selector("#reveal:not(.hidden)")
    return info.value.request.post_data_json


def stored(db: Database) -> list[Response]:
    """Every stored response, oldest first."""
    with db.session() as session:
        responses = session.scalars(select(Response).order_by(Response.id)).all()
        for response in responses:
            session.expunge(response)
        return list(responses)


def signals(response: Response) -> dict[str, Any]:
    return response.qc_flags.get("signals") or {}


def paste_with_shortcut(page: Any, text: str) -> None:
    """A real paste: the text goes on the clipboard and Ctrl+V puts it in the box."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.evaluate("(text) => navigator.clipboard.writeText(text)", text)
    page.focus("#explanation")
    page.keyboard.press("ControlOrMeta+V")
    assert page.input_value("#explanation") == text


def test_typed_explanation_counts_its_keys_and_is_not_flagged(
    page: Any, live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    study_id = start_study(local_study)
    open_and_join(page, live_server.url, study_id, PLAYER)
    reach_explanation(page)

    page.focus("#explanation")
    page.keyboard.type(TYPED + "x", delay=100)  # about 10 characters a second
    page.keyboard.press("Backspace")  # a correction counts as a key too
    assert page.input_value("#explanation") == TYPED
    body = send_explanation(page)
    assert set(body["typing"]) == {"keys", "pastes", "pasted_chars", "typing_ms"}

    (response,) = stored(db)
    assert response.explanation == TYPED
    typing = response.qc_flags["typing"]
    assert typing["keys"] >= len(TYPED) + 2
    assert typing["pastes"] == 0 and typing["pasted_chars"] == 0
    assert typing["typing_ms"] >= 100 * len(TYPED)
    assert "pasted" not in signals(response)
    assert "typed_too_fast" not in signals(response)


def test_pasted_explanation_sets_off_the_pasted_signal(
    page: Any, live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    study_id = start_study(local_study)
    open_and_join(page, live_server.url, study_id, PLAYER)
    reach_explanation(page)

    paste_with_shortcut(page, PASTED)
    send_explanation(page)

    (response,) = stored(db)
    assert response.explanation == PASTED
    typing = response.qc_flags["typing"]
    assert typing["pastes"] >= 1
    assert typing["pasted_chars"] == len(PASTED)
    assert typing["keys"] == 0, "Ctrl+V writes no character of its own"
    assert signals(response)["pasted"]["pasted_chars"] == len(PASTED)
    assert "typed_too_fast" not in signals(response), "pasted text is not judged as typed"


def test_dropped_text_counts_as_pasted(
    page: Any, live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    study_id = start_study(local_study)
    open_and_join(page, live_server.url, study_id, PLAYER)
    reach_explanation(page)

    # A drop from outside the box: the event carries the text, then the text appears.
    page.evaluate(
        """(text) => {
            const box = document.getElementById("explanation");
            const data = new DataTransfer();
            data.setData("text/plain", text);
            box.dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true}));
            box.value = text;
            const inserted = {inputType: "insertFromDrop", bubbles: true};
            box.dispatchEvent(new InputEvent("input", inserted));
        }""",
        PASTED,
    )
    send_explanation(page)

    (response,) = stored(db)
    typing = response.qc_flags["typing"]
    assert typing["pastes"] == 1 and typing["pasted_chars"] == len(PASTED)
    assert "pasted" in signals(response)


def test_text_set_by_a_script_is_typed_too_fast(
    page: Any, live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    study_id = start_study(local_study)
    open_and_join(page, live_server.url, study_id, PLAYER)
    reach_explanation(page)

    page.evaluate(
        """(text) => {
            const box = document.getElementById("explanation");
            box.value = text;
            box.dispatchEvent(new Event("input", {bubbles: true}));
        }""",
        SCRIPTED,
    )
    send_explanation(page)

    (response,) = stored(db)
    nothing = {"keys": 0, "pastes": 0, "pasted_chars": 0, "typing_ms": 0}
    assert response.qc_flags["typing"] == nothing
    flagged = signals(response)
    assert "pasted" not in flagged
    assert flagged["typed_too_fast"]["typed_chars"] == len(SCRIPTED)
    assert flagged["typed_too_fast"]["keys"] == 0


def test_the_counts_start_afresh_with_each_assignment(
    page: Any, live_server: Any, local_study: Callable[..., int], db: Database
) -> None:
    study_id = start_study(local_study, n_items=2)
    open_and_join(page, live_server.url, study_id, PLAYER)
    reach_explanation(page)
    paste_with_shortcut(page, PASTED)
    send_explanation(page)

    page.click("#next")
    page.wait_for_selector("#task:not(.hidden)")
    reach_explanation(page)
    assert page.input_value("#explanation") == ""
    page.focus("#explanation")
    page.keyboard.type(TYPED, delay=100)
    send_explanation(page)

    first, second = stored(db)
    assert first.explanation == PASTED and "pasted" in signals(first)
    assert second.explanation == TYPED
    assert second.qc_flags["typing"]["pastes"] == 0
    assert second.qc_flags["typing"]["pasted_chars"] == 0
    assert second.qc_flags["typing"]["keys"] == len(TYPED)
    assert "pasted" not in signals(second) and "typed_too_fast" not in signals(second)
