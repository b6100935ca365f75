"""A minimal experimenter dashboard: log in with an API key, see studies, progress, reports."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, redirect, render_template, request, session, url_for
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.context import platform
from crowd.exceptions import AuthenticationError, NotFound
from crowd.ml import reward as training
from crowd.storage import Experimenter, Report, Study
from crowd.studies import lifecycle as studies
from crowd.web import csrf

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")
# The login and logout forms carry their token (crowd.web.csrf): another site cannot log a
# visitor in to its own account or out of theirs.
csrf.protect_forms(bp)
RUNS_SHOWN = 5


def _experimenter_id() -> int | None:
    value = session.get("experimenter_id")
    return value if isinstance(value, int) else None


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
            return redirect(url_for("dashboard.index"))
        except AuthenticationError as failure:
            error = str(failure)
    return render_template("login.html", error=error), 401 if error else 200


@bp.post("/logout")
def logout() -> Any:
    session.clear()
    return redirect(url_for("dashboard.login"))


@bp.get("/")
def index() -> Any:
    experimenter_id = _experimenter_id()
    if experimenter_id is None:
        return redirect(url_for("dashboard.login"))
    with platform().db.session() as db:
        experimenter = db.get(Experimenter, experimenter_id)
        if experimenter is None:
            session.clear()
            return redirect(url_for("dashboard.login"))
        rows, runs = [], []
        for study in db.scalars(
            select(Study).where(Study.experimenter_id == experimenter_id).order_by(Study.id)
        ):
            has_report = db.scalar(select(Report.id).where(Report.study_id == study.id))
            rows.append({"progress": studies.progress(db, study), "has_report": bool(has_report)})
            # The latest reward-model runs, with the progress their jobs report.
            runs += [
                training.run_json(run, training.job_progress(platform().redis, run))
                for run in training.runs_of(db, study.id)[:RUNS_SHOWN]
            ]
        name = experimenter.name
    return render_template("dashboard.html", name=name, rows=rows, runs=runs)


@bp.get("/studies/<int:study_id>/report")
def report(study_id: int) -> Any:
    experimenter_id = _experimenter_id()
    if experimenter_id is None:
        return redirect(url_for("dashboard.login"))
    with platform().db.session() as db:
        experimenter = db.get(Experimenter, experimenter_id)
        studies.get_study(db, study_id, experimenter)
        row = db.scalar(select(Report).where(Report.study_id == study_id))
        if row is None:
            raise NotFound("no report yet: it appears once a worker has processed responses")
        return Response(row.html, mimetype="text/html")
