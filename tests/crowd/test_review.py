"""Reviewers' actions on workers over the experimenter's API and the `crowd review` CLI: every
action audited, providers reached, bonuses validated and paid once, bulk by rule, roles; and
the review page's answers in the HIT type's terms."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.accounts import create_api_key, get_or_create_experimenter
from crowd.cli import main
from crowd.exceptions import PermissionDenied
from crowd.platforms.publishing import open_study
from crowd.review import Reviewer, act
from crowd.storage import (
    Assignment,
    AuditEntry,
    Bonus,
    Database,
    Decision,
    PlatformAction,
    Role,
    Serving,
    Study,
    StudyWorker,
    User,
    Worker,
    WorkerBlock,
    WorkerStatus,
)
from crowd.studies.lifecycle import create_study, import_items
from tests.conftest import join, passage
from tests.crowd.quality.test_standing import ROFT_RULE

CONFIG = {"annotations_per_item": 3, "attention_rate": 0.0, "require_explanation": False}
ACTOR = "experimenter:tester"


def work(client: FlaskClient, who: dict[str, str], study_id: int, items: int, guess: int) -> None:
    """Answer `items` boundary items, each with the same guess (n = all human)."""
    for _ in range(items):
        view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
        assert "task" in view, view
        path = f"/api/work/assignments/{view['assignment_id']}/step"
        while "task" in view and not view.get("answered"):
            current = view["task"]["step"]
            choice = "machine" if current == guess else "human"
            view = client.post(
                path, json={"step": current, "choice": choice}, headers=who
            ).get_json()
        assert view.get("answered") is True, view


def worker_id(db: Database, external_id: str) -> int:
    with db.session() as session:
        found = session.scalar(select(Worker.id).where(Worker.external_id == external_id))
        assert found is not None
        return found


def states(db: Database, wid: int) -> list[str]:
    with db.session() as session:
        return [
            str(state)
            for state in session.scalars(
                select(Assignment.state).where(Assignment.worker_id == wid).order_by(Assignment.id)
            )
        ]


def assignment_ids(db: Database, wid: int) -> list[int]:
    with db.session() as session:
        return list(
            session.scalars(
                select(Assignment.id).where(Assignment.worker_id == wid).order_by(Assignment.id)
            )
        )


def audit(db: Database, study_id: int, wid: int | None = None) -> list[tuple[str, str, str]]:
    """(actor, action, reason) of the study's audit entries, oldest first."""
    with db.session() as session:
        query = select(AuditEntry).where(AuditEntry.study_id == study_id)
        if wid is not None:
            query = query.where(AuditEntry.worker_id == wid)
        return [
            (e.actor, e.action, e.reason) for e in session.scalars(query.order_by(AuditEntry.id))
        ]


def standing(db: Database, study_id: int, wid: int) -> StudyWorker:
    with db.session() as session:
        row = session.scalar(
            select(StudyWorker).where(
                StudyWorker.study_id == study_id, StudyWorker.worker_id == wid
            )
        )
        assert row is not None
        session.expunge(row)
        return row


def worker_status(db: Database, wid: int) -> WorkerStatus:
    with db.session() as session:
        worker = session.get(Worker, wid)
        assert worker is not None
        return worker.status


@pytest.fixture
def crew(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> tuple[int, dict[str, int], dict[str, dict[str, str]]]:
    """A study where five simulated workers each answered two items."""
    study_id = make_study([passage(f"p{i}", 2, n=3) for i in range(6)], CONFIG)
    ids, tokens = {}, {}
    for name in ("alice", "bob", "carol", "dave", "erin"):
        tokens[name] = join(client, auth, external_id=name)
        work(client, tokens[name], study_id, 2, guess=2)
        ids[name] = worker_id(db, name)
    return study_id, ids, tokens


def post_action(
    client: FlaskClient, auth: dict[str, str], study_id: int, wid: int, **body: Any
) -> Any:
    return client.post(f"/api/studies/{study_id}/workers/{wid}/actions", json=body, headers=auth)


# -- every action over the API -----------------------------------------------------------------
def blocks(db: Database) -> list[tuple[int, str]]:
    with db.session() as session:
        return [(b.worker_id, b.reason) for b in session.scalars(select(WorkerBlock))]


def test_every_action_changes_the_worker_and_is_audited(
    client: FlaskClient,
    auth: dict[str, str],
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]],
    db: Database,
) -> None:
    study_id, ids, tokens = crew
    table = client.get(f"/api/studies/{study_id}/workers", headers=auth).get_json()["workers"]
    assert {row["worker"] for row in table} == {f"sim:{n}" for n in ids}
    assert all(row["responses"] == 2 and row["status"] == "active" for row in table)

    reply = post_action(client, auth, study_id, ids["alice"], action="approve")
    assert reply.status_code == 200 and reply.get_json()["changed"] is True
    assert states(db, ids["alice"]) == ["approved", "approved"]
    assert standing(db, study_id, ids["alice"]).decision == Decision.APPROVED

    for missing in ({}, {"reason": "   "}):
        reply = post_action(client, auth, study_id, ids["bob"], action="reject", **missing)
        assert reply.status_code == 422 and "reason" in reply.get_json()["error"]
    assert states(db, ids["bob"]) == ["submitted", "submitted"]
    reply = post_action(client, auth, study_id, ids["bob"], action="reject", reason="random")
    assert reply.status_code == 200
    assert states(db, ids["bob"]) == ["rejected", "rejected"]
    bob = standing(db, study_id, ids["bob"])
    assert bob.decision == Decision.REJECTED and bob.excluded_by == ACTOR
    assert bob.serving == Serving.STOPPED

    reply = post_action(client, auth, study_id, ids["carol"], action="soft_reject")
    assert reply.status_code == 422  # a reason is required
    reply = post_action(client, auth, study_id, ids["carol"], action="soft_reject", reason="rushed")
    assert reply.status_code == 200
    assert states(db, ids["carol"]) == ["approved", "approved"]  # paid all the same
    carol = standing(db, study_id, ids["carol"])
    assert carol.decision == Decision.SOFT_REJECTED and carol.excluded_by == ACTOR

    reply = post_action(client, auth, study_id, ids["dave"], action="block", reason="a bot")
    assert reply.status_code == 200 and reply.get_json()["changed"] is True
    # A block is the experimenter's: it reaches their studies, not the platform-wide status.
    assert blocks(db) == [(ids["dave"], "a bot")]
    assert worker_status(db, ids["dave"]) == WorkerStatus.ACTIVE
    blocked = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=tokens["dave"])
    assert blocked.status_code == 403
    # Another experimenter's study still serves dave: the block was not theirs.
    with db.session() as session:
        other = create_study(session, get_or_create_experimenter(session, "someone else"),
                             "theirs", "boundary", CONFIG)  # fmt: skip
        import_items(session, other, [passage("x1", 2)])
        open_study(session, other, ["sim"])
        other_id = other.id
    theirs = client.post(f"/api/work/studies/{other_id}/next", json={}, headers=tokens["dave"])
    assert theirs.status_code == 200 and "task" in theirs.get_json()
    again = post_action(client, auth, study_id, ids["dave"], action="block", reason="a bot")
    assert again.get_json()["changed"] is False
    reply = post_action(client, auth, study_id, ids["dave"], action="unblock")
    assert reply.status_code == 200 and reply.get_json()["changed"] is True
    assert blocks(db) == []
    unblocked = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=tokens["dave"])
    assert unblocked.status_code == 200 and "task" in unblocked.get_json()

    reply = post_action(
        client, auth, study_id, ids["erin"], action="bonus", amount="0.5", reason="careful work"
    )
    assert reply.status_code == 200 and reply.get_json()["changed"] is True
    reply = post_action(client, auth, study_id, ids["erin"], action="note", note="check later")
    assert reply.status_code == 200
    assert post_action(client, auth, study_id, ids["erin"], action="note").status_code == 422

    assert [(actor, action) for actor, action, _ in audit(db, study_id)] == [
        (ACTOR, "approve"),
        (ACTOR, "reject"),
        (ACTOR, "soft_reject"),
        (ACTOR, "block"),
        (ACTOR, "unblock"),
        (ACTOR, "bonus"),
        (ACTOR, "note"),
    ]
    assert audit(db, study_id, ids["bob"]) == [(ACTOR, "reject", "random")]
    assert audit(db, study_id, ids["erin"])[-1] == (ACTOR, "note", "check later")
    history = client.get(f"/api/studies/{study_id}/workers/{ids['erin']}", headers=auth)
    data = history.get_json()
    assert [a["action"] for a in data["audit"]] == ["note", "bonus"]  # newest first
    assert data["bonuses"][0]["amount"] == "0.50" and len(data["answers"]) == 2
    entries = client.get(f"/api/studies/{study_id}/audit?worker={ids['dave']}", headers=auth)
    assert [e["action"] for e in entries.get_json()["entries"]] == ["unblock", "block"]
    statuses = {
        row["worker"]: row["status"]
        for row in client.get(f"/api/studies/{study_id}/workers", headers=auth).get_json()[
            "workers"
        ]
    }
    assert statuses == {
        "sim:alice": "approved",
        "sim:bob": "rejected",
        "sim:carol": "soft_rejected",
        "sim:dave": "active",
        "sim:erin": "active",
    }


def test_bad_bonus_amounts_are_refused(
    client: FlaskClient,
    auth: dict[str, str],
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]],
    db: Database,
) -> None:
    study_id, ids, _ = crew
    for amount in ("1.234", "-1", "abc", "1000", "100.01", "0", "", "NaN", "Infinity", None):
        reply = post_action(
            client, auth, study_id, ids["erin"], action="bonus", amount=amount, reason="thanks"
        )
        assert reply.status_code == 422 and "amount" in reply.get_json()["error"], amount
    with db.session() as session:
        assert session.scalar(select(func.count(Bonus.id))) == 0
    assert audit(db, study_id) == []
    # At most 100.00, with cents: "100" and "0.01" are fine.
    for amount, paid in (("100", "100.00"), ("0.01", "0.01")):
        reply = post_action(
            client, auth, study_id, ids["erin"], action="bonus", amount=amount, reason=amount
        )
        assert reply.status_code == 200, reply.get_json()
        assert paid in reply.get_json()["message"]


def test_the_same_bonus_asked_for_twice_pays_once(
    client: FlaskClient,
    auth: dict[str, str],
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]],
    db: Database,
) -> None:
    study_id, ids, _ = crew
    body = {"action": "bonus", "amount": "0.5", "reason": "great explanations"}
    first = post_action(client, auth, study_id, ids["erin"], **body)
    second = post_action(client, auth, study_id, ids["erin"], **body)
    assert first.get_json()["changed"] is True and second.get_json()["changed"] is False
    # A different reason is a different bonus; the same token for another amount is refused.
    other = post_action(client, auth, study_id, ids["erin"], **{**body, "reason": "and fast"})
    assert other.get_json()["changed"] is True
    clash = post_action(
        client, auth, study_id, ids["erin"], action="bonus", amount="0.75", reason="x",
        token="tok-1",
    )  # fmt: skip
    assert clash.status_code == 200
    reused = post_action(
        client, auth, study_id, ids["erin"], action="bonus", amount="0.80", reason="x",
        token="tok-1",
    )  # fmt: skip
    assert reused.status_code == 422 and "token" in reused.get_json()["error"]
    with db.session() as session:
        rows = session.scalars(select(Bonus).order_by(Bonus.id)).all()
        assert [(b.amount, b.reason) for b in rows] == [
            ("0.50", "great explanations"),
            ("0.50", "and fast"),
            ("0.75", "x"),
        ]
        assert all(b.actor == ACTOR for b in rows)
    assert [action for _, action, _ in audit(db, study_id)] == ["bonus"] * 3


# -- the provider is reached -------------------------------------------------------------------
def test_workers_without_a_platform_get_no_platform_calls(
    client: FlaskClient,
    auth: dict[str, str],
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]],
    db: Database,
) -> None:
    """Simulated and open-web workers have no platform: decisions are ours alone.

    The calls that do reach a platform are shown against MTurk in
    tests/crowd/platforms/providers/test_mturk_provider.py (approve, reject, bonus, block,
    retries).
    """
    study_id, ids, _ = crew
    post_action(client, auth, study_id, ids["alice"], action="approve")
    post_action(client, auth, study_id, ids["bob"], action="reject", reason="copied answers")
    post_action(
        client, auth, study_id, ids["dave"], action="bonus", amount="1.25", reason="helpful",
        token="bonus-token-7",
    )  # fmt: skip
    post_action(client, auth, study_id, ids["erin"], action="block", reason="fake account")
    assert states(db, ids["alice"]) == ["approved", "approved"]
    assert states(db, ids["bob"]) == ["rejected", "rejected"]
    with db.session() as session:
        assert session.scalar(select(func.count(PlatformAction.id))) == 0
        assert session.scalar(select(func.count(Bonus.id))) == 1


# -- bulk, ownership, unknown actions, roles ---------------------------------------------------
def test_bulk_acts_on_exactly_the_workers_a_rule_fires_on(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    items = [passage(f"p{i}", 2, n=3) for i in range(4)]
    items += [passage(f"att{i}", 3, n=3, kind="attention") for i in range(2)]
    config = {"annotations_per_item": 3, "attention_rate": 0.5, "require_explanation": False,
              "qc": {"rules": [ROFT_RULE]}}  # fmt: skip
    study_id = make_study(items, config)
    # Two items each at rate 0.5 include one attention check; "all human" (3) passes it.
    for name, guess in (("ok1", 3), ("fail1", 1), ("ok2", 3), ("fail2", 1)):
        work(client, join(client, auth, external_id=name), study_id, 2, guess=guess)
    failers = {worker_id(db, "fail1"), worker_id(db, "fail2")}
    reply = client.post(
        f"/api/studies/{study_id}/workers/bulk",
        json={"rule": "attention_failed", "action": "soft_reject", "reason": "failed a check"},
        headers=auth,
    )
    assert reply.status_code == 200
    assert set(reply.get_json()["workers"]) == failers
    for name in ("fail1", "fail2"):
        wid = worker_id(db, name)
        assert states(db, wid) == ["approved", "approved"]
        assert standing(db, study_id, wid).decision == Decision.SOFT_REJECTED
    for name in ("ok1", "ok2"):
        wid = worker_id(db, name)
        assert states(db, wid) == ["submitted", "submitted"]
        assert standing(db, study_id, wid).decision is None
    by_people = [(a, act_) for a, act_, _ in audit(db, study_id) if a == ACTOR]
    assert by_people == [
        (ACTOR, "bulk_soft_reject"),
        (ACTOR, "soft_reject"),
        (ACTOR, "soft_reject"),
    ]
    nobody = client.post(
        f"/api/studies/{study_id}/workers/bulk",
        json={"rule": "no_such_rule", "action": "note", "reason": "x"},
        headers=auth,
    )
    assert nobody.status_code == 200 and nobody.get_json()["workers"] == []


def test_another_experimenter_cannot_see_or_touch_the_workers(
    client: FlaskClient,
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]],
    db: Database,
) -> None:
    study_id, ids, _ = crew
    with db.session() as session:
        other = {"Authorization": f"Bearer {create_api_key(session, 'mallory')}"}
    base = f"/api/studies/{study_id}"
    assert client.get(f"{base}/workers", headers=other).status_code == 404
    assert client.get(f"{base}/workers/{ids['alice']}", headers=other).status_code == 404
    assert client.get(f"{base}/audit", headers=other).status_code == 404
    reply = client.post(
        f"{base}/workers/{ids['alice']}/actions",
        json={"action": "block", "reason": "mine now"},
        headers=other,
    )
    assert reply.status_code == 404
    bulk = client.post(
        f"{base}/workers/bulk", json={"rule": "too_fast", "action": "note"}, headers=other
    )
    assert bulk.status_code == 404
    assert worker_status(db, ids["alice"]) == WorkerStatus.ACTIVE
    assert audit(db, study_id) == []


def test_unknown_actions_and_workers_are_refused(
    client: FlaskClient,
    auth: dict[str, str],
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]],
    make_study: Callable[..., int],
    db: Database,
) -> None:
    study_id, ids, _ = crew
    for body in ({"action": "fire"}, {"action": 3}, {}):
        reply = post_action(client, auth, study_id, ids["alice"], **body)
        assert reply.status_code == 422 and "action" in reply.get_json()["error"], body
    bulk = client.post(
        f"/api/studies/{study_id}/workers/bulk",
        json={"rule": "too_fast", "action": "fire"},
        headers=auth,
    )
    assert bulk.status_code == 422
    # Each action's own fields go with it only, and unknown fields are refused by name.
    for body, field in (
        ({"action": "approve", "amount": "1.00"}, "amount"),
        ({"action": "approve", "note": "x"}, "note"),
        ({"action": "block", "reason": "x", "until": "tomorrow"}, "until"),
        ({"action": "bonus", "amount": "0.5", "reason": "x", "token": ""}, "token"),
        ({"action": "qualify", "qualification": "lower-case"}, "qualification"),
        ({"action": "note", "note": "x" * 2001}, "note"),
    ):
        reply = post_action(client, auth, study_id, ids["alice"], **body)
        assert reply.status_code == 422 and reply.get_json()["field"] == field, body
    for body, field in (
        ({"rule": "too_fast", "action": "approve", "note": "x"}, "note"),
        ({"rules": "too_fast", "action": "note"}, "rule"),
        ({"rule": "", "action": "note"}, "rule"),
    ):
        reply = client.post(f"/api/studies/{study_id}/workers/bulk", json=body, headers=auth)
        assert reply.status_code == 422 and reply.get_json()["field"] == field, body
    # A worker with no work in this study is not one of its workers.
    empty = make_study([passage("q", 2)], CONFIG)
    assert post_action(client, auth, empty, ids["alice"], action="approve").status_code == 404
    assert post_action(client, auth, study_id, 9999, action="approve").status_code == 404
    assert audit(db, study_id) == [] and audit(db, empty) == []


def test_reviewers_may_judge_work_but_not_block_or_pay(
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]], db: Database
) -> None:
    study_id, ids, _ = crew
    reviewer = Reviewer("rita", Role.REVIEWER)
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        with pytest.raises(PermissionDenied):
            act(session, study, ids["alice"], "block", reviewer, {"reason": "x"})
        with pytest.raises(PermissionDenied):
            act(session, study, ids["alice"], "bonus", reviewer, {"amount": "1", "reason": "x"})
        with pytest.raises(PermissionDenied):
            act(session, study, ids["alice"], "unblock", reviewer)
        outcome = act(session, study, ids["bob"], "approve", reviewer, {"reason": "fine"})
        assert outcome.changed is True
    assert worker_status(db, ids["alice"]) == WorkerStatus.ACTIVE
    assert audit(db, study_id) == [("reviewer:rita", "approve", "fine")]
    with db.session() as session:
        assert session.scalar(select(func.count(Bonus.id))) == 0


# -- the CLI -----------------------------------------------------------------------------------
def test_review_commands_on_the_command_line(
    runner: CliRunner,
    crew: tuple[int, dict[str, int], dict[str, dict[str, str]]],
    db: Database,
) -> None:
    study_id, ids, _ = crew
    listed = runner.invoke(main, ["review", "workers", str(study_id)])
    assert listed.exit_code == 0, listed.output
    for name in ids:
        assert f"sim:{name}" in listed.output
    as_json = runner.invoke(main, ["review", "workers", str(study_id), "--json"])
    assert {row["worker_id"] for row in json.loads(as_json.output)} == set(ids.values())

    no_reason = runner.invoke(main, ["review", "soft-reject", str(study_id), str(ids["bob"])])
    assert no_reason.exit_code == 2 and "Missing option '--reason'" in no_reason.output
    empty = runner.invoke(
        main, ["review", "soft-reject", str(study_id), str(ids["bob"]), "--reason", " "]
    )
    assert empty.exit_code == 1 and "say why" in empty.output
    assert states(db, ids["bob"]) == ["submitted", "submitted"]
    soft = runner.invoke(
        main,
        ["review", "soft-reject", str(study_id), str(ids["bob"]), "--reason", "rushed",
         "--as", "rev-cli"],
    )  # fmt: skip
    assert soft.exit_code == 0, soft.output
    assert "approved 2 assignment(s); data excluded" in soft.output
    assert states(db, ids["bob"]) == ["approved", "approved"]
    assert standing(db, study_id, ids["bob"]).excluded_by == "experimenter:rev-cli"

    bonus = ["review", "bonus", str(study_id), str(ids["carol"]), "0.25", "--reason", "x"]
    first = runner.invoke(main, bonus)
    second = runner.invoke(main, bonus)
    assert first.exit_code == 0 and "bonus of 0.25 recorded" in first.output
    assert second.exit_code == 0 and "already recorded" in second.output
    bad = runner.invoke(main, ["review", "bonus", str(study_id), str(ids["carol"]), "1.234",
                               "--reason", "x"])  # fmt: skip
    assert bad.exit_code == 1 and "two decimals" in bad.output
    with db.session() as session:
        assert [(b.amount, b.worker_id) for b in session.scalars(select(Bonus))] == [
            ("0.25", ids["carol"])
        ]

    log = runner.invoke(main, ["review", "audit", str(study_id)])
    assert log.exit_code == 0
    lines = log.output.splitlines()
    assert len(lines) == 2  # the soft-reject and one bonus, newest first
    assert "bonus" in lines[0] and "experimenter:cli-" in lines[0]
    assert "soft_reject" in lines[1] and "experimenter:rev-cli" in lines[1]
    assert f"worker {ids['bob']}: rushed" in lines[1]
    one = runner.invoke(main, ["review", "audit", str(study_id), "--worker", str(ids["carol"])])
    assert len(one.output.splitlines()) == 1
    missing = runner.invoke(main, ["review", "audit", "999"])
    assert missing.exit_code == 1 and "no study 999" in missing.output

    made = runner.invoke(
        main,
        ["users", "create", "rita", "--experimenter", "tester", "--password", "long-enough-pw"],
    )
    assert made.exit_code == 0, made.output
    assert "rita (reviewer)" in made.output
    short = runner.invoke(
        main, ["users", "create", "sam", "--experimenter", "tester", "--password", "short"]
    )
    assert short.exit_code == 1 and "10 characters" in short.output
    with db.session() as session:
        users = session.scalars(select(User)).all()
        assert [(u.name, u.role) for u in users] == [("rita", Role.REVIEWER)]
        assert users[0].password_hash != "long-enough-pw"


# -- the review page ---------------------------------------------------------------------------
