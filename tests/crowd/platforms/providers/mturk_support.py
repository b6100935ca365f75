"""What the MTurk provider tests share: the stand-in and settings pointing at it, a study,
and a worker's way through our page (open it as MTurk's frame does, answer, hand in).

The fixtures are registered as ``mturk``, ``settings`` and ``study_id``; a test module
imports ``mturk_fixture``, ``settings_fixture`` and ``study_id_fixture`` to use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.platforms.sync import SyncReport, sync_study
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import Database, PlatformSession
from tests.conftest import passage
from tests.crowd.platforms.providers.mturk_server import MTurkServer

WORKER = "A1WORKERONE"
OPTIONS = {
    "reward": "0.50",
    "items_per_session": 2,
    "assignments_per_hit": 2,
    "hits": 2,
    "sandbox": True,
    "block_qualification_id": "3BLOCKQUALIFICATION01",
}


@pytest.fixture(name="mturk")
def mturk_fixture() -> Iterator[MTurkServer]:
    with MTurkServer(balance="100.00") as server:
        yield server


@pytest.fixture(name="settings")
def settings_fixture(
    settings: Settings, mturk: MTurkServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-for-tests")
    return settings.with_changes(
        mturk_endpoint_url=mturk.endpoint_url, mturk_submit_origins=(mturk.endpoint_url,)
    )


def publish(client: FlaskClient, auth: dict[str, str], study_id: int, **changes: Any) -> Any:
    body = {"providers": ["mturk"], "options": {"mturk": {**OPTIONS, **changes}}}
    return client.post(f"/api/studies/{study_id}/publish", json=body, headers=auth)


def open_page(client: FlaskClient, url: str) -> tuple[int, str]:
    """GET our page as MTurk's frame would; returns the status and the page."""
    path = re.sub(r"^https?://[^/]+", "", url)
    response = client.get(path)
    return response.status_code, response.get_data(as_text=True)


def worker_header(page: str) -> dict[str, str]:
    token = re.search(r'data-worker-token="([^"]*)"', page)
    assert token and token.group(1), "the page carries no worker token"
    return {"X-Crowd-Worker": token.group(1)}


def do_items(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    """Answer boundary items ('machine' at sentence 1) until the session is done."""
    for _item in range(20):
        view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
        if view.get("done"):
            return dict(view)
        path = f"/api/work/assignments/{view['assignment_id']}"
        while not view.get("answered"):
            current = view["task"]["step"]
            step = {"step": current, "choice": "machine" if current >= 1 else "human"}
            reply = client.post(f"{path}/step", json=step, headers=who)
            assert reply.status_code == 200, reply.get_json()
            view = reply.get_json()
        if view.get("needs_followup"):
            followup = {"reasons": ["grammar"], "explanation": "it repeats the same phrase"}
            reply = client.post(f"{path}/explanation", json=followup, headers=who)
            assert reply.status_code == 200, reply.get_json()
    raise AssertionError("the session never ended")


@pytest.fixture(name="study_id")
def study_id_fixture(make_study: Any) -> int:
    items = [passage(f"p{i}", 2) for i in range(4)]
    return int(make_study(items, {"annotations_per_item": 2, "attention_rate": 0.0}, ("local",)))


def actions_url(db: Database, study_id: int) -> str:
    """The reviewer-actions URL of the (only) platform worker of the study."""
    with db.session() as session:
        worker_id = session.scalar(select(PlatformSession.worker_id))
    return f"/api/studies/{study_id}/workers/{worker_id}/actions"


def sync_now(db: Database, settings: Settings, study_id: int) -> SyncReport:
    return sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)


def hand_in(client: FlaskClient, mturk: MTurkServer, study_id: int, hit_id: str) -> str:
    """Accept a HIT, do its items on our page, post the form to MTurk; the assignment id."""
    assignment_id = mturk.accept(hit_id, WORKER)
    who = worker_header(open_page(client, mturk.page_url(assignment_id))[1])
    completion = do_items(client, who, study_id)["completion"]
    assert requests.post(completion["action"], data=completion["fields"], timeout=5).ok
    return assignment_id
