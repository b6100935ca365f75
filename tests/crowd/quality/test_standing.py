"""Quality control through the platform: adaptive gold serving, rules that stop and exclude
workers (audited once), the qualification gate, simulated time and typing reports, reviewers
overturning rules, and the filtered set in exports and reports."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.quality import standing as quality
from crowd.storage import (
    Assignment,
    AuditEntry,
    Database,
    Item,
    Qualification,
    Response,
    Serving,
    Study,
    StudyWorker,
    Worker,
)
from crowd.studies.lifecycle import get_study
from qc.rules import DEFAULT_RULES
from tasks import get_hit_type
from tests.conftest import join, passage
from tests.tasks.form_helpers import sample_config

NO_EXPLANATION = {"annotations_per_item": 1, "attention_rate": 0.0, "require_explanation": False}
# RoFT's filter: one failed attention check leaves a worker out (the default waits for two).
ROFT_RULE = {
    "name": "attention_failed",
    "metric": "attention_failed",
    "op": ">=",
    "threshold": 1,
    "min_evidence": {"attention_checks": 1},
    "action": "soft_block",
}
# The default rules with RoFT's filter in place of the default attention rule.
ROFT_RULES = [ROFT_RULE, *(r.to_json() for r in DEFAULT_RULES if r.name != "attention_failed")]


# -- helpers: a worker playing boundary items through the HTTP API ----------------------------
def next_view(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    reply = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


def answer(
    client: FlaskClient,
    who: dict[str, str],
    view: dict[str, Any],
    guess: int,
    sim_seconds: float | None = None,
) -> dict[str, Any]:
    """Answer an open boundary item: sentence `guess` is the first machine one (n = all human)."""
    path = f"/api/work/assignments/{view['assignment_id']}"
    while "task" in view and not view.get("answered"):
        current = view["task"]["step"]
        body: dict[str, Any] = {
            "step": current,
            "choice": "machine" if current == guess else "human",
        }
        if sim_seconds is not None:
            body["sim_seconds"] = sim_seconds
        reply = client.post(f"{path}/step", json=body, headers=who)
        assert reply.status_code == 200, reply.get_json()
        view = reply.get_json()
    if view.get("needs_followup"):
        reply = client.post(f"{path}/explanation", json={"reasons": ["grammar"]}, headers=who)
        assert reply.status_code == 200, reply.get_json()
        view = reply.get_json()
    return view


def play_items(
    client: FlaskClient,
    who: dict[str, str],
    study_id: int,
    count: int,
    guess: int,
    sim_seconds: float | None = None,
) -> int:
    """Play up to `count` items with the same guess; returns how many were played."""
    for played in range(count):
        view = next_view(client, who, study_id)
        if view.get("done"):
            return played
        answer(client, who, view, guess, sim_seconds)
    return count


def worker_id(db: Database, external_id: str) -> int:
    with db.session() as session:
        found = session.scalar(select(Worker.id).where(Worker.external_id == external_id))
        assert found is not None
        return found


def kinds_served(db: Database, study_id: int, external_id: str) -> list[str]:
    """The kinds of the items the worker was given in the study, in order."""
    with db.session() as session:
        rows = session.scalars(
            select(Item.kind)
            .join(Assignment, Assignment.item_id == Item.id)
            .join(Worker, Worker.id == Assignment.worker_id)
            .where(Assignment.study_id == study_id, Worker.external_id == external_id)
            .order_by(Assignment.id)
        ).all()
        return [str(kind) for kind in rows]


def audit_entries(db: Database, study_id: int, wid: int | None = None) -> list[AuditEntry]:
    with db.session() as session:
        query = select(AuditEntry).where(AuditEntry.study_id == study_id)
        if wid is not None:
            query = query.where(AuditEntry.worker_id == wid)
        entries = list(session.scalars(query.order_by(AuditEntry.id)).all())
        session.expunge_all()
        return entries


def refresh(db: Database, study_id: int, wid: int) -> None:
    """What the RQ job does after each stored response."""
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        quality.refresh_standing(session, study, wid)


def standing_of(db: Database, study_id: int, wid: int) -> StudyWorker:
    with db.session() as session:
        row = session.scalar(
            select(StudyWorker).where(
                StudyWorker.study_id == study_id, StudyWorker.worker_id == wid
            )
        )
        assert row is not None
        session.expunge(row)
        return row


# -- gold serving ------------------------------------------------------------------------------
def test_gold_serving_tapers_for_workers_with_a_good_gold_record(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quality, "_GOLD_RANDOM", random.Random(20240501))
    # A veteran answers 20 gold items right in another boundary study (gold at every chance);
    # a worker's gold record counts over every study of the HIT type.
    history = make_study(
        [passage(f"h{i}", 2, n=2, kind="gold") for i in range(20)] + [passage("hr", 1, n=2)],
        {**NO_EXPLANATION, "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}}},
    )
    veteran = join(client, auth, external_id="veteran")
    assert play_items(client, veteran, history, 20, guess=2) == 20
    assert kinds_served(db, history, "veteran") == ["gold"] * 20

    items = [passage(f"r{i}", 1, n=2) for i in range(70)]
    items += [passage(f"g{i}", 2, n=2, kind="gold") for i in range(40)]
    adaptive = {"gold": {"min_rate": 0.0, "max_rate": 1.0, "trusted": 0.8, "prior": [1, 1]}}
    study_id = make_study(items, {**NO_EXPLANATION, "qc": adaptive})
    rookie = join(client, auth, external_id="rookie")
    # "All human" is right on every gold item here (boundary 2 of 2 sentences).
    assert play_items(client, rookie, study_id, 30, guess=2) == 30
    assert play_items(client, veteran, study_id, 30, guess=2) == 30
    rookie_gold = kinds_served(db, study_id, "rookie").count("gold")
    veteran_gold = kinds_served(db, study_id, "veteran").count("gold")
    # Expected about 9 of 30 for the rookie (rate 0.8 at first, falling as gold comes right)
    # and about 0.3 of 30 for the veteran (rate 0.8 ** 21).
    assert rookie_gold >= 5
    assert veteran_gold <= 3
    assert rookie_gold >= veteran_gold + 3
    refresh(db, study_id, worker_id(db, "veteran"))
    evidence = standing_of(db, study_id, worker_id(db, "veteran")).evidence
    assert evidence["gold_n"] == 20 + veteran_gold  # pooled over both studies
    assert evidence["gold_rate"] < 0.05


def test_gold_goes_to_any_number_of_workers_but_only_while_real_work_is_left(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    items = [passage("r1", 1, n=2), passage("r2", 1, n=2)]
    items += [passage("g1", 2, n=2, kind="gold"), passage("g2", 2, n=2, kind="gold")]
    always_gold = {"gold": {"min_rate": 1.0, "max_rate": 1.0}}
    study_id = make_study(items, {**NO_EXPLANATION, "qc": always_gold})
    for name in ("w1", "w2"):
        who = join(client, auth, external_id=name)
        assert play_items(client, who, study_id, 3, guess=2) == 3
        assert kinds_served(db, study_id, name) == ["gold", "gold", "real"]
    # Both real items are taken: the third worker gets nothing, not even the unseen gold.
    late = join(client, auth, external_id="w3")
    assert next_view(client, late, study_id)["done"] is True
    assert kinds_served(db, study_id, "w3") == []
    with db.session() as session:
        per_item = dict(
            session.execute(
                select(Item.external_id, func.count(Assignment.id))
                .join(Assignment, Assignment.item_id == Item.id)
                .group_by(Item.external_id)
            ).all()
        )
    # annotations_per_item is 1: real items stop at one worker, gold items do not.
    assert per_item == {"r1": 1, "r2": 1, "g1": 2, "g2": 2}
    # Progress is the real items': complete, though nobody saw every gold item.
    status = client.get(f"/api/studies/{study_id}", headers=auth).get_json()
    assert status["progress"]["fraction_complete"] == 1.0


def gold_served(db: Database, study_id: int, external_id: str) -> list[str]:
    """The external ids of the gold items the worker was given, in order."""
    with db.session() as session:
        return list(
            session.scalars(
                select(Item.external_id)
                .join(Assignment, Assignment.item_id == Item.id)
                .join(Worker, Worker.id == Assignment.worker_id)
                .where(Assignment.study_id == study_id, Worker.external_id == external_id,
                       Item.kind == "gold")
                .order_by(Assignment.id)
            ).all()
        )  # fmt: skip


@pytest.mark.parametrize("shared", [True, False])
def test_workers_meet_the_same_gold_so_a_ring_shares_items_whose_truth_is_known(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    shared: bool,
) -> None:
    # Collusion is tested on shared items. Drawn at random, two workers who each see 4 of 12
    # gold items share all 4 once in 495 studies; served the most answered first, they do.
    items = [passage(f"r{i}", 1, n=2) for i in range(3)]
    items += [passage(f"g{i}", 2, n=2, kind="gold") for i in range(12)]
    gold = {"min_rate": 1.0, "max_rate": 1.0, "shared_order": shared}
    study_id = make_study(items, {**NO_EXPLANATION, "qc": {"gold": gold}})
    first = join(client, auth, external_id="first")
    assert play_items(client, first, study_id, 4, guess=2) == 4
    leader = sorted(gold_served(db, study_id, "first"))
    assert len(leader) == 4
    followers = []
    for name in ("second", "third"):
        who = join(client, auth, external_id=name)
        assert play_items(client, who, study_id, 4, guess=2) == 4
        followers.append(sorted(gold_served(db, study_id, name)))
    # At random, both followers meet the leader's four once in 245,025 studies.
    assert (followers == [leader, leader]) is shared


def test_a_worker_playing_one_category_gets_gold_and_checks_of_that_category_only(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    # Gold of another topic would give itself away: only the chosen category's gold (or
    # gold without a category) may come.
    items = [passage(f"news{i}", 1, n=2, category="news") for i in range(3)]
    items += [passage(f"gnews{i}", 2, n=2, kind="gold", category="news") for i in range(2)]
    items += [passage(f"grecipe{i}", 2, n=2, kind="gold", category="recipes") for i in range(3)]
    items += [passage("gplain", 2, n=2, kind="gold")]
    always_gold = {"gold": {"min_rate": 1.0, "max_rate": 1.0}}
    study_id = make_study(items, {**NO_EXPLANATION, "qc": always_gold})
    who = join(client, auth, external_id="reader")
    served = []
    for _ in range(10):
        reply = client.post(
            f"/api/work/studies/{study_id}/next", json={"category": "news"}, headers=who
        ).get_json()
        if reply.get("done"):
            break
        served.append(reply["task"]["sentences"][0].split()[0])
        answer(client, who, reply, 2)
    assert sorted(served) == ["gnews0", "gnews1", "gplain", "news0", "news1", "news2"]


# -- rules stop and exclude, once ----------------------------------------------------------------
def gold_failer(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> tuple[int, int, dict[str, str]]:
    """A study where worker "careless" guesses early on 5 gold items (accuracy 0)."""
    items = [passage(f"r{i}", 1, n=3) for i in range(6)]
    items += [passage(f"g{i}", 3, n=4, kind="gold") for i in range(5)]
    # Credibility 0.95, not boundary's 0.99: five misses (P(accuracy < 0.5) = 0.984) meet the
    # gold rule's 0.98 (qc.rules.GOLD_CREDIBILITY), four (0.969) would not.
    gold = {"threshold": 0.5, "credibility": 0.95, "min_rate": 1.0, "max_rate": 1.0}
    study_id = make_study(items, {**NO_EXPLANATION, "qc": {"gold": gold}})
    who = join(client, auth, external_id="careless")
    # Machine at sentence 1 is two early for boundary 3: a miss. Simulated time keeps the
    # worker clear of the too-fast rule, so only the gold rule can fire.
    assert play_items(client, who, study_id, 5, guess=1, sim_seconds=30) == 5
    assert kinds_served(db, study_id, "careless") == ["gold"] * 5
    return study_id, worker_id(db, "careless"), who


def test_a_worker_credibly_below_the_gold_threshold_is_stopped_and_excluded_once(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id, wid, who = gold_failer(client, auth, make_study, db)
    before = standing_of(db, study_id, wid)
    assert before.serving == Serving.ACTIVE and before.excluded_by is None
    refresh(db, study_id, wid)
    row = standing_of(db, study_id, wid)
    assert row.serving == Serving.STOPPED
    assert row.excluded_by == "rule:gold_below_threshold"
    assert "gold_below_threshold" in row.rule_hits
    assert row.evidence["gold_n"] == 5 and row.evidence["gold_accuracy"] == 0.0
    assert row.evidence["gold_below_prob"] >= 0.98
    entries = [e for e in audit_entries(db, study_id, wid) if e.actor.startswith("rule:")]
    # Five answers alike are also flagged (a flag only: it stops nobody).
    assert [(e.actor, e.action) for e in entries] == [
        ("rule:gold_below_threshold", "soft_block"),
        ("rule:identical_run", "flag"),
    ]
    assert "gold accuracy" in entries[0].reason
    # Stopped: the same words as "nothing left", though real items are still open.
    view = next_view(client, who, study_id)
    assert view["done"] is True and "every item" in view["message"]
    refresh(db, study_id, wid)
    refresh(db, study_id, wid)
    assert len([e for e in audit_entries(db, study_id, wid) if e.actor.startswith("rule:")]) == 2


def test_a_reviewers_approval_overturns_a_rule_and_sticks(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id, wid, who = gold_failer(client, auth, make_study, db)
    refresh(db, study_id, wid)
    assert standing_of(db, study_id, wid).excluded_by == "rule:gold_below_threshold"
    reply = client.post(
        f"/api/studies/{study_id}/workers/{wid}/actions",
        json={"action": "approve", "reason": "checked by hand: the gold items were ambiguous"},
        headers=auth,
    )
    assert reply.status_code == 200 and reply.get_json()["changed"] is True
    for _ in range(2):
        refresh(db, study_id, wid)
        row = standing_of(db, study_id, wid)
        assert "gold_below_threshold" in row.cleared_rules and row.decision == "approved"
        assert row.excluded_by is None and row.serving == Serving.ACTIVE
        # The rule still fires (the evidence is recorded), but no longer acts.
        assert "gold_below_threshold" in row.rule_hits
    actions = [(e.actor, e.action) for e in audit_entries(db, study_id, wid)]
    assert actions == [
        ("rule:gold_below_threshold", "soft_block"),
        ("rule:identical_run", "flag"),
        ("experimenter:tester", "approve"),
    ]
    view = next_view(client, who, study_id)
    assert "task" in view and not view.get("done")


# -- the qualification gate --------------------------------------------------------------------
def comparison_item(item_id: str, kind: str = "real", best: int | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": item_id,
        "kind": kind,
        "query": f"Query of {item_id}:",
        "candidates": [f"{item_id}-cand{i} text" for i in range(4)],
    }
    if best is not None:
        record["best"] = best
    return record


def pick(
    client: FlaskClient, who: dict[str, str], view: dict[str, Any], text: str
) -> dict[str, Any]:
    position = view["task"]["candidates"].index(text)
    reply = client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": view["task"]["step"], "choice": position},
        headers=who,
    )
    assert reply.status_code == 200, reply.get_json()
    return reply.get_json()


def test_the_qualification_gate_stops_workers_who_fail_training(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    records = [
        comparison_item("real1"),
        comparison_item("real2"),
        comparison_item("train1", kind="training", best=3),
        comparison_item("train2", kind="training", best=1),
    ]
    config = {
        "template": "sentiment",
        "overlap_share": 0,
        "qc": {"qualification": {"min_accuracy": 1.0}},
    }
    study_id = make_study(records, config, hit_type="comparison")
    right = {"train1": "train1-cand3 text", "train2": "train2-cand1 text"}

    failer = join(client, auth, external_id="failer")
    for training, wrong in (("train1", "train1-cand0 text"), ("train2", right["train2"])):
        view = next_view(client, failer, study_id)
        assert view["task"]["query"] == f"Query of {training}:"
        assert "training" in pick(client, failer, view, wrong)["feedback"]
    assert next_view(client, failer, study_id)["done"] is True
    assert next_view(client, failer, study_id)["done"] is True
    assert kinds_served(db, study_id, "failer") == ["training", "training"]
    wid = worker_id(db, "failer")
    row = standing_of(db, study_id, wid)
    assert row.qualification == Qualification.FAILED and row.serving == Serving.STOPPED
    entries = audit_entries(db, study_id, wid)
    assert [(e.actor, e.action) for e in entries] == [("system", "qualification_failed")]
    assert entries[0].details == {"accuracy": 0.5, "training_items": 2}

    passer = join(client, auth, external_id="passer")
    for training in ("train1", "train2"):
        view = next_view(client, passer, study_id)
        assert view["task"]["query"] == f"Query of {training}:"
        assert pick(client, passer, view, right[training])["feedback"]["correct"] is True
    view = next_view(client, passer, study_id)
    assert view["task"]["query"] in ("Query of real1:", "Query of real2:")
    wid = worker_id(db, "passer")
    assert standing_of(db, study_id, wid).qualification == Qualification.PASSED
    assert [e.action for e in audit_entries(db, study_id, wid)] == ["qualification_passed"]


# -- simulated time and typing reports ---------------------------------------------------------
def test_sim_seconds_are_taken_from_simulated_workers_only(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = make_study([passage(f"p{i}", 1, n=2) for i in range(3)], NO_EXPLANATION)
    person = join(client, name="Ada")
    view = next_view(client, person, study_id)
    path = f"/api/work/assignments/{view['assignment_id']}/step"
    refused = client.post(
        path, json={"step": 0, "choice": "human", "sim_seconds": 5}, headers=person
    )
    assert refused.status_code == 409 and "simulated workers only" in refused.get_json()["error"]
    reloaded = client.get(f"/api/work/assignments/{view['assignment_id']}", headers=person)
    assert reloaded.get_json()["task"]["step"] == 0  # the refused step did not happen

    bot = join(client, auth, external_id="bot")
    view = next_view(client, bot, study_id)
    path = f"/api/work/assignments/{view['assignment_id']}/step"
    for bad in (-1, "5", True, 86401):
        reply = client.post(
            path, json={"step": 0, "choice": "human", "sim_seconds": bad}, headers=bot
        )
        assert reply.status_code == 422 and reply.get_json()["field"] == "sim_seconds", bad
    first = client.post(path, json={"step": 0, "choice": "human", "sim_seconds": 2.5}, headers=bot)
    assert first.status_code == 200
    last = client.post(path, json={"step": 1, "choice": "human", "sim_seconds": 4}, headers=bot)
    assert last.get_json()["answered"] is True
    with db.session() as session:
        stored = session.scalars(select(Response)).one()
        assert stored.qc_flags["seconds"] == 6.5
        assert [e.get("sim_seconds") for e in stored.events] == [None, 2.5, 4.0]


def test_a_bad_typing_report_is_refused_and_stores_nothing(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = make_study([passage("p", 2, n=3)], {"annotations_per_item": 1})
    who = join(client)  # a person on the open web: timed by our clock, not simulated
    view = next_view(client, who, study_id)
    view = client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": 0, "choice": "human"},
        headers=who,
    ).get_json()
    view = client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": 1, "choice": "machine"},
        headers=who,
    ).get_json()
    assert view["needs_followup"] is True
    path = f"/api/work/assignments/{view['assignment_id']}/explanation"
    text = "the second sentence repeats the first one"
    for typing in (
        {"keys": 40, "mouse_moves": 3},
        {"keys": -1},
        {"keys": 40, "typing_ms": -5},
        {"pastes": 1.5},
        {"keys": True},
        "fast",
    ):
        reply = client.post(path, json={"explanation": text, "typing": typing}, headers=who)
        assert reply.status_code == 422, typing
        assert reply.get_json()["field"].startswith("typing"), reply.get_json()
    with db.session() as session:
        response = session.scalars(select(Response)).one()
        assert response.explanation is None and response.explained_at is None
        assert "typing" not in response.qc_flags
        assert [e["type"] for e in response.events if e["type"] == "explanation"] == []
    report = {"keys": 45, "pastes": 0, "pasted_chars": 0, "typing_ms": 12000}
    done = client.post(path, json={"explanation": text, "typing": report}, headers=who)
    assert done.status_code == 200 and "feedback" in done.get_json()
    with db.session() as session:
        response = session.scalars(select(Response)).one()
        stored = response.qc_flags["typing"]
        assert response.explanation == text
        # No typing outlasts the time since the answer was stored: 12 s is cut to that.
        assert {**stored, "typing_ms": 12000} == report and stored["typing_ms"] < 12000


def test_simulated_workers_keep_their_simulated_typing_time(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = make_study([passage("p", 2, n=3)], {"annotations_per_item": 1})
    who = join(client, auth, external_id="typist")  # a sim worker
    view = next_view(client, who, study_id)
    for step, choice in ((0, "human"), (1, "machine")):
        view = client.post(
            f"/api/work/assignments/{view['assignment_id']}/step",
            json={"step": step, "choice": choice},
            headers=who,
        ).get_json()
    report = {"keys": 45, "pastes": 0, "pasted_chars": 0, "typing_ms": 12000}
    done = client.post(
        f"/api/work/assignments/{view['assignment_id']}/explanation",
        json={"explanation": "the second sentence repeats the first one", "typing": report},
        headers=who,
    )
    assert done.status_code == 200
    with db.session() as session:
        assert session.scalars(select(Response)).one().qc_flags["typing"] == report


# -- the filtered set in exports and the report ------------------------------------------------
def test_exports_and_the_report_leave_out_soft_blocked_workers(
    app: Flask,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items = [passage(f"p{i}", 2, n=3) for i in range(4)]
    items += [passage(f"att{i}", 3, n=3, kind="attention") for i in range(2)]
    config = {"annotations_per_item": 2, "attention_rate": 0.5, "require_explanation": False,
              "qc": {"rules": [ROFT_RULE]}}  # fmt: skip
    study_id = make_study(items, config)
    # At rate 0.5 every worker meets one attention check within two items. "All human" (3)
    # passes it; machine at sentence 1 fails it.
    for name, guess in (("good", 3), ("bad", 1)):
        who = join(client, auth, external_id=name)
        assert play_items(client, who, study_id, 2, guess=guess) == 2
        assert "attention" in kinds_served(db, study_id, name)

    # What the queue job of each answer does (no queue worker runs in tests).
    with db.session() as session:
        quality.refresh_study(session, get_study(session, study_id))

    def exported(which: str) -> list[dict[str, Any]]:
        reply = client.get(f"/api/studies/{study_id}/export?format=jsonl&set={which}", headers=auth)
        assert reply.status_code == 200
        return [json.loads(line) for line in reply.get_data(as_text=True).splitlines()]

    full, filtered = exported("full"), exported("filtered")
    assert sorted(row["worker"] for row in full) == ["sim:bad"] * 2 + ["sim:good"] * 2
    assert [row["worker"] for row in filtered] == ["sim:good", "sim:good"]
    assert client.get(f"/api/studies/{study_id}/export?set=all", headers=auth).status_code == 422
    bad = standing_of(db, study_id, worker_id(db, "bad"))
    assert bad.excluded_by == "rule:attention_failed"

    # No Redis: the report is built in the request.
    monkeypatch.setattr(app.extensions["crowd"], "redis", None)
    made = client.post(f"/api/studies/{study_id}/report", headers=auth)
    assert made.status_code == 201 and made.get_json()["queued"] is False
    data = client.get(f"/api/studies/{study_id}/report", headers=auth).get_json()["report"]
    assert data["rules"]["attention_failed"]["workers"] == 1
    assert data["rules"]["attention_failed"]["responses"] == 2
    assert data["qc"]["workers"] == {"active": 1, "excluded": 1}
    assert data["qc"]["rules_firing"] == {"attention_failed": 1}
    majority = data["aggregation"]["majority_vote"]
    assert majority["n_workers"] == 1  # the filtered set: the good worker only
    assert majority["n_tasks"] == 1


def test_a_forms_rating_fields_are_the_scales_collusion_reads_as_offsets() -> None:
    asked = {"faithfulness", "problems", "strengths", "own field"}
    assert quality.scale_questions(get_hit_type("form"), sample_config(), asked) == {"faithfulness"}
    # A comparison's pick is a category; a rating type's questions are all scales.
    assert quality.scale_questions(get_hit_type("comparison"), {}, {"best"}) == set()
    assert quality.scale_questions(get_hit_type("likert"), {}, {"fluency"}) == {"fluency"}
