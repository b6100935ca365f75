"""The experimenter's web app: log in with an API key; list, create and archive studies;
manage API keys. A study's own page (items, settings, preview, publishing, progress,
reports, exports, webhooks) is crowd.web.dashboard_study.

Server-rendered pages whose forms carry a CSRF token (crowd.web.csrf); a small script on the
study page polls its progress. Every action goes through the same functions as the API and
the CLI, so each refuses what they refuse, with the same messages.
"""

from __future__ import annotations

import json
from typing import Any

from flask import (
    Blueprint,
    Response,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd import accounts
from crowd.accounts import authenticate
from crowd.context import platform
from crowd.exceptions import AuthenticationError, CrowdError, NotFound, ValidationError
from crowd.storage import ApiKey, Experimenter, Report
from crowd.studies import lifecycle as studies
from crowd.web import csrf
from tasks import HIT_TYPES, get_hit_type, load_builtin

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")
# Every form carries its token (crowd.web.csrf), the login and logout forms too: another
# site cannot log a visitor in to its own account or out of theirs.
csrf.protect_forms(bp)


class LoginNeeded(Exception):
    """The page needs an experimenter's session: the login page, then back."""


@bp.errorhandler(LoginNeeded)
def _to_login(_error: LoginNeeded) -> Any:
    return redirect(url_for("dashboard.login", next=request.full_path.rstrip("?")))


def signed_in(db: Session) -> Experimenter:
    """The experimenter logged in to this browser session, or LoginNeeded."""
    experimenter_id = session.get("experimenter_id")
    found = db.get(Experimenter, experimenter_id) if isinstance(experimenter_id, int) else None
    if found is None:
        session.clear()
        raise LoginNeeded
    return found


def _own_path(target: str | None) -> str:
    """Where to go after logging in: a dashboard path of ours, never another site."""
    if target and target.startswith("/dashboard/") and not target.startswith("//"):
        return target
    return url_for("dashboard.index")


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    error = None
    if request.method == "POST":
        key = request.form.get("api_key", "").strip()
        try:
            with platform().db.session() as db:
                experimenter = authenticate(db, key)
                session.clear()
                session["experimenter_id"] = experimenter.id
            return redirect(_own_path(request.args.get("next")))
        except AuthenticationError as failure:
            error = str(failure)
    return render_template("login.html", error=error), 401 if error else 200


@bp.post("/logout")
def logout() -> Any:
    session.clear()
    return redirect(url_for("dashboard.login"))


@bp.get("/")
def index() -> Any:
    archived = request.args.get("archived") == "1"
    with platform().db.read_session() as db:
        experimenter = signed_in(db)
        rows = [
            studies.progress(db, study)
            for study in studies.studies_of(db, experimenter, archived=archived)
        ]
        return render_template(
            "dashboard.html", name=experimenter.name, rows=rows, archived=archived
        )


def hit_types() -> list[tuple[str, str]]:
    """(name, title) of every HIT type a study can be created with."""
    load_builtin()
    return [(name, get_hit_type(name).title) for name in HIT_TYPES]


def _config_from_form(form: Any) -> dict[str, Any]:
    """The study config the new-study form describes: its JSON, then the fields shown."""
    text = form.get("config", "").strip() or "{}"
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValidationError(
            f"not valid JSON ({error.msg}, line {error.lineno})", "config"
        ) from None
    if not isinstance(config, dict):
        raise ValidationError("must be a JSON object of settings", "config")
    per_item = form.get("annotations_per_item", "").strip()
    if per_item:
        if not per_item.isdigit():
            raise ValidationError("must be a whole number", "annotations_per_item")
        config["annotations_per_item"] = int(per_item)
    page = {k: form.get(k, "").strip() for k in ("title", "description") if form.get(k, "").strip()}
    if page:
        config["worker_page"] = {**config.get("worker_page", {}), **page}
    return config


@bp.route("/studies/new", methods=["GET", "POST"])
def new_study() -> Any:
    error = None
    if request.method == "POST":
        try:
            with platform().db.session() as db:
                experimenter = signed_in(db)
                study = studies.create_study(
                    db,
                    experimenter,
                    request.form.get("name", ""),
                    request.form.get("hit_type", ""),
                    _config_from_form(request.form),
                )
                study_id = study.id
            flash(f"Study {study_id} created. Upload its items next.", "ok")
            return redirect(url_for("dashboard.study", study_id=study_id))
        except CrowdError as failure:
            error = failure
    with platform().db.read_session() as db:
        signed_in(db)
    return render_template(
        "study_new.html", hit_types=hit_types(), form=request.form, error=error
    ), (422 if error else 200)


def _keys_page(db: Session, experimenter: Experimenter, new_key: str | None = None) -> str:
    rows = db.scalars(
        select(ApiKey).where(ApiKey.experimenter_id == experimenter.id).order_by(ApiKey.id)
    )
    return render_template("keys.html", keys=list(rows), new_key=new_key)


@bp.get("/keys")
def keys() -> Any:
    with platform().db.read_session() as db:
        return _keys_page(db, signed_in(db))


@bp.post("/keys")
def create_key() -> Any:
    with platform().db.session() as db:
        experimenter = signed_in(db)
        # Shown on this page only: the database keeps its hash.
        token = accounts.create_api_key(db, experimenter.name)
        return _keys_page(db, experimenter, new_key=token), 201


@bp.post("/keys/<int:key_id>/revoke")
def revoke_key(key_id: int) -> Any:
    with platform().db.session() as db:
        experimenter = signed_in(db)
        key = db.get(ApiKey, key_id)
        if key is None or key.experimenter_id != experimenter.id:
            raise NotFound(f"no API key {key_id} of yours")
        accounts.revoke_api_key(db, key.prefix)
        prefix = key.prefix
    flash(f"Key {prefix} revoked: requests with it are refused from now on.", "ok")
    return redirect(url_for("dashboard.keys"))


@bp.get("/studies/<int:study_id>/report")
def report(study_id: int) -> Any:
    with platform().db.read_session() as db:
        studies.get_study(db, study_id, signed_in(db))
        row = db.scalar(select(Report).where(Report.study_id == study_id))
        if row is None:
            raise NotFound("no report yet: it appears once a worker has processed responses")
        return Response(row.html, mimetype="text/html")
