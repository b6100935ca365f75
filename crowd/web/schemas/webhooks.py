"""Webhook subscriptions and their deliveries."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from crowd.web.contract import Body, Reply

Event = Literal["response.stored", "item.complete", "study.complete", "worker.blocked"]


class NewWebhook(Body):
    """Each event is POSTed as JSON {event, study_id, created_at, data} with the headers
    X-Crowd-Event, X-Crowd-Delivery and X-Crowd-Signature: t=<unix time>,v1=<hex
    HMAC-SHA256(secret, '<t>.<body>')>; non-2xx answers are retried with backoff for 24 h."""

    url: str = Field(max_length=2000, pattern=r"^[hH][tT][tT][pP][sS]?://",
                     description="an http(s) URL on a public address")
    events: list[Event] = Field(min_length=1, max_length=10)


class Webhook(Reply):
    """A webhook subscription"""

    id: int
    study_id: int
    url: str
    events: list[str]
    active: bool
    created_at: str


class NewWebhookReply(Webhook):
    """The subscription with its signing secret, shown only once"""

    secret: str


class Webhooks(Reply):
    """The study's active webhooks"""

    webhooks: list[Webhook]


class Delivery(Reply):
    id: int
    kind: str
    event: str
    ref: str | None
    url: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: str | None
    next_attempt_at: str | None
    delivered_at: str | None


class DeliveriesQuery(Body):
    limit: int = Field(default=50, ge=1, le=500, description="how many, newest first")


class Deliveries(Reply):
    """A webhook and its latest deliveries"""

    webhook: Webhook
    deliveries: list[Delivery]

