"""Completing Scale tasks from accepted answers, and the callbacks that report them.

A task is complete once its item has its target number of answers that QC accepts: answers
of workers the study's QC excluded (crowd.quality.exclusion.excluded_by), of blocked workers, and of
rejected assignments do not count, and each of them raises the item's target by one so
another worker answers in its place. The response is made of the accepted answers, best-of-K
picks (`answer["best"]`) or form answers (`answer["fields"]`), in Scale's shape for the
task's type (crowd.scale.params.task_response). Then the task's callback is scheduled as a signed,
retried delivery (crowd.delivery.signed) carrying Scale's `scale-callback-auth` header; its outcome
sets the task's `callback_succeeded`.

Runs when the queue handles each stored answer's outbox event (crowd.queue.jobs.process_event),
after the QC refresh of the answering worker; running it twice completes nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.delivery.signed import on_delivery_body, on_delivery_outcome, schedule_delivery
from crowd.exceptions import ValidationError
from crowd.quality.exclusion import left_out_workers
from crowd.queue.hooks import AFTER_QC, Event, on_event
from crowd.scale.params import task_response
from crowd.scale.service import callback_auth_key, in_field_order, task_json
from crowd.storage import (
    Assignment,
    AssignmentState,
    Delivery,
    DeliveryStatus,
    Item,
    ItemKind,
    Response,
    ResponseSource,
    ScaleProject,
    ScaleTask,
    ScaleTaskStatus,
    utcnow,
)
from crowd.storage.outbox import RESPONSE_EXPLAINED, RESPONSE_STORED, WORKER_BLOCKED

log = logging.getLogger(__name__)

CALLBACK_KIND = "scale.callback"
CALLBACK_AUTH_HEADER = "scale-callback-auth"


def after_response(session: Session, response_id: int) -> list[str]:
    """Complete the Scale tasks this answer may finish; returns the completed task ids."""
    response = session.get(Response, response_id)
    if response is None:
        return []
    project = session.scalar(select(ScaleProject).where(ScaleProject.study_id == response.study_id))
    if project is None:
        return []
    study = project.study
    left_out = left_out_workers(session, study)
    items = {response.item_id}
    if response.worker_id in left_out:
        # The worker was just excluded: every pending task they answered needs a new answer.
        items |= set(
            session.scalars(
                select(Response.item_id).where(
                    Response.study_id == study.id, Response.worker_id == response.worker_id
                )
            )
        )
    return settle(session, project, items, left_out)


def after_block(session: Session, study_id: int, worker_id: int) -> list[str]:
    """A reviewer blocked a worker: reopen (or complete) the pending tasks they answered."""
    project = session.scalar(select(ScaleProject).where(ScaleProject.study_id == study_id))
    if project is None:
        return []
    items = session.scalars(
        select(Response.item_id).where(
            Response.study_id == study_id, Response.worker_id == worker_id
        )
    )
    return settle(session, project, items, left_out_workers(session, project.study))


def settle(
    session: Session, project: ScaleProject, item_ids: Iterable[int], left_out: set[int]
) -> list[str]:
    """Complete the project's pending tasks of these items that have enough accepted answers."""
    ids = sorted(set(item_ids))
    if not ids:
        return []
    tasks = session.scalars(
        select(ScaleTask)
        .where(
            ScaleTask.project_id == project.id,
            ScaleTask.item_id.in_(ids),
            ScaleTask.kind == ItemKind.REAL,
            ScaleTask.status == ScaleTaskStatus.PENDING,
        )
        .order_by(ScaleTask.id)
        .with_for_update()
    ).all()
    if not tasks:
        return []
    rows = session.execute(
        select(Response.item_id, Response.worker_id, Response.answer, Assignment.state)
        .outerjoin(Assignment, Assignment.id == Response.assignment_id)
        .where(
            Response.item_id.in_([task.item_id for task in tasks]),
            Response.source == ResponseSource.LIVE,
        )
        .order_by(Response.id)
    ).all()
    default_target = int(project.study.config.get("annotations_per_item", 1))
    completed = []
    for task in tasks:
        answers = [row for row in rows if row.item_id == task.item_id]
        accepted = [
            row.answer
            for row in answers
            if row.worker_id not in left_out and row.state != AssignmentState.REJECTED
        ]
        needed = task.target if task.target is not None else default_target
        if needed > 0 and len(accepted) >= needed:
            complete(session, task, accepted)
            completed.append(task.task_id)
        elif len(answers) > len(accepted):
            _reopen(session, task, needed + len(answers) - len(accepted))
    return completed


def _reopen(session: Session, task: ScaleTask, target: int) -> None:
    """Let more workers answer in place of answers that do not count (never for held tasks)."""
    if task.batch is not None and task.batch.finalized_at is None:
        return
    item = session.get(Item, task.item_id)
    if item is not None and (item.target is None or item.target < target):
        item.target = target


def complete(session: Session, task: ScaleTask, answers: list[dict[str, Any]]) -> None:
    """Mark the task completed with the aggregated response and schedule its callback."""
    now = utcnow()
    task.response = task_response(task.type, task.params, answers)
    task.status = ScaleTaskStatus.COMPLETED
    task.completed_at = now
    task.updated_at = now
    log.info("Scale task %s completed from %d answers", task.task_id, len(answers))
    if not task.callback_url:
        return
    key = callback_auth_key(session, task.experimenter_id)
    try:
        delivery = schedule_delivery(
            session,
            CALLBACK_KIND,
            task.callback_url,
            callback_body(task),
            headers={CALLBACK_AUTH_HEADER: key},
            ref=f"scale-task:{task.task_id}",
            secret=key,
        )
    except ValidationError as error:  # checked on creation; a job must not fail on it forever
        log.warning("Scale task %s: no callback (%s)", task.task_id, error)
        task.callback_succeeded = False
        return
    task.delivery_id = delivery.id


def callback_body(task: ScaleTask) -> dict[str, Any]:
    """What Scale POSTs to a task's callback_url: the task, its response and its id."""
    return {"task": task_json(task), "response": task.response, "task_id": task.task_id}


def in_sent_order(payload: dict[str, Any]) -> dict[str, Any]:
    """A stored callback body as it is sent: a TextCollection response's answers in the
    order of the task's fields (HELM pairs them by position), which the stored payload
    loses; the rest as stored."""
    task = payload.get("task")
    if not isinstance(task, dict):
        return payload
    ordered = in_field_order(task)
    if "response" in ordered and "response" in payload:
        return {**payload, "task": ordered, "response": ordered["response"]}
    return {**payload, "task": ordered}


on_delivery_body(CALLBACK_KIND, in_sent_order)


def record_callback_outcome(session: Session, delivery: Delivery) -> None:
    """Set callback_succeeded once the callback got a 2xx, or was given up after 24 h."""
    task = session.scalar(select(ScaleTask).where(ScaleTask.delivery_id == delivery.id))
    if task is None:
        log.warning("Scale callback delivery %s belongs to no task", delivery.id)
        return
    task.callback_succeeded = delivery.status == DeliveryStatus.SUCCEEDED
    task.updated_at = utcnow()


on_delivery_outcome(CALLBACK_KIND, record_callback_outcome)


# After the QC refresh, and after the webhooks of the same event (the order it always had).
@on_event(RESPONSE_STORED, RESPONSE_EXPLAINED, order=AFTER_QC + 10)
def settle_after_response(session: Session, event: Event) -> None:
    after_response(session, int(event.payload["response_id"]))


@on_event(WORKER_BLOCKED, order=AFTER_QC + 10)
def settle_after_block(session: Session, event: Event) -> None:
    after_block(session, int(event.payload["study_id"]), int(event.payload["worker_id"]))
