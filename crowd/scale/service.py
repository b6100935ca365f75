"""The Scale-compatible task API: projects, batches and tasks on top of studies and items.

A Scale project is one study of the experimenter, created with the project (a `form` study
for comparison and textcollection projects, a `comparison` study for categorization and
best-of-K projects: crowd/scale/params.py); a task is one item of that study (an evaluation
task a gold item, a training task a training item), so tasks are served by crowd/work/ to
whichever crowds the study is published to, under the study's QC. What Scale's objects
hold beyond the item lives in storage/scale.py.
The request bodies are declared in crowd/web/schemas/scale.py; the rules between their
fields and the mapping onto items are in params.py, listing in listing.py, completion and
callbacks in completion.py (beside this module).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from crowd.exceptions import (
    AlreadyExists,
    InvalidConfig,
    InvalidItem,
    NotFound,
    ValidationError,
)
from crowd.scale import forms
from crowd.scale.params import (
    TEXTCOLLECTION,
    TaskRequest,
    parse_task,
    project_params,
    request_hash,
)
from crowd.storage import (
    Experimenter,
    Item,
    ItemKind,
    ScaleAccount,
    ScaleBatch,
    ScaleProject,
    ScaleTask,
    ScaleTaskStatus,
    ScaleTaskTag,
    utcnow,
)
from crowd.studies import lifecycle as studies

MAX_PAGE = 100
MAX_COMMENTS = 5000


def timestamp(value: datetime | None) -> str | None:
    """Scale's time format: ISO 8601 in UTC with milliseconds and a Z."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- the account's callback secret ---------------------------------------------------------------
def callback_auth_key(session: Session, experimenter_id: int) -> str:
    """The experimenter's callback secret, created on first use."""
    query = select(ScaleAccount).where(ScaleAccount.experimenter_id == experimenter_id)
    account = session.scalar(query)
    if account is None:
        try:
            with session.begin_nested():
                session.add(
                    ScaleAccount(
                        experimenter_id=experimenter_id,
                        callback_auth_key=secrets.token_urlsafe(32),
                    )
                )
        except IntegrityError:  # created by a concurrent request: use that one
            pass
        account = session.scalar(query)
        if account is None:
            raise RuntimeError(f"no Scale account row for experimenter {experimenter_id}")
    return account.callback_auth_key


# -- projects ----------------------------------------------------------------------------------
def create_project(
    session: Session,
    experimenter: Experimenter,
    name: str,
    task_type: str,
    raw_params: Mapping[str, Any] | None = None,
    rapid: bool = False,
) -> ScaleProject:
    """A project and its study; the study's settings come from params.crowd."""
    params, hit_type, config = project_params(task_type, raw_params)
    if _find_project(session, experimenter.id, name) is not None:
        raise AlreadyExists(f"you already have a project named {name!r}: pick another name")
    try:
        study = studies.create_study(session, experimenter, name, hit_type, config)
    except InvalidConfig as error:
        where = f"params.crowd.{error.where}" if error.where else "params.crowd"
        raise ValidationError(error.message, where) from None
    project = ScaleProject(
        experimenter_id=experimenter.id,
        study_id=study.id,
        name=name,
        type=task_type,
        params=params,
        rapid=rapid,
    )
    try:
        with session.begin_nested():
            session.add(project)
    except IntegrityError:  # the same name, created concurrently
        raise AlreadyExists(f"you already have a project named {name!r}") from None
    return project


def _find_project(session: Session, experimenter_id: int, name: str) -> ScaleProject | None:
    return session.scalar(
        select(ScaleProject).where(
            ScaleProject.experimenter_id == experimenter_id, ScaleProject.name == name
        )
    )


def get_project(session: Session, experimenter: Experimenter, name: str) -> ScaleProject:
    project = _find_project(session, experimenter.id, name)
    if project is None:
        raise NotFound(f"no project named {name!r}: list yours with GET /v1/projects")
    return project


def list_projects(session: Session, experimenter: Experimenter) -> list[ScaleProject]:
    return list(
        session.scalars(
            select(ScaleProject)
            .where(ScaleProject.experimenter_id == experimenter.id)
            .order_by(ScaleProject.id)
            .options(selectinload(ScaleProject.study))
        )
    )


def task_counts(session: Session, project: ScaleProject) -> dict[str, int]:
    """The project's tasks by status (pending, completed, canceled)."""
    rows = session.execute(
        select(ScaleTask.status, func.count(ScaleTask.id))
        .where(ScaleTask.project_id == project.id)
        .group_by(ScaleTask.status)
    ).all()
    counts = {str(status): 0 for status in ScaleTaskStatus}
    counts.update({str(status): int(n) for status, n in rows})
    return counts


def project_json(project: ScaleProject) -> dict[str, Any]:
    created = timestamp(project.created_at)
    study = project.study
    return {
        "type": project.type,
        "name": project.name,
        "params": project.params,
        # scaleapi's Project reads the latest params (and their version) from the history.
        "param_history": [{**project.params, "version": 0, "created_at": created}],
        "created_at": created,
        "rapid": project.rapid,
        "study_id": project.study_id,
        "crowd": {
            "study_id": study.id,
            "hit_type": study.hit_type,
            "study_status": str(study.status),
            "providers": study.providers,
            "annotations_per_item": study.config.get("annotations_per_item"),
        },
    }


# -- batches -----------------------------------------------------------------------------------
def create_batch(
    session: Session,
    experimenter: Experimenter,
    project_name: str,
    name: str,
    metadata: Mapping[str, Any] | None = None,
    calibration_batch: bool = False,
    self_label_batch: bool = False,
) -> ScaleBatch:
    """A batch of the project; its tasks are held until it is finalized."""
    project = get_project(session, experimenter, project_name)
    if _find_batch(session, experimenter.id, name) is not None:
        raise AlreadyExists(f"you already have a batch named {name!r}: pick another name")
    batch = ScaleBatch(
        experimenter_id=experimenter.id,
        project_id=project.id,
        name=name,
        meta=dict(metadata or {}),
        calibration_batch=calibration_batch,
        self_label_batch=self_label_batch,
    )
    try:
        with session.begin_nested():
            session.add(batch)
    except IntegrityError:
        raise AlreadyExists(f"you already have a batch named {name!r}") from None
    return batch


def _find_batch(
    session: Session, experimenter_id: int, name: str, lock: bool = False
) -> ScaleBatch | None:
    query = select(ScaleBatch).where(
        ScaleBatch.experimenter_id == experimenter_id, ScaleBatch.name == name
    )
    return session.scalar(query.with_for_update() if lock else query)


def get_batch(
    session: Session, experimenter: Experimenter, name: str, lock: bool = False
) -> ScaleBatch:
    batch = _find_batch(session, experimenter.id, name, lock)
    if batch is None:
        raise NotFound(f"no batch named {name!r}: create it with POST /v1/batches")
    return batch


def finalize_batch(session: Session, experimenter: Experimenter, name: str) -> ScaleBatch:
    """Release the batch's pending tasks to workers (an evaluation or training task's item
    gets its kind back); finalizing twice changes nothing."""
    batch = get_batch(session, experimenter, name, lock=True)
    if batch.finalized_at is not None:
        return batch
    batch.finalized_at = utcnow()
    held = select(ScaleTask.item_id).where(
        ScaleTask.batch_id == batch.id, ScaleTask.status == ScaleTaskStatus.PENDING
    )
    planned = select(ScaleTask.target).where(ScaleTask.item_id == Item.id).scalar_subquery()
    kind = select(ScaleTask.kind).where(ScaleTask.item_id == Item.id).scalar_subquery()
    session.execute(
        update(Item)
        .where(Item.id.in_(held))
        .values(target=planned, kind=kind)
        .execution_options(synchronize_session=False)
    )
    return batch


def batch_counts(session: Session, batch: ScaleBatch) -> dict[str, int]:
    """The batch's customer tasks by status."""
    counts = dict(
        session.execute(
            select(ScaleTask.status, func.count(ScaleTask.id))
            .where(ScaleTask.batch_id == batch.id, ScaleTask.kind == ItemKind.REAL)
            .group_by(ScaleTask.status)
        ).all()
    )
    return {str(status): int(counts.get(status, 0)) for status in ScaleTaskStatus}


def _batch_status(batch: ScaleBatch, counts: Mapping[str, int]) -> str:
    if batch.finalized_at is None:
        return "staging"
    return "completed" if counts[ScaleTaskStatus.PENDING] == 0 else "in_progress"


def batch_json(session: Session, batch: ScaleBatch) -> dict[str, Any]:
    counts = batch_counts(session, batch)
    return {
        "name": batch.name,
        "project": batch.project.name,
        "status": _batch_status(batch, counts),
        "created_at": timestamp(batch.created_at),
        "finalized_at": timestamp(batch.finalized_at),
        "metadata": batch.meta,
        "callback": batch.callback or "",
        "calibration_batch": batch.calibration_batch,
        "self_label_batch": batch.self_label_batch,
        "tasks": counts,
    }


def batch_status(session: Session, batch: ScaleBatch) -> dict[str, Any]:
    counts = batch_counts(session, batch)
    return {"status": _batch_status(batch, counts), **counts}


# -- tasks -------------------------------------------------------------------------------------
def _by_unique_id(session: Session, experimenter_id: int, unique_id: str) -> ScaleTask | None:
    return session.scalar(
        select(ScaleTask).where(
            ScaleTask.experimenter_id == experimenter_id, ScaleTask.unique_id == unique_id
        )
    )


def _same_or_conflict(task: ScaleTask, fingerprint: str) -> ScaleTask:
    if task.request_hash != fingerprint:
        raise AlreadyExists(
            f"unique_id {task.unique_id!r} belongs to task {task.task_id}, created with other "
            "parameters: use another unique_id, or cancel that task with clear_unique_id=true"
        )
    return task


def _place(
    session: Session, experimenter: Experimenter, task_type: str, fields: Mapping[str, Any]
) -> tuple[ScaleProject, ScaleBatch | None]:
    name, batch_name = fields.get("project"), fields.get("batch")
    if name is None and batch_name is None:
        raise ValidationError("name the project the task belongs to (or its batch)", "project")
    batch = None if batch_name is None else get_batch(session, experimenter, batch_name)
    if batch is not None and name not in (None, batch.project.name):
        raise ValidationError(
            f"batch {batch.name!r} belongs to project {batch.project.name!r}, not {name!r}",
            "batch",
        )
    project = batch.project if batch is not None else get_project(
        session, experimenter, name or "")  # fmt: skip
    if project.type != task_type:
        raise ValidationError(
            f"project {project.name!r} takes {project.type} tasks: create {task_type} tasks "
            "in a project of that type",
            "project",
        )
    return project, batch


def create_task(
    session: Session,
    experimenter: Experimenter,
    task_type: str,
    fields: Mapping[str, Any],
    kind: ItemKind = ItemKind.REAL,
    sent: Mapping[str, Any] | None = None,
) -> ScaleTask:
    """A task and its item from the fields of a checked task body; the same unique_id and
    request again give the same task. `sent` is the body as the client sent it (default:
    `fields`): the fingerprint of a unique_id is the request's, as it always was. A task of
    a batch not finalized yet (an evaluation or training task too) is held until it is."""
    fingerprint = request_hash(str(kind), task_type, dict(sent if sent is not None else fields))
    unique_id = fields.get("unique_id")
    if unique_id is not None:
        existing = _by_unique_id(session, experimenter.id, unique_id)
        if existing is not None:
            return _same_or_conflict(existing, fingerprint)
    project, batch = _place(session, experimenter, task_type, fields)
    request = parse_task(task_type, fields, quality=kind != ItemKind.REAL,
                         hit_type=project.study.hit_type)  # fmt: skip
    task_id = secrets.token_hex(12)
    try:
        # One savepoint for the item and the task: a unique_id taken meanwhile leaves no item.
        with session.begin_nested():
            _import(session, project, request, task_id, kind)
            item = session.scalar(
                select(Item).where(Item.study_id == project.study_id, Item.external_id == task_id)
            )
            if item is None:
                raise RuntimeError(f"the item of task {task_id} was not stored")
            planned = request.target if request.target is not None else item.target
            item.target = planned
            if batch is not None and batch.finalized_at is None:
                # Held until the batch is finalized: a real item nobody is due to answer
                # (gold and training items are served without a target).
                item.target, item.kind = 0, ItemKind.REAL
            task = ScaleTask(
                task_id=task_id,
                experimenter_id=experimenter.id,
                project_id=project.id,
                batch_id=batch.id if batch is not None else None,
                item_id=item.id,
                type=task_type,
                kind=str(kind),
                instruction=request.instruction,
                params=request.params,
                meta=request.metadata,
                tags=request.tags,
                unique_id=request.unique_id,
                request_hash=fingerprint,
                callback_url=request.callback_url,
                target=planned,
                expected_response=request.expected_response,
            )
            session.add(task)
            session.flush()
            session.add_all(ScaleTaskTag(task_pk=task.id, tag=tag) for tag in request.tags)
    except IntegrityError:
        existing = (
            _by_unique_id(session, experimenter.id, request.unique_id)
            if request.unique_id is not None
            else None
        )
        if existing is None:
            raise
        return _same_or_conflict(existing, fingerprint)
    return task


def _import(
    session: Session, project: ScaleProject, request: TaskRequest, task_id: str, kind: ItemKind
) -> None:
    """The task's item; a refused item names the field of the request, not of the item."""
    try:
        studies.import_items(session, project.study, [request.item_record(task_id, kind)],
                             where=lambda _: forms.ITEM)  # fmt: skip
    except InvalidItem as error:
        where = forms.request_path(error.where, request.type, request.params, request.content)
        raise ValidationError(error.message, where) from None


def get_task(
    session: Session, experimenter: Experimenter, task_id: str, lock: bool = False
) -> ScaleTask:
    """A task by its task_id or, where none has it, by its unique_id (scaleapi's get_task
    after a 409 on create, as HELM's client does)."""
    for column in (ScaleTask.task_id, ScaleTask.unique_id):
        query = select(ScaleTask).where(column == task_id,
                                        ScaleTask.experimenter_id == experimenter.id)  # fmt: skip
        task = session.scalar(query.with_for_update() if lock else query)
        if task is not None:
            return task
    raise NotFound(f"no task {task_id!r}: list yours with GET /v1/tasks?project=NAME")


def cancel_task(
    session: Session, experimenter: Experimenter, task_id: str, clear_unique_id: bool = False
) -> ScaleTask:
    """Stop serving a pending task; its answers so far stay in the study."""
    task = get_task(session, experimenter, task_id, lock=True)
    if task.kind != ItemKind.REAL:
        raise ValidationError(
            "evaluation and training tasks cannot be canceled: they are part of the project's "
            "quality control",
            "task_id",
        )
    if task.status == ScaleTaskStatus.CANCELED and not clear_unique_id:
        raise ValidationError(f"task {task_id} is already canceled", "task_id")
    if task.status == ScaleTaskStatus.COMPLETED:
        raise ValidationError(
            f"task {task_id} is completed and cannot be canceled: audit it instead", "task_id"
        )
    task.status = ScaleTaskStatus.CANCELED
    if clear_unique_id:
        task.unique_id = None
    task.updated_at = utcnow()
    session.execute(update(Item).where(Item.id == task.item_id).values(target=0))
    return task


def audit_task(
    session: Session,
    experimenter: Experimenter,
    task_id: str,
    accepted: bool,
    comments: str | None = None,
) -> ScaleTask:
    """Record the customer's acceptance (or rejection) of a completed task."""
    task = get_task(session, experimenter, task_id, lock=True)
    if task.status != ScaleTaskStatus.COMPLETED:
        raise ValidationError(f"task {task_id} is {task.status}: only completed tasks are audited")
    now = utcnow()
    audit = {"accepted": accepted, "comments": comments, "source": "customer",
             "created_at": timestamp(now)}  # fmt: skip
    task.audits = [*task.audits, audit]
    task.customer_review_status = "accepted" if accepted else "rejected"
    task.updated_at = now
    return task


def task_json(task: ScaleTask) -> dict[str, Any]:
    """The task object in Scale's shape, with where it lives here under `crowd` (a reply puts
    a TextCollection response in field order: in_field_order)."""
    data: dict[str, Any] = {
        "task_id": task.task_id,
        "type": task.type,
        "status": str(task.status),
        "created_at": timestamp(task.created_at),
        "updated_at": timestamp(task.updated_at),
        "instruction": task.instruction,
        "params": task.params,
        "metadata": task.meta,
        "tags": task.tags,
        "callback_url": task.callback_url or "",
        "project": task.project.name,
        "is_test": False,
        "audits": task.audits,
        "callback_succeeded": task.callback_succeeded,
        "crowd": {
            "study_id": task.project.study_id,
            "item_id": task.item_id,
            "kind": task.kind,
        },
    }
    if task.unique_id is not None:
        data["unique_id"] = task.unique_id
    if task.batch is not None:
        data["batch"] = task.batch.name
    if task.customer_review_status is not None:
        data["customer_review_status"] = task.customer_review_status
    if task.completed_at is not None:
        data["completed_at"] = timestamp(task.completed_at)
    if task.response is not None:
        data["response"] = task.response
    return data


def in_field_order(task: dict[str, Any]) -> dict[str, Any]:
    """A TextCollection task's response with each respondent's answers (and the annotations)
    in the order of the task's fields: HELM's client pairs them with the fields by position,
    and a JSON object's key order is lost in PostgreSQL's jsonb (and in sorted JSON)."""
    response = task.get("response")
    fields = (task.get("params") or {}).get("fields")
    if task.get("type") != TEXTCOLLECTION or not isinstance(response, dict) or not fields:
        return task
    ids = [field["field_id"] for field in fields]

    def ordered(answers: Any) -> Any:
        if not isinstance(answers, dict):
            return answers
        return {key: answers[key] for key in ids if key in answers} | answers

    response = {**response, "responses": [ordered(r) for r in response.get("responses", [])],
                "annotations": ordered(response.get("annotations"))}  # fmt: skip
    return {**task, "response": response}


def quality_task_json(task: ScaleTask) -> dict[str, Any]:
    """An evaluation or training task as scaleapi's EvaluationTask/TrainingTask read it."""
    return {"id": task.task_id, **task_json(task), "expected_response": task.expected_response}
