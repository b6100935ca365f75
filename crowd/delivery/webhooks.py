"""Experimenters' webhooks: per-study subscriptions and the events they receive.

Events are emitted by the queue jobs that process the outbox (never by a request), one
signed delivery per active subscription that asked for the event. Each (subscription,
event, ref) pair is delivered at most once, so a job that runs twice sends nothing twice.

- `response.stored`: a worker's answer was stored.
- `item.complete`: a real item has its target number of live responses.
- `study.complete`: every real item of the study is complete.
- `worker.blocked`: a reviewer blocked the worker, or a QC rule soft-blocked or stopped them.

Every delivery is `{"event", "study_id", "created_at", "data": {...}}` with the headers
X-Crowd-Event, X-Crowd-Delivery and X-Crowd-Signature (see crowd.delivery.signed).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from crowd.delivery.signed import new_delivery, validate_url
from crowd.exceptions import NotFound, ValidationError
from crowd.queue.hooks import AFTER_QC, Event, on_event
from crowd.storage import (
    AuditEntry,
    Delivery,
    DeliveryStatus,
    Item,
    ItemKind,
    Response,
    ResponseSource,
    Study,
    WebhookSubscription,
    Worker,
    outbox,  # its topics; this module names webhook events
    utcnow,
)

RESPONSE_STORED = "response.stored"
ITEM_COMPLETE = "item.complete"
STUDY_COMPLETE = "study.complete"
WORKER_BLOCKED = "worker.blocked"
WEBHOOK_EVENTS = (RESPONSE_STORED, ITEM_COMPLETE, STUDY_COMPLETE, WORKER_BLOCKED)
KIND = "webhook"
EVENT_HEADER = "X-Crowd-Event"
# Audit actions that bar a worker from more items in the study: a reviewer's block, a
# rule's soft block or stop.
BLOCK_ACTIONS = ("block", "soft_block", "stop")
MAX_SUBSCRIPTIONS = 20
SECRET_PREFIX = "whsec_"


# -- subscriptions -----------------------------------------------------------------------------
def parse_events(value: Any) -> list[str]:
    """The events asked for: a non-empty list of known event names (duplicates dropped)."""
    known = ", ".join(WEBHOOK_EVENTS)
    if not isinstance(value, list | tuple) or not value:
        raise ValidationError(f"a list of one or more events from {known}", "events")
    events: list[str] = []
    for name in value:
        if name not in WEBHOOK_EVENTS:
            raise ValidationError(f"unknown event {name!r}: one of {known}", "events")
        if name not in events:
            events.append(name)
    return events


def create_subscription(
    session: Session, study: Study, url: Any, events: Any
) -> WebhookSubscription:
    """Subscribe `url` to the study's `events`; the new row carries its signing secret."""
    url = validate_url(url)
    names = parse_events(events)
    if len(active_subscriptions(session, study.id)) >= MAX_SUBSCRIPTIONS:
        raise ValidationError(
            f"study {study.id} has {MAX_SUBSCRIPTIONS} webhooks already: remove one first"
        )
    subscription = WebhookSubscription(
        study_id=study.id,
        url=url,
        events=names,
        secret=SECRET_PREFIX + secrets.token_urlsafe(32),
        active=True,
    )
    session.add(subscription)
    session.flush()
    return subscription


def active_subscriptions(session: Session, study_id: int) -> list[WebhookSubscription]:
    return list(
        session.scalars(
            select(WebhookSubscription)
            .where(WebhookSubscription.study_id == study_id, WebhookSubscription.active)
            .order_by(WebhookSubscription.id)
        ).all()
    )


def get_subscription(session: Session, study: Study, subscription_id: int) -> WebhookSubscription:
    subscription = session.get(WebhookSubscription, subscription_id)
    if subscription is None or subscription.study_id != study.id:
        raise NotFound(
            f"study {study.id} has no webhook {subscription_id}: list them with "
            f"GET /api/studies/{study.id}/webhooks"
        )
    return subscription


def remove_subscription(
    session: Session, study: Study, subscription_id: int
) -> WebhookSubscription:
    """Stop a subscription; its deliveries still waiting for a retry are given up."""
    subscription = get_subscription(session, study, subscription_id)
    subscription.active = False
    waiting = session.scalars(
        select(Delivery)
        .where(
            Delivery.subscription_id == subscription.id,
            Delivery.status == DeliveryStatus.PENDING,
        )
        .with_for_update()
    ).all()
    for delivery in waiting:
        delivery.status = DeliveryStatus.FAILED
        delivery.next_attempt_at = None
        delivery.last_error = "the webhook was removed"
    return subscription


def recent_deliveries(
    session: Session, subscription: WebhookSubscription, limit: int = 50
) -> list[Delivery]:
    return list(
        session.scalars(
            select(Delivery)
            .where(Delivery.subscription_id == subscription.id)
            .order_by(Delivery.id.desc())
            .limit(limit)
        ).all()
    )


def subscription_json(
    subscription: WebhookSubscription, with_secret: bool = False
) -> dict[str, Any]:
    """A subscription as the API and CLI show it; the secret only right after creation."""
    shown = {
        "id": subscription.id,
        "study_id": subscription.study_id,
        "url": subscription.url,
        "events": list(subscription.events),
        "active": subscription.active,
        "created_at": subscription.created_at.isoformat(),
    }
    if with_secret:
        shown["secret"] = subscription.secret
    return shown


# -- emission, from the queue jobs -------------------------------------------------------------
def _wanting(subscriptions: Iterable[WebhookSubscription], event: str) -> list[WebhookSubscription]:
    return [s for s in subscriptions if event in (s.events or [])]


def _emit(
    session: Session,
    subscriptions: list[WebhookSubscription],
    event: str,
    study_id: int,
    ref: str,
    data: dict[str, Any],
    happened_at: datetime | None = None,
) -> int:
    """One delivery of `event` about `ref` per subscription that has none yet."""
    # Subscriptions made after the fact do not get it (e.g. an old block, a response
    # stored a minute before the subscription).
    targets = [s for s in subscriptions if happened_at is None or happened_at >= s.created_at]
    if not targets:
        return 0
    sent = set(
        session.scalars(
            select(Delivery.subscription_id).where(
                Delivery.subscription_id.in_([s.id for s in targets]),
                Delivery.event == event,
                Delivery.ref == ref,
            )
        ).all()
    )
    payload = {"event": event, "study_id": study_id, "created_at": utcnow().isoformat(),
               "data": data}  # fmt: skip
    added = 0
    for subscription in targets:
        if subscription.id in sent:
            continue
        delivery = new_delivery(KIND, subscription.url, payload, {EVENT_HEADER: event}, ref,
                                subscription.secret)  # fmt: skip
        delivery.subscription_id = subscription.id
        delivery.event = event
        try:
            # The unique (subscription, event, ref) key settles a race between two jobs.
            with session.begin_nested():
                session.add(delivery)
                session.flush()
        except IntegrityError:
            continue
        added += 1
    return added


def after_response(session: Session, response_id: int, stored: bool = True) -> int:
    """Emit what a processed response brings: response.stored (when `stored`), item and
    study completion, and blocks by the QC rules. Returns the number of deliveries added."""
    response = session.get(Response, response_id)
    if response is None:
        return 0
    subscriptions = active_subscriptions(session, response.study_id)
    if not subscriptions:
        return 0
    item = response.item
    added = 0
    wanting = _wanting(subscriptions, RESPONSE_STORED)
    if stored and wanting:
        data = {
            "response_id": response.id,
            "item": item.external_id,
            "item_kind": str(item.kind),
            "worker_id": response.worker_id,
            "answer": response.answer,
            "created_at": response.created_at.isoformat(),
        }
        added += _emit(session, wanting, RESPONSE_STORED, response.study_id,
                       f"response:{response.id}", data, response.created_at)  # fmt: skip
    if response.source == ResponseSource.LIVE and item.kind == ItemKind.REAL:
        added += _completion(session, subscriptions, item)
    return added + _blocks(session, subscriptions, response.study_id, response.worker_id)


def after_block(session: Session, study_id: int, worker_id: int) -> int:
    """Emit worker.blocked for the worker's blocks in the study not yet delivered."""
    return _blocks(session, active_subscriptions(session, study_id), study_id, worker_id)


def _target(study: Study, item: Item) -> int:
    return item.target if item.target is not None else int(
        study.config.get("annotations_per_item", 1)
    )  # fmt: skip


def _live_count(study_id: int) -> Any:
    return (
        select(Response.item_id, func.count(Response.id).label("n"))
        .where(Response.study_id == study_id, Response.source == ResponseSource.LIVE)
        .group_by(Response.item_id)
        .subquery()
    )


def _completion(session: Session, subscriptions: list[WebhookSubscription], item: Item) -> int:
    if not _wanting(subscriptions, ITEM_COMPLETE) and not _wanting(subscriptions, STUDY_COMPLETE):
        return 0
    study = item.study
    target = _target(study, item)
    n = session.scalar(
        select(func.count(Response.id)).where(
            Response.item_id == item.id, Response.source == ResponseSource.LIVE
        )
    )
    if (n or 0) < target:
        return 0
    data = {"item": item.external_id, "item_id": item.id, "responses": n, "target": target}
    added = _emit(session, _wanting(subscriptions, ITEM_COMPLETE), ITEM_COMPLETE, study.id,
                  f"item:{item.id}", data)  # fmt: skip
    wanting = _wanting(subscriptions, STUDY_COMPLETE)
    if not wanting:
        return added
    counts = _live_count(study.id)
    default = int(study.config.get("annotations_per_item", 1))
    n_real, incomplete, responses = session.execute(
        select(
            func.count(Item.id),
            func.count(Item.id).filter(
                func.coalesce(counts.c.n, 0) < func.coalesce(Item.target, default)
            ),
            func.coalesce(func.sum(counts.c.n), 0),
        )
        .outerjoin(counts, counts.c.item_id == Item.id)
        .where(Item.study_id == study.id, Item.kind == ItemKind.REAL)
    ).one()
    if incomplete or _held(session, study.id):
        return added
    data = {"items": n_real, "responses": int(responses)}
    return added + _emit(session, wanting, STUDY_COMPLETE, study.id, f"study:{study.id}", data)


def _held(session: Session, study_id: int) -> int:
    """Items held back from workers until their Scale batch is finalized (their target is 0
    meanwhile, which would otherwise read as done)."""
    from crowd.storage.scale import ScaleBatch, ScaleTask

    return (
        session.scalar(
            select(func.count(ScaleTask.id))
            .join(ScaleBatch, ScaleBatch.id == ScaleTask.batch_id)
            .join(Item, Item.id == ScaleTask.item_id)
            .where(Item.study_id == study_id, ScaleBatch.finalized_at.is_(None))
        )
        or 0
    )


def _blocks(
    session: Session, subscriptions: list[WebhookSubscription], study_id: int, worker_id: int
) -> int:
    wanting = _wanting(subscriptions, WORKER_BLOCKED)
    if not wanting:
        return 0
    entries = session.scalars(
        select(AuditEntry)
        .where(
            AuditEntry.study_id == study_id,
            AuditEntry.worker_id == worker_id,
            AuditEntry.action.in_(BLOCK_ACTIONS),
        )
        .order_by(AuditEntry.id)
    ).all()
    if not entries:
        return 0
    worker = session.get(Worker, worker_id)
    added = 0
    for entry in entries:
        data = {
            "worker_id": worker_id,
            "worker": f"{worker.provider}:{worker.external_id}" if worker else None,
            "action": entry.action,
            "by": entry.actor,
            "reason": entry.reason,
            "at": entry.at.isoformat(),
        }
        added += _emit(session, wanting, WORKER_BLOCKED, study_id, f"audit:{entry.id}", data,
                       entry.at)  # fmt: skip
    return added


@on_event(outbox.RESPONSE_STORED, outbox.RESPONSE_EXPLAINED, order=AFTER_QC)
def emit_after_response(session: Session, event: Event) -> None:
    # After the QC refresh (order), so blocks its rules just made go out too.
    after_response(session, int(event.payload["response_id"]),
                   stored=event.topic == outbox.RESPONSE_STORED)  # fmt: skip


@on_event(outbox.WORKER_BLOCKED, order=AFTER_QC)
def emit_after_block(session: Session, event: Event) -> None:
    after_block(session, int(event.payload["study_id"]), int(event.payload["worker_id"]))
