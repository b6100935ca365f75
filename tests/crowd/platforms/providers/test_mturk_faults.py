"""MTurk when things go wrong between us and it, through the real boto3 client against the
local MTurk: a bonus paid whose answer never came back, answers lost from our database
after a sync, a publish that failed after MTurk made its HITs; and that what the reviewer
says reaches the worker, and what the CLI says is what happened.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError
from click.testing import CliRunner
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.cli import main
from crowd.platforms import actions as platform_actions
from crowd.platforms import publishing
from crowd.platforms.providers import PROVIDERS
from crowd.platforms.providers.mturk_api import MAX_ATTEMPTS, make_client
from crowd.queue.hooks import sweeps
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import (
    ActionStatus,
    AuditEntry,
    Database,
    PlatformAction,
    PlatformSession,
    Publication,
    RemoteTask,
    Response,
    Study,
)
from tests.crowd.platforms.providers.mturk_server import MTurkServer
from tests.crowd.platforms.providers.mturk_support import (
    OPTIONS,
    WORKER,
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

__all__ = ["mturk_fixture", "settings_fixture", "study_id_fixture"]

DAY = 24 * 3600


@pytest.fixture
def cli(runner: CliRunner, mturk: MTurkServer, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("CROWD_MTURK_ENDPOINT_URL", mturk.endpoint_url)
    return runner


def crowd(cli: CliRunner, *args: Any) -> str:
    result = cli.invoke(main, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    return result.output


def handed_in_worker(
    client: FlaskClient, auth: dict[str, str], mturk: MTurkServer, db: Database,
    settings: Settings, study_id: int,
) -> tuple[int, str]:  # fmt: skip
    """Publish, let WORKER do a HIT and hand it in, sync: our worker id, the assignment id."""
    assert publish(client, auth, study_id).status_code == 200
    assignment_id = hand_in(client, mturk, study_id, next(iter(mturk.hits)))
    assert sync_now(db, settings, study_id).submitted == 1
    with db.session() as session:
        worker_id = session.scalar(select(PlatformSession.worker_id))
    assert worker_id is not None
    return worker_id, assignment_id


def bonus_action(db: Database) -> PlatformAction:
    with db.session() as session:
        row = session.scalars(select(PlatformAction).where(PlatformAction.action == "bonus")).one()
        session.expunge(row)
        return row


def test_a_bonus_paid_whose_answer_never_came_is_shown_paid(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, cli: CliRunner,
) -> None:  # fmt: skip
    worker_id, assignment_id = handed_in_worker(client, auth, mturk, db, settings, study_id)
    said = crowd(cli, "review", "bonus", study_id, worker_id, "0.25", "--reason", "careful work")
    assert "queued to mturk" in said and "paid a bonus" not in said
    assert f"{'queued':8}" in crowd(cli, "mturk", "actions", study_id)
    assert mturk.bonuses() == []  # nothing is paid until the job makes the call
    # MTurk pays; its answer, and its refusals of botocore's retries, are all lost.
    mturk.cut_next_responses("SendBonus", MAX_ATTEMPTS + 1)
    run_worker(settings, burst=True)
    assert [(p.worker_id, p.assignment_id, p.amount) for p in mturk.bonuses()] == [
        (WORKER, assignment_id, Decimal("0.25"))
    ]
    row = bonus_action(db)
    assert row.status == ActionStatus.DONE
    assert row.result["seen_in"] == "ListBonusPayments"
    shown = crowd(cli, "mturk", "actions", study_id)
    assert "bonus 0.25" in shown and "paid" in shown and "failed" not in shown
    # Asked again, the same bonus is recorded once, and nothing more reaches MTurk.
    again = crowd(cli, "review", "bonus", study_id, worker_id, "0.25", "--reason", "careful work")
    assert "already recorded" in again
    run_worker(settings, burst=True)
    assert len(mturk.bonuses()) == 1 and mturk.calls_to("SendBonus") == MAX_ATTEMPTS + 1


def action_line(cli: CliRunner, study_id: int) -> list[str]:
    """The words of the (only) line `crowd mturk actions` prints."""
    lines = crowd(cli, "mturk", "actions", study_id).strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0].split()


def test_a_bonus_retried_after_mturk_forgot_its_token_is_not_paid_twice(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, cli: CliRunner, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    worker_id, _ = handed_in_worker(client, auth, mturk, db, settings, study_id)
    monkeypatch.setattr(platform_actions, "MAX_ACTION_ATTEMPTS", 1)
    crowd(cli, "review", "bonus", study_id, worker_id, "0.50", "--reason", "top 10%")
    # MTurk pays, then the network goes: no answer to SendBonus, none to ListBonusPayments
    # after the count taken before sending.
    mturk.cut_next_responses("SendBonus", MAX_ATTEMPTS + 1)
    mturk.cut_next_responses("ListBonusPayments", MAX_ATTEMPTS + 1, after=1)
    run_worker(settings, burst=True)
    row = bonus_action(db)
    # Not failed (someone would pay it again by hand): unknown, and still pending.
    assert row.status == ActionStatus.PENDING
    assert (row.last_error or "").startswith("PaymentUnknown:") and "failed too" in row.last_error
    assert row.result["ledger"] == {"alike_before": "0"}
    assert len(mturk.bonuses()) == 1
    words = action_line(cli, study_id)
    assert words[5] == "unknown" and "payment unknown: check MTurk" in " ".join(words)
    assert "queued 0 failed call(s) again" in crowd(cli, "mturk", "actions", study_id, "--retry")
    assert "platform-payments-unknown" in {sweep.name for sweep in sweeps()}
    # MTurk's records still cannot be read: asked again, it stays unknown, nothing is sent.
    mturk.cut_next_responses("ListBonusPayments", MAX_ATTEMPTS + 1)
    assert platform_actions.ask_again_about_payments(db) == 1
    assert platform_actions.ask_again_about_payments(db) == 0  # queued once
    run_worker(settings, burst=True)
    row = bonus_action(db)
    assert row.status == ActionStatus.PENDING and "may have paid" in (row.last_error or "")
    assert action_line(cli, study_id)[5] == "unknown"
    # A day later MTurk has forgotten the token (sending it again would pay again), and its
    # records answer: the next sweep's try finds the bonus paid there.
    mturk.pass_time(DAY + 60)
    assert platform_actions.ask_again_about_payments(db) == 1
    run_worker(settings, burst=True)
    assert len(mturk.bonuses()) == 1
    assert mturk.calls_to("SendBonus") == MAX_ATTEMPTS + 1  # not called again
    row = bonus_action(db)
    assert row.status == ActionStatus.DONE and row.result["seen_in"] == "ListBonusPayments"
    assert "bonus 0.50" in crowd(cli, "mturk", "actions", study_id).replace("  ", " ")
    assert action_line(cli, study_id)[5] == "paid"


@pytest.mark.parametrize("paid", [True, False], ids=["paid-then", "not-paid-then"])
def test_a_bonus_tried_before_the_ledger_kept_a_count_is_never_paid_blindly(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, cli: CliRunner, paid: bool,
) -> None:  # fmt: skip
    worker_id, assignment_id = handed_in_worker(client, auth, mturk, db, settings, study_id)
    crowd(cli, "review", "bonus", study_id, worker_id, "0.50", "--reason", "top 10%")
    queued = bonus_action(db)
    # A version that kept no count in the ledger tried it once: the call failed, perhaps
    # after MTurk paid (its answer lost).
    if paid:
        make_client(True, endpoint_url=mturk.endpoint_url).send_bonus(
            WorkerId=WORKER, AssignmentId=assignment_id, BonusAmount="0.50", Reason="top 10%",
            UniqueRequestToken=queued.params["token"],
        )  # fmt: skip
    with db.session() as session:
        row = session.get(PlatformAction, queued.id)
        assert row is not None and not row.result
        row.attempts, row.last_error = 1, "ConnectionClosedError: Connection was closed"
    mturk.pass_time(DAY + 60)  # MTurk has forgotten the token: a send would pay again
    run_worker(settings, burst=True)
    assert [(p.worker_id, p.amount) for p in mturk.bonuses()] == [(WORKER, Decimal("0.50"))]
    row = bonus_action(db)
    assert row.status == ActionStatus.DONE
    assert row.result["seen_in"] == ("ListBonusPayments" if paid else "SendBonus")
    assert mturk.calls_to("SendBonus") == 1  # the earlier version's, or ours


def test_the_reviewers_reason_reaches_mturk_as_requester_feedback(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, cli: CliRunner,
) -> None:  # fmt: skip
    worker_id, assignment_id = handed_in_worker(client, auth, mturk, db, settings, study_id)
    said = crowd(cli, "review", "approve", study_id, worker_id, "--reason", "Thanks: careful work")
    assert "1 payment(s) queued to mturk" in said
    run_worker(settings, burst=True)
    approved = mturk.assignments[assignment_id]
    assert (approved.status, approved.feedback) == ("Approved", "Thanks: careful work")

    # A second worker soft-rejected before handing in: the reason goes with the payment
    # that the sync queues once MTurk has the work.
    other = "A2WORKERTWO"
    second = mturk.accept(list(mturk.hits)[1], other)
    who = worker_header(open_page(client, mturk.page_url(second))[1])
    completion = do_items(client, who, study_id)["completion"]
    with db.session() as session:
        other_id = session.scalar(
            select(PlatformSession.worker_id).where(PlatformSession.remote_id == second)
        )
    said = crowd(cli, "review", "soft-reject", study_id, other_id, "--reason", "Answers rushed")
    assert said.strip().endswith("approved 2 assignment(s); data excluded"), said
    mturk.external_submit(completion["fields"])
    sync_now(db, settings, study_id)
    run_worker(settings, burst=True)
    assert (mturk.assignments[second].status, mturk.assignments[second].feedback) == (
        "Approved", "Answers rushed",
    )  # fmt: skip
    # MTurk shows at most 1024 characters: a longer reason is refused before anything is queued.
    too_long = cli.invoke(main, ["review", "approve", str(study_id), str(worker_id),
                                 "--reason", "x" * 1100])  # fmt: skip
    assert too_long.exit_code == 1 and "1024" in too_long.output


def test_a_reason_kept_longer_than_mturk_shows_is_cut_and_the_worker_paid(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, cli: CliRunner,
) -> None:  # fmt: skip
    assert publish(client, auth, study_id).status_code == 200
    assignment_id = mturk.accept(next(iter(mturk.hits)), WORKER)
    who = worker_header(open_page(client, mturk.page_url(assignment_id))[1])
    completion = do_items(client, who, study_id)["completion"]
    with db.session() as session:
        worker_id = session.scalar(select(PlatformSession.worker_id))
    # Decided before MTurk has the work; the review keeps reasons of 2,000 characters, and
    # this one was kept before MTurk's 1,024 were checked (the accent falls on the cut).
    crowd(cli, "review", "soft-reject", study_id, worker_id, "--reason", "rushed")
    kept = "Answers rushed. " * 63 + "Too quick, Cafe\u0301 " + "x" * 900
    with db.session() as session:
        entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "soft_reject")).one()
        entry.reason = kept
    mturk.external_submit(completion["fields"])
    sync_now(db, settings, study_id)
    run_worker(settings, burst=True)
    approved = mturk.assignments[assignment_id]
    assert approved.status == "Approved"  # paid, not failed on MTurk's limit
    assert approved.feedback == "Answers rushed. " * 63 + "Too quick, Caf\u2026"
    assert approved.feedback is not None and len(approved.feedback) <= 1024
    with db.session() as session:
        row = session.scalars(select(PlatformAction)).one()
        assert (row.action, row.status, row.attempts) == ("approve", ActionStatus.DONE, 1)


def test_a_second_sync_recovers_answers_lost_after_the_first(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings,
) -> None:  # fmt: skip
    handed_in_worker(client, auth, mturk, db, settings, study_id)
    with db.session() as session:  # restored from a backup older than the work
        lost = session.scalars(select(Response)).all()
        assert len(lost) == 2
        for response in lost:
            session.delete(response)
    report = sync_now(db, settings, study_id)
    assert report.recovered == 1 and report.problems == []
    with db.session() as session:
        answers = session.scalars(select(Response)).all()
        assert len(answers) == 2
        assert all(r.qc_flags.get("recovered_from") == "mturk" and r.answer for r in answers)
    # Nothing is recovered twice.
    assert sync_now(db, settings, study_id).recovered == 0
    with db.session() as session:
        assert session.scalar(select(func.count(Response.id))) == 2


class CommitFailed(Exception):
    pass


def publish_and_fail(db: Database, settings: Settings, study_id: int) -> None:
    """A publish as the API makes it (its start noted first) whose commit fails after MTurk
    made its HITs."""
    publishing.start_publishing(db, study_id, ["mturk"])
    with pytest.raises(CommitFailed), db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        publishing.publish(session, settings, study, ["mturk"], {"mturk": OPTIONS})
        raise CommitFailed


@pytest.mark.parametrize("later", [0, DAY + 60], ids=["same-day", "after-mturk-forgot"])
def test_a_publish_that_failed_after_creating_hits_adopts_them(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, later: int,
) -> None:  # fmt: skip
    publish_and_fail(db, settings, study_id)
    orphans = set(mturk.hits)
    assert len(orphans) == 2
    with db.session() as session:
        assert session.scalar(select(func.count(RemoteTask.id))) == 0
    mturk.pass_time(later)
    assert publish(client, auth, study_id).status_code == 200
    assert set(mturk.hits) == orphans  # adopted, not made again
    assert mturk.calls_to("CreateHITWithHITType") == 2
    with db.session() as session:
        tasks = session.scalars(select(RemoteTask)).all()
        assert sorted(task.remote_id for task in tasks) == sorted(orphans)
        publication = session.scalars(select(Publication)).one()
        assert publication.remote["adopted_hits"] == sorted(orphans)


def test_a_publish_whose_answer_was_lost_is_adopted_on_the_next_try(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings,
) -> None:  # fmt: skip
    # MTurk makes the first HIT, but no answer ever comes back: the publish fails.
    mturk.cut_next_responses("CreateHITWithHITType", MAX_ATTEMPTS + 1)
    publishing.start_publishing(db, study_id, ["mturk"])
    with pytest.raises(ConnectionClosedError), db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        publishing.publish(session, settings, study, ["mturk"], {"mturk": OPTIONS})
    assert len(mturk.hits) == 1
    mturk.pass_time(DAY + 60)
    reply = publish(client, auth, study_id)
    assert reply.status_code == 200, reply.get_json()
    assert len(mturk.hits) == 2
    with db.session() as session:
        assert sorted(session.scalars(select(RemoteTask.remote_id)).all()) == sorted(mturk.hits)


def test_a_first_publish_lists_no_hits(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
) -> None:  # fmt: skip
    for publication in (1, 2):
        assert publish(client, auth, study_id).status_code == 200
        assert len(mturk.hits) == 2 * publication
    # Nothing to look for: no earlier try of either publication began. The account's other
    # HITs (there may be thousands) are never listed.
    assert mturk.calls_to("ListHITs") == 0
    with db.session() as session:
        started = session.scalars(
            select(AuditEntry.details).where(AuditEntry.action == publishing.PUBLISH_STARTED)
        ).all()
    assert [note["token"] for note in started] == [
        f"crowd-{study_id}-mturk-1", f"crowd-{study_id}-mturk-2",
    ]  # fmt: skip


def test_hits_another_database_made_for_its_study_of_the_same_id_are_not_adopted(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings,
) -> None:  # fmt: skip
    # Another deployment on the same requester account (same secret key, a reset database)
    # published its own study of this id, the first time, on the same page address.
    provider = PROVIDERS.get("mturk")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        theirs = replace(
            publishing.study_ref(session, study), created_at=study.created_at - timedelta(days=3)
        )
    made = provider.publish(
        settings, theirs, settings.base_url, provider.validate_options(OPTIONS),
        f"crowd-{study_id}-mturk-1",
    )  # fmt: skip
    others = {task.remote_id for task in made.tasks}
    # Our first try fails before it makes anything (the balance is short), so the retry
    # looks for HITs of its own.
    balance, mturk.balance = mturk.balance, Decimal("0.10")
    assert publish(client, auth, study_id).status_code == 409
    mturk.balance = balance
    assert publish(client, auth, study_id).status_code == 200
    assert mturk.calls_to("ListHITs") >= 1
    with db.session() as session:
        ours = set(session.scalars(select(RemoteTask.remote_id)).all())
        assert "adopted_hits" not in session.scalars(select(Publication)).one().remote
    assert len(ours) == 2 and not ours & others and set(mturk.hits) == ours | others


@pytest.mark.parametrize("orphan", ["expired", "elsewhere"])
def test_a_retry_adopts_only_live_hits_that_show_our_page(
    client: FlaskClient, auth: dict[str, str], study_id: int, mturk: MTurkServer, db: Database,
    settings: Settings, orphan: str,
) -> None:  # fmt: skip
    if orphan == "elsewhere":  # the first try ran where the site was served before
        publish_and_fail(db, settings.with_changes(base_url="https://old.example.org"), study_id)
    else:
        publish_and_fail(db, settings, study_id)
    first, second = list(mturk.hits)
    if orphan == "expired":  # someone closed one on the requester site
        client_ = make_client(True, endpoint_url=mturk.endpoint_url)
        client_.update_expiration_for_hit(HITId=second, ExpireAt=datetime(2020, 1, 1, tzinfo=UTC))
    assert publish(client, auth, study_id).status_code == 200
    with db.session() as session:
        ours = set(session.scalars(select(RemoteTask.remote_id)).all())
    assert len(ours) == 2 and len(mturk.hits) == 4 - len(ours & {first, second})
    if orphan == "expired":
        assert ours & {first, second} == {first}
    else:
        assert not ours & {first, second}
    for hit_id in ours:
        assert mturk.hits[hit_id].url == f"{settings.base_url}/ext/mturk/{study_id}"
