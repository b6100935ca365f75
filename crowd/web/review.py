"""The reviewer UI: log in (experimenter or reviewer), see workers with their QC evidence,
act on them one by one or in bulk by rule, read the audit log.

Forms post with a per-session CSRF token (crowd.web.csrf); the session cookie is HttpOnly and
SameSite=Lax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import (
    Blueprint,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd import review
from crowd.accounts import check_login
from crowd.context import platform
from crowd.exceptions import AuthenticationError, CrowdError, NotFound
from crowd.storage import Experimenter, Role, Study, User
from crowd.studies import lifecycle as studies
from crowd.web import csrf

bp = Blueprint("review", __name__, url_prefix="/review")
# Every post, the login and logout included, carries its form's token (crowd.web.csrf).
csrf.protect_forms(bp)


def _who(db: Session) -> tuple[review.Reviewer, int] | None:
    """The logged-in person and the experimenter whose studies they see."""
    user_id = session.get("user_id")
    if isinstance(user_id, int):
        user = db.get(User, user_id)
        if user is not None:
            return review.Reviewer(user.name, Role(user.role)), user.experimenter_id
    # An experimenter logged in to the dashboard with an API key reviews their own studies.
    experimenter_id = session.get("experimenter_id")
    if isinstance(experimenter_id, int):
        experimenter = db.get(Experimenter, experimenter_id)
        if experimenter is not None:
            return review.Reviewer(experimenter.name, Role.EXPERIMENTER), experimenter.id
    return None


def _study(db: Session, study_id: int, experimenter_id: int) -> Study:
    experimenter = db.get(Experimenter, experimenter_id)
    if experimenter is None:  # get_study(…, None) would skip the ownership check
        raise NotFound(f"no study {study_id}")
    return studies.get_study(db, study_id, experimenter)


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    error = None
    if request.method == "POST":
        try:
            with platform().db.session() as db:
                user = check_login(
                    db, request.form.get("name", ""), request.form.get("password", "")
                )
                session.clear()
                session["user_id"] = user.id
            return redirect(url_for("review.index"))
        except AuthenticationError as failure:
            error = str(failure)
    return render_template("review_login.html", error=error), 401 if error else 200


@bp.post("/logout")
def logout() -> Any:
    session.clear()
    return redirect(url_for("review.login"))


@bp.get("/")
def index() -> Any:
    with platform().db.read_session() as db:
        who = _who(db)
        if who is None:
            return redirect(url_for("review.login"))
        reviewer, experimenter_id = who
        rows = [
            studies.progress(db, study)
            for study in db.scalars(
                select(Study).where(Study.experimenter_id == experimenter_id).order_by(Study.id)
            )
        ]
    return render_template("review_index.html", reviewer=reviewer, rows=rows)


@bp.get("/studies/<int:study_id>")
def study_page(study_id: int) -> Any:
    sort = request.args.get("sort", "worker")
    with platform().db.read_session() as db:
        who = _who(db)
        if who is None:
            return redirect(url_for("review.login"))
        reviewer, experimenter_id = who
        study = _study(db, study_id, experimenter_id)
        table = review.worker_table(db, study, sort)
        rules = sorted({rule for row in table for rule in row["rule_hits"]})
        name = study.name
    return render_template(
        "review_study.html",
        reviewer=reviewer,
        study_id=study_id,
        study_name=name,
        table=table,
        sort=sort,
        sort_keys=review.SORT_KEYS,
        rules=rules,
        actions=sorted(review.ALLOWED[reviewer.role]),
    )


@bp.get("/studies/<int:study_id>/workers/<int:worker_id>")
def worker_page(study_id: int, worker_id: int) -> Any:
    with platform().db.read_session() as db:
        who = _who(db)
        if who is None:
            return redirect(url_for("review.login"))
        reviewer, experimenter_id = who
        study = _study(db, study_id, experimenter_id)
        history = review.worker_history(db, study, worker_id)
    return render_template(
        "review_worker.html",
        reviewer=reviewer,
        study_id=study_id,
        history=history,
        actions=sorted(review.ALLOWED[reviewer.role]),
    )


def _post_action(study_id: int, do: Callable[[Session, Study, review.Reviewer], str]) -> bool:
    """Run one form action as the logged-in person; False when nobody is logged in."""
    try:
        with platform().db.session() as db:
            who = _who(db)
            if who is None:
                return False
            reviewer, experimenter_id = who
            flash(do(db, _study(db, study_id, experimenter_id), reviewer), "ok")
    except CrowdError as error:
        flash(str(error), "error")
    return True


def _form_params() -> dict[str, Any]:
    keys = ("reason", "amount", "subject", "qualification", "value")
    return {key: request.form[key] for key in keys if request.form.get(key)}


@bp.post("/studies/<int:study_id>/workers/<int:worker_id>/act")
def act(study_id: int, worker_id: int) -> Any:
    action, params = request.form.get("action", ""), _form_params()

    def do(db: Session, study: Study, reviewer: review.Reviewer) -> str:
        return review.act(db, study, worker_id, action, reviewer, params).message

    if not _post_action(study_id, do):
        return redirect(url_for("review.login"))
    return redirect(url_for("review.worker_page", study_id=study_id, worker_id=worker_id))


@bp.post("/studies/<int:study_id>/bulk")
def bulk(study_id: int) -> Any:
    rule, action, params = (
        request.form.get("rule", ""),
        request.form.get("action", ""),
        _form_params(),
    )

    def do(db: Session, study: Study, reviewer: review.Reviewer) -> str:
        outcomes = review.bulk(db, study, rule, action, reviewer, params)
        return f"{action} on {len(outcomes)} worker(s) flagged by {rule}"

    if not _post_action(study_id, do):
        return redirect(url_for("review.login"))
    return redirect(url_for("review.study_page", study_id=study_id))


@bp.get("/studies/<int:study_id>/audit")
def audit_page(study_id: int) -> Any:
    with platform().db.read_session() as db:
        who = _who(db)
        if who is None:
            return redirect(url_for("review.login"))
        reviewer, experimenter_id = who
        _study(db, study_id, experimenter_id)
        entries = [review.audit_row(entry) for entry in review.audit_log(db, study_id)]
    return render_template(
        "review_audit.html", reviewer=reviewer, study_id=study_id, entries=entries
    )
