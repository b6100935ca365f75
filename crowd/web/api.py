"""The experimenter's REST API (Authorization: Bearer <key>), described at /openapi.json."""

from __future__ import annotations

from typing import Any, cast

from flask import Blueprint, Response, request
from sqlalchemy import select

from crowd import review
from crowd.context import platform
from crowd.exceptions import NotFound, ValidationError
from crowd.quality import labels
from crowd.quality import standing as quality
from crowd.storage import Experimenter, Report, RewardRun, Role, Study
from crowd.studies import lifecycle as studies
from crowd.studies import uploads
from crowd.studies.annotations import import_file
from crowd.studies.item_files import decode
from crowd.web.bodies import loads
from crowd.web.common import current_experimenter
from crowd.web.contract import EXPERIMENTER, Media, UnsupportedMedia, operation, read_body
from crowd.web.results import export_download, refresh_report
from crowd.web.schemas.review import (
    ActionOutcome,
    Aggregate,
    AggregationsQuery,
    AggregationSummary,
    AuditLog,
    AuditQuery,
    BulkAction,
    BulkOutcome,
    WorkerAction,
    WorkerHistory,
    WorkersQuery,
    WorkerTable,
)
from crowd.web.schemas.review import Aggregations as AggregationsReply
from crowd.web.schemas.studies import (
    AnnotationsImported,
    AnnotationsQuery,
    ExportQuery,
    ItemsAdded,
    ItemsChecked,
    NewItems,
    NewStudy,
    Publications,
    Publish,
    Published,
    ReportBuilt,
    ReportQueued,
    Studies,
    StudiesQuery,
    StudyChange,
    StudyProgress,
    StudyReport,
    SyncReport,
)
from crowd.web.schemas.studies import Study as StudyReply
from crowd.web.schemas.training import NewRewardRun, RewardRuns
from crowd.web.schemas.training import RewardRun as RewardRunReply

bp = Blueprint("api", __name__, url_prefix="/api")

STUDIES, ITEMS, PUBLISHING = ("studies",), ("items and annotations",), ("publishing",)
RESULTS, QC, MODELS = ("exports and reports",), ("quality control",), ("reward models",)
ITEM_FILES = Media(
    types=("application/x-ndjson", "text/csv"),
    description="the file as it is: JSON lines (one item a line, a JSON object in the HIT "
    "type's terms) or CSV (a header naming the items' fields, then one row per item; list and "
    "object cells as JSON or the plain forms of the README's item formats)",
)
CSV_TYPES = ("text/csv", "application/csv", "text/tab-separated-values")
ANNOTATIONS = Media(
    types=("application/x-ndjson", "text/csv"),
    description="the file as it is, in the layout ?format= names: JSON lines {worker, item, "
    "answer, rater_group?, created_at?, explanation?, reasons?}; CSV with columns worker, "
    "item, the answer's fields (or attribute and rating; a form's field:<id> or <id>), "
    "rater_group?, created_at?, explanation?, reasons?; or the public RoFT release's CSV",
)
EXPORT = Media(
    types=("application/x-ndjson", "text/csv"),
    description="the study's responses as a file (csv and roft: CSV, the others JSON lines)",
)
# Bodies that browsers send cross-site without asking: never a file we take.
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def study_json(study: Study) -> dict[str, Any]:
    return {
        "id": study.id,
        "name": study.name,
        "hit_type": study.hit_type,
        "config": study.config,
        "status": str(study.status),
        "providers": study.providers,
        "created_at": study.created_at.isoformat(),
        "archived_at": study.archived_at.isoformat() if study.archived_at else None,
    }


def raw_text() -> str:
    """The request body as text: not empty, UTF-8, no NUL characters (no database stores
    them)."""
    if request.mimetype in FORM_TYPES:
        raise UnsupportedMedia("send the file itself as the body, not a form")
    text = decode(request.get_data(cache=True))
    if not text.strip():
        raise ValidationError("the body is empty: send the file itself as the body", "body")
    return text


# -- studies ---------------------------------------------------------------------------------
@bp.post("/studies")
@operation("Create a study", body=NewStudy, responses={201: StudyReply}, auth=EXPERIMENTER,
           tags=STUDIES)  # fmt: skip
def create_study(body: NewStudy) -> Any:
    with platform().db.session() as session:
        experimenter = current_experimenter(session)
        study = studies.create_study(session, experimenter, body.name, body.hit_type, body.config)
        return study_json(study), 201


@bp.get("/studies")
@operation("List your studies", query=StudiesQuery, responses={200: Studies},
           auth=EXPERIMENTER, tags=STUDIES)  # fmt: skip
def list_studies(query: StudiesQuery) -> Any:
    with platform().db.read_session() as session:
        experimenter = current_experimenter(session)
        rows = studies.studies_of(session, experimenter, archived=query.archived)
        return {"studies": [study_json(study) for study in rows]}


@bp.post("/studies/<int:study_id>/status")
@operation("Pause, resume, close, archive or unarchive a study", body=StudyChange,
           responses={200: StudyReply}, auth=EXPERIMENTER, errors=(409,), tags=STUDIES)  # fmt: skip
def change_status(study_id: int, body: StudyChange) -> Any:
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        if body.action in ("archive", "unarchive"):
            studies.archive(session, study, archived=body.action == "archive")
        else:
            studies.change_status(session, study, body.action)
        return study_json(study)


@bp.get("/studies/<int:study_id>")
@operation("A study and its progress", responses={200: StudyProgress}, auth=EXPERIMENTER,
           tags=STUDIES)  # fmt: skip
def show_study(study_id: int) -> Any:
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return {**study_json(study), "progress": studies.progress(session, study)}


# -- items and annotations -------------------------------------------------------------------
def _items_body() -> NewItems | tuple[str, str]:
    """{"items": [...]}, or a file's text and format (its Content-Type's, else detected)."""
    if request.is_json:
        return cast(NewItems, read_body(NewItems))
    text = raw_text()
    if request.mimetype in CSV_TYPES:
        return text, "csv"
    return text, "jsonl" if request.mimetype == "application/x-ndjson" else "auto"


@bp.post("/studies/<int:study_id>/items")
@operation("Add items (all or none)", body=NewItems, raw_body=ITEM_FILES,
           responses={201: ItemsAdded}, auth=EXPERIMENTER, errors=(409,), tags=ITEMS)  # fmt: skip
def import_items(study_id: int) -> Any:
    """Items as JSON lines (application/x-ndjson), CSV (text/csv) or {"items": [...]}; a bad
    item is a 422 naming its line (items[i] in a JSON body) and nothing is stored."""
    body = _items_body()
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        if isinstance(body, NewItems):
            added = uploads.store_records(session, study, body.items)
        else:
            added = uploads.store_items(session, study, *body, loads=loads)
        return {"added": added}, 201


@bp.post("/studies/<int:study_id>/items/check")
@operation("Check items without storing them: a preview of every line", body=NewItems,
           raw_body=ITEM_FILES, responses={200: ItemsChecked}, auth=EXPERIMENTER,
           errors=(409,), tags=ITEMS)  # fmt: skip
def check_items(study_id: int) -> Any:
    """The same bodies as POST .../items; each line's problem is in the reply (200), only a
    file that cannot be read at all (an unknown CSV column, broken quoting) is a 422."""
    body = _items_body()
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        if isinstance(body, NewItems):
            return uploads.check_records(session, study, body.items)
        return uploads.check_items(session, study, *body, loads=loads)


@bp.post("/studies/<int:study_id>/annotations")
@operation("Import answers collected elsewhere (all or none)", query=AnnotationsQuery,
           raw_body=ANNOTATIONS, responses={201: AnnotationsImported}, auth=EXPERIMENTER,
           errors=(409,), tags=ITEMS)  # fmt: skip
def import_annotations(study_id: int, query: AnnotationsQuery) -> Any:
    """Answers collected elsewhere, as the raw file: ?format=jsonl|csv|roft&rater_group=..."""
    text = raw_text()
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        summary = import_file(
            session,
            study,
            text,
            query.format,
            rater_group=query.rater_group,
            skip_duplicates=query.skip_duplicates,
            max_sentences=query.max_sentences,
            loads=loads,
        )
        return summary.to_json(), 201


# -- publishing ------------------------------------------------------------------------------
@bp.post("/studies/<int:study_id>/publish")
@operation("Open the study to the workers of providers", body=Publish, body_required=False,
           responses={200: Published}, auth=EXPERIMENTER, errors=(409, 502),
           tags=PUBLISHING)  # fmt: skip
def publish(study_id: int, body: Publish) -> Any:
    from crowd.platforms import publishing as platforms

    settings, db = platform().settings, platform().db
    with db.read_session() as session:
        experimenter_id = current_experimenter(session).id
    links = platforms.publish_study(
        db, settings, study_id, body.providers, body.options, experimenter_id
    )
    with db.read_session() as session:
        return {**study_json(studies.get_study(session, study_id)), "links": links}


@bp.get("/studies/<int:study_id>/publications")
@operation("The study's publications and platform calls", responses={200: Publications},
           auth=EXPERIMENTER, tags=PUBLISHING)  # fmt: skip
def publications(study_id: int) -> Any:
    from crowd.platforms import overview as platforms

    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return {
            "publications": platforms.publications(session, study),
            "platform_actions": platforms.actions(session, study),
        }


@bp.post("/studies/<int:study_id>/sync")
@operation("Sync the study with its crowd platforms now", responses={200: SyncReport},
           auth=EXPERIMENTER, errors=(502,), tags=PUBLISHING)  # fmt: skip
def sync(study_id: int) -> Any:
    """Sync the study with its crowd platforms now (crowd worker does it periodically)."""
    from crowd.platforms import sync as platforms

    with platform().db.read_session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
    report = platforms.sync_study(platform().db, platform().settings, platform().signer, study_id)
    return report.to_json()


# -- exports and reports ---------------------------------------------------------------------
@bp.get("/studies/<int:study_id>/export")
@operation("Export the study's responses", query=ExportQuery, responses={200: EXPORT},
           auth=EXPERIMENTER, tags=RESULTS)  # fmt: skip
def export(study_id: int, query: ExportQuery) -> Any:
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return export_download(session, study, query.format, query.set == "filtered")


def _report(study_id: int) -> Report:
    with platform().db.session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
        report = session.scalar(select(Report).where(Report.study_id == study_id))
        if report is None:
            raise NotFound(f"study {study_id} has no report yet: POST to this URL to make one")
        return report


@bp.get("/studies/<int:study_id>/report")
@operation("The study's latest report", responses={200: StudyReport}, auth=EXPERIMENTER,
           tags=RESULTS)  # fmt: skip
def report_json(study_id: int) -> Any:
    report = _report(study_id)
    return {"updated_at": report.updated_at.isoformat(), "report": report.data}


@bp.get("/studies/<int:study_id>/report.html")
@operation("The study's latest report as a page",
           responses={200: Media(types=("text/html",), description="the report as HTML")},
           auth=EXPERIMENTER, tags=RESULTS)  # fmt: skip
def report_html(study_id: int) -> Any:
    return Response(_report(study_id).html, mimetype="text/html")


@bp.post("/studies/<int:study_id>/report")
@operation("Refresh the report", responses={201: ReportBuilt, 202: ReportQueued},
           auth=EXPERIMENTER, tags=RESULTS)  # fmt: skip
def request_report(study_id: int) -> Any:
    """Refresh the report: on the queue when there is one, here and now otherwise."""
    with platform().db.read_session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
    return refresh_report(study_id)


# -- quality control: workers, actions, audit, aggregated labels ----------------------------
def _reviewer(experimenter: Experimenter) -> review.Reviewer:
    # An API key is the experimenter's own: every action is open to it.
    return review.Reviewer(experimenter.name, Role.EXPERIMENTER)


@bp.get("/studies/<int:study_id>/workers")
@operation("The study's workers with their QC evidence and standing", query=WorkersQuery,
           responses={200: WorkerTable}, auth=EXPERIMENTER, tags=QC)  # fmt: skip
def list_workers(study_id: int, query: WorkersQuery) -> Any:
    # Reads the standing the queue jobs keep current: a GET writes nothing.
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return {"workers": review.worker_table(session, study, query.sort)}


@bp.get("/studies/<int:study_id>/workers/<int:worker_id>")
@operation("A worker's answers, standing and audit trail in the study",
           responses={200: WorkerHistory}, auth=EXPERIMENTER, tags=QC)  # fmt: skip
def show_worker(study_id: int, worker_id: int) -> Any:
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        return review.worker_history(session, study, worker_id)


@bp.post("/studies/<int:study_id>/workers/<int:worker_id>/actions")
@operation("Act on a worker (approve, reject, bonus, block, ...)", body=WorkerAction,
           responses={200: ActionOutcome}, auth=EXPERIMENTER, errors=(409,), tags=QC)  # fmt: skip
def act_on_worker(study_id: int, worker_id: int, body: WorkerAction) -> Any:
    params = body.model_dump(exclude={"action"}, exclude_none=True)
    if body.amount is not None:
        params["amount"] = str(body.amount)
    with platform().db.session() as session:
        experimenter = current_experimenter(session)
        study = studies.get_study(session, study_id, experimenter)
        outcome = review.act(session, study, worker_id, body.action, _reviewer(experimenter),
                             params)  # fmt: skip
        return {"action": outcome.action, "worker_id": outcome.worker_id,
                "changed": outcome.changed, "message": outcome.message}  # fmt: skip


@bp.post("/studies/<int:study_id>/workers/bulk")
@operation("Act on every worker on whom a QC rule fires", body=BulkAction,
           responses={200: BulkOutcome}, auth=EXPERIMENTER, errors=(409,), tags=QC)  # fmt: skip
def bulk_action(study_id: int, body: BulkAction) -> Any:
    params = body.model_dump(exclude={"rule", "action"}, exclude_none=True)
    with platform().db.session() as session:
        experimenter = current_experimenter(session)
        study = studies.get_study(session, study_id, experimenter)
        quality.refresh_study(session, study)
        outcomes = review.bulk(session, study, body.rule, body.action, _reviewer(experimenter),
                               params)  # fmt: skip
        return {"rule": body.rule, "action": body.action,
                "workers": [o.worker_id for o in outcomes if o.changed]}  # fmt: skip


@bp.get("/studies/<int:study_id>/audit")
@operation("The study's audit log", query=AuditQuery, responses={200: AuditLog},
           auth=EXPERIMENTER, tags=QC)  # fmt: skip
def audit_log(study_id: int, query: AuditQuery) -> Any:
    with platform().db.read_session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
        entries = review.audit_log(session, study_id, query.worker, query.limit)
        return {"entries": [review.audit_row(entry) for entry in entries]}


@bp.get("/studies/<int:study_id>/aggregations")
@operation("The study's stored aggregated labels", query=AggregationsQuery,
           responses={200: AggregationsReply}, auth=EXPERIMENTER, tags=QC)  # fmt: skip
def aggregations(study_id: int, query: AggregationsQuery) -> Any:
    with platform().db.read_session() as session:
        studies.get_study(session, study_id, current_experimenter(session))
        stored = labels.stored(session, study_id)
    if query.methods:
        stored = {method: data for method, data in stored.items() if method in query.methods}
    return {"aggregations": stored}


@bp.post("/studies/<int:study_id>/aggregations")
@operation("Aggregate the filtered set's labels now", body=Aggregate, body_required=False,
           responses={201: AggregationSummary}, auth=EXPERIMENTER, tags=QC)  # fmt: skip
def aggregate_now(study_id: int, body: Aggregate) -> Any:
    """Aggregate the filtered set's labels now, by the methods asked for (default: all)."""
    # Fitting can take seconds (MACE): compute without a lock, then store in a short write.
    with platform().db.read_session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        summary, results = labels.compute_aggregations(session, study,
                                                       methods=tuple(body.methods))  # fmt: skip
    with platform().db.session() as session:
        labels.store_aggregations(session, study_id, results)
    return {"summary": summary}, 201


# -- reward models --------------------------------------------------------------------------
@bp.get("/studies/<int:study_id>/reward-models")
@operation("The study's reward-model runs", responses={200: RewardRuns}, auth=EXPERIMENTER,
           tags=MODELS)  # fmt: skip
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
@operation("Queue a reward-model run", body=NewRewardRun, body_required=False,
           responses={202: RewardRunReply}, auth=EXPERIMENTER, tags=MODELS)  # fmt: skip
def train_reward_model(study_id: int, body: NewRewardRun) -> Any:
    """Queue a reward-model run ({labels?, settings?: {RewardConfig fields}})."""
    from crowd.ml import reward as training

    connection = platform().redis
    if connection is None:
        raise ValidationError(
            "reward-model runs go through the queue: set CROWD_REDIS_URL and run `crowd worker`"
        )
    overrides = body.settings.model_dump(exclude_unset=True)
    with platform().db.session() as session:
        study = studies.get_study(session, study_id, current_experimenter(session))
        run = training.request_run(session, study, "manual", overrides, body.labels)
        run_id = run.id
    training.enqueue_run(platform().db, connection, run_id)
    with platform().db.read_session() as session:
        row = session.get(RewardRun, run_id)
        if row is None:
            raise NotFound(f"reward-model run {run_id} is gone")
        return training.run_json(row), 202
