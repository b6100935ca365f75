"""The MTurk provider end to end, with the real boto3 client against a local MTurk.

Publish creates a HIT type and HITs whose ExternalQuestion is our page; a worker accepts a
HIT and arrives with MTurk's query parameters; our server stores each answer, then hands
the page a form for MTurk's externalSubmit; a sync finds the submitted assignment; the
reviewer's approve, bonus and block reach MTurk through queued jobs.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
import requests
from click.testing import CliRunner
from flask.testing import FlaskClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from crowd.cli import main
from crowd.platforms import actions as platform_actions
from crowd.platforms import publishing
from crowd.platforms.sync import request_platform_syncs, sync_study
from crowd.queue import redis_connection
from crowd.queue.runner import run_worker
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import (
    ActionStatus,
    Assignment,
    AssignmentState,
    Database,
    Item,
    ItemKind,
    PlatformAction,
    PlatformSession,
    RemoteTask,
    Response,
    SessionState,
    Study,
)
from tests.crowd.platforms.providers.mturk_server import MTurkServer
from tests.crowd.platforms.providers.mturk_support import (
    OPTIONS,
    WORKER,
    actions_url,
    do_items,
    hand_in,
    mturk_fixture,
    open_page,
    publish,
    settings_fixture,
    study_id_fixture,
    sync_now,
    worker_header,
)

# The fixtures, and the helpers the Prolific tests take from here.
__all__ = [
    "actions_url", "do_items", "mturk_fixture", "open_page", "settings_fixture",
    "study_id_fixture", "worker_header",
]  # fmt: skip


def test_publish_makes_hits_with_our_page_after_a_balance_check(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer
) -> None:
    reply = publish(client, auth, study_id)
    assert reply.status_code == 200, reply.get_json()
    links = reply.get_json()["links"]["mturk"]
    assert links["page"].endswith(f"/ext/mturk/{study_id}")
    assert len(mturk.hit_types) == 1 and len(mturk.hits) == 2
    hit_type = next(iter(mturk.hit_types.values()))
    assert hit_type.reward == Decimal("0.50")
    # Workers see the study's public title, never the experimenter's name for it.
    assert hit_type.title == "Real or Fake Text"
    assert {q["Comparator"] for q in hit_type.qualifications} >= {"DoesNotExist", "In"}
    assert all(hit.url == links["page"] and hit.max_assignments == 2 for hit in mturk.hits.values())
    # 2 HITs x 2 assignments x (0.50 + 20% fee)
    assert mturk.calls_to("GetAccountBalance") == 1
    pub = client.get(f"/api/studies/{study_id}/publications", headers=auth).get_json()
    assert pub["publications"][0]["remote"]["cost"] == "2.40"
    assert {t["remote_id"] for t in pub["publications"][0]["tasks"]} == set(mturk.hits)


def test_publish_is_refused_when_the_balance_is_short(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer
) -> None:
    mturk.balance = Decimal("1.00")
    reply = publish(client, auth, study_id)
    assert reply.status_code == 409, reply.get_json()
    assert "needs $2.40" in reply.get_json()["error"]
    assert not mturk.hits
    assert publish(client, auth, study_id, reward="0.505").status_code == 422


def test_preview_shows_the_task_and_takes_no_answer(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database
) -> None:
    publish(client, auth, study_id)
    status, page = open_page(client, mturk.page_url("", preview=True))
    assert status == 200
    assert "Preview" in page and 'data-worker-token=""' in page
    assert 'data-preview="yes"' in page
    with db.session() as session:
        assert session.scalar(select(PlatformSession.id)) is None


def test_a_worker_does_the_hit_which_is_synced_approved_paid_a_bonus_once_and_blocked(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    hit_id = next(iter(mturk.hits))
    assignment_id = mturk.accept(hit_id, WORKER)
    status, page = open_page(client, mturk.page_url(assignment_id))
    assert status == 200
    who = worker_header(page)
    done = do_items(client, who, study_id)
    completion = done["completion"]
    assert completion["action"] == f"{mturk.endpoint_url}/mturk/externalSubmit"
    assert completion["fields"]["assignmentId"] == assignment_id
    assert completion["items_done"] == 2
    with db.session() as session:
        stored = session.scalars(select(Response).where(Response.study_id == study_id)).all()
        assert len(stored) == 2  # stored on our side before the page may submit
    assert requests.post(completion["action"], data=completion["fields"], timeout=5).ok

    report = sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)
    assert report.submitted == 1 and report.recovered == 0, report
    with db.session() as session:
        row = session.scalar(select(PlatformSession))
        assert row is not None and row.state == SessionState.SUBMITTED
        worker_id = row.worker_id

    actions = f"/api/studies/{study_id}/workers/{worker_id}/actions"
    reply = client.post(actions, json={"action": "approve", "reason": "good"}, headers=auth)
    assert reply.status_code == 200, reply.get_json()
    assert not [p for p in mturk.payments if p.kind == "reward"]  # made by the job, after commit
    run_worker(settings, burst=True)
    rewards = [p for p in mturk.payments if p.kind == "reward"]
    assert [(p.worker_id, p.assignment_id, p.amount) for p in rewards] == [
        (WORKER, assignment_id, Decimal("0.50"))
    ]

    # The bonus's answer is lost once: botocore retries, MTurk sees the token again.
    mturk.lose_next_response("SendBonus")
    bonus = {"action": "bonus", "amount": "0.25", "reason": "careful work"}
    assert client.post(actions, json=bonus, headers=auth).status_code == 200
    assert client.post(actions, json=bonus, headers=auth).status_code == 200  # a double click
    run_worker(settings, burst=True)
    assert mturk.calls_to("SendBonus") == 2
    assert [(p.worker_id, p.amount) for p in mturk.bonuses()] == [(WORKER, Decimal("0.25"))]

    note = {"action": "notify", "subject": "Thanks", "reason": "A follow-up study is open."}
    assert client.post(actions, json=note, headers=auth).status_code == 200
    grant = {"action": "qualify", "qualification": "3FOLLOWUPQUAL", "value": 7}
    assert client.post(actions, json=grant, headers=auth).status_code == 200
    run_worker(settings, burst=True)
    assert mturk.notifications == [([WORKER], "Thanks", "A follow-up study is open.")]
    assert mturk.qualifications[(WORKER, "3FOLLOWUPQUAL")] == 7

    block = {"action": "block", "reason": "copied answers elsewhere"}
    assert client.post(actions, json=block, headers=auth).status_code == 200
    run_worker(settings, burst=True)
    assert WORKER in mturk.blocks
    assert mturk.qualifications[(WORKER, OPTIONS["block_qualification_id"])] == 1
    with pytest.raises(PermissionError):
        mturk.accept(list(mturk.hits)[1], WORKER)
    with db.session() as session:
        done_actions = session.scalars(select(PlatformAction).order_by(PlatformAction.id)).all()
        assert [(a.action, a.status) for a in done_actions] == [
            ("approve", ActionStatus.DONE),
            ("bonus", ActionStatus.DONE),
            ("notify", ActionStatus.DONE),
            ("grant_qualification", ActionStatus.DONE),
            ("block", ActionStatus.DONE),
        ]
        assert session.get(PlatformSession, row.id).state == SessionState.APPROVED


def test_sync_recovers_an_answer_we_lost_from_mturks_answer_xml(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    assignment_id = mturk.accept(next(iter(mturk.hits)), WORKER)
    who = worker_header(open_page(client, mturk.page_url(assignment_id))[1])
    completion = do_items(client, who, study_id)["completion"]
    requests.post(completion["action"], data=completion["fields"], timeout=5)
    with db.session() as session:  # a restore from last night's backup loses the answers
        live = {r.item_id: dict(r.qc_flags) for r in session.scalars(select(Response)).all()}
        for response in session.scalars(select(Response)).all():
            session.delete(response)
        session.flush()
        for assignment in session.scalars(select(Assignment)).all():
            assignment.state = AssignmentState.ABANDONED
        # One of the items was gold (a real item made gold after the answers, as `crowd qc
        # promote-gold` does): its recovered answer is scored as a live one, which the gold
        # tally counts from the next QC refresh.
        gold = session.get(Item, min(live))
        gold.kind = ItemKind.GOLD
    report = sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)
    assert report.recovered == 1
    with db.session() as session:
        answers = session.scalars(select(Response)).all()
        assert len(answers) == 2
        assert all(r.qc_flags.get("recovered_from") == "mturk" for r in answers)
        assert all(r.source == "live" for r in answers)
        assert all(r.answer for r in answers)
        # The QC facts of a live answer but the time, which the platform does not keep.
        for r in answers:
            assert r.qc_flags["seconds"] is None
            for fact in ("chars_shown", "surface"):
                assert r.qc_flags[fact] == live[r.item_id][fact], fact
        gold = session.get(Item, min(live))
        scored = next(r for r in answers if r.item_id == gold.id).qc_flags["gold_accuracy"]
        assert scored == 1.0  # 'machine' at sentence 1, one before the boundary (2)


def test_forged_answers_in_mturk_are_not_recovered(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    hit_id = next(iter(mturk.hits))
    mturk.add_assignment(hit_id, WORKER, answer=None)
    forged = mturk.accept(hit_id, "A2FORGER")
    mturk.external_submit({"assignmentId": forged, "crowd_answers": "eyJyZXNwb25zZXMiOltdfQ.x.y"})
    report = sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)
    assert report.recovered == 0
    with db.session() as session:
        assert session.scalar(select(Response.id)) is None
        problems = [row.problems for row in session.scalars(select(PlatformSession)).all()]
        assert any("the answers posted to the platform are not ours" in p for p in problems)
        assert all("handed in without any answer stored with us" in p for p in problems)


def test_a_returned_hit_frees_its_item_after_the_assignment_time(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id, duration_s=60)
    assignment_id = mturk.accept(next(iter(mturk.hits)), WORKER)
    who = worker_header(open_page(client, mturk.page_url(assignment_id))[1])
    view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    assert "task" in view
    mturk.return_assignment(assignment_id)
    with db.session() as session:  # the assignment's hour is up
        row = session.scalar(select(PlatformSession))
        assert row is not None
        row.created_at = row.created_at.replace(year=2020)
    report = sync_study(db, settings, WorkerSigner(settings.secret_key), study_id)
    assert report.abandoned == 1
    with db.session() as session:
        assignment = session.get(Assignment, view["assignment_id"])
        assert assignment is not None and assignment.state == AssignmentState.ABANDONED
        assert assignment.item.holders == 0


def test_the_page_refuses_other_workers_sessions_and_foreign_submit_targets(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer
) -> None:
    publish(client, auth, study_id)
    assignment_id = mturk.accept(next(iter(mturk.hits)), WORKER)
    url = mturk.page_url(assignment_id)
    assert open_page(client, url)[0] == 200
    assert open_page(client, url.replace(WORKER, "A2SOMEONEELSE"))[0] == 403
    evil = url.replace(f"turkSubmitTo={mturk.endpoint_url}".replace(":", "%3A").replace("/", "%2F"),
                       "turkSubmitTo=https%3A%2F%2Fevil.example")  # fmt: skip
    assert evil != url and open_page(client, evil)[0] == 422
    assert open_page(client, url.replace("hitId=", "hitId=X"))[0] == 404


def test_expire_and_extend_hits(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    hit_id = next(iter(mturk.hits))
    with db.session() as session:
        study = session.get(Study, study_id)
        assert publishing.expire(session, settings, study, "mturk", hit_id) == 1
    with pytest.raises(PermissionError):
        mturk.accept(hit_id, WORKER)
    with db.session() as session:
        study = session.get(Study, study_id)
        assert publishing.extend(session, settings, study, "mturk", hit_id, 3600, 1) == 1
        assert publishing.extend(session, settings, study, "mturk", hit_id, 0, 1) == 1
    assert mturk.hits[hit_id].max_assignments == 4
    mturk.accept(hit_id, WORKER)


def test_the_cli_publishes_syncs_expires_extends_and_shows_the_balance(
    runner: CliRunner, study_id: int, mturk: MTurkServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CROWD_MTURK_ENDPOINT_URL", mturk.endpoint_url)
    options = ["--option", "items_per_session=2", "--option", "hits=1"]
    result = runner.invoke(
        main,
        ["study", "publish", str(study_id), "--provider", "mturk", "--reward", "0.30", *options],
    )
    assert result.exit_code == 0, result.output
    assert f"mturk page: http://127.0.0.1:5000/ext/mturk/{study_id}" in result.output
    hit = next(iter(mturk.hits.values()))
    assert hit.hit_type.reward == Decimal("0.30") and hit.max_assignments == 2
    result = runner.invoke(main, ["mturk", "balance"])
    assert result.exit_code == 0 and '"available": "100.00"' in result.output
    result = runner.invoke(main, ["mturk", "sync", str(study_id)])
    assert result.exit_code == 0 and '"seen": 0' in result.output, result.output
    result = runner.invoke(main, ["mturk", "expire", str(study_id)])
    assert result.exit_code == 0 and "expired 1 HIT(s)" in result.output
    result = runner.invoke(
        main, ["mturk", "extend", str(study_id), "--hours", "2", "--places", "1"]
    )
    assert result.exit_code == 0 and "extended 1 HIT(s)" in result.output
    assert hit.max_assignments == 3
    result = runner.invoke(main, ["mturk", "options"])
    assert "block_qualification_id" in result.output
    result = runner.invoke(main, ["study", "publish", str(study_id), "--provider", "mturk"])
    assert result.exit_code == 1 and "MTurk needs a reward" in result.output


def test_crowd_worker_syncs_published_studies_as_a_job(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    mturk.add_assignment(next(iter(mturk.hits)), WORKER)  # work our page never saw
    assert settings.redis_url
    connection = redis_connection(settings.redis_url)
    assert request_platform_syncs(connection, db) == 1
    assert request_platform_syncs(connection, db) == 0  # one waiting sync is enough
    run_worker(settings, burst=True)
    with db.session() as session:
        tasks = session.scalars(select(RemoteTask)).all()
        assert tasks and all(task.synced_at is not None for task in tasks)
        # Its worker is known now, its answers were not ours to recover.
        row = session.scalar(select(PlatformSession))
        assert row is not None and row.state == SessionState.SUBMITTED


def test_a_decision_made_before_the_hand_in_reaches_mturk_and_work_never_stored_is_not_paid(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    first, second = list(mturk.hits)
    assignment_id = mturk.accept(first, WORKER)
    who = worker_header(open_page(client, mturk.page_url(assignment_id))[1])
    completion = do_items(client, who, study_id)["completion"]
    actions = actions_url(db, study_id)
    # Approved while MTurk has nothing submitted yet: nothing to call now.
    assert client.post(actions, json={"action": "approve"}, headers=auth).status_code == 200
    with db.session() as session:
        assert session.scalar(select(func.count(PlatformAction.id))) == 0
    requests.post(completion["action"], data=completion["fields"], timeout=5)
    # The same worker hands in a second HIT straight to MTurk, without doing its items.
    empty = mturk.accept(second, WORKER)
    assert open_page(client, mturk.page_url(empty))[0] == 200
    mturk.external_submit({"assignmentId": empty, "crowd_code": "CNOTOURS"})
    report = sync_now(db, settings, study_id)
    assert report.submitted == 2
    assert any("without any answer stored" in problem for problem in report.problems)
    assert any("'CNOTOURS' is not the one we issued" in p for p in report.problems)
    run_worker(settings, burst=True)
    paid = [p.assignment_id for p in mturk.payments if p.kind == "reward"]
    assert paid == [assignment_id]  # the decision reached MTurk; the empty HIT is not paid


def test_approving_after_a_rejection_overturns_it_on_mturk(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    assignment_id = hand_in(client, mturk, study_id, next(iter(mturk.hits)))
    sync_now(db, settings, study_id)
    actions = actions_url(db, study_id)
    reject = {"action": "reject", "reason": "answers do not match the passages"}
    assert client.post(actions, json=reject, headers=auth).status_code == 200
    run_worker(settings, burst=True)
    assert mturk.assignments[assignment_id].status == "Rejected"
    assert mturk.assignments[assignment_id].feedback == "answers do not match the passages"
    too_long = {"action": "reject", "reason": "x" * 1500}
    assert client.post(actions, json=too_long, headers=auth).status_code == 422
    assert client.post(actions, json={"action": "approve"}, headers=auth).status_code == 200
    run_worker(settings, burst=True)
    assert mturk.assignments[assignment_id].status == "Approved"
    assert [p.assignment_id for p in mturk.payments if p.kind == "reward"] == [assignment_id]


def test_a_failed_call_is_retried_and_can_be_queued_again(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
    runner: CliRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    publish(client, auth, study_id)
    hand_in(client, mturk, study_id, next(iter(mturk.hits)))
    sync_now(db, settings, study_id)
    actions = actions_url(db, study_id)
    monkeypatch.setattr(platform_actions, "MAX_ACTION_ATTEMPTS", 1)
    mturk.lose_next_response("CreateWorkerBlock", times=50)  # MTurk is down for blocks
    block = {"action": "block", "reason": "bot-like answers"}
    assert client.post(actions, json=block, headers=auth).status_code == 200
    run_worker(settings, burst=True)
    with db.session() as session:
        row = session.scalar(select(PlatformAction))
        assert row is not None and row.status == ActionStatus.FAILED and row.last_error
    mturk.lost.clear()
    monkeypatch.setenv("CROWD_MTURK_ENDPOINT_URL", mturk.endpoint_url)
    result = runner.invoke(main, ["mturk", "actions", str(study_id), "--retry"])
    assert "queued 1 failed call(s) again" in result.output, result.output
    run_worker(settings, burst=True)
    assert WORKER in mturk.blocks
    with db.session() as session:
        row = session.scalar(select(PlatformAction))
        assert row is not None and row.status == ActionStatus.DONE


def test_a_call_looks_its_studys_experimenter_up_once(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    publish(client, auth, study_id)
    hand_in(client, mturk, study_id, next(iter(mturk.hits)))
    sync_now(db, settings, study_id)
    looked_up: list[int] = []
    real = platform_actions._experimenter

    def counted(session: Session, row: PlatformAction) -> int | None:
        looked_up.append(row.id)
        return real(session, row)

    monkeypatch.setattr(platform_actions, "_experimenter", counted)
    block = {"action": "block", "reason": "bot-like answers"}
    assert client.post(actions_url(db, study_id), json=block, headers=auth).status_code == 200
    run_worker(settings, burst=True)
    assert WORKER in mturk.blocks
    with db.session() as session:
        row = session.scalars(select(PlatformAction)).one()
        assert row.status == ActionStatus.DONE
        assert looked_up == [row.id]


def test_answers_signed_for_another_session_are_not_recovered(
    client: FlaskClient,
    auth: dict[str, str],
    study_id: int,
    mturk: MTurkServer,
    db: Database,
    settings: Settings,
) -> None:
    publish(client, auth, study_id)
    first, second = list(mturk.hits)
    assignment_id = mturk.accept(first, WORKER)
    who = worker_header(open_page(client, mturk.page_url(assignment_id))[1])
    fields = do_items(client, who, study_id)["completion"]["fields"]
    replay = mturk.accept(second, "A2REPLAYER")
    mturk.external_submit({**fields, "assignmentId": replay})  # the first HIT's signed answers
    report = sync_now(db, settings, study_id)
    assert report.recovered == 0
    assert any("belong to another session" in problem for problem in report.problems)
    with db.session() as session:
        assert session.scalar(select(func.count(Response.id))) == 2  # the first worker's only
