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
from crowd.storage import Publication
from crowd.studies.lifecycle import get_study
from crowd.work.assignments import DEFAULT_ITEMS_PER_SESSION
from tasks import get_hit_type

bp = Blueprint("external", __name__)

LABELS = {"mturk": "Mechanical Turk", "prolific": "Prolific"}


@bp.get("/ext/<provider>/<int:study_id>")
def page(provider: str, study_id: int) -> Any:
    if provider not in PROVIDERS:
        raise NotFound(f"no provider {provider!r}")
    args = {key: value for key, value in request.args.items() if len(value) <= 500}
    with platform().db.session() as session:
        study = get_study(session, study_id)
        bound = platforms.bind_page(
            session, platform().settings, platform().signer, study, provider, args
        )
        hit = get_hit_type(study.hit_type)
        name = study.name
        latest = session.scalar(
            select(Publication.options)
            .where(Publication.study_id == study.id, Publication.provider == provider)
            .order_by(Publication.id.desc())
            .limit(1)
        )
        per_session = (latest or {}).get("items_per_session") or DEFAULT_ITEMS_PER_SESSION
    response = render_template(
        hit.template,
        study_id=study_id,
        study_name=name,
        category=None,
        joined=not bound.preview,
        title=hit.title,
        external=True,
        preview=bound.preview,
        provider_label=LABELS.get(provider, provider),
        items_per_session=per_session,
        worker_token=bound.token,
    )
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
