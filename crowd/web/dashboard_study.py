"""A study's page in the experimenter's web app: progress (live), state changes, items
(uploaded with a per-line check before anything is stored), settings, publishing with its
cost estimate, reports, exports and webhooks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from flask import flash, jsonify, redirect, render_template, request, url_for
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from crowd.context import platform
from crowd.delivery import webhooks
from crowd.exceptions import CrowdError, ValidationError
from crowd.ml import reward as training
from crowd.platforms import overview, publishing
from crowd.platforms.providers import PROVIDERS
from crowd.platforms.providers.mturk import OPTION_HELP as MTURK_OPTIONS
from crowd.platforms.providers.prolific import OPTION_HELP as PROLIFIC_OPTIONS
from crowd.quality import exclusion
from crowd.queue import ALL_QUEUES, job_queue
from crowd.storage import OutboxEvent, Report, Study, StudyStatus
from crowd.studies import lifecycle as studies
from crowd.studies import uploads
from crowd.studies.item_files import decode
from crowd.web.dashboard import bp, signed_in
from crowd.web.results import export_download, refresh_report
from tasks import get_hit_type

RUNS_SHOWN = 5
T = TypeVar("T")
# The providers offered on the publish form, with their options' help: the open web, the
# two platforms, and the simulated crowd (crowd.platforms.providers.sim) to try a study out.
PUBLISH_TO = {
    "local": ("The open web", {}),
    "mturk": ("Amazon Mechanical Turk", MTURK_OPTIONS),
    "prolific": ("Prolific", PROLIFIC_OPTIONS),
    "sim": ("A simulated crowd, to try the study out", {}),
}
STATUS_ACTIONS = {
    StudyStatus.DRAFT: ("close", "archive"),
    StudyStatus.PUBLISHED: ("pause", "close", "archive"),
    StudyStatus.PAUSED: ("resume", "close", "archive"),
    StudyStatus.COMPLETED: ("archive",),
}


def _owned(db: Session, study_id: int) -> Study:
    return studies.get_study(db, study_id, signed_in(db))


def _backlog() -> dict[str, Any]:
    """The queue's backlog: outbox events not yet processed, jobs waiting per queue."""
    with platform().db.read_session() as db:
        waiting = db.scalar(
            select(func.count(OutboxEvent.id)).where(OutboxEvent.processed_at.is_(None))
        )
    connection = platform().redis
    queues: dict[str, int | None] = {}
    for name in ALL_QUEUES:
        try:
            queues[name] = job_queue(name, connection).count if connection is not None else None
        except Exception:  # noqa: BLE001 - the page still shows, with the queue unknown
            queues[name] = None
    return {"events_waiting": waiting or 0, "queues": queues}


def live_numbers(db: Session, study: Study) -> dict[str, Any]:
    """What the study page shows and refreshes: progress, QC exclusions, backlog, runs."""
    excluded = {rule: len(ids) for rule, ids in exclusion.excluded_by(db, study.id).items()}
    report = db.scalar(select(Report.updated_at).where(Report.study_id == study.id))
    runs = [
        training.run_json(run, training.job_progress(platform().redis, run))
        for run in training.runs_of(db, study.id)[:RUNS_SHOWN]
    ]
    return {
        "progress": studies.progress(db, study),
        "excluded": excluded,
        "excluded_total": sum(excluded.values()),
        "backlog": _backlog(),
        "report_updated_at": f"{report:%Y-%m-%d %H:%M:%S} UTC" if report else None,
        "reward_runs": runs,
    }


def _page(db: Session, study: Study, status: int = 200, **extra: Any) -> Any:
    hit = get_hit_type(study.hit_type)
    context = {
        "study": study,
        "hit": hit,
        "live": live_numbers(db, study),
        "config_json": json.dumps(study.config, indent=2, sort_keys=True),
        "live_settings": studies.LIVE_SETTINGS,
        "actions": STATUS_ACTIONS[StudyStatus(study.status)],
        "publish_to": PUBLISH_TO,
        "publications": overview.publications(db, study),
        "webhooks": webhooks.active_subscriptions(db, study.id),
        "events": webhooks.WEBHOOK_EVENTS,
        "export_formats": hit.export_formats,
        "form": request.form,
        **extra,
    }
    return render_template("study.html", **context), status


@bp.get("/studies/<int:study_id>")
def study(study_id: int) -> Any:
    with platform().db.read_session() as db:
        return _page(db, _owned(db, study_id))


@bp.get("/studies/<int:study_id>/live")
def live(study_id: int) -> Any:
    with platform().db.read_session() as db:
        return jsonify(live_numbers(db, _owned(db, study_id)))


@bp.post("/studies/<int:study_id>/status")
def change_status(study_id: int) -> Any:
    action = request.form.get("action", "")
    with platform().db.session() as db:
        found = _owned(db, study_id)
        if action in ("archive", "unarchive"):
            studies.archive(db, found, archived=action == "archive")
        else:
            studies.change_status(db, found, action)
        now = f"{found.status}" + (", archived" if found.archived_at else "")
    flash(f"Study {study_id} is now {now}.", "ok")
    return redirect(url_for("dashboard.study", study_id=study_id))


def _upload_text() -> tuple[str, str | None]:
    """The uploaded file (or the checked text sent back to store it), as text."""
    upload = request.files.get("file")
    if upload is not None and upload.filename:
        return decode(upload.read()), upload.filename
    text = request.form.get("text", "")
    if not text.strip():
        raise ValidationError("choose a file of items (JSON lines or CSV)", "file")
    return text, request.form.get("filename") or None


def _attempt(study_id: int, change: Callable[[Session, Study], T]) -> T | CrowdError:
    """Run `change` on the experimenter's study in one transaction; a refusal rolls it all
    back and comes back as the error, for the page to show beside the form."""
    try:
        with platform().db.session() as db:
            return change(db, _owned(db, study_id))
    except CrowdError as error:
        return error


def _shown(study_id: int, status: int = 200, **extra: Any) -> Any:
    with platform().db.read_session() as db:
        return _page(db, _owned(db, study_id), status, **extra)


@bp.post("/studies/<int:study_id>/items")
def items(study_id: int) -> Any:
    fmt = request.form.get("format", "auto")
    store = request.form.get("action") == "store"
    try:
        text, filename = _upload_text()
    except CrowdError as error:
        return _shown(study_id, 422, items_error=error)
    if store:
        added = _attempt(study_id, lambda db, found: uploads.store_items(db, found, text, fmt,
                                                                         filename))  # fmt: skip
        if isinstance(added, CrowdError):
            return _shown(study_id, 422, items_error=added)
        flash(f"Stored {added} items.", "ok")
        return redirect(url_for("dashboard.study", study_id=study_id) + "#items")
    with platform().db.read_session() as db:
        found = _owned(db, study_id)
        try:
            check = uploads.check_items(db, found, text, fmt, filename)
        except CrowdError as error:
            return _page(db, found, 422, items_error=error)
        return _page(db, found, upload=check, upload_text=text, upload_name=filename)


def _new_config(db: Session, found: Study) -> Study:
    try:
        config = json.loads(request.form.get("config", ""))
    except json.JSONDecodeError as error:
        raise ValidationError(f"not valid JSON ({error.msg}, line {error.lineno})") from None
    if not isinstance(config, dict):
        raise ValidationError("must be a JSON object of settings", "config")
    return studies.update_config(db, found, config)


@bp.post("/studies/<int:study_id>/settings")
def settings(study_id: int) -> Any:
    outcome = _attempt(study_id, _new_config)
    if isinstance(outcome, CrowdError):
        return _shown(study_id, 422, settings_error=outcome)
    flash("Settings saved.", "ok")
    return redirect(url_for("dashboard.study", study_id=study_id) + "#settings")


def _publish_options(form: Any) -> tuple[list[str], dict[str, dict[str, Any]]]:
    providers = [name for name in PUBLISH_TO if form.get(f"provider_{name}")]
    if not providers:
        raise ValidationError("tick at least one place to publish to", "providers")
    options: dict[str, dict[str, Any]] = {}
    for name in providers:
        if not PROVIDERS.get(name).remote:
            continue
        text = form.get(f"options_{name}", "").strip() or "{}"
        try:
            given = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValidationError(f"not valid JSON ({error.msg})", f"{name} options") from None
        if not isinstance(given, dict):
            raise ValidationError("must be a JSON object", f"{name} options")
        reward = form.get(f"reward_{name}", "").strip()
        if reward:
            given["reward"] = reward
        if name == "mturk":
            given.setdefault("sandbox", form.get("mturk_sandbox") == "on")
        options[name] = given
    return providers, options


@bp.post("/studies/<int:study_id>/publish")
def publish(study_id: int) -> Any:
    db_ = platform().db
    with db_.read_session() as db:
        found = _owned(db, study_id)
        try:
            providers, options = _publish_options(request.form)
            estimate = publishing.estimate(db, found, providers, options)
        except CrowdError as error:
            return _page(db, found, 422, publish_error=error)
        if request.form.get("action") != "publish":
            return _page(db, found, estimate=estimate)
        experimenter_id = found.experimenter_id
    try:
        links = publishing.publish_study(
            db_, platform().settings, study_id, providers, options, experimenter_id
        )
    except CrowdError as error:
        with db_.read_session() as db:
            return _page(db, _owned(db, study_id), 422, publish_error=error, estimate=estimate)
    for name, urls in links.items():
        flash(f"Published to {PUBLISH_TO[name][0]}: " + ", ".join(urls.values()), "ok")
    return redirect(url_for("dashboard.study", study_id=study_id))


@bp.post("/studies/<int:study_id>/report")
def report_refresh(study_id: int) -> Any:
    with platform().db.read_session() as db:
        _owned(db, study_id)
    reply, _status = refresh_report(study_id)
    flash("The report is being refreshed: it appears here when ready." if reply["queued"]
          else "The report is up to date.", "ok")  # fmt: skip
    return redirect(url_for("dashboard.study", study_id=study_id) + "#results")


@bp.get("/studies/<int:study_id>/export")
def export(study_id: int) -> Any:
    with platform().db.read_session() as db:
        found = _owned(db, study_id)
        fmt = request.args.get("format", "jsonl")
        if fmt not in get_hit_type(found.hit_type).export_formats:
            raise ValidationError(f"{found.hit_type} studies export as "
                                  f"{', '.join(get_hit_type(found.hit_type).export_formats)}",
                                  "format")  # fmt: skip
        return export_download(db, found, fmt, request.args.get("filtered") == "1")


@bp.post("/studies/<int:study_id>/webhooks")
def add_webhook(study_id: int) -> Any:
    events = request.form.getlist("events") or list(webhooks.WEBHOOK_EVENTS)
    url = request.form.get("url", "")
    made = _attempt(study_id, lambda db, found: webhooks.create_subscription(db, found, url,
                                                                             events))  # fmt: skip
    if isinstance(made, CrowdError):
        return _shown(study_id, 422, webhook_error=made)
    # Shown on this page only, as the API shows it only in its reply.
    return _shown(study_id, 201, webhook_secret=made.secret, webhook_id=made.id)


@bp.post("/studies/<int:study_id>/webhooks/<int:webhook_id>/remove")
def remove_webhook(study_id: int, webhook_id: int) -> Any:
    with platform().db.session() as db:
        webhooks.remove_subscription(db, _owned(db, study_id), webhook_id)
    flash(f"Webhook {webhook_id} removed.", "ok")
    return redirect(url_for("dashboard.study", study_id=study_id) + "#webhooks")
