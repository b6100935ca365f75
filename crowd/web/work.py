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
from crowd.web.common import WORKER_COOKIE, current_experimenter, current_worker, current_worker_id
from crowd.web.contract import ANYONE, EXPERIMENTER, WORKER, operation
from crowd.web.schemas.work import (
    AssignmentView,
    ExplanationBody,
    JoinBody,
    Joined,
    NextBody,
    NextReply,
    StepBody,
    WorkerReply,
)
from crowd.work import assignments as work

bp = Blueprint("work", __name__, url_prefix="/api/work")
TAGS = ("work",)
COOKIE_SECONDS = 30 * 24 * 3600


@bp.post("/join")
@operation("Become a worker", body=JoinBody, body_required=False, responses={201: Joined},
           auth=(ANYONE, EXPERIMENTER), tags=TAGS,
           description="Open-web players (provider local) join freely; workers of the other "
           "providers are registered by an experimenter's key with their platform id.")  # fmt: skip
def join(body: JoinBody) -> Any:
    provider = PROVIDERS.get(body.provider)
    with platform().db.session() as session:
        if provider.open_signup:
            external_id = secrets.token_hex(12)
        else:
            current_experimenter(session)
            if body.external_id is None:
                raise ValidationError("needed to join a non-public provider", "external_id")
            external_id = body.external_id
        worker = work.get_or_create_worker(
            session, provider.name, external_id, body.name or f"player-{external_id[:6]}"
        )
        token = platform().signer.sign(worker.id)
        joined = Joined(worker_id=worker.id, name=worker.display_name, provider=worker.provider,
                        worker_token=token)  # fmt: skip
    # The cookie lets the open-web pages work without handling the token themselves.
    response = make_response(jsonify(joined.model_dump(mode="json")), 201)
    response.set_cookie(WORKER_COOKIE, token, httponly=True, samesite="Lax", max_age=COOKIE_SECONDS)
    return response


@bp.get("/me")
@operation("The worker the token names", responses={200: WorkerReply}, auth=WORKER, tags=TAGS)
def me() -> Any:
    from crowd.storage import Worker

    worker_id = current_worker_id()
    with platform().db.session() as session:
        worker = session.get(Worker, worker_id)
        if worker is None:
            raise ValidationError("unknown worker: join again")
        return {"worker_id": worker.id, "name": worker.display_name, "provider": worker.provider}


@bp.post("/studies/<int:study_id>/next")
@operation("The worker's open assignment in the study, or a new one", body=NextBody,
           body_required=False, responses={200: NextReply}, auth=WORKER, errors=(409,),
           tags=TAGS)  # fmt: skip
def next_item(study_id: int, body: NextBody) -> Any:
    worker_id, session_id = current_worker()
    with platform().db.session() as session:
        study = get_study(session, study_id)
        on_platform = platforms.load_session(session, session_id, worker_id) if session_id else None
        try:
            served = work.next_assignment(
                session, study, worker_id, body.category or None, on_platform
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
        # "Item i of n": counted here, where the category the worker plays is known.
        view = work.assignment_view(session, served.assignment)
        return {**view, **served.counter(session)}


@bp.get("/assignments/<int:assignment_id>")
@operation("One of the worker's assignments", responses={200: AssignmentView}, auth=WORKER,
           tags=TAGS)  # fmt: skip
def show(assignment_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        assignment = work.load_assignment(session, assignment_id, worker_id)
        return work.assignment_view(session, assignment)


@bp.post("/assignments/<int:assignment_id>/step")
@operation("Take one step of the task (the last one stores the answer)", body=StepBody,
           responses={200: AssignmentView}, auth=WORKER, errors=(409,), tags=TAGS)  # fmt: skip
def step(assignment_id: int, body: StepBody) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        assignment = work.act(session, assignment_id, worker_id, body.action())
        session.flush()
        return work.assignment_view(session, assignment)


@bp.post("/assignments/<int:assignment_id>/explanation")
@operation("Explain the stored answer (when the task asks for it)", body=ExplanationBody,
           responses={200: AssignmentView}, auth=WORKER, errors=(409,), tags=TAGS)  # fmt: skip
def explanation(assignment_id: int, body: ExplanationBody) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        assignment = work.explain(session, assignment_id, worker_id, body.action())
        session.flush()
        return work.assignment_view(session, assignment)


@bp.post("/assignments/<int:assignment_id>/return")
@operation("Give an open assignment back (its item goes to others)",
           responses={200: AssignmentView}, auth=WORKER, errors=(409,), tags=TAGS)  # fmt: skip
def give_back(assignment_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        assignment = work.release(session, assignment_id, worker_id)
        return work.assignment_view(session, assignment)
