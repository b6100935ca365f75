"""The worker page as crowd platforms show it: MTurk's ExternalQuestion frame, Prolific's
study link. The platform's query parameters bind the visit to a worker and a platform
session; the page then works as the open-web page does, with the worker token in a header.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template, request
from sqlalchemy import select

from crowd.context import platform
from crowd.exceptions import NotFound
from crowd.platforms import sessions as platforms
from crowd.platforms.providers import PROVIDERS
from crowd.storage import Publication, Study
from crowd.web.game import worker_page_context
from crowd.work.counter import DEFAULT_ITEMS_PER_SESSION

bp = Blueprint("external", __name__)

LABELS = {"mturk": "Mechanical Turk", "prolific": "Prolific"}


@bp.get("/ext/<provider>/<int:study_id>")
def page(provider: str, study_id: int) -> Any:
    label = LABELS.get(provider, provider)
    # Worker-facing: the worker came from the platform and can only go back there.
    unavailable = f"This task is not available here. Please return it on {label}."
    if provider not in PROVIDERS:
        raise NotFound(unavailable)
    args = {key: value for key, value in request.args.items() if len(value) <= 500}
    with platform().db.session() as session:
        study = session.get(Study, study_id)
        if study is None:
            raise NotFound(unavailable)
        try:
            bound = platforms.bind_page(
                session, platform().settings, platform().signer, study, provider, args
            )
        except NotFound:
            raise NotFound(unavailable) from None
        latest = session.scalar(
            select(Publication.options)
            .where(Publication.study_id == study.id, Publication.provider == provider)
            .order_by(Publication.id.desc())
            .limit(1)
        )
        per_session = (latest or {}).get("items_per_session") or DEFAULT_ITEMS_PER_SESSION
        context = worker_page_context(
            session,
            study,
            bound.worker_id,
            category=None,
            joined=not bound.preview,
            external=True,
            preview=bound.preview,
            provider_label=label,
            items_per_session=per_session,
            worker_token=bound.token,
        )
    response = render_template(context.pop("template"), **context)
    return (
        response,
        200,
        {
            # The page lives in MTurk's frame: let the platforms frame it, nobody else.
            "Content-Security-Policy": "frame-ancestors 'self' https://*.mturk.com "
            "https://*.prolific.com https://*.prolific.co",
            "Cache-Control": "no-store",
        },
    )
