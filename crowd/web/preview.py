"""The experimenter's preview of a study's worker page (crowd.work.preview): the worker's own
template and script in a frame, their calls answered by this blueprint, nothing stored.

The calls mirror the worker API's paths under /dashboard/preview (task.js takes the base from
the page), so the page cannot tell a preview from the real thing. They are JSON posts
authenticated by the experimenter's session cookie; crowd.web.csrf refuses them from another
origin, and they store nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, render_template, session

from crowd.context import platform
from crowd.exceptions import ValidationError
from crowd.storage import Study
from crowd.studies.lifecycle import get_study
from crowd.web.common import json_body
from crowd.web.dashboard import LoginNeeded, signed_in
from crowd.web.dashboard import bp as dashboard
from crowd.web.game import worker_page_context
from crowd.work import preview as flow
from tasks import get_hit_type

bp = Blueprint("preview", __name__, url_prefix="/dashboard/preview")
STATE_KEY = "preview"


@bp.errorhandler(LoginNeeded)
def _login_needed(_error: LoginNeeded) -> Any:
    return {"error": "log in to the dashboard again to preview", "type": "LoginNeeded"}, 401


def _state(study_id: int) -> dict[str, Any] | None:
    kept = session.get(STATE_KEY)
    if isinstance(kept, dict) and kept.get("study") == study_id:
        return kept
    return None


def _remember(study_id: int, state: dict[str, Any]) -> None:
    session[STATE_KEY] = {**state, "study": study_id}


@dashboard.get("/studies/<int:study_id>/preview")
def page(study_id: int) -> Any:
    """The preview's frame at a desktop's width and at a phone's, with a way to start over."""
    with platform().db.read_session() as db:
        study = get_study(db, study_id, signed_in(db))
        return render_template("preview.html", study=study)


@dashboard.get("/studies/<int:study_id>/preview/page")
def worker_page(study_id: int) -> Any:
    """The worker's page itself, as the frame shows it; every visit starts over."""
    with platform().db.read_session() as db:
        study = get_study(db, study_id, signed_in(db))
        session.pop(STATE_KEY, None)
        if get_hit_type(study.hit_type).live is not None:
            raise ValidationError(
                f"{study.hit_type} is played live between people: open it with a second "
                "browser once published to try it"
            )
        # As a worker who has not begun: the intro (instructions, consent) comes first.
        context = worker_page_context(db, study, None, joined=True, api_base=bp.url_prefix)
        return render_template(context["template"], **context)


def _run(
    study_id: int,
    call: Callable[[Any, Study, dict[str, Any] | None], tuple[dict[str, Any], dict[str, Any]]],
) -> Any:
    with platform().db.read_session() as db:
        study = get_study(db, study_id, signed_in(db))
        view, state = call(db, study, _state(study_id))
    _remember(study_id, state)
    return view


@bp.post("/studies/<int:study_id>/next")
def next_view(study_id: int) -> Any:
    return _run(study_id, flow.next_view)


# In the preview the study's id stands for the assignment's (crowd.work.preview).
@bp.post("/assignments/<int:study_id>/<any(step, explanation, return):action>")
def assignment(study_id: int, action: str) -> Any:
    if action == "return":  # the worker gives the item back: the preview moves on
        return _run(study_id, flow.next_view)
    body = json_body()
    act = flow.step_view if action == "step" else flow.explain_view
    return _run(study_id, lambda db, study, state: act(db, study, state, body))
