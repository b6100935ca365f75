"""Signed HTTP deliveries against a real local receiver: body, headers and signature, retries
with backoff, giving up after 24 h, outcome hooks, jobs run twice, and a Redis outage."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.delivery.signed import (
    DELIVERY_BODIES,
    DELIVERY_HEADER,
    DELIVERY_OUTCOMES,
    SIGNATURE_HEADER,
    attempt_delivery,
    backoff,
    install_after_commit_delivery,
    on_delivery_body,
    on_delivery_outcome,
    private_address,
    schedule_delivery,
    sign,
    sweep_deliveries,
    verify_signature,
)
from crowd.exceptions import RegistryError, ValidationError
from crowd.queue import DELIVERIES, job_queue
from crowd.queue.jobs import configure
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import AuditEntry, Database, Delivery, DeliveryStatus, utcnow
from tests.conftest import free_port

SECRET = "whsec_test-secret"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A local HTTP server that records every POST and answers with the statuses queued."""

    statuses: list[int] = field(default_factory=list)
    delay: float = 0.0
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(receiver.delay)
                with receiver.lock:
                    receiver.received.append(Received(self.path, dict(self.headers), body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"receiver is down")

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def outcomes() -> Iterator[list[tuple[int, str, bool]]]:
    """Calls of the outcome hook of the kind "test": (delivery id, status, in a transaction)."""
    calls: list[tuple[int, str, bool]] = []

    def hook(session: Session, delivery: Delivery) -> None:
        calls.append((delivery.id, str(delivery.status), session.in_transaction()))

    on_delivery_outcome("test", hook)
    yield calls
    DELIVERY_OUTCOMES.pop("test", None)


def schedule(db: Database, url: str, **extra: Any) -> int:
    with db.session() as session:
        delivery = schedule_delivery(
            session, "test", url, extra.pop("payload", {"n": 1}), secret=SECRET, **extra
        )
        return delivery.id


def load(db: Database, delivery_id: int) -> Delivery:
    with db.session() as session:
        delivery = session.get(Delivery, delivery_id)
        assert delivery is not None
        return delivery


def make_due(db: Database, delivery_id: int, created_ago: timedelta | None = None) -> None:
    """Move time on: the next attempt is due now (and the delivery is older, if asked)."""
    with db.session() as session:
        delivery = session.get(Delivery, delivery_id)
        assert delivery is not None
        delivery.next_attempt_at = utcnow() - timedelta(seconds=1)
        if created_ago is not None:
            delivery.created_at = utcnow() - created_ago


def test_a_delivery_arrives_as_signed_json(
    settings: Settings, db: Database, receiver: Receiver
) -> None:
    payload = {"text": "café", "b": [1, 2], "a": None}
    delivery_id = schedule(
        db, receiver.url + "/hooks?x=1", payload=payload, headers={"X-Extra": "yes"}, ref="task:a"
    )
    run_worker(settings, burst=True)
    [got] = receiver.received
    assert got.path == "/hooks?x=1"
    assert got.body == b'{"a":null,"b":[1,2],"text":"caf\\u00e9"}'  # compact, sorted keys
    assert got.json() == payload
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-Extra"] == "yes"
    assert got.headers[DELIVERY_HEADER] == str(delivery_id)
    signature = got.headers[SIGNATURE_HEADER]
    assert verify_signature(SECRET, got.body, signature)
    assert not verify_signature("another secret", got.body, signature)
    assert not verify_signature(SECRET, got.body.replace(b"1,2", b"1,3"), signature)
    # The timestamp is inside the MAC: an old signature is refused as a replay.
    old = sign(SECRET, got.body, int(time.time()) - 3600)
    assert not verify_signature(SECRET, got.body, old)
    delivery = load(db, delivery_id)
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert (delivery.attempts, delivery.last_status_code) == (1, 200)
    assert delivery.delivered_at is not None and delivery.next_attempt_at is None
    assert delivery.ref == "task:a"


def test_without_a_secret_there_is_no_signature(
    settings: Settings, db: Database, receiver: Receiver
) -> None:
    with db.session() as session:
        schedule_delivery(session, "test", receiver.url, {"n": 1})
    run_worker(settings, burst=True)
    [got] = receiver.received
    assert SIGNATURE_HEADER not in got.headers


def test_the_first_attempt_is_enqueued_after_commit_only(
    db: Database, redis_url: str, receiver: Receiver
) -> None:
    connection = redis.Redis.from_url(redis_url)
    install_after_commit_delivery(db, connection)
    queue = job_queue(DELIVERIES, connection)
    with pytest.raises(RuntimeError), db.session() as session:
        schedule_delivery(session, "test", receiver.url, {"n": 1})
        raise RuntimeError("the caller's transaction fails")
    assert queue.count == 0
    delivery_id = schedule(db, receiver.url)
    assert queue.job_ids == [f"delivery-{delivery_id}-1"]
    # The sweep leaves a delivery alone while its job waits in Redis.
    assert sweep_deliveries(db, connection) == 0


def test_a_failing_receiver_gets_it_on_the_third_attempt(
    settings: Settings, db: Database, receiver: Receiver, outcomes: list[Any]
) -> None:
    receiver.statuses = [500, 503]
    delivery_id = schedule(db, receiver.url)
    before = utcnow()
    run_worker(settings, burst=True)
    delivery = load(db, delivery_id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)
    assert delivery.last_status_code == 500
    assert delivery.last_error == "HTTP 500"
    assert delivery.next_attempt_at is not None
    wait = delivery.next_attempt_at - before
    assert timedelta(seconds=9) < wait < timedelta(seconds=12)  # the first backoff, 10 s

    run_worker(settings, burst=True)  # not due yet: nothing is sent
    assert len(receiver.received) == 1
    connection = redis.Redis.from_url(settings.redis_url or "")
    assert sweep_deliveries(db, connection) == 0
    assert sweep_deliveries(db, connection, now=utcnow() + timedelta(seconds=11)) == 1

    make_due(db, delivery_id)
    run_worker(settings, burst=True)
    delivery = load(db, delivery_id)
    assert (delivery.attempts, delivery.last_status_code) == (2, 503)
    assert outcomes == []

    make_due(db, delivery_id)
    run_worker(settings, burst=True)
    delivery = load(db, delivery_id)
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert (delivery.attempts, delivery.last_status_code, delivery.last_error) == (3, 200, None)
    assert len(receiver.received) == 3
    assert len({r.body for r in receiver.received}) == 1  # the same body every time
    assert all(
        verify_signature(SECRET, r.body, r.headers[SIGNATURE_HEADER]) for r in receiver.received
    )
    assert outcomes == [(delivery_id, "succeeded", True)]


def test_backoff_grows_then_settles_at_three_hours() -> None:
    waits = [backoff(n).total_seconds() for n in range(1, 11)]
    assert waits == [10, 30, 60, 300, 900, 3600, 7200, 10800, 10800, 10800]
    # From the first attempt, the schedule fits about a dozen attempts into a day.
    total, attempts = 0.0, 1
    while total + backoff(attempts).total_seconds() <= 24 * 3600:
        total += backoff(attempts).total_seconds()
        attempts += 1
    assert 12 <= attempts <= 16


def test_it_tries_until_the_24_hours_end_then_gives_up(
    settings: Settings, db: Database, receiver: Receiver, outcomes: list[Any]
) -> None:
    receiver.statuses = [500] * 10
    delivery_id = schedule(db, receiver.url)
    make_due(db, delivery_id, created_ago=timedelta(hours=23))
    run_worker(settings, burst=True)
    assert load(db, delivery_id).status == DeliveryStatus.PENDING  # 10 s later is within 24 h
    # 23 h 59 min 45 s old: the next wait (30 s) would end after the day is over, so the
    # last try comes just before it ends.
    make_due(db, delivery_id, created_ago=timedelta(hours=24) - timedelta(seconds=15))
    run_worker(settings, burst=True)
    delivery = load(db, delivery_id)
    assert delivery.status == DeliveryStatus.PENDING and delivery.next_attempt_at is not None
    last_try = delivery.created_at + timedelta(hours=24) - timedelta(seconds=1)
    assert delivery.next_attempt_at == last_try
    make_due(db, delivery_id, created_ago=timedelta(hours=24) - timedelta(milliseconds=500))
    run_worker(settings, burst=True)
    delivery = load(db, delivery_id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 3)
    assert delivery.next_attempt_at is None and delivery.delivered_at is None
    assert delivery.last_error == "HTTP 500"  # not what the receiver said
    assert outcomes == [(delivery_id, "failed", True)]
    configure(settings)
    assert attempt_delivery(delivery_id) == f"delivery {delivery_id} already failed"
    assert sweep_deliveries(db, redis.Redis.from_url(settings.redis_url or "")) == 0
    assert len(receiver.received) == 3 and len(outcomes) == 1


def test_private_addresses_are_refused_unless_allowed(
    settings: Settings, db: Database, receiver: Receiver
) -> None:
    public_only = settings.with_changes(delivery_allow_private=False)
    delivery_id = schedule(db, receiver.url.replace("127.0.0.1", "localhost"))
    run_worker(public_only, burst=True)
    delivery = load(db, delivery_id)
    assert delivery.status == DeliveryStatus.PENDING and receiver.received == []
    assert delivery.last_error is not None and "non-public address (127.0.0.1" in (
        delivery.last_error
    )
    assert private_address("http://169.254.169.254/latest/meta-data") == "169.254.169.254"
    assert private_address("http://10.1.2.3:8080/x") == "10.1.2.3"
    assert private_address("http://8.8.8.8/hook") is None


def test_a_signature_with_odd_characters_is_refused_not_a_crash() -> None:
    body = b'{"a":1}'
    now = int(time.time())
    assert verify_signature("s3cret", body, sign("s3cret", body, now))
    assert not verify_signature("s3cret", body, f"t={now},v1=\u00e9")
    assert not verify_signature("s3cret", body, f"t={now},v1=" + "0" * 64)


def test_connection_errors_are_failed_attempts(settings: Settings, db: Database) -> None:
    delivery_id = schedule(db, f"http://127.0.0.1:{free_port()}/nobody-listens")
    run_worker(settings, burst=True)
    delivery = load(db, delivery_id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.PENDING, 1)
    assert delivery.last_status_code is None
    assert delivery.last_error is not None and "ConnectionError" in delivery.last_error


def test_redirects_are_not_followed(settings: Settings, db: Database, receiver: Receiver) -> None:
    receiver.statuses = [302]
    delivery_id = schedule(db, receiver.url)
    run_worker(settings, burst=True)
    delivery = load(db, delivery_id)
    assert (delivery.status, delivery.last_status_code) == (DeliveryStatus.PENDING, 302)


def test_a_job_run_twice_posts_once(
    settings: Settings, db: Database, receiver: Receiver, outcomes: list[Any]
) -> None:
    delivery_id = schedule(db, receiver.url)
    configure(settings)
    assert attempt_delivery(delivery_id) == f"delivery {delivery_id} succeeded on attempt 1"
    assert attempt_delivery(delivery_id) == f"delivery {delivery_id} already succeeded"
    assert len(receiver.received) == 1 and len(outcomes) == 1

    # Two jobs for the same attempt at the same time (the after-commit enqueue and a sweep,
    # say) against a slow receiver: the first claims the row, the second finds it not due.
    receiver.delay = 0.5
    other = schedule(db, receiver.url)
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(attempt_delivery(other))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [
        f"delivery {other} is not due yet",
        f"delivery {other} succeeded on attempt 1",
    ]
    assert len(receiver.received) == 2 and len(outcomes) == 2


def test_a_failing_hook_does_not_undo_the_outcome(
    settings: Settings, db: Database, receiver: Receiver
) -> None:
    def hook(session: Session, delivery: Delivery) -> None:
        session.add(AuditEntry(actor="hook", action="note", reason="written, then undone"))
        raise RuntimeError("the hook's own bug")

    on_delivery_outcome("test", hook)
    try:
        delivery_id = schedule(db, receiver.url)
        run_worker(settings, burst=True)
    finally:
        DELIVERY_OUTCOMES.pop("test", None)
    assert load(db, delivery_id).status == DeliveryStatus.SUCCEEDED
    assert len(receiver.received) == 1
    with db.session() as session:
        assert session.scalars(select(AuditEntry)).all() == []


def test_a_kind_with_a_body_hook_is_sent_in_its_order_and_signed_as_sent(
    settings: Settings, db: Database, receiver: Receiver
) -> None:
    def answers_in_order(payload: dict[str, Any]) -> dict[str, Any]:
        return {"order": payload["order"],
                "answers": {key: payload["answers"][key] for key in payload["order"]}}  # fmt: skip

    on_delivery_body("test", answers_in_order)
    try:
        with pytest.raises(RegistryError, match="already orders its body"):
            on_delivery_body("test", lambda payload: payload)
        payload = {"order": ["z", "a"], "answers": {"a": 1, "z": 2}}
        schedule(db, receiver.url, payload=payload)
        run_worker(settings, burst=True)
    finally:
        DELIVERY_BODIES.pop("test", None)
    [got] = receiver.received
    assert got.body == b'{"order":["z","a"],"answers":{"z":2,"a":1}}'
    assert list(got.json()["answers"]) == ["z", "a"]
    assert verify_signature(SECRET, got.body, got.headers[SIGNATURE_HEADER])
    # Other kinds keep sorted keys.
    schedule(db, receiver.url, payload=payload)
    run_worker(settings, burst=True)
    assert receiver.received[1].body == b'{"answers":{"a":1,"z":2},"order":["z","a"]}'


def test_a_kind_has_one_outcome_hook() -> None:
    def first(session: Session, delivery: Delivery) -> None:
        pass

    def second(session: Session, delivery: Delivery) -> None:
        pass

    try:
        assert on_delivery_outcome("test", first) is first
        assert on_delivery_outcome("test", first) is first  # the same one again is fine
        with pytest.raises(RegistryError, match="already has an outcome hook"):
            on_delivery_outcome("test", second)
    finally:
        DELIVERY_OUTCOMES.pop("test", None)


def test_a_delivery_recorded_while_redis_is_down_goes_out_after_the_sweep(
    settings: Settings, db: Database, receiver: Receiver
) -> None:
    dead = redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    install_after_commit_delivery(db, dead)
    delivery_id = schedule(db, receiver.url)  # commits although Redis is unreachable
    live = redis.Redis.from_url(settings.redis_url or "")
    assert job_queue(DELIVERIES, live).count == 0
    assert sweep_deliveries(db, dead) == 0  # still down: nothing lost, nothing sent
    assert load(db, delivery_id).status == DeliveryStatus.PENDING
    run_worker(settings, burst=True)  # Redis is back: the worker's sweep finds it due
    assert load(db, delivery_id).status == DeliveryStatus.SUCCEEDED
    assert len(receiver.received) == 1


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/x",
        "http://",
        "example.org/hooks",
        "https://exa mple.org/",
        "http://example.org:99999/",
        "javascript:alert(1)",
        "https://example.org/" + "x" * 2000,
        "",
        None,
    ],
)
def test_bad_urls_are_refused(db: Database, url: Any) -> None:
    with pytest.raises(ValidationError, match="url"), db.session() as session:
        schedule_delivery(session, "test", url, {"n": 1})


def test_good_urls_headers_and_payloads(db: Database) -> None:
    with db.session() as session:
        for url in ("http://127.0.0.1:8080/x", "https://example.org/hooks?a=1", "http://localhost"):
            assert schedule_delivery(session, "test", url, {"n": 1}).url == url
        with pytest.raises(ValidationError, match="set by each attempt"):
            schedule_delivery(session, "test", "http://localhost", {}, {"Content-Type": "x"})
        with pytest.raises(ValidationError, match="one line"):
            schedule_delivery(session, "test", "http://localhost", {}, {"X-A": "a\r\nX-B: b"})
        with pytest.raises(ValidationError, match="not plain JSON"):
            schedule_delivery(session, "test", "http://localhost", {"when": utcnow()})
        with pytest.raises(ValidationError, match="kind"):
            schedule_delivery(session, "", "http://localhost", {})
