"""Pages of the open-web game: pick a category, play, see your profile and the leaderboard."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template, request

from crowd.context import platform
from crowd.exceptions import NotFound
from crowd.studies.lifecycle import get_study
from crowd.web.common import current_worker_id, optional_worker_id
from crowd.web.contract import ANYONE, WORKER, operation
from crowd.web.schemas.game import Leaderboard, LeaderboardQuery, Profile
from crowd.work import game
from tasks import get_hit_type

bp = Blueprint("game", __name__)
TAGS = ("game",)


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
    with platform().db.session() as session:
        study = get_study(session, study_id)
        if "local" not in study.providers:
            raise NotFound(f"study {study_id} is not open to the public")
        hit = get_hit_type(study.hit_type)
        name = study.name
    return render_template(
        hit.template,
        study_id=study_id,
        study_name=name,
        category=_category(),
        joined=optional_worker_id() is not None,
        title=hit.title,
    )


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
