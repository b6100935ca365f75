"""The Scale-compatible task API under /v1, for the official `scaleapi` client.

`ScaleClient(api_key, api_instance_url="http://HOST/v1")` works against it: the client sends
the key as the user name of HTTP Basic auth, reads only 200 replies as success, and maps
other statuses to its exceptions from the `error` field of the JSON body, which is why every
success here is a 200 and every error is `{"status_code", "error"}` (422s become 400s).

A POST with an `Idempotency-Key` header is done once: the same key with the same request
gets the stored reply, with another request a 409.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from flask import Blueprint, jsonify, request
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from werkzeug.exceptions import HTTPException

from crowd.accounts import authenticate
from crowd.context import platform
from crowd.exceptions import AlreadyExists, AuthenticationError, CrowdError, ValidationError
from crowd.scale import listing as scale_listing
from crowd.scale import service as scale
from crowd.scale.params import request_hash
from crowd.storage import Experimenter, IdempotentReply, ItemKind
from crowd.web.common import bearer_token, json_body

bp = Blueprint("scale", __name__, url_prefix="/v1")

IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_IDEMPOTENCY_KEY = 255
Handler = Callable[[Session, Experimenter, dict[str, Any]], dict[str, Any]]


def _error(status: int, message: str, kind: str) -> Any:
    reply = jsonify(status_code=status, error=message, type=kind)
    reply.status_code = status
    if status == 401:
        reply.headers["WWW-Authenticate"] = 'Basic realm="crowd"'
    return reply


@bp.errorhandler(CrowdError)
def crowd_error(error: CrowdError) -> Any:
    # scaleapi knows 400 (invalid request), not 422.
    status = 400 if isinstance(error, ValidationError) and error.status == 422 else error.status
    return _error(status, str(error), type(error).__name__)


@bp.errorhandler(HTTPException)
def http_error(error: HTTPException) -> Any:
    return _error(error.code or 500, str(error.description), error.name)


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
    body = json_body()
    key = request.headers.get(IDEMPOTENCY_HEADER)
    with platform().db.session() as session:
        owner = experimenter(session)
        if key is None:
            return handler(session, owner, body), 200
        if not 0 < len(key) <= MAX_IDEMPOTENCY_KEY:
            raise ValidationError(
                f"must be 1 to {MAX_IDEMPOTENCY_KEY} characters", IDEMPOTENCY_HEADER
            )
        fingerprint = request_hash(request.method, request.path, request.args.to_dict(False), body)
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
        reply = handler(session, owner, body)
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


def _args() -> dict[str, list[str]]:
    return request.args.to_dict(flat=False)


# -- tasks -------------------------------------------------------------------------------------
@bp.post("/task/<task_type>")
def create_task(task_type: str) -> Any:
    return _post(lambda s, owner, body: scale.task_json(
        scale.create_task(s, owner, task_type, body)))  # fmt: skip


@bp.post("/evaluation_tasks/<task_type>")
def create_evaluation_task(task_type: str) -> Any:
    return _post(lambda s, owner, body: scale.quality_task_json(
        scale.create_task(s, owner, task_type, body, ItemKind.GOLD)))  # fmt: skip


@bp.post("/training_tasks/<task_type>")
def create_training_task(task_type: str) -> Any:
    return _post(lambda s, owner, body: scale.quality_task_json(
        scale.create_task(s, owner, task_type, body, ItemKind.TRAINING)))  # fmt: skip


@bp.get("/task/<task_id>")
def get_task(task_id: str) -> Any:
    with platform().db.read_session() as session:
        task = scale.get_task(session, experimenter(session), task_id)
        if task.kind != ItemKind.REAL:
            return scale.quality_task_json(task)
        return scale.task_json(task)


@bp.post("/task/<task_id>/cancel")
def cancel_task(task_id: str) -> Any:
    clear = request.args.get("clear_unique_id", "false")
    if clear not in ("true", "false"):
        raise ValidationError("must be true or false", "clear_unique_id")
    return _post(lambda s, owner, _body: scale.task_json(
        scale.cancel_task(s, owner, task_id, clear == "true")))  # fmt: skip


@bp.post("/task/<task_id>/audit")
def audit_task(task_id: str) -> Any:
    return _post(lambda s, owner, body: scale.task_json(
        scale.audit_task(s, owner, task_id, body)))  # fmt: skip


@bp.get("/tasks")
def list_tasks() -> Any:
    with platform().db.read_session() as session:
        return scale_listing.list_tasks(session, experimenter(session), _args())


# -- projects ----------------------------------------------------------------------------------
@bp.post("/projects")
def create_project() -> Any:
    return _post(lambda s, owner, body: scale.project_json(
        scale.create_project(s, owner, body)))  # fmt: skip


@bp.get("/projects")
def list_projects() -> Any:
    with platform().db.read_session() as session:
        projects = scale.list_projects(session, experimenter(session))
        return jsonify([scale.project_json(project) for project in projects])


@bp.get("/projects/<name>")
def get_project(name: str) -> Any:
    with platform().db.read_session() as session:
        return scale.project_json(scale.get_project(session, experimenter(session), name))


@bp.get("/projects/<name>/label_schedule")
def label_schedule(name: str) -> Any:
    """The online label schedule l(n) of Ziegler et al. (2019) for this project.

    Query: step (the policy step n), initial (N0), total (N), policy_steps (N_pi) and
    optionally min_outstanding (default 1000). The reply says how many labels should be in
    hand before step n, how many the project has (completed tasks) and has outstanding
    (pending tasks), and how many new tasks to send now.
    """
    from models.reward.schedule import MIN_OUTSTANDING, LabelSchedule

    def number(key: str, default: float | None = None, whole: bool = True) -> Any:
        raw = request.args.get(key)
        if raw is None:
            if default is None:
                raise ValidationError(f"give {key} as a query parameter", key)
            return default
        try:
            value = int(raw) if whole else float(raw)
        except ValueError:
            raise ValidationError("must be a number" + (" (whole)" if whole else ""), key) from None
        if not math.isfinite(value) or value < 0 or value > 10**12:
            raise ValidationError("must be between 0 and 10^12", key)
        return value

    schedule = LabelSchedule(
        initial=number("initial"), total=number("total"), policy_steps=number("policy_steps"),
        min_outstanding=number("min_outstanding", MIN_OUTSTANDING),
    )  # fmt: skip
    step = number("step", whole=False)
    with platform().db.read_session() as session:
        project = scale.get_project(session, experimenter(session), name)
        counts = scale.task_counts(session, project)
    reply = schedule.to_json(step, counts["completed"], counts["pending"])
    return {"project": name, **reply}


# -- batches -----------------------------------------------------------------------------------
@bp.post("/batches")
def create_batch() -> Any:
    return _post(lambda s, owner, body: scale.batch_json(
        s, scale.create_batch(s, owner, body)))  # fmt: skip


@bp.get("/batches")
def list_batches() -> Any:
    with platform().db.read_session() as session:
        return scale_listing.list_batches(session, experimenter(session), _args())


@bp.get("/batches/<name>")
def get_batch(name: str) -> Any:
    with platform().db.read_session() as session:
        return scale.batch_json(session, scale.get_batch(session, experimenter(session), name))


@bp.post("/batches/<name>/finalize")
def finalize_batch(name: str) -> Any:
    return _post(lambda s, owner, _body: scale.batch_json(
        s, scale.finalize_batch(s, owner, name)))  # fmt: skip


@bp.get("/batches/<name>/status")
def batch_status(name: str) -> Any:
    with platform().db.read_session() as session:
        return scale.batch_status(session, scale.get_batch(session, experimenter(session), name))


# -- the account ---------------------------------------------------------------------------------
@bp.get("/callback_auth_key")
def callback_auth_key() -> Any:
    """The secret every callback carries in its scale-callback-auth header (created once)."""
    with platform().db.session() as session:
        owner = experimenter(session)
        return {"callback_auth_key": scale.callback_auth_key(session, owner.id),
                "header": "scale-callback-auth"}  # fmt: skip


# -- the OpenAPI description (merged into /openapi.json by crowd.web.openapi) --------------------
def _op(summary: str, params: tuple[str, ...] = (), query: tuple[str, ...] = (),
        body: bool = False) -> dict[str, Any]:  # fmt: skip
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in params
    ] + [{"name": name, "in": "query", "schema": {"type": "string"}} for name in query]
    operation: dict[str, Any] = {
        "summary": summary,
        "tags": ["scale"],
        "parameters": parameters,
        "security": [{"scaleBasic": []}, {"apiKey": []}],
        "responses": {"200": {"description": "ok"},
                      "4XX": {"description": "{status_code, error}"}},
    }  # fmt: skip
    if body:
        operation["requestBody"] = {"content": {"application/json": {"schema": {"type": "object"}}}}
    return operation


TASK_CREATE = (
    "Create a {kind} of the task type (comparison: instruction, attachments, choices; "
    "categorization: attachment, categories, instruction; both: project, batch, callback_url, "
    "metadata, tags, unique_id{extra}); optional Idempotency-Key header"
)


def openapi_paths() -> dict[str, Any]:
    """The /v1 routes for /openapi.json."""
    task_query = tuple(sorted(scale_listing.TASK_LIST_PARAMS))
    batch_query = tuple(sorted(scale_listing.BATCH_LIST_PARAMS))
    return {
        "/v1/task/{task_type}": {"post": _op(
            TASK_CREATE.format(kind="task", extra=""), ("task_type",), body=True)},
        "/v1/evaluation_tasks/{task_type}": {"post": _op(
            TASK_CREATE.format(kind="gold (evaluation) task", extra=", expected_response"),
            ("task_type",), body=True)},
        "/v1/training_tasks/{task_type}": {"post": _op(
            TASK_CREATE.format(kind="training task", extra=", expected_response"),
            ("task_type",), body=True)},
        "/v1/task/{task_id}": {"get": _op("A task, with its response once completed",
                                          ("task_id",))},
        "/v1/task/{task_id}/cancel": {"post": _op(
            "Cancel a pending task", ("task_id",), ("clear_unique_id",))},
        "/v1/task/{task_id}/audit": {"post": _op(
            "Accept or reject a completed task: {accepted, comments}", ("task_id",), body=True)},
        "/v1/tasks": {"get": _op("Customer tasks, oldest first, paged by next_token",
                                 query=task_query)},
        "/v1/projects": {
            "get": _op("Your projects"),
            "post": _op("Create a project and its study: {name, type, params: {instruction, "
                        "crowd: <study config>}}", body=True),
        },
        "/v1/projects/{name}": {"get": _op("A project (with its study id)", ("name",))},
        "/v1/projects/{name}/label_schedule": {
            "get": _op("The online label schedule l(n) = N0 + (N - N0)(1 - (1 - n/N_pi)^2): "
                       "query step, initial, total, policy_steps, min_outstanding (1000); "
                       "labels wanted, completed, pending and tasks to send now", ("name",))
        },
        "/v1/batches": {
            "get": _op("Your batches (offset paging)", query=batch_query),
            "post": _op("Create a batch: {project, name, metadata, callback}", body=True),
        },
        "/v1/batches/{name}": {"get": _op("A batch", ("name",))},
        "/v1/batches/{name}/finalize": {"post": _op(
            "Release the batch's tasks to workers", ("name",))},
        "/v1/batches/{name}/status": {"get": _op("Counts of the batch's tasks by status",
                                                ("name",))},
        "/v1/callback_auth_key": {"get": _op(
            "The secret sent as the scale-callback-auth header of every callback")},
    }  # fmt: skip
