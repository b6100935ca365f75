"""The worker's API: join, get the next item, step through it, explain, see the reveal."""

from __future__ import annotations

import secrets
from typing import Any

from flask import Blueprint, jsonify, make_response

from crowd.context import platform
from crowd.exceptions import NoWorkLeft, PermissionDenied, StudyNotOpen, ValidationError
from crowd.platforms import sessions as platforms
from crowd.platforms.providers import PROVIDERS
from crowd.studies.lifecycle import get_study
from crowd.web.common import (
    WORKER_COOKIE,
    current_experimenter,
    current_worker,
    current_worker_id,
    json_body,
)
from crowd.work import assignments as work

bp = Blueprint("work", __name__, url_prefix="/api/work")

MAX_NAME = 40


def _clean_name(name: Any) -> str | None:
    if name is None or name == "":
        return None
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_NAME:
        raise ValidationError(f"a player name is 1 to {MAX_NAME} characters", "name")
    cleaned = name.strip()
    if not all(ch.isalnum() or ch in " _-." for ch in cleaned):
        raise ValidationError("use letters, digits, spaces, '_', '-' or '.' in names", "name")
    return cleaned


@bp.post("/join")
def join() -> Any:
    """Become a worker. Open-web players join freely; others need an experimenter's key."""
    body = json_body()
    provider_name = body.get("provider", "local")
    if not isinstance(provider_name, str):
        raise ValidationError("must be a provider name", "provider")
    provider = PROVIDERS.get(provider_name)
    name = _clean_name(body.get("name"))
    with platform().db.session() as session:
        if provider.open_signup:
            external_id = secrets.token_hex(12)
        else:
            current_experimenter(session)
            given = body.get("external_id")
            if not isinstance(given, str) or not given:
                raise ValidationError("needed to join a non-public provider", "external_id")
            external_id = given
        worker = work.get_or_create_worker(
            session, provider.name, external_id, name or f"player-{external_id[:6]}"
        )
        token = platform().signer.sign(worker.id)
        payload = {
            "worker_id": worker.id,
            "name": worker.display_name,
            "provider": worker.provider,
            "worker_token": token,
        }
    response = make_response(jsonify(payload), 201)
    response.set_cookie(WORKER_COOKIE, token, httponly=True, samesite="Lax", max_age=30 * 24 * 3600)
    return response


@bp.get("/me")
def me() -> Any:
    from crowd.storage import Worker

    worker_id = current_worker_id()
    with platform().db.session() as session:
        worker = session.get(Worker, worker_id)
        if worker is None:
            raise ValidationError("unknown worker: join again")
        return {"worker_id": worker.id, "name": worker.display_name, "provider": worker.provider}


@bp.post("/studies/<int:study_id>/next")
def next_item(study_id: int) -> Any:
    worker_id, session_id = current_worker()
    body = json_body()
    category = body.get("category")
    if category is not None and not isinstance(category, str):
        raise ValidationError("must be a category name", "category")
    with platform().db.session() as session:
        study = get_study(session, study_id)
        on_platform = platforms.load_session(session, session_id, worker_id) if session_id else None
        try:
            assignment = work.next_assignment(
                session, study, worker_id, category or None, on_platform
            )
        except (NoWorkLeft, PermissionDenied, StudyNotOpen) as done:
            if on_platform is None and not isinstance(done, NoWorkLeft):
                raise
            # A platform worker whom we stop (QC, a block, a closed study) can still hand in
            # the work already stored, and be paid or judged for it on the platform.
            view: dict[str, Any] = {"done": True, "message": str(done)}
            if on_platform is not None:
                handover = platforms.completion(
                    session, platform().settings, platform().signer, on_platform
                )
                if handover is None:
                    view["message"] += " (no answer was stored: return the task on the platform)"
                else:
                    view["completion"] = handover
            return view
        return work.assignment_view(session, assignment)


@bp.get("/assignments/<int:assignment_id>")
def show(assignment_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        assignment = work.load_assignment(session, assignment_id, worker_id)
        return work.assignment_view(session, assignment)


@bp.post("/assignments/<int:assignment_id>/step")
def step(assignment_id: int) -> Any:
    worker_id = current_worker_id()
    body = json_body()
    with platform().db.session() as session:
        assignment = work.act(session, assignment_id, worker_id, body)
        session.flush()
        return work.assignment_view(session, assignment)


@bp.post("/assignments/<int:assignment_id>/explanation")
def explanation(assignment_id: int) -> Any:
    worker_id = current_worker_id()
    body = json_body()
    with platform().db.session() as session:
        assignment = work.explain(session, assignment_id, worker_id, body)
        session.flush()
        return work.assignment_view(session, assignment)


@bp.post("/assignments/<int:assignment_id>/return")
def give_back(assignment_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        assignment = work.release(session, assignment_id, worker_id)
        return work.assignment_view(session, assignment)
