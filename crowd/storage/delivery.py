"""Outgoing HTTP deliveries (webhooks, Scale task callbacks) and experimenters' webhooks.

A delivery row is its own outbox: it is written in the caller's transaction, its first
attempt is enqueued after the commit, and a sweep of due rows catches whatever Redis never
took, so a Redis outage delays a delivery but never loses it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from crowd.storage.base import Base, utcnow


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    # Gave up: every attempt within the retry window failed.
    FAILED = "failed"


class WebhookSubscription(Base):
    """An experimenter's endpoint for events of one study."""

    __tablename__ = "webhook_subscriptions"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    url: Mapped[str] = mapped_column(String(2000))
    events: Mapped[list[Any]] = mapped_column(default=list)
    # A signing secret, kept as given because every delivery is signed with it (HMAC);
    # it authenticates us to the receiver, it is not a login to anything here.
    secret: Mapped[str] = mapped_column(String(200))
    active: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Delivery(Base):
    """One JSON POST to one URL, retried with backoff until it succeeds or we give up."""

    __tablename__ = "deliveries"
    __table_args__ = (
        # An event reaches a subscription at most once, however often its job runs. Rows
        # without a subscription (e.g. Scale callbacks) have NULLs here and are not limited.
        UniqueConstraint("subscription_id", "event", "ref"),
        Index("ix_deliveries_due", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # What the delivery is for ("webhook", "scale.callback"): picks the outcome hook.
    kind: Mapped[str] = mapped_column(String(50))
    url: Mapped[str] = mapped_column(String(2000))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    headers: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Free text naming what the delivery is about, e.g. "task:abc" or "response:17".
    ref: Mapped[str | None] = mapped_column(String(200), default=None, index=True)
    # Signs each attempt (X-Crowd-Signature) when set.
    secret: Mapped[str | None] = mapped_column(String(200), default=None)
    status: Mapped[DeliveryStatus] = mapped_column(String(20), default=DeliveryStatus.PENDING)
    attempts: Mapped[int] = mapped_column(default=0)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    last_status_code: Mapped[int | None] = mapped_column(default=None)
    # When the next attempt is due; NULL once the delivery succeeded or was given up.
    next_attempt_at: Mapped[datetime | None] = mapped_column(default=utcnow)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(default=None)
    # Webhook deliveries only: whose and which event.
    subscription_id: Mapped[int | None] = mapped_column(
        ForeignKey("webhook_subscriptions.id"), default=None
    )
    event: Mapped[str | None] = mapped_column(String(100), default=None)
