"""Experimenters' webhooks: subscribed over the API and the CLI, fed by the queue jobs,
signed, sent once per event however often a job runs, and kept to the study's owner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.accounts import create_api_key
from crowd.cli import main
from crowd.delivery.signed import DELIVERY_HEADER, SIGNATURE_HEADER, verify_signature
from crowd.queue.jobs import configure, process_event
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import Database, Delivery, DeliveryStatus, OutboxEvent, Worker
from tests.conftest import join, passage
from tests.crowd.delivery.test_signed import Received, Receiver
from tests.crowd.quality.test_standing import ROFT_RULES
from tests.crowd.work.test_assignments import play

ALL_EVENTS = ["response.stored", "item.complete", "study.complete", "worker.blocked"]
CONFIG = {"annotations_per_item": 1, "attention_rate": 0.0}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver().start()
    yield server
    server.stop()


def subscribe(
    client: FlaskClient, auth: dict[str, str], study_id: int, url: str, events: list[str]
) -> dict[str, Any]:
    reply = client.post(
        f"/api/studies/{study_id}/webhooks", json={"url": url, "events": events}, headers=auth
    )
    assert reply.status_code == 201, reply.get_json()
    body: dict[str, Any] = reply.get_json()
    return body


def events_of(receiver: Receiver) -> list[str]:
    return [r.json()["event"] for r in receiver.received]


def check_signed(received: list[Received], secret: str) -> None:
    for got in received:
        assert verify_signature(secret, got.body, got.headers[SIGNATURE_HEADER])
        assert got.headers["X-Crowd-Event"] == got.json()["event"]
        assert got.headers[DELIVERY_HEADER].isdigit()


def test_answers_completed_items_and_studies_reach_the_webhook(
    settings: Settings,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    receiver: Receiver,
) -> None:
    study_id = make_study([passage("a", 2, n=3), passage("b", 2, n=3)], CONFIG)
    hook = subscribe(client, auth, study_id, receiver.url + "/crowd", ALL_EVENTS)
    assert hook["secret"].startswith("whsec_") and hook["events"] == ALL_EVENTS
    who = join(client, auth)
    play(client, who, study_id, guess=2)
    run_worker(settings, burst=True)
    assert sorted(events_of(receiver)) == ["item.complete", "response.stored"]
    play(client, who, study_id, guess=1)
    run_worker(settings, burst=True)
    assert sorted(events_of(receiver)) == [
        "item.complete",
        "item.complete",
        "response.stored",
        "response.stored",
        "study.complete",
    ]
    check_signed(receiver.received, hook["secret"])
    assert {r.path for r in receiver.received} == {"/crowd"}

    stored = [r.json() for r in receiver.received if r.json()["event"] == "response.stored"]
    with db.session() as session:
        worker_id = session.scalars(select(Worker.id)).one()
    assert {s["data"]["item"] for s in stored} == {"a", "b"}
    for message in stored:
        assert message["study_id"] == study_id and message["created_at"]
        assert message["data"]["worker_id"] == worker_id
        assert message["data"]["item_kind"] == "real"
        assert message["data"]["answer"]["guess"] in (1, 2)
    [done] = [r.json() for r in receiver.received if r.json()["event"] == "study.complete"]
    assert done["data"] == {"items": 2, "responses": 2}

    listed = client.get(f"/api/studies/{study_id}/webhooks", headers=auth).get_json()["webhooks"]
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
    shown = client.get(
        f"/api/studies/{study_id}/webhooks/{hook['id']}/deliveries", headers=auth
    ).get_json()
    assert len(shown["deliveries"]) == 5 and "secret" not in shown["webhook"]
    assert {(d["status"], d["attempts"]) for d in shown["deliveries"]} == {("succeeded", 1)}


def test_an_item_completes_at_its_target_only(
    settings: Settings,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    receiver: Receiver,
) -> None:
    study_id = make_study([passage("a", 2, n=3)], {"annotations_per_item": 2})
    subscribe(client, auth, study_id, receiver.url, ["item.complete", "study.complete"])
    play(client, join(client, auth, external_id="w1"), study_id, guess=2)
    run_worker(settings, burst=True)
    assert events_of(receiver) == []
    play(client, join(client, auth, external_id="w2"), study_id, guess=2)
    run_worker(settings, burst=True)
    assert sorted(events_of(receiver)) == ["item.complete", "study.complete"]
    [item] = [r.json() for r in receiver.received if r.json()["event"] == "item.complete"]
    assert item["data"]["item"] == "a" and item["data"]["responses"] == item["data"]["target"] == 2


def test_blocks_by_reviewers_and_by_rules_reach_the_webhook(
    settings: Settings,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    receiver: Receiver,
) -> None:
    study_id = make_study(
        [passage(f"p{i}", 2, n=3) for i in range(3)] + [passage("att", 3, n=3, kind="attention")],
        {"annotations_per_item": 2, "attention_rate": 0.5, "qc": {"rules": ROFT_RULES}},
    )
    hook = subscribe(client, auth, study_id, receiver.url, ["worker.blocked"])
    careless = join(client, auth, external_id="careless")
    spammer = join(client, auth, external_id="spam")
    # The careless worker fails the attention check: RoFT's rule soft-blocks them.
    play(client, careless, study_id, guess=2)
    play(client, careless, study_id, guess=2)
    play(client, spammer, study_id, guess=3)  # all human: passes a check if it gets one
    run_worker(settings, burst=True)
    [rule] = [r.json() for r in receiver.received]
    assert rule["event"] == "worker.blocked"
    assert rule["data"]["action"] == "soft_block"
    assert rule["data"]["by"] == "rule:attention_failed"
    assert rule["data"]["worker"] == "sim:careless"

    with db.session() as session:
        spam_id = session.scalar(select(Worker.id).where(Worker.external_id == "spam"))
    reply = client.post(
        f"/api/studies/{study_id}/workers/{spam_id}/actions",
        json={"action": "block", "reason": "copies answers"},
        headers=auth,
    )
    assert reply.status_code == 200
    run_worker(settings, burst=True)
    assert len(receiver.received) == 2
    block = receiver.received[1].json()
    assert block["study_id"] == study_id
    assert block["data"]["worker_id"] == spam_id
    assert (block["data"]["action"], block["data"]["by"], block["data"]["reason"]) == (
        "block",
        "experimenter:tester",
        "copies answers",
    )
    check_signed(receiver.received, hook["secret"])
    # Blocking again changes nothing and sends nothing.
    client.post(
        f"/api/studies/{study_id}/workers/{spam_id}/actions",
        json={"action": "block", "reason": "copies answers"},
        headers=auth,
    )
    run_worker(settings, burst=True)
    assert len(receiver.received) == 2


def test_only_the_events_asked_for_are_sent(
    settings: Settings,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    receiver: Receiver,
) -> None:
    study_id = make_study([passage("a", 2, n=3), passage("b", 2, n=3)], CONFIG)
    subscribe(client, auth, study_id, receiver.url, ["study.complete"])
    who = join(client, auth)
    play(client, who, study_id, guess=2)
    play(client, who, study_id, guess=2)
    run_worker(settings, burst=True)
    assert events_of(receiver) == ["study.complete"]


def test_bad_subscriptions_are_refused(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> None:
    study_id = make_study(config=CONFIG)
    path = f"/api/studies/{study_id}/webhooks"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"url": "ftp://example.org/x", "events": ["item.complete"]}, "url"),
        ({"url": "not a url", "events": ["item.complete"]}, "url"),
        ({"events": ["item.complete"]}, "url"),
        (
            {"url": "https://example.org/h", "events": ["item.finished"]},
            "events[0]: Input should be 'response.stored'",
        ),
        (
            {"url": "https://example.org/h", "events": ["item.complete"], "event": "x"},
            "event: unknown field: the allowed fields are events, url",
        ),
        ({"url": "https://example.org/h", "events": []}, "events"),
        ({"url": "https://example.org/h", "events": "item.complete"}, "events"),
    ]
    for body, message in cases:
        reply = client.post(path, json=body, headers=auth)
        assert reply.status_code == 422, body
        assert message in reply.get_json()["error"], reply.get_json()
    assert client.post(path, data="url=x", headers=auth).status_code == 415
    assert client.get(path, headers=auth).get_json() == {"webhooks": []}
    assert (
        client.post(
            path, json={"url": "https://example.org/h", "events": ["item.complete"]}
        ).status_code
        == 401
    )


def test_another_experimenter_cannot_see_or_add_webhooks(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = make_study(config=CONFIG)
    hook = subscribe(client, auth, study_id, "https://example.org/h", ["item.complete"])
    with db.session() as session:
        other = {"Authorization": f"Bearer {create_api_key(session, 'someone else')}"}
    path = f"/api/studies/{study_id}/webhooks"
    body = {"url": "https://evil.example/h", "events": ["response.stored"]}
    assert client.post(path, json=body, headers=other).status_code == 404
    assert client.get(path, headers=other).status_code == 404
    assert client.delete(f"{path}/{hook['id']}", headers=other).status_code == 404
    assert client.get(f"{path}/{hook['id']}/deliveries", headers=other).status_code == 404
    # Their own study does not open a door to this study's webhooks either.
    theirs = client.post(
        "/api/studies", json={"name": "t", "hit_type": "boundary"}, headers=other
    ).get_json()["id"]
    assert (
        client.delete(f"/api/studies/{theirs}/webhooks/{hook['id']}", headers=other).status_code
        == 404
    )
    listed = client.get(path, headers=auth).get_json()["webhooks"]
    assert [(h["url"], h["active"]) for h in listed] == [("https://example.org/h", True)]


def test_a_removed_webhook_gets_nothing_more(
    settings: Settings,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    receiver: Receiver,
) -> None:
    study_id = make_study([passage("a", 2, n=3), passage("b", 2, n=3)], CONFIG)
    hook = subscribe(client, auth, study_id, receiver.url, ["response.stored"])
    receiver.statuses = [500]
    who = join(client, auth)
    play(client, who, study_id, guess=2)
    run_worker(settings, burst=True)  # the first attempt fails; a retry waits
    path = f"/api/studies/{study_id}/webhooks/{hook['id']}"
    reply = client.delete(path, headers=auth)
    assert reply.status_code == 200 and reply.get_json()["active"] is False
    assert client.get(f"/api/studies/{study_id}/webhooks", headers=auth).get_json() == {
        "webhooks": []
    }
    [delivery] = client.get(f"{path}/deliveries", headers=auth).get_json()["deliveries"]
    assert (delivery["status"], delivery["attempts"]) == ("failed", 1)
    assert delivery["last_error"] == "the webhook was removed"
    play(client, who, study_id, guess=2)
    run_worker(settings, burst=True)
    assert len(receiver.received) == 1
    assert client.delete(f"{path}9", headers=auth).status_code == 404


def test_a_job_run_twice_sends_each_event_once(
    settings: Settings,
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    receiver: Receiver,
) -> None:
    study_id = make_study([passage("a", 2, n=3)], CONFIG)
    subscribe(client, auth, study_id, receiver.url, ALL_EVENTS)
    play(client, join(client, auth), study_id, guess=2)
    configure(settings)
    with db.session() as session:
        event_ids = list(session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id)))
    for _ in range(2):
        for event_id in event_ids:
            process_event(event_id)
        # As if the job died after its work but before it was marked done.
        with db.session() as session:
            for row in session.scalars(select(OutboxEvent)):
                row.processed_at = None
    with db.session() as session:
        assert session.scalar(select(func.count(Delivery.id))) == 3
    run_worker(settings, burst=True)
    assert sorted(events_of(receiver)) == ["item.complete", "response.stored", "study.complete"]
    with db.session() as session:
        statuses = set(session.scalars(select(Delivery.status)))
    assert statuses == {DeliveryStatus.SUCCEEDED}


def test_webhook_commands_on_the_command_line(
    runner: CliRunner, make_study: Callable[..., int], receiver: Receiver
) -> None:
    study_id = str(make_study(config=CONFIG))
    added = runner.invoke(
        main,
        [
            "webhooks",
            "add",
            study_id,
            receiver.url,
            "--event",
            "item.complete",
            "--event",
            "study.complete",
        ],
    )
    assert added.exit_code == 0, added.output
    assert "item.complete, study.complete" in added.output and "whsec_" in added.output
    hook_id = added.output.split()[1].rstrip(":")
    listed = runner.invoke(main, ["webhooks", "list", study_id])
    assert receiver.url in listed.output and "whsec_" not in listed.output
    bad = runner.invoke(main, ["webhooks", "add", study_id, "ftp://x", "--event", "item.complete"])
    assert bad.exit_code == 1 and "http:// or https://" in bad.output
    unknown = runner.invoke(main, ["webhooks", "add", study_id, receiver.url, "--event", "nope"])
    assert unknown.exit_code == 1 and "unknown event 'nope'" in unknown.output
    shown = runner.invoke(main, ["webhooks", "deliveries", study_id, hook_id, "--json"])
    assert shown.exit_code == 0 and shown.output.strip() == "[]"
    removed = runner.invoke(main, ["webhooks", "remove", study_id, hook_id])
    assert removed.exit_code == 0 and f"webhook {hook_id} removed" in removed.output
    assert "no webhooks" in runner.invoke(main, ["webhooks", "list", study_id]).output
    missing = runner.invoke(main, ["webhooks", "remove", study_id, "999"])
    assert missing.exit_code == 1 and "has no webhook 999" in missing.output
