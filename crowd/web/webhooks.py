"""Experimenters' webhooks over the REST API (Authorization: Bearer <key>, own studies only)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from crowd.context import platform
from crowd.delivery import webhooks
from crowd.delivery.signed import delivery_json
from crowd.studies import lifecycle as studies
from crowd.web.common import current_experimenter
from crowd.web.contract import EXPERIMENTER, operation
from crowd.web.schemas.webhooks import (
    Deliveries,
    DeliveriesQuery,
    NewWebhook,
    NewWebhookReply,
    Webhook,
    Webhooks,
)

bp = Blueprint("webhooks", __name__, url_prefix="/api/studies/<int:study_id>/webhooks")
TAGS = ("webhooks",)


@bp.post("")
@operation("Subscribe a URL to the study's events", body=NewWebhook,
           responses={201: NewWebhookReply}, auth=EXPERIMENTER, tags=TAGS)  # fmt: skip
def create(study_id: int, body: NewWebhook) -> Any:
    """Subscribe a URL to events; the answer carries the signing secret, shown only here."""
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        subscription = webhooks.create_subscription(session, study, body.url, list(body.events))
        return webhooks.subscription_json(subscription, with_secret=True), 201


@bp.get("")
@operation("List the study's webhooks", responses={200: Webhooks}, auth=EXPERIMENTER, tags=TAGS)
def list_all(study_id: int) -> Any:
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        rows = webhooks.active_subscriptions(session, study.id)
        return {"webhooks": [webhooks.subscription_json(row) for row in rows]}


@bp.delete("/<int:webhook_id>")
@operation("Remove a webhook (its pending deliveries are dropped)", responses={200: Webhook},
           auth=EXPERIMENTER, tags=TAGS)  # fmt: skip
def remove(study_id: int, webhook_id: int) -> Any:
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        subscription = webhooks.remove_subscription(session, study, webhook_id)
        return webhooks.subscription_json(subscription)


@bp.get("/<int:webhook_id>/deliveries")
@operation("A webhook's latest deliveries", query=DeliveriesQuery,
           responses={200: Deliveries}, auth=EXPERIMENTER, tags=TAGS)  # fmt: skip
def deliveries(study_id: int, webhook_id: int, query: DeliveriesQuery) -> Any:
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        subscription = webhooks.get_subscription(session, study, webhook_id)
        rows = webhooks.recent_deliveries(session, subscription, query.limit)
        return {
            "webhook": webhooks.subscription_json(subscription),
            "deliveries": [delivery_json(row) for row in rows],
        }
