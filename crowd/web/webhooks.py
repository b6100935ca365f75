"""Experimenters' webhooks over the REST API (Authorization: Bearer <key>, own studies only)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from crowd.context import platform
from crowd.delivery import webhooks
from crowd.delivery.signed import delivery_json
from crowd.exceptions import ValidationError
from crowd.studies import lifecycle as studies
from crowd.web.common import current_experimenter, json_body

bp = Blueprint("webhooks", __name__, url_prefix="/api/studies/<int:study_id>/webhooks")


@bp.post("")
def create(study_id: int) -> Any:
    """Subscribe a URL to events; the answer carries the signing secret, shown only here."""
    body = json_body()
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        subscription = webhooks.create_subscription(
            session, study, body.get("url"), body.get("events")
        )
        return webhooks.subscription_json(subscription, with_secret=True), 201


@bp.get("")
def list_all(study_id: int) -> Any:
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        rows = webhooks.active_subscriptions(session, study.id)
        return {"webhooks": [webhooks.subscription_json(row) for row in rows]}


@bp.delete("/<int:webhook_id>")
def remove(study_id: int, webhook_id: int) -> Any:
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        subscription = webhooks.remove_subscription(session, study, webhook_id)
        return webhooks.subscription_json(subscription)


@bp.get("/<int:webhook_id>/deliveries")
def deliveries(study_id: int, webhook_id: int) -> Any:
    limit = request.args.get("limit", default=50, type=int)
    if not 1 <= limit <= 500:
        raise ValidationError("must be from 1 to 500", "limit")
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        subscription = webhooks.get_subscription(session, study, webhook_id)
        rows = webhooks.recent_deliveries(session, subscription, limit)
        return {
            "webhook": webhooks.subscription_json(subscription),
            "deliveries": [delivery_json(row) for row in rows],
        }
