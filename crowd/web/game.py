"""Pages of the open-web game: pick a category, play, see your profile and the leaderboard."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template, request
from sqlalchemy.orm import Session

from crowd.context import platform
from crowd.exceptions import NotFound, StudyNotOpen
from crowd.storage import Study, StudyStatus
from crowd.web.common import current_worker_id, optional_worker_id
from crowd.web.contract import ANYONE, WORKER, operation
from crowd.web.schemas.game import Leaderboard, LeaderboardQuery, Profile
from crowd.work import game
from tasks import get_hit_type

bp = Blueprint("game", __name__)
TAGS = ("game",)
# Worker-facing words: a worker has no API and no study list of their own.
NO_SUCH_STUDY = "We could not find this study. It may have ended: see the open studies."
NOT_OPEN = {
    StudyStatus.PAUSED: "This study is paused for now. Come back later, or pick another study.",
    StudyStatus.COMPLETED: "This study has ended. Thank you for your interest!",
}


def worker_page_context(
    session: Session, study: Study, worker_id: int | None, **page: Any
) -> dict[str, Any]:
    """What a HIT type's worker template needs about the study: its public page (title,
    description, consent, instructions, examples; never the internal name) and whether the
    worker has begun (their intro is then behind them). `page` adds the template's other
    values: category, joined, external, preview, provider_label, items_per_session,
    worker_token and api_base (where the page's work calls go; default /api/work).
    """
    hit = get_hit_type(study.hit_type)
    public = hit.public_page(study.config)
    started = worker_id is not None and game.has_started(session, study.id, worker_id)
    return {
        "template": hit.template,
        "study_id": study.id,
        "hit_type": study.hit_type,
        "page": public,
        "title": public["title"],
        "worker_id": worker_id,
        "started": started,
        **page,
    }


def _category() -> str | None:
    category = request.args.get("category") or None
    if category is not None and len(category) > 100:
        raise NotFound("unknown category")
    return category


@bp.get("/")
@bp.get("/play")
def home() -> Any:
    with platform().db.session() as session:
        studies = game.open_studies(session)
    return render_template("play.html", studies=studies, joined=optional_worker_id() is not None)


@bp.get("/play/<int:study_id>")
def play(study_id: int) -> Any:
    worker_id = optional_worker_id()
    with platform().db.session() as session:
        study = session.get(Study, study_id)
        if study is None or "local" not in study.providers or study.status == StudyStatus.DRAFT:
            raise NotFound(NO_SUCH_STUDY)
        if study.status in NOT_OPEN:
            raise StudyNotOpen(NOT_OPEN[study.status])
        context = worker_page_context(
            session, study, worker_id, category=_category(), joined=worker_id is not None
        )
    return render_template(context.pop("template"), **context)


@bp.get("/play/profile")
def profile_page() -> Any:
    worker_id = optional_worker_id()
    data = None
    if worker_id is not None:
        with platform().db.session() as session:
            data = game.profile(session, worker_id)
    return render_template("profile.html", profile=data)


@bp.get("/play/leaderboard")
def leaderboard_page() -> Any:
    category = _category()
    with platform().db.session() as session:
        rows = game.leaderboard(session, category)
        categories = game.categories(session)
    return render_template("leaderboard.html", rows=rows, category=category, categories=categories)


@bp.get("/api/play/profile")
@operation("Your scores, overall and per category", responses={200: Profile}, auth=WORKER,
           tags=TAGS)  # fmt: skip
def profile_json() -> Any:
    worker_id = current_worker_id()
    with platform().db.read_session() as session:
        return game.profile(session, worker_id)


@bp.get("/api/play/leaderboard")
@operation("The best players, by points", query=LeaderboardQuery, responses={200: Leaderboard},
           auth=ANYONE, tags=TAGS)  # fmt: skip
def leaderboard_json(query: LeaderboardQuery) -> Any:
    category = query.category or None
    with platform().db.read_session() as session:
        return {"category": category, "leaderboard": game.leaderboard(session, category)}
