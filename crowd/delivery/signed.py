"""Signed HTTP deliveries with retries: webhooks to experimenters, callbacks to Scale clients.

`schedule_delivery` records a `Delivery` in the caller's transaction. After the commit its
first attempt is enqueued on the deliveries queue; `sweep_deliveries` (run by `crowd
worker`) enqueues every attempt that is due, including those Redis never took, so a Redis
outage delays a delivery but never loses it.

Each attempt POSTs the payload as compact JSON with sorted keys (or in the order a kind's
`on_delivery_body` hook gives, e.g. a Scale callback's answers in field order). With a
secret, it carries

    X-Crowd-Signature: t=<unix time>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>

(the scheme of Stripe's webhooks: the timestamp inside the MAC lets receivers refuse
replays; `verify_signature` checks it). A 2xx answer within `READ_TIMEOUT` succeeds;
anything else is retried after 10 s, 30 s, 1 min, 5 min, 15 min, 1 h, 2 h and then every
3 h, until the next attempt would fall more than `GIVE_UP_AFTER` after the delivery was
created: then it has failed. The outcome hooks registered for the delivery's kind run in
the transaction that records its success or failure.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import re
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import redis
import requests
from rq import get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import JobStatus
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from crowd import __version__
from crowd.exceptions import RegistryError, ValidationError
from crowd.queue import DELIVERIES, failed, fetch_job, job_queue, resting
from crowd.queue.hooks import SweepContext, every_sweep, on_commit
from crowd.queue.jobs import context
from crowd.storage import Database, Delivery, DeliveryStatus, utcnow

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Crowd-Signature"
DELIVERY_HEADER = "X-Crowd-Delivery"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 10.0
# The job's RQ timeout; an attempt holds its row this long, so a second job for it (or a
# sweep) does not post again while the first one waits for the receiver.
JOB_TIMEOUT = 60
ATTEMPT_LEASE = timedelta(seconds=120)
BACKOFF = tuple(
    timedelta(seconds=s) for s in (10, 30, 60, 5 * 60, 15 * 60, 3600, 2 * 3600)
)  # fmt: skip
THEN_EVERY = timedelta(hours=3)
GIVE_UP_AFTER = timedelta(hours=24)
MAX_URL = 2000
MAX_PAYLOAD = 1024 * 1024
MAX_HEADERS = 20
# Set by each attempt; a caller's headers cannot replace them.
RESERVED_HEADERS = frozenset(
    {"content-type", "content-length", "host", "user-agent", SIGNATURE_HEADER.lower(),
     DELIVERY_HEADER.lower()}
)  # fmt: skip
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
ALIVE = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}

DeliveryOutcome = Callable[[Session, Delivery], None]
# kind -> what to do once a delivery of that kind succeeded or was given up (read
# delivery.status); called in the transaction that records it, exactly once per delivery.
DELIVERY_OUTCOMES: dict[str, DeliveryOutcome] = {}


def on_delivery_outcome(kind: str, fn: DeliveryOutcome) -> DeliveryOutcome:
    """Register `fn` to run when a delivery of `kind` succeeds or fails for good."""
    existing = DELIVERY_OUTCOMES.get(kind)
    if existing is not None and existing is not fn:
        raise RegistryError(f"delivery kind {kind!r} already has an outcome hook: {existing!r}")
    DELIVERY_OUTCOMES[kind] = fn
    return fn


DeliveryBody = Callable[[dict[str, Any]], dict[str, Any]]
# kind -> the stored payload with its keys in the order they are sent: for receivers that
# read meaning into key order, which the stored JSON (PostgreSQL's jsonb) does not keep.
DELIVERY_BODIES: dict[str, DeliveryBody] = {}


def on_delivery_body(kind: str, fn: DeliveryBody) -> DeliveryBody:
    """Register `fn` to order the payload of each delivery of `kind`; such bodies keep the
    order `fn` gives instead of sorted keys (the signature covers the bytes sent)."""
    existing = DELIVERY_BODIES.get(kind)
    if existing is not None and existing is not fn:
        raise RegistryError(f"delivery kind {kind!r} already orders its body: {existing!r}")
    DELIVERY_BODIES[kind] = fn
    return fn


# -- what goes over the wire -------------------------------------------------------------------
def validate_url(url: Any, where: str = "url") -> str:
    """An http(s) URL with a host, at most MAX_URL characters (local hosts are allowed)."""
    if not isinstance(url, str) or not url.strip():
        raise ValidationError("give the URL to POST to, e.g. https://example.org/hooks", where)
    url = url.strip()
    if len(url) > MAX_URL:
        raise ValidationError(f"a URL is at most {MAX_URL} characters", where)
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise ValidationError("a URL has no spaces or control characters: encode them", where)
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is not a number from 0 to 65535
    except ValueError:
        raise ValidationError(f"{url!r} is not a valid URL", where) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(
            f"{url!r} is not an http:// or https:// URL with a host, "
            "e.g. https://example.org/hooks",
            where,
        )
    return url


def body_of(payload: dict[str, Any], kind: str | None = None) -> bytes:
    """The request body, what the signature covers: compact JSON with sorted keys, or in the
    order the kind's body hook gives (on_delivery_body)."""
    order = DELIVERY_BODIES.get(kind) if kind is not None else None
    if order is not None:
        return json.dumps(order(payload), separators=(",", ":"), allow_nan=False).encode()
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The X-Crowd-Signature value for `body` sent at `timestamp` (unix seconds)."""
    message = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify_signature(
    secret: str, body: bytes, header: str, tolerance: float = 300.0, now: float | None = None
) -> bool:
    """Whether `header` signs `body` with `secret`, sent within `tolerance` seconds of now."""
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        fields.setdefault(key, []).append(value)
    try:
        timestamp = int(fields["t"][0])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = sign(secret, body, timestamp).rpartition("v1=")[2].encode()
    return any(hmac.compare_digest(expected, given.encode()) for given in fields.get("v1", []))


def backoff(attempt: int) -> timedelta:
    """How long to wait after failed attempt number `attempt` (1 for the first)."""
    if attempt < 1:
        raise ValueError("attempts are numbered from 1")
    return BACKOFF[attempt - 1] if attempt <= len(BACKOFF) else THEN_EVERY


def _headers(headers: dict[str, str] | None) -> dict[str, str]:
    headers = dict(headers or {})
    if len(headers) > MAX_HEADERS:
        raise ValidationError(f"at most {MAX_HEADERS} headers", "headers")
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise ValidationError(f"{name!r} is not a valid header name", "headers")
        if name.lower() in RESERVED_HEADERS:
            raise ValidationError(f"{name} is set by each attempt: leave it out", "headers")
        if not isinstance(value, str) or len(value) > 1000 or any(ord(c) < 32 for c in value):
            raise ValidationError(
                f"the value of {name} must be text of at most 1000 characters on one line",
                "headers",
            )
    return headers


def new_delivery(
    kind: str,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str] | None = None,
    ref: str | None = None,
    secret: str | None = None,
) -> Delivery:
    """A checked, unsaved Delivery due now; `schedule_delivery` is the usual way in."""
    if not isinstance(kind, str) or not 1 <= len(kind) <= 50:
        raise ValidationError("a delivery kind is 1 to 50 characters, e.g. 'webhook'", "kind")
    if not isinstance(payload, dict):
        raise ValidationError("the payload must be a JSON object (a dict)", "payload")
    try:
        size = len(body_of(payload, kind))
    except (TypeError, ValueError) as error:
        raise ValidationError(f"the payload is not plain JSON: {error}", "payload") from None
    if size > MAX_PAYLOAD:
        raise ValidationError(f"the payload is {size} bytes; at most {MAX_PAYLOAD}", "payload")
    if ref is not None and (not isinstance(ref, str) or len(ref) > 200):
        raise ValidationError("a ref is text of at most 200 characters", "ref")
    if secret is not None and (not isinstance(secret, str) or not 1 <= len(secret) <= 200):
        raise ValidationError("a signing secret is 1 to 200 characters", "secret")
    return Delivery(
        kind=kind,
        url=validate_url(url),
        payload=payload,
        headers=_headers(headers),
        ref=ref,
        secret=secret,
        status=DeliveryStatus.PENDING,
        attempts=0,
        next_attempt_at=utcnow(),
    )


def schedule_delivery(
    session: Session,
    kind: str,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str] | None = None,
    ref: str | None = None,
    secret: str | None = None,
) -> Delivery:
    """Record a delivery in the caller's transaction; its first attempt follows the commit."""
    delivery = new_delivery(kind, url, payload, headers, ref, secret)
    session.add(delivery)
    session.flush()
    return delivery


# -- enqueueing: after the commit, and the sweep of due attempts --------------------------------
def delivery_job_id(delivery_id: int, attempt: int) -> str:
    return f"delivery-{delivery_id}-{attempt}"


def enqueue_deliveries(connection: redis.Redis, due: Iterable[tuple[int, int]]) -> int:
    """Enqueue the attempt job of each (delivery id, attempts so far); returns how many
    reached Redis (0 when it is down: the sweep enqueues them later)."""
    if resting(connection):
        return 0  # it just failed: the sweep sends these attempts
    queue = job_queue(DELIVERIES, connection)
    done = 0
    for delivery_id, attempts in due:
        try:
            queue.enqueue(
                attempt_delivery,
                delivery_id,
                job_id=delivery_job_id(delivery_id, attempts + 1),
                job_timeout=JOB_TIMEOUT,
                result_ttl=3600,
                failure_ttl=7 * 24 * 3600,
            )
        except redis.RedisError as error:
            failed(connection)
            log.warning("Redis is unavailable, delivery %s waits for the sweep: %s",
                        delivery_id, error)  # fmt: skip
            return done
        done += 1
    return done


@on_commit
def install_after_commit_delivery(db: Database, connection: redis.Redis) -> None:
    """Enqueue the first attempt of every delivery committed by a session of `db`."""

    def collect(session: Session, _context: Any) -> None:
        new = [obj.id for obj in session.new if isinstance(obj, Delivery)]
        if new:
            session.info.setdefault("delivery_ids", []).extend(new)

    def after_commit(session: Session) -> None:
        ids = session.info.pop("delivery_ids", [])
        if ids:
            enqueue_deliveries(connection, [(delivery_id, 0) for delivery_id in ids])

    event.listen(db.sessions, "after_flush", collect)
    event.listen(db.sessions, "after_commit", after_commit)
    event.listen(db.sessions, "after_soft_rollback",
                 lambda session, _t: session.info.pop("delivery_ids", None))  # fmt: skip


def _job_alive(connection: redis.Redis, job_id: str) -> bool:
    try:
        return fetch_job(job_id, connection).get_status(refresh=False) in ALIVE
    except NoSuchJobError:
        return False


def sweep_deliveries(
    db: Database, connection: redis.Redis, now: datetime | None = None, limit: int = 1000
) -> int:
    """Enqueue an attempt for every pending delivery due by `now`; returns how many.

    The attempt job judges by its own clock whether the delivery is due, so a `now` in the
    future enqueues jobs that do nothing yet.
    """
    now = now or utcnow()
    with db.read_session() as session:
        due = session.execute(
            select(Delivery.id, Delivery.attempts)
            .where(Delivery.status == DeliveryStatus.PENDING, Delivery.next_attempt_at <= now)
            .order_by(Delivery.next_attempt_at, Delivery.id)
            .limit(limit)
        ).all()
    try:
        todo = [
            (delivery_id, attempts)
            for delivery_id, attempts in due
            if not _job_alive(connection, delivery_job_id(delivery_id, attempts + 1))
        ]
    except redis.RedisError as error:
        log.warning("Redis is unavailable, %d due deliveries wait: %s", len(due), error)
        return 0
    done = enqueue_deliveries(connection, todo)
    if done:
        log.info("sweep enqueued %d due deliveries", done)
    return done


@every_sweep("deliveries", order=10, burst=True)
def sweep_due_deliveries(sweep: SweepContext) -> None:
    """Each sweep round (and between the rounds of a burst worker): attempts that are due."""
    sweep_deliveries(sweep.db, sweep.connection)


# -- the attempt job -----------------------------------------------------------------------------
@dataclass(frozen=True)
class AttemptResult:
    status_code: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def private_address(url: str) -> str | None:
    """The first address `url`'s host resolves to that is not on the public internet (a
    loopback, private, link-local or cloud-metadata address), or None.

    Experimenters choose where we POST; without this a callback could reach services inside
    our own network. Checked at each attempt, so a name cannot be re-pointed after it was
    accepted. (A resolver that answers differently a moment later could still slip through;
    a proxy that refuses private addresses closes that too.)
    """
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None  # the POST fails to connect and is retried
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not address.is_global:
            return str(address)
    return None


def _post(
    url: str, body: bytes, headers: dict[str, str], allow_private: bool = False
) -> AttemptResult:
    if not allow_private:
        private = private_address(url)
        if private is not None:
            return AttemptResult(
                None,
                f"refused: the host resolves to a non-public address ({private}); deliveries "
                "go to public addresses only (CROWD_DELIVERY_ALLOW_PRIVATE=1 allows others)",
            )
    try:
        # No redirects: a receiver that moved answers 3xx, which counts as a failed attempt
        # (following it would turn the POST into a GET on some servers, or go elsewhere).
        with requests.post(
            url,
            data=body,
            headers=headers,
            timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
            allow_redirects=False,
            stream=True,
        ) as response:
            if 200 <= response.status_code < 300:
                return AttemptResult(response.status_code, None)
            # The status only: what the receiver answered is not ours to show back.
            return AttemptResult(response.status_code, f"HTTP {response.status_code}")
    except requests.RequestException as error:
        return AttemptResult(None, f"{type(error).__name__}: the request did not complete")


def _job_tag() -> str:
    job = get_current_job()
    return f"[job {job.id}]" if job else "[inline]"


def _finish(session: Session, delivery: Delivery, status: DeliveryStatus, now: datetime) -> None:
    delivery.status = status
    delivery.next_attempt_at = None
    if status == DeliveryStatus.SUCCEEDED:
        delivery.delivered_at = now
    hook = DELIVERY_OUTCOMES.get(delivery.kind)
    if hook is None:
        return
    try:
        # In a savepoint: a failing hook must not undo the record of what the receiver got.
        with session.begin_nested():
            hook(session, delivery)
    except Exception:
        log.exception("%s the %s outcome hook failed on delivery %s", _job_tag(),
                      delivery.kind, delivery.id)  # fmt: skip


def _lock(session: Session, delivery_id: int) -> Delivery | None:
    return session.scalar(select(Delivery).where(Delivery.id == delivery_id).with_for_update())


def attempt_delivery(delivery_id: int) -> str:
    """Make one attempt at a due delivery and record its outcome; safe to run twice.

    The row is claimed (attempt counted, next attempt pushed past the lease) in one short
    transaction, the POST happens outside any transaction, and the outcome is recorded in
    another: a second job finds the delivery not due, and a job killed mid-attempt is
    retried by the sweep once the lease is over.
    """
    db = context().db
    now = utcnow()
    with db.session() as session:
        delivery = _lock(session, delivery_id)
        if delivery is None:
            return f"delivery {delivery_id} does not exist"
        if delivery.status != DeliveryStatus.PENDING:
            return f"delivery {delivery_id} already {delivery.status}"
        if delivery.next_attempt_at is None or delivery.next_attempt_at > now:
            return f"delivery {delivery_id} is not due yet"
        if delivery.attempts and now >= delivery.created_at + GIVE_UP_AFTER:
            # Attempts that never recorded an outcome (killed mid-post) end here too.
            delivery.last_error = (
                delivery.last_error or "no outcome recorded within the retry window"
            )
            _finish(session, delivery, DeliveryStatus.FAILED, now)
            return f"delivery {delivery_id} gave up"
        delivery.attempts += 1
        attempt = delivery.attempts
        delivery.next_attempt_at = now + ATTEMPT_LEASE
        url, body = delivery.url, body_of(delivery.payload, delivery.kind)
        headers = {
            **delivery.headers,
            "Content-Type": "application/json",
            "User-Agent": f"crowd/{__version__}",
            DELIVERY_HEADER: str(delivery.id),
        }
        secret = delivery.secret
    if secret:
        headers[SIGNATURE_HEADER] = sign(secret, body, int(time.time()))
    result = _post(url, body, headers, allow_private=context().settings.delivery_allow_private)
    with db.session() as session:
        delivery = _lock(session, delivery_id)
        if delivery is None or delivery.status != DeliveryStatus.PENDING:
            return f"delivery {delivery_id} was settled meanwhile"
        if not result.ok and delivery.attempts != attempt:
            # Our lease ran out and a later attempt owns the row now: it records its own.
            return f"delivery {delivery_id} attempt {attempt} failed after its lease"
        return _record(session, delivery, attempt, result, utcnow())


def _record(
    session: Session, delivery: Delivery, attempt: int, result: AttemptResult, now: datetime
) -> str:
    delivery.last_status_code = result.status_code
    if result.ok:
        delivery.last_error = None
        _finish(session, delivery, DeliveryStatus.SUCCEEDED, now)
        log.info("%s delivered %s %s (attempt %d)", _job_tag(), delivery.kind, delivery.id,
                 attempt)  # fmt: skip
        return f"delivery {delivery.id} succeeded on attempt {attempt}"
    delivery.last_error = (result.error or "")[:1000]
    retry_at = now + backoff(attempt)
    deadline = delivery.created_at + GIVE_UP_AFTER
    if retry_at > deadline:
        # One last try just before the 24 hours end, rather than giving up hours early.
        retry_at = deadline - timedelta(seconds=1)
    if retry_at <= now:
        _finish(session, delivery, DeliveryStatus.FAILED, now)
        log.warning("%s gave up delivery %s to %s after %d attempts: %s", _job_tag(),
                    delivery.id, delivery.url, attempt, delivery.last_error)  # fmt: skip
        return f"delivery {delivery.id} failed for good on attempt {attempt}"
    delivery.next_attempt_at = retry_at
    log.info("%s delivery %s attempt %d failed (%s); next at %s", _job_tag(), delivery.id,
             attempt, delivery.last_error, retry_at.isoformat())  # fmt: skip
    return f"delivery {delivery.id} attempt {attempt} failed; retry at {retry_at.isoformat()}"


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    """A delivery as the API and CLI show it (never its secret)."""

    def when(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "id": delivery.id,
        "kind": delivery.kind,
        "event": delivery.event,
        "ref": delivery.ref,
        "url": delivery.url,
        "status": str(delivery.status),
        "attempts": delivery.attempts,
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "created_at": when(delivery.created_at),
        "next_attempt_at": when(delivery.next_attempt_at),
        "delivered_at": when(delivery.delivered_at),
    }
