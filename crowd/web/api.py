"""The experimenter's REST API (Authorization: Bearer <key>), described at /openapi.json."""

from __future__ import annotations

import io
from typing import Any

from flask import Blueprint, Response, request
from sqlalchemy import select

from crowd import review
from crowd.context import platform
from crowd.exceptions import NotFound, ValidationError
from crowd.quality import labels
from crowd.quality import standing as quality
from crowd.storage import Experimenter, Report, RewardRun, Role, Study
from crowd.studies import lifecycle as studies
from crowd.studies.reports import export as export_rows
from crowd.web.common import current_experimenter, json_body

bp = Blueprint("api", __name__, url_prefix="/api")

EXPORT_TYPES = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv",
    "roft": "text/csv",
    "pairwise": "application/x-ndjson",
    "kway": "application/x-ndjson",
}


def study_json(study: Study) -> dict[str, Any]:
    return {
        "id": study.id,
        "name": study.name,
        "hit_type": study.hit_type,
        "config": study.config,
        "status": str(study.status),
        "providers": study.providers,
        "created_at": study.created_at.isoformat(),
    }


@bp.post("/studies")
def create_study() -> Any:
    body = json_body()
    name, hit_type = body.get("name"), body.get("hit_type")
    if not isinstance(name, str) or not isinstance(hit_type, str):
        raise ValidationError("send {'name': ..., 'hit_type': ..., 'config': {...}}")
    config = body.get("config") or {}
    if not isinstance(config, dict):
        raise ValidationError("must be a JSON object", "config")
    with platform().db.session() as session:
        experimenter = current_experimenter(session)
        study = studies.create_study(session, experimenter, name, hit_type, config)
        return study_json(study), 201


@bp.get("/studies")
def list_studies() -> Any:
    with platform().db.session() as session:
        experimenter = current_experimenter(session)
        rows = session.scalars(
            select(Study).where(Study.experimenter_id == experimenter.id).order_by(Study.id)
        )
        return {"studies": [study_json(study) for study in rows]}


@bp.get("/studies/<int:study_id>")
def show_study(study_id: int) -> Any:
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return {**study_json(study), "progress": studies.progress(session, study)}


@bp.post("/studies/<int:study_id>/items")
def import_items(study_id: int) -> Any:
    """Items as JSON lines (Content-Type: application/x-ndjson) or {"items": [...]}."""
    if request.is_json:
        body = json_body()
        records = body.get("items")
        if not isinstance(records, list):
            raise ValidationError("send {'items': [...]} or JSON lines")
    else:
        text = request.get_data(as_text=True)
        records = studies.parse_jsonl(text.splitlines())
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        added = studies.import_items(session, study, records)
        return {"added": added}, 201


@bp.post("/studies/<int:study_id>/annotations")
def import_annotations(study_id: int) -> Any:
    """Answers collected elsewhere, as the raw file: ?format=jsonl|csv|roft&rater_group=..."""
    from crowd.studies.annotations import FORMATS, import_file

    fmt = request.args.get("format", "jsonl")
    if fmt not in FORMATS:
        raise ValidationError(f"format must be one of {', '.join(FORMATS)}", "format")
    skip = request.args.get("skip_duplicates", "false")
    if skip not in ("true", "false"):
        raise ValidationError("must be true or false", "skip_duplicates")
    max_sentences = request.args.get("max_sentences")
    if max_sentences is not None and not max_sentences.isdigit():
        raise ValidationError("must be a whole number", "max_sentences")
    text = request.get_data(as_text=True)
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        summary = import_file(
            session,
            study,
            text,
            fmt,
            rater_group=request.args.get("rater_group", "crowd"),
            skip_duplicates=skip == "true",
            max_sentences=int(max_sentences) if max_sentences else None,
        )
        return summary.to_json(), 201


@bp.post("/studies/<int:study_id>/publish")
def publish(study_id: int) -> Any:
    from crowd.platforms import publishing as platforms

    body = json_body()
    providers = body.get("providers", ["local"])
    if not isinstance(providers, list) or not all(isinstance(p, str) for p in providers):
        raise ValidationError("must be a list of provider names", "providers")
    options = body.get("options") or {}
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise ValidationError("must map provider names to objects of options", "options")
    settings = platform().settings
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        links = platforms.publish(session, settings, study, providers, options)
        return {**study_json(study), "links": links}


@bp.get("/studies/<int:study_id>/publications")
def publications(study_id: int) -> Any:
    from crowd.platforms import overview as platforms

    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return {
            "publications": platforms.publications(session, study),
            "platform_actions": platforms.actions(session, study),
        }


@bp.post("/studies/<int:study_id>/sync")
def sync(study_id: int) -> Any:
    """Sync the study with its crowd platforms now (crowd worker does it periodically)."""
    from crowd.platforms import sync as platforms

    with platform().db.read_session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
    report = platforms.sync_study(platform().db, platform().settings, platform().signer, study_id)
    return report.to_json()


@bp.get("/studies/<int:study_id>/export")
def export(study_id: int) -> Any:
    fmt = request.args.get("format", "jsonl")
    which = request.args.get("set", "full")
    if fmt not in EXPORT_TYPES:
        raise ValidationError(f"format must be one of {sorted(EXPORT_TYPES)}", "format")
    if which not in ("full", "filtered"):
        raise ValidationError("set must be full or filtered", "set")
    buffer = io.StringIO()
    # Reads the QC standing the queue jobs keep current: a GET writes nothing.
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        export_rows(session, study, fmt, buffer, filtered=which == "filtered", refresh=False)
    extension = "csv" if EXPORT_TYPES[fmt] == "text/csv" else "jsonl"
    return Response(
        buffer.getvalue(),
        mimetype=EXPORT_TYPES[fmt],
        headers={"Content-Disposition": f"attachment; filename=study-{study_id}-{fmt}.{extension}"},
    )


def _report(study_id: int) -> Report:
    with platform().db.session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
        report = session.scalar(select(Report).where(Report.study_id == study_id))
        if report is None:
            raise NotFound(f"study {study_id} has no report yet: POST to this URL to make one")
        return report


@bp.get("/studies/<int:study_id>/report")
def report_json(study_id: int) -> Any:
    report = _report(study_id)
    return {"updated_at": report.updated_at.isoformat(), "report": report.data}


@bp.get("/studies/<int:study_id>/report.html")
def report_html(study_id: int) -> Any:
    return Response(_report(study_id).html, mimetype="text/html")


@bp.post("/studies/<int:study_id>/report")
def request_report(study_id: int) -> Any:
    """Refresh the report: on the queue when there is one, here and now otherwise."""
    from crowd.studies.reports import build_report
    from crowd.studies.reports import request_report as enqueue_report

    with platform().db.session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
    connection = platform().redis
    if connection is not None:
        job = enqueue_report(connection, study_id)
        return {"queued": True, "job_id": job.id if job else None}, 202
    with platform().db.session() as session:
        report = build_report(session, platform().settings, study_id)
        return {"queued": False, "updated_at": report.updated_at.isoformat()}, 201


# -- quality control: workers, actions, audit, aggregated labels, gold ------------------------
def _reviewer(experimenter: Experimenter) -> review.Reviewer:
    # An API key is the experimenter's own: every action is open to it.
    return review.Reviewer(experimenter.name, Role.EXPERIMENTER)


@bp.get("/studies/<int:study_id>/workers")
def list_workers(study_id: int) -> Any:
    sort = request.args.get("sort", "worker")
    # Reads the standing the queue jobs keep current: a GET writes nothing.
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return {"workers": review.worker_table(session, study, sort)}


@bp.get("/studies/<int:study_id>/workers/<int:worker_id>")
def show_worker(study_id: int, worker_id: int) -> Any:
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return review.worker_history(session, study, worker_id)


@bp.post("/studies/<int:study_id>/workers/<int:worker_id>/actions")
def act_on_worker(study_id: int, worker_id: int) -> Any:
    body = json_body()
    action = body.pop("action", None)
    if not isinstance(action, str):
        raise ValidationError(f"say which: one of {', '.join(review.ACTIONS)}", "action")
    with platform().db.session() as session:
        experimenter = current_experimenter(session)
        study = studies.get_study(session, study_id, experimenter)
        outcome = review.act(session, study, worker_id, action, _reviewer(experimenter), body)
        return {"action": outcome.action, "worker_id": outcome.worker_id,
                "changed": outcome.changed, "message": outcome.message}  # fmt: skip


@bp.post("/studies/<int:study_id>/workers/bulk")
def bulk_action(study_id: int) -> Any:
    body = json_body()
    rule, action = body.pop("rule", None), body.pop("action", None)
    if not isinstance(rule, str) or not isinstance(action, str):
        raise ValidationError("send the 'rule' whose workers to act on and the 'action'", "rule")
    with platform().db.session() as session:
        experimenter = current_experimenter(session)
        study = studies.get_study(session, study_id, experimenter)
        quality.refresh_study(session, study)
        outcomes = review.bulk(session, study, rule, action, _reviewer(experimenter), body)
        return {"rule": rule, "action": action,
                "workers": [o.worker_id for o in outcomes if o.changed]}  # fmt: skip


@bp.get("/studies/<int:study_id>/audit")
def audit_log(study_id: int) -> Any:
    worker = request.args.get("worker", type=int)
    limit = request.args.get("limit", default=200, type=int)
    if not 1 <= limit <= 5000:
        raise ValidationError("must be from 1 to 5000", "limit")
    with platform().db.session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
        entries = review.audit_log(session, study_id, worker, limit)
        return {"entries": [review.audit_row(entry) for entry in entries]}


@bp.get("/studies/<int:study_id>/aggregations")
def aggregations(study_id: int) -> Any:
    with platform().db.session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
        return {"aggregations": labels.stored(session, study_id)}


@bp.post("/studies/<int:study_id>/aggregations")
def aggregate_now(study_id: int) -> Any:
    """Aggregate the filtered set's labels now, by the methods asked for (default: all)."""
    body = json_body()
    methods = body.get("methods", list(labels.METHODS))
    known = set(labels.METHODS)
    if not isinstance(methods, list) or not methods or not set(methods) <= known:
        raise ValidationError(f"a list of methods from {sorted(known)}", "methods")
    # Fitting can take seconds (MACE): compute without a lock, then store in a short write.
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        summary, results = labels.compute_aggregations(session, study, methods=tuple(methods))
    with platform().db.session() as session:
        labels.store_aggregations(session, study_id, results)
    return {"summary": summary}, 201


# -- reward models --------------------------------------------------------------------------
@bp.get("/studies/<int:study_id>/reward-models")
def reward_runs(study_id: int) -> Any:
    """The study's reward-model runs, newest first, with their jobs' progress."""
    from crowd.ml import reward as training

    with platform().db.read_session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
        runs = training.runs_of(session, study_id)
        return {
            "runs": [training.run_json(r, training.job_progress(platform().redis, r)) for r in runs]
        }


@bp.post("/studies/<int:study_id>/reward-models")
def train_reward_model(study_id: int) -> Any:
    """Queue a reward-model run ({labels?, settings?: {RewardConfig fields}})."""
    from crowd.ml import reward as training

    body = json_body()
    unknown = sorted(set(body) - {"labels", "settings"})
    if unknown:
        raise ValidationError(f"unknown keys {unknown}: give labels and settings", "body")
    overrides = body.get("settings") or {}
    if not isinstance(overrides, dict):
        raise ValidationError("an object of reward-model settings", "settings")
    labels_source = body.get("labels")
    if labels_source is not None and not isinstance(labels_source, str):
        raise ValidationError("a label source name", "labels")
    connection = platform().redis
    if connection is None:
        raise ValidationError(
            "reward-model runs go through the queue: set CROWD_REDIS_URL and run `crowd worker`"
        )
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        run = training.request_run(session, study, "manual", overrides, labels_source)
        run_id = run.id
    training.enqueue_run(platform().db, connection, run_id)
    with platform().db.read_session() as session:
        row = session.get(RewardRun, run_id)
        return training.run_json(row) if row else {"id": run_id}, 202
