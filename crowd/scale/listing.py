"""Listing Scale tasks and batches: the filters scaleapi sends, next_token and offset paging.

Tasks come oldest first and are paged by an opaque `next_token` (the last task seen), as
scaleapi's `tasks()` and `get_tasks()` expect; batches by limit and offset, as its
`batches()` does. Evaluation and training tasks are not customer tasks and are never listed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session, selectinload

from crowd.exceptions import ValidationError
from crowd.scale.service import MAX_PAGE, batch_json, get_batch, get_project, task_json
from crowd.storage import (
    MAX_ID,
    Experimenter,
    ItemKind,
    ScaleBatch,
    ScaleTask,
    ScaleTaskStatus,
    ScaleTaskTag,
)

# Ids are 64-bit signed integers in the database.


def encode_token(after: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode().rstrip("=")


def decode_token(token: str) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        after = data["after"]
    except (binascii.Error, ValueError, TypeError, KeyError):
        after = None
    # A forged larger number would overflow the database's integer: refused like garbage.
    if not isinstance(after, int) or isinstance(after, bool) or not 0 <= after <= MAX_ID:
        raise ValidationError("is not a token this server gave out: start again without it",
                              "next_token")  # fmt: skip
    return after


def _filtered_tasks(
    session: Session, experimenter: Experimenter, filters: Mapping[str, Any]
) -> Select[Any]:
    query = select(ScaleTask).where(
        ScaleTask.experimenter_id == experimenter.id, ScaleTask.kind == ItemKind.REAL
    )
    if filters.get("project"):
        project = get_project(session, experimenter, filters["project"])
        query = query.where(ScaleTask.project_id == project.id)
    if filters.get("batch"):
        batch = get_batch(session, experimenter, filters["batch"])
        query = query.where(ScaleTask.batch_id == batch.id)
    if filters.get("status") is not None:
        query = query.where(ScaleTask.status == filters["status"])
    if filters.get("type") is not None:
        query = query.where(ScaleTask.type == filters["type"])
    bounds = {
        "start_time": (ScaleTask.created_at, True), "created_after": (ScaleTask.created_at, True),
        "end_time": (ScaleTask.created_at, False), "created_before": (ScaleTask.created_at, False),
        "completed_after": (ScaleTask.completed_at, True),
        "completed_before": (ScaleTask.completed_at, False),
        "updated_after": (ScaleTask.updated_at, True),
        "updated_before": (ScaleTask.updated_at, False),
    }  # fmt: skip
    for name, (column, lower) in bounds.items():
        when = filters.get(name)
        if when is not None:
            query = query.where(column >= when if lower else column <= when)
    for tag in filters.get("tags") or []:
        query = query.where(
            ScaleTask.id.in_(select(ScaleTaskTag.task_pk).where(ScaleTaskTag.tag == tag))
        )
    unique_ids = filters.get("unique_id")
    if unique_ids:
        query = query.where(ScaleTask.unique_id.in_(unique_ids))
    reviews = filters.get("customer_review_status")
    if reviews:
        named = [r for r in reviews if r != "pending"]
        condition: ColumnElement[bool] = ScaleTask.customer_review_status.in_(named)
        if "pending" in reviews:  # completed and not audited yet
            condition = condition | (
                (ScaleTask.status == ScaleTaskStatus.COMPLETED)
                & ScaleTask.customer_review_status.is_(None)
            )
        query = query.where(condition)
    return query


def list_tasks(
    session: Session,
    experimenter: Experimenter,
    filters: Mapping[str, Any],
    limit: int = MAX_PAGE,
    next_token: str | None = None,
    limited: bool = False,
) -> dict[str, Any]:
    """A page of customer tasks, oldest first; evaluation and training tasks are left out.

    `filters` are the checked values of the query (crowd.web.schemas.scale.TasksQuery):
    project, batch, status, type, the time bounds as datetimes, and lists of tags, unique_ids
    and customer_review_statuses.
    """
    query = _filtered_tasks(session, experimenter, filters)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    after = decode_token(next_token) if next_token else 0
    offset = 0
    if after:
        before = query.where(ScaleTask.id <= after).subquery()
        offset = session.scalar(select(func.count()).select_from(before)) or 0
    rows = session.scalars(
        query.where(ScaleTask.id > after)
        .order_by(ScaleTask.id)
        .limit(limit + 1)
        .options(selectinload(ScaleTask.project), selectinload(ScaleTask.batch))
    ).all()
    page, has_more = rows[:limit], len(rows) > limit
    docs = [task_json(task) for task in page]
    if limited:
        keys = ("task_id", "status", "metadata", "project")
        docs = [{key: doc[key] for key in keys} for doc in docs]
    return {
        "docs": docs,
        "total": total,
        "limit": limit,
        "offset": offset,
        "has_more": has_more,
        "next_token": encode_token(page[-1].id) if has_more else None,
    }


def list_batches(
    session: Session,
    experimenter: Experimenter,
    project: str | None = None,
    status: str | None = None,
    start_time: datetime | None = None,
    end_time: datetime | None = None,
    limit: int = MAX_PAGE,
    offset: int = 0,
) -> dict[str, Any]:
    """A page of batches (offset paging, as scaleapi's batches() does); none are archived."""
    query = select(ScaleBatch).where(ScaleBatch.experimenter_id == experimenter.id)
    if project:
        query = query.where(ScaleBatch.project_id == get_project(session, experimenter, project).id)
    if start_time is not None:
        query = query.where(ScaleBatch.created_at >= start_time)
    if end_time is not None:
        query = query.where(ScaleBatch.created_at <= end_time)
    rows = [batch_json(session, batch) for batch in session.scalars(query.order_by(ScaleBatch.id))]
    if status is not None:
        rows = [row for row in rows if row["status"] == status]
    page = rows[offset : offset + limit]
    return {
        "docs": page,
        "totalDocs": len(rows),
        "limit": limit,
        "offset": offset,
        "has_more": offset + len(page) < len(rows),
    }
