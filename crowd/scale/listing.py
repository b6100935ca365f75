"""Listing Scale tasks and batches: the filters scaleapi sends, next_token and offset paging.

Tasks come oldest first and are paged by an opaque `next_token` (the last task seen), as
scaleapi's `tasks()` and `get_tasks()` expect; batches by limit and offset, as its
`batches()` does. Evaluation and training tasks are not customer tasks and are never listed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session, selectinload

from crowd.exceptions import ValidationError
from crowd.scale.params import TASK_TYPES
from crowd.scale.service import MAX_PAGE, batch_json, get_batch, get_project, task_json
from crowd.storage import (
    Experimenter,
    ItemKind,
    ScaleBatch,
    ScaleTask,
    ScaleTaskStatus,
    ScaleTaskTag,
)

TASK_LIST_PARAMS = frozenset(
    {
        "project", "batch", "status", "type", "start_time", "end_time", "created_after",
        "created_before", "completed_after", "completed_before", "updated_after",
        "updated_before", "tags", "unique_id", "customer_review_status", "limit", "next_token",
        "include_attachment_url", "limited_response",
    }
)  # fmt: skip
BATCH_LIST_PARAMS = frozenset(
    {"project", "status", "start_time", "end_time", "limit", "offset", "exclude_archived"}
)
BATCH_STATUSES = ("staging", "in_progress", "completed")


def parse_time(value: str, where: str) -> datetime:
    """'YYYY-MM-DD HH:MM:SS.mmmmmm' (what scaleapi documents) or any ISO 8601; naive is UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValidationError(
            "must be a time like '2026-01-31 12:00:00.000000' (UTC) or ISO 8601", where
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _bool_arg(value: str, where: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0"):
        raise ValidationError("must be true or false", where)
    return value.lower() in ("true", "1")


def _int_arg(value: str, where: str, low: int, high: int) -> int:
    if not value.strip().isdigit() or not low <= int(value) <= high:
        raise ValidationError(f"must be a whole number from {low} to {high}", where)
    return int(value)


def _known(args: Mapping[str, Sequence[str]], allowed: frozenset[str]) -> None:
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ValidationError(f"unknown query parameters {unknown}; use {sorted(allowed)}")


def _arg(args: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = args.get(name) or []
    return values[-1] if values else None


def _values(args: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """A list parameter sent as repeated keys (what requests does) or comma-separated."""
    return [part for value in args.get(name) or [] for part in value.split(",") if part]


def encode_token(after: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode().rstrip("=")


def decode_token(token: str) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        after = data["after"]
    except (binascii.Error, ValueError, TypeError, KeyError):
        after = None
    if not isinstance(after, int) or isinstance(after, bool):
        raise ValidationError("is not a token this server gave out: start again without it",
                              "next_token")  # fmt: skip
    return after


def _filtered_tasks(
    session: Session, experimenter: Experimenter, args: Mapping[str, Sequence[str]]
) -> Select[Any]:
    query = select(ScaleTask).where(
        ScaleTask.experimenter_id == experimenter.id, ScaleTask.kind == ItemKind.REAL
    )
    if _arg(args, "project"):
        project = get_project(session, experimenter, _arg(args, "project") or "")
        query = query.where(ScaleTask.project_id == project.id)
    if _arg(args, "batch"):
        query = query.where(
            ScaleTask.batch_id == get_batch(session, experimenter, _arg(args, "batch") or "").id
        )
    status = _arg(args, "status")
    if status is not None:
        if status not in {s.value for s in ScaleTaskStatus}:
            raise ValidationError(f"must be one of {[s.value for s in ScaleTaskStatus]}", "status")
        query = query.where(ScaleTask.status == status)
    task_type = _arg(args, "type")
    if task_type is not None:
        if task_type not in TASK_TYPES:
            raise ValidationError(f"must be one of {list(TASK_TYPES)}", "type")
        query = query.where(ScaleTask.type == task_type)
    bounds = {
        "start_time": (ScaleTask.created_at, True), "created_after": (ScaleTask.created_at, True),
        "end_time": (ScaleTask.created_at, False), "created_before": (ScaleTask.created_at, False),
        "completed_after": (ScaleTask.completed_at, True),
        "completed_before": (ScaleTask.completed_at, False),
        "updated_after": (ScaleTask.updated_at, True),
        "updated_before": (ScaleTask.updated_at, False),
    }  # fmt: skip
    for name, (column, lower) in bounds.items():
        value = _arg(args, name)
        if value:
            when = parse_time(value, name)
            query = query.where(column >= when if lower else column <= when)
    for tag in _values(args, "tags"):
        query = query.where(
            ScaleTask.id.in_(select(ScaleTaskTag.task_pk).where(ScaleTaskTag.tag == tag))
        )
    unique_ids = _values(args, "unique_id")
    if unique_ids:
        query = query.where(ScaleTask.unique_id.in_(unique_ids))
    reviews = _values(args, "customer_review_status")
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
    session: Session, experimenter: Experimenter, args: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """A page of customer tasks, oldest first; evaluation and training tasks are left out."""
    _known(args, TASK_LIST_PARAMS)
    limit = _int_arg(_arg(args, "limit") or str(MAX_PAGE), "limit", 1, MAX_PAGE)
    for flag in ("include_attachment_url", "limited_response"):
        if _arg(args, flag) is not None:
            _bool_arg(_arg(args, flag) or "", flag)
    limited = _bool_arg(_arg(args, "limited_response") or "false", "limited_response")
    query = _filtered_tasks(session, experimenter, args)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    token = _arg(args, "next_token")
    after = decode_token(token) if token else 0
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
    session: Session, experimenter: Experimenter, args: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """A page of batches (offset paging, as scaleapi's batches() does)."""
    _known(args, BATCH_LIST_PARAMS)
    query = select(ScaleBatch).where(ScaleBatch.experimenter_id == experimenter.id)
    project = _arg(args, "project")
    if project:
        query = query.where(ScaleBatch.project_id == get_project(session, experimenter, project).id)
    for name, lower in (("start_time", True), ("end_time", False)):
        value = _arg(args, name)
        if value:
            when = parse_time(value, name)
            query = query.where(
                ScaleBatch.created_at >= when if lower else ScaleBatch.created_at <= when
            )
    status = _arg(args, "status")
    if status is not None and status not in BATCH_STATUSES:
        raise ValidationError(f"must be one of {list(BATCH_STATUSES)}", "status")
    limit = _int_arg(_arg(args, "limit") or str(MAX_PAGE), "limit", 1, MAX_PAGE)
    offset = _int_arg(_arg(args, "offset") or "0", "offset", 0, 10**9)
    if _arg(args, "exclude_archived") is not None:
        _bool_arg(_arg(args, "exclude_archived") or "", "exclude_archived")  # none are archived
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
