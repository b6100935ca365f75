"""An MTurk worker does a HIT in headless Chromium: preview, accept, two items, submit.

The page is opened with MTurk's query parameters (assignmentId, hitId, workerId,
turkSubmitTo); every answer must be stored on our server before the page posts the
finished work to turkSubmitTo + /mturk/externalSubmit, which the local MTurk stand-in turns
into a Submitted assignment that our sync then finds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.demo import BackgroundServer
from crowd.platforms.sync import sync_study
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import Database, PlatformSession, Response, SessionState
from tests.conftest import passage
from tests.crowd.platforms.providers.mturk_server import MTurkServer
from tests.crowd.web.conftest import BROWSER_MARKS, click_step, guess_machine

pytestmark = BROWSER_MARKS
WORKER = "A3BROWSERWORKER"
SHOTS = Path("/tmp/shots/helper_worker")


@pytest.fixture
def mturk() -> Iterator[MTurkServer]:
    with MTurkServer() as server:
        yield server


@pytest.fixture
def settings(settings: Settings, mturk: MTurkServer, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-for-tests")
    return settings.with_changes(
        mturk_endpoint_url=mturk.endpoint_url, mturk_submit_origins=(mturk.endpoint_url,)
    )


def answer_item(page: Any) -> None:
    """Say 'machine' at sentence 1 and explain; the reveal follows."""
    page.wait_for_selector("#task:not(.hidden)")
    click_step(page, "#human")
    guess_machine(page)
    page.wait_for_selector("#explain:not(.hidden)")
    page.fill("#explanation", "the second sentence changes the subject abruptly")
    with page.expect_response(lambda r: r.url.endswith("/explanation")):
        page.click("#explain-button")
    page.wait_for_selector("#reveal:not(.hidden)")


def test_a_worker_previews_accepts_does_and_submits_a_hit(
    page: Any,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    mturk: MTurkServer,
    live_server: BackgroundServer,
    db: Database,
    settings: Settings,
) -> None:
    items = [passage(f"p{i}", 2, n=4) for i in range(3)]
    study_id = make_study(items, {"annotations_per_item": 1, "attention_rate": 0.0}, ("local",))
    options = {"reward": "0.40", "items_per_session": 2, "hits": 1, "assignments_per_hit": 1}
    reply = client.post(
        f"/api/studies/{study_id}/publish",
        json={"providers": ["mturk"], "options": {"mturk": options}},
        headers=auth,
    )
    assert reply.status_code == 200, reply.get_json()

    def on_our_server(url: str) -> str:  # the HIT names CROWD_BASE_URL; tests serve elsewhere
        return url.replace(settings.base_url, live_server.url)

    # Preview: the task's intro (what the work is), nothing to answer, no worker made.
    page.goto(on_our_server(mturk.page_url("", preview=True)))
    page.wait_for_selector("#preview")
    page.wait_for_selector("#join:not(.hidden)")
    assert page.is_hidden("#task") and page.is_disabled("#join-button")
    assert page.locator("header a").count() == 0, "no link out of MTurk's frame"
    page.set_viewport_size({"width": 390, "height": 900})
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "mturk-preview-phone.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    with db.session() as session:
        assert session.scalar(select(func.count(PlatformSession.id))) == 0

    assignment_id = mturk.accept(next(iter(mturk.hits)), WORKER)
    page.goto(on_our_server(mturk.page_url(assignment_id)))
    page.wait_for_selector("#join:not(.hidden)")  # the intro, before the first item
    assert page.locator("#name").count() == 0  # the platform knows the worker: no name asked
    page.click("#join-button")
    answer_item(page)
    assert page.inner_text("#progress") == "Item 1 of 2"  # the HIT's items_per_session
    page.click("#next")
    answer_item(page)
    assert page.inner_text("#progress") == "Item 2 of 2"
    with db.session() as session:  # both answers are ours before anything goes to MTurk
        assert session.scalar(select(func.count(Response.id))) == 2
    assert mturk.submissions == []
    page.click("#next")
    page.wait_for_selector("#completion-form:not(.hidden)")
    with page.expect_navigation():
        page.click("#submit-work")
    assert "your HIT was submitted" in page.content()

    assert len(mturk.submissions) == 1
    posted = mturk.submissions[0]
    assert posted["assignmentId"] == assignment_id and posted["crowd_answers"]
    assert mturk.assignments[assignment_id].status == "Submitted"
    report = sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)
    assert report.submitted == 1 and report.recovered == 0
    with db.session() as session:
        row = session.scalar(select(PlatformSession))
        assert row is not None and row.state == SessionState.SUBMITTED and row.items_done == 2
