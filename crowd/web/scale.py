"""The Scale-compatible task API under /v1, for the official `scaleapi` client.

`ScaleClient(api_key, api_instance_url="http://HOST/v1")` works against it: the client sends
the key as the user name of HTTP Basic auth, reads only 200 replies as success, and maps
other statuses to its exceptions from the `error` field of the JSON body, which is why every
success here is a 200 and every error is a ScaleError `{"status_code", "error", "type"}`
(422s become 400s).

A POST with an `Idempotency-Key` header is done once: the same key with the same request
gets the stored reply, with another request a 409.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

import sqlalchemy.exc
from flask import Blueprint, Response, jsonify, request
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from werkzeug.exceptions import HTTPException

from crowd.accounts import authenticate
from crowd.context import platform
from crowd.exceptions import AlreadyExists, AuthenticationError, CrowdError, ValidationError
from crowd.scale import listing as scale_listing
from crowd.scale import service as scale
from crowd.scale.params import (
    CATEGORIZATION,
    COMPARISON,
    TASK_TYPES,
    TEXTCOLLECTION,
    request_hash,
)
from crowd.storage import Experimenter, IdempotentReply, ItemKind
from crowd.web.common import bearer_token
from crowd.web.contract import EXPERIMENTER, SCALE, FieldProblem, View, operation, read_json
from crowd.web.schemas.scale import (
    Audit,
    BatchesQuery,
    CancelQuery,
    NewBatch,
    NewCategorizationQualityTask,
    NewCategorizationTask,
    NewComparisonQualityTask,
    NewComparisonTask,
    NewProject,
    NewTextCollectionQualityTask,
    NewTextCollectionTask,
    ScheduleQuery,
    TasksQuery,
)
from crowd.web.schemas.scale_replies import (
    AnyTask,
    Batch,
    BatchList,
    BatchState,
    CallbackAuthKey,
    Project,
    Projects,
    QualityTask,
    ScaleError,
    Schedule,
    Task,
    TaskList,
)
from models.reward.schedule import LabelSchedule

log = logging.getLogger(__name__)
bp = Blueprint("scale", __name__, url_prefix="/v1")

IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_IDEMPOTENCY_KEY = 255
Handler = Callable[[Session, Experimenter], dict[str, Any]]
# scaleapi sends the key as HTTP Basic's user name; a Bearer key is taken too.
AUTH = (SCALE, EXPERIMENTER)
TAGS = ("scale",)
IDEMPOTENCY = {
    IDEMPOTENCY_HEADER: Field(
        min_length=1, max_length=MAX_IDEMPOTENCY_KEY,
        description="the same key with the same request again gets the first reply; with "
        "another request, a 409",
    )
}


def _read(summary: str, reply: type[BaseModel], **declared: Any) -> Callable[[View], View]:
    return operation(summary, responses={200: reply}, auth=AUTH, tags=TAGS,
                     error_model=ScaleError, **declared)  # fmt: skip


def _write(summary: str, reply: type[BaseModel], errors: tuple[int, ...] = (),
           **declared: Any) -> Callable[[View], View]:  # fmt: skip
    """A POST: done once per Idempotency-Key, so a key reused for another request is a 409."""
    return operation(summary, responses={200: reply}, auth=AUTH, tags=TAGS,
                     error_model=ScaleError, headers=IDEMPOTENCY, errors=(409, *errors),
                     **declared)  # fmt: skip


def _error(status: int, message: str, kind: str, problems: list[FieldProblem] | None = None,
           where: str | None = None) -> Any:  # fmt: skip
    body = ScaleError(status_code=status, error=message, type=kind, field=where or None,
                      errors=problems or None)  # fmt: skip
    reply = jsonify(body.model_dump(mode="json", exclude_none=True))
    reply.status_code = status
    if status == 401:
        reply.headers["WWW-Authenticate"] = 'Basic realm="crowd"'
    return reply


# pydantic names the member of a discriminated union in the location: a TextCollection
# field's problem is at fields[0].text.field_id, where the request has fields[0].field_id.
_UNION_TAG = re.compile(r"(fields\[\d+\])\.(?:category|text)(?=[.\[]|$)")


def _request_path(where: str | None) -> str | None:
    return None if where is None else _UNION_TAG.sub(r"\1", where)


@bp.errorhandler(CrowdError)
def crowd_error(error: CrowdError) -> Any:
    # scaleapi knows 400 (invalid request), not 422.
    status = 400 if error.status == 422 else error.status
    kind = getattr(error, "kind", None) or type(error).__name__
    message, where = str(error), getattr(error, "where", None)
    if isinstance(error, ValidationError) and where:
        where = _request_path(where)
        message = f"{where}: {error.message}"
    problems = [FieldProblem(field=_request_path(p.field) or p.field, message=p.message)
                for p in getattr(error, "problems", None) or []]  # fmt: skip
    return _error(status, message, kind, problems, where)


@bp.errorhandler(sqlalchemy.exc.DataError)
def data_error(error: sqlalchemy.exc.DataError) -> Any:
    # The models should have refused it; the database refusing a value is still the input's.
    log.warning("the database refused a value: %s", error.orig)
    message = "a value does not fit what the database stores (too long or out of range)"
    return _error(400, message, "ValidationError")


@bp.errorhandler(HTTPException)
def http_error(error: HTTPException) -> Any:
    return _error(error.code or 500, str(error.description), error.name)


CREATE_PATH = re.compile(r"/v1/(?:task|evaluation_tasks|training_tasks)/([^/]+)")


def unrouted(error: HTTPException) -> Any:
    """A /v1 URL no route takes (crowd.web answers it here), in Scale's error shape; a task
    type this server does not speak says so, as scaleapi's create_task expects a 400."""
    match = CREATE_PATH.fullmatch(request.path)
    if request.method == "POST" and match is not None and match[1] not in TASK_TYPES:
        message = (f"task type {match[1]!r} is not available here: this server speaks "
                   f"{', '.join(TASK_TYPES)} tasks")  # fmt: skip
        return _error(400, f"type: {message}", "ValidationError", where="type")
    return http_error(error)


def experimenter(session: Session) -> Experimenter:
    """The owner of the API key: HTTP Basic's user name (what scaleapi sends), or Bearer."""
    auth = request.authorization
    token = auth.username if auth is not None and auth.type == "basic" else bearer_token()
    if not token:
        raise AuthenticationError(
            "send your API key as the user name of HTTP Basic auth (what scaleapi does) "
            "or as 'Authorization: Bearer <key>'; create one with `crowd keys create NAME`"
        )
    return authenticate(session, token)


def _post(handler: Handler) -> Any:
    """Run a POST in one transaction, once per Idempotency-Key."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    with platform().db.session() as session:
        owner = experimenter(session)
        if key is None:
            return handler(session, owner), 200
        if not 0 < len(key) <= MAX_IDEMPOTENCY_KEY:
            raise ValidationError(
                f"must be 1 to {MAX_IDEMPOTENCY_KEY} characters", IDEMPOTENCY_HEADER
            )
        fingerprint = request_hash(request.method, request.path, request.args.to_dict(False),
                                   read_json())  # fmt: skip
        stored = session.scalar(
            select(IdempotentReply).where(
                IdempotentReply.experimenter_id == owner.id, IdempotentReply.key == key
            )
        )
        if stored is not None:
            if stored.request_hash != fingerprint:
                raise AlreadyExists(
                    f"{IDEMPOTENCY_HEADER} {key!r} was used for another request: send a new "
                    "key with each new request"
                )
            return stored.body, stored.status_code
        reply = handler(session, owner)
        try:
            with session.begin_nested():
                session.add(IdempotentReply(experimenter_id=owner.id, key=key,
                                            request_hash=fingerprint, status_code=200,
                                            body=reply))  # fmt: skip
        except IntegrityError:  # the same key in a concurrent request: this one is undone
            raise AlreadyExists(
                f"a request with {IDEMPOTENCY_HEADER} {key!r} is under way: retry it shortly"
            ) from None
        return reply, 200


def _in_order(model: type[BaseModel], result: Any) -> Response:
    """A reply holding tasks, checked by its model, with its keys in the order given: a
    TextCollection response's in its fields' (HELM pairs them by position), where the app's
    JSON would sort them."""
    data, status = result if isinstance(result, tuple) else (result, 200)
    if isinstance(data, dict) and isinstance(data.get("docs"), list):
        data = {**data, "docs": [scale.in_field_order(doc) for doc in data["docs"]]}
    elif isinstance(data, dict):
        data = scale.in_field_order(data)
    payload = model.model_validate(data).model_dump(mode="json")
    return Response(json.dumps(payload), status=status, mimetype="application/json")


def _create(task_type: str, body: BaseModel, kind: ItemKind = ItemKind.REAL) -> Any:
    """A task of the checked body; its unique_id's fingerprint is the body as sent."""
    fields, sent = body.model_dump(exclude_unset=True), read_json()
    as_json = scale.task_json if kind == ItemKind.REAL else scale.quality_task_json
    model = Task if kind == ItemKind.REAL else QualityTask
    return _in_order(model, _post(lambda s, owner: as_json(
        scale.create_task(s, owner, task_type, fields, kind, sent))))  # fmt: skip


# -- tasks -------------------------------------------------------------------------------------
@bp.post("/task/comparison")
@_write("Create a comparison task: one of the choices for 2 to 8 attachments (best of K: "
        "the best attachment)", Task, body=NewComparisonTask, errors=(404,))  # fmt: skip
def create_comparison_task(body: NewComparisonTask) -> Any:
    return _create(COMPARISON, body)


@bp.post("/task/categorization")
@_write("Create a categorization task: pick one of 2 to 8 categories for a text",
        Task, body=NewCategorizationTask, errors=(404,))  # fmt: skip
def create_categorization_task(body: NewCategorizationTask) -> Any:
    return _create(CATEGORIZATION, body)


@bp.post("/task/textcollection")
@_write("Create a TextCollection task: a form of category and text fields over attachments",
        Task, body=NewTextCollectionTask, errors=(404,))  # fmt: skip
def create_textcollection_task(body: NewTextCollectionTask) -> Any:
    return _create(TEXTCOLLECTION, body)


@bp.post("/evaluation_tasks/comparison")
@_write("Create an evaluation comparison task: a gold item with its expected choice",
        QualityTask, body=NewComparisonQualityTask, errors=(404,))  # fmt: skip
def create_comparison_evaluation_task(body: NewComparisonQualityTask) -> Any:
    return _create(COMPARISON, body, ItemKind.GOLD)


@bp.post("/evaluation_tasks/categorization")
@_write("Create an evaluation categorization task: a gold item with its expected category",
        QualityTask, body=NewCategorizationQualityTask, errors=(404,))  # fmt: skip
def create_categorization_evaluation_task(body: NewCategorizationQualityTask) -> Any:
    return _create(CATEGORIZATION, body, ItemKind.GOLD)


@bp.post("/evaluation_tasks/textcollection")
@_write("Create an evaluation TextCollection task: a gold item with its expected categories",
        QualityTask, body=NewTextCollectionQualityTask, errors=(404,))  # fmt: skip
def create_textcollection_evaluation_task(body: NewTextCollectionQualityTask) -> Any:
    return _create(TEXTCOLLECTION, body, ItemKind.GOLD)


@bp.post("/training_tasks/comparison")
@_write("Create a training comparison task: shown first, with its expected choice as feedback",
        QualityTask, body=NewComparisonQualityTask, errors=(404,))  # fmt: skip
def create_comparison_training_task(body: NewComparisonQualityTask) -> Any:
    return _create(COMPARISON, body, ItemKind.TRAINING)


@bp.post("/training_tasks/categorization")
@_write("Create a training categorization task: shown first, with its expected category",
        QualityTask, body=NewCategorizationQualityTask, errors=(404,))  # fmt: skip
def create_categorization_training_task(body: NewCategorizationQualityTask) -> Any:
    return _create(CATEGORIZATION, body, ItemKind.TRAINING)


@bp.post("/training_tasks/textcollection")
@_write("Create a training TextCollection task: shown first, with its expected categories",
        QualityTask, body=NewTextCollectionQualityTask, errors=(404,))  # fmt: skip
def create_textcollection_training_task(body: NewTextCollectionQualityTask) -> Any:
    return _create(TEXTCOLLECTION, body, ItemKind.TRAINING)


@bp.get("/task/<task_id>")
@_read("A task (by its task_id, or its unique_id), with its response once completed", AnyTask)
def get_task(task_id: str) -> Any:
    with platform().db.read_session() as session:
        task = scale.get_task(session, experimenter(session), task_id)
        if task.kind != ItemKind.REAL:
            return _in_order(QualityTask, scale.quality_task_json(task))
        return _in_order(Task, scale.task_json(task))


@bp.post("/task/<task_id>/cancel")
@_write("Cancel a pending task: it is no longer served", Task, query=CancelQuery)
def cancel_task(task_id: str, query: CancelQuery) -> Any:
    return _in_order(Task, _post(lambda s, owner: scale.task_json(
        scale.cancel_task(s, owner, task_id, query.clear_unique_id))))  # fmt: skip


@bp.post("/task/<task_id>/audit")
@_write("Accept or reject a completed task's response", Task, body=Audit)
def audit_task(task_id: str, body: Audit) -> Any:
    return _in_order(Task, _post(lambda s, owner: scale.task_json(
        scale.audit_task(s, owner, task_id, body.accepted, body.comments))))  # fmt: skip


@bp.get("/tasks")
@_read("Customer tasks, oldest first, paged by next_token", TaskList, query=TasksQuery,
       errors=(404,))  # fmt: skip
def list_tasks(query: TasksQuery) -> Any:
    filters = query.model_dump(exclude={"limit", "next_token", "limited_response",
                                        "include_attachment_url"})  # fmt: skip
    with platform().db.read_session() as session:
        return _in_order(TaskList, scale_listing.list_tasks(
            session, experimenter(session), filters, query.limit, query.next_token,
            query.limited_response))  # fmt: skip


# -- projects ----------------------------------------------------------------------------------
@bp.post("/projects")
@_write("Create a project and its study", Project, body=NewProject)
def create_project(body: NewProject) -> Any:
    params = None if body.params is None else body.params.model_dump(exclude_unset=True)
    return _post(lambda s, owner: scale.project_json(
        scale.create_project(s, owner, body.name, body.type, params, body.rapid)))  # fmt: skip


@bp.get("/projects")
@_read("Your projects", Projects)
def list_projects() -> Any:
    with platform().db.read_session() as session:
        projects = scale.list_projects(session, experimenter(session))
        return [scale.project_json(project) for project in projects]


@bp.get("/projects/<name>")
@_read("A project, with its study", Project)
def get_project(name: str) -> Any:
    with platform().db.read_session() as session:
        return scale.project_json(scale.get_project(session, experimenter(session), name))


@bp.get("/projects/<name>/label_schedule")
@_read("The online label schedule of Ziegler et al. (2019) for this project", Schedule,
       query=ScheduleQuery,
       description="l(n) = N0 + (N - N0)(1 - (1 - n/N_pi)^2) labels should be in hand before "
       "policy step n, and at least min_outstanding label requests open: the reply says how "
       "many the project has (completed tasks) and has outstanding (pending tasks), and how "
       "many new tasks to send now.")  # fmt: skip
def label_schedule(name: str, query: ScheduleQuery) -> Any:
    schedule = LabelSchedule(initial=query.initial, total=query.total,
                             policy_steps=query.policy_steps,
                             min_outstanding=query.min_outstanding)  # fmt: skip
    with platform().db.read_session() as session:
        project = scale.get_project(session, experimenter(session), name)
        counts = scale.task_counts(session, project)
    reply = schedule.to_json(query.step, counts["completed"], counts["pending"])
    return {"project": name, **reply}


# -- batches -----------------------------------------------------------------------------------
@bp.post("/batches")
@_write("Create a batch of a project: its tasks wait until it is finalized", Batch,
        body=NewBatch, errors=(404,))  # fmt: skip
def create_batch(body: NewBatch) -> Any:
    return _post(lambda s, owner: scale.batch_json(
        s, scale.create_batch(s, owner, body.project, body.name, body.metadata,
                              body.calibration_batch, body.self_label_batch)))  # fmt: skip


@bp.get("/batches")
@_read("Your batches, oldest first, paged by offset", BatchList, query=BatchesQuery,
       errors=(404,))  # fmt: skip
def list_batches(query: BatchesQuery) -> Any:
    with platform().db.read_session() as session:
        return scale_listing.list_batches(
            session, experimenter(session), project=query.project, status=query.status,
            start_time=query.start_time, end_time=query.end_time, limit=query.limit,
            offset=query.offset,
        )  # fmt: skip


@bp.get("/batches/<name>")
@_read("A batch, with its tasks by status", Batch)
def get_batch(name: str) -> Any:
    with platform().db.read_session() as session:
        return scale.batch_json(session, scale.get_batch(session, experimenter(session), name))


@bp.post("/batches/<name>/finalize")
@_write("Release the batch's tasks to workers (again: no change)", Batch)
def finalize_batch(name: str) -> Any:
    return _post(lambda s, owner: scale.batch_json(s, scale.finalize_batch(s, owner, name)))


@bp.get("/batches/<name>/status")
@_read("The batch's status and its tasks by status", BatchState)
def batch_status(name: str) -> Any:
    with platform().db.read_session() as session:
        return scale.batch_status(session, scale.get_batch(session, experimenter(session), name))


# -- the account ---------------------------------------------------------------------------------
@bp.get("/callback_auth_key")
@_read("The secret every callback carries in its scale-callback-auth header", CallbackAuthKey)
def callback_auth_key() -> Any:
    """The secret is created on first use, so this GET may write."""
    with platform().db.session() as session:
        owner = experimenter(session)
        return {"callback_auth_key": scale.callback_auth_key(session, owner.id),
                "header": "scale-callback-auth"}  # fmt: skip
