"""The Prolific provider end to end, against a local stand-in of Prolific's REST API.

Publish creates and publishes a Prolific study whose URL is our page; a participant arrives
with PROLIFIC_PID / STUDY_ID / SESSION_ID, answers, and gets a completion code only once the
answers are stored; the sync checks the code; approving and a bonus reach Prolific through
queued jobs; places of timed-out submissions are reclaimed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.platforms.sync import SyncReport, sync_study
from crowd.queue.runner import run_worker
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import (
    ActionStatus,
    Assignment,
    AssignmentState,
    Database,
    PlatformAction,
    PlatformSession,
    SessionState,
)
from tests.conftest import passage
from tests.crowd.platforms.providers.prolific_server import ProlificServer
from tests.crowd.platforms.providers.test_mturk_provider import (
    actions_url,
    do_items,
    open_page,
    worker_header,
)

OPTIONS = {"reward": "1.50", "items_per_session": 2, "places": 2, "estimated_minutes": 5}


@pytest.fixture
def prolific() -> Iterator[ProlificServer]:
    with ProlificServer() as server:
        yield server


@pytest.fixture
def settings(settings: Settings, prolific: ProlificServer) -> Settings:
    return settings.with_changes(prolific_api_url=prolific.base_url, prolific_token=prolific.token)


@pytest.fixture
def study_id(make_study: Any) -> int:
    items = [passage(f"p{i}", 2) for i in range(4)]
    return int(make_study(items, {"annotations_per_item": 1, "attention_rate": 0.0}, ("local",)))


def publish(client: FlaskClient, auth: dict[str, str], study_id: int) -> str:
    body = {"providers": ["prolific"], "options": {"prolific": OPTIONS}}
    reply = client.post(f"/api/studies/{study_id}/publish", json=body, headers=auth)
    assert reply.status_code == 200, reply.get_json()
    return str(reply.get_json()["links"]["prolific"]["study"]).rsplit("/", 1)[1]


def sync(db: Database, settings: Settings, study_id: int) -> SyncReport:
    return sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)


def test_publish_completion_code_sync_approve_bonus_and_reclaim(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    prolific: ProlificServer,
    db: Database,
    settings: Settings,
) -> None:
    remote_id = publish(client, auth, study_id)
    remote = prolific.studies[remote_id]
    assert remote.status == "ACTIVE"
    assert remote.fields["reward"] == 150 and remote.fields["total_available_places"] == 2
    url = remote.fields["external_study_url"]
    assert url.startswith(f"http://127.0.0.1:5000/ext/prolific/{study_id}?")
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in url and "SESSION_ID={{%SESSION_ID%}}" in url

    submission, _session = prolific.start_submission(remote_id)
    who = worker_header(open_page(client, prolific.participant_url(submission))[1])
    first = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    assert "task" in first and "completion" not in first
    with db.session() as session:  # no code exists before an answer is stored
        row = session.scalar(select(PlatformSession))
        assert row is not None and row.completion_code is None
    done = do_items(client, who, study_id)
    completion = done["completion"]
    assert completion["kind"] == "code" and completion["url"].endswith(completion["code"])
    again = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    assert again["completion"]["code"] == completion["code"]  # one code per submission

    prolific.complete(submission, completion["code"])
    report = sync(db, settings, study_id)
    assert report.submitted == 1 and not report.problems, report

    actions = actions_url(db, study_id)
    assert client.post(actions, json={"action": "approve"}, headers=auth).status_code == 200
    bonus = {"action": "bonus", "amount": "0.40", "reason": "thoughtful answers"}
    assert client.post(actions, json=bonus, headers=auth).status_code == 200
    run_worker(settings, burst=True)
    assert prolific.submissions[submission].status == "APPROVED"
    assert [(p.kind, p.amount) for p in prolific.payments if p.kind == "bonus"] == [("bonus", 40)]
    with db.session() as session:
        statuses = session.scalars(select(PlatformAction.status)).all()
        assert set(statuses) == {ActionStatus.DONE}

    # A second participant takes the last place, starts an item and times out; the study
    # had filled its places, so Prolific would not reopen it by itself.
    second, _ = prolific.start_submission(remote_id)
    who = worker_header(open_page(client, prolific.participant_url(second))[1])
    view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    prolific.time_out(second)
    remote.status = "COMPLETED"
    report = sync(db, settings, study_id)
    assert report.abandoned == 1 and report.reclaimed == 1
    assert remote.fields["total_available_places"] == 3
    with db.session() as session:
        held = session.get(Assignment, view["assignment_id"])
        assert held is not None and held.state == AssignmentState.ABANDONED


def test_a_wrong_completion_code_is_flagged_and_not_approved_by_sync(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    prolific: ProlificServer,
    db: Database,
    settings: Settings,
) -> None:
    remote_id = publish(client, auth, study_id)
    submission, _ = prolific.start_submission(remote_id)
    who = worker_header(open_page(client, prolific.participant_url(submission))[1])
    do_items(client, who, study_id)
    # The reviewer approved the worker before the submission reached Prolific.
    reply = client.post(actions_url(db, study_id), json={"action": "approve"}, headers=auth)
    assert reply.status_code == 200
    prolific.complete(submission, "GUESSED1")
    report = sync(db, settings, study_id)
    run_worker(settings, burst=True)
    assert prolific.submissions[submission].status == "AWAITING REVIEW"  # not paid
    assert any("not the one we issued" in problem for problem in report.problems)
    with db.session() as session:
        row = session.scalar(select(PlatformSession))
        assert row is not None and row.state == SessionState.SUBMITTED
        assert any("GUESSED1" in problem for problem in row.problems)


def test_the_page_needs_well_formed_prolific_parameters(
    client: FlaskClient, auth: dict[str, str], study_id: int, prolific: ProlificServer
) -> None:
    remote_id = publish(client, auth, study_id)
    submission, _ = prolific.start_submission(remote_id)
    url = prolific.participant_url(submission)
    assert open_page(client, url)[0] == 200
    assert open_page(client, re.sub(r"PROLIFIC_PID=\w+", "PROLIFIC_PID=bad", url))[0] == 422
    status, page = open_page(client, url.split("?")[0])
    assert status == 200 and 'data-preview="yes"' in page
