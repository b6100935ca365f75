"""The Scale-compatible API's records: projects, batches, tasks and idempotent replies.

A Scale project is one study of the experimenter; a task is one item of that study. What
Scale's objects hold beyond the item (the caller's params and metadata, the unique_id, the
callback URL, the aggregated response) lives here, so the item stays a plain item that the
worker pages and QC treat like any other.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column, relationship

from crowd.storage.base import Base, utcnow
from crowd.storage.studies import Item, Study


class ScaleTaskStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    CANCELED = "canceled"
    ERROR = "error"


class ScaleAccount(Base):
    """Per-experimenter Scale settings: the static secret every callback carries."""

    __tablename__ = "scale_accounts"

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"), unique=True)
    # Sent as the `scale-callback-auth` header and used as the HMAC key of each callback;
    # kept in clear because we must send it, and it grants nothing on this server.
    callback_auth_key: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ScaleProject(Base):
    __tablename__ = "scale_projects"
    __table_args__ = (UniqueConstraint("experimenter_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"), index=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(50))
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Scale's Rapid projects: stored and echoed; served like any other here.
    rapid: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    study: Mapped[Study] = relationship()


class ScaleBatch(Base):
    __tablename__ = "scale_batches"
    __table_args__ = (UniqueConstraint("experimenter_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"), index=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("scale_projects.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    callback: Mapped[str | None] = mapped_column(String(2000), default=None)
    # Scale's self-serve batch kinds: stored and echoed; the tasks are served like any other.
    calibration_batch: Mapped[bool] = mapped_column(default=False, server_default=false())
    self_label_batch: Mapped[bool] = mapped_column(default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Until then the batch's tasks are held: their items are real items of target 0 (an
    # evaluation or training task's gets its kind back at finalize), so nobody gets them.
    finalized_at: Mapped[datetime | None] = mapped_column(default=None)

    project: Mapped[ScaleProject] = relationship()


class ScaleTask(Base):
    __tablename__ = "scale_tasks"
    __table_args__ = (
        # NULL unique_ids do not collide (on SQLite and PostgreSQL alike).
        UniqueConstraint("experimenter_id", "unique_id"),
        Index("ix_scale_tasks_listing", "experimenter_id", "kind", "id"),
        Index("ix_scale_tasks_project_status", "project_id", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # The public id, random hex like Scale's.
    task_id: Mapped[str] = mapped_column(String(32), unique=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"))
    project_id: Mapped[int] = mapped_column(ForeignKey("scale_projects.id"))
    batch_id: Mapped[int | None] = mapped_column(
        ForeignKey("scale_batches.id"), default=None, index=True
    )
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"), unique=True)
    type: Mapped[str] = mapped_column(String(50))
    # real (a customer task), gold (an evaluation task) or training (a training task).
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[ScaleTaskStatus] = mapped_column(String(20), default=ScaleTaskStatus.PENDING)
    instruction: Mapped[str | None] = mapped_column(Text, default=None)
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    unique_id: Mapped[str | None] = mapped_column(String(200), default=None)
    # A hash of the creating request: the same unique_id with other params is a conflict.
    request_hash: Mapped[str] = mapped_column(String(64))
    callback_url: Mapped[str | None] = mapped_column(String(2000), default=None)
    # The item's target once the task may be served (NULL: the study's annotations_per_item).
    target: Mapped[int | None] = mapped_column(default=None)
    expected_response: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    response: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    audits: Mapped[list[Any]] = mapped_column(default=list)
    customer_review_status: Mapped[str | None] = mapped_column(String(20), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(default=None, index=True)
    # NULL until the callback succeeded (true) or was given up after its retries (false).
    callback_succeeded: Mapped[bool | None] = mapped_column(default=None)
    delivery_id: Mapped[int | None] = mapped_column(default=None, index=True)

    project: Mapped[ScaleProject] = relationship()
    batch: Mapped[ScaleBatch | None] = relationship()
    item: Mapped[Item] = relationship()


class ScaleTaskTag(Base):
    """One tag of one task, so listing by tags is plain SQL on every backend."""

    __tablename__ = "scale_task_tags"

    task_pk: Mapped[int] = mapped_column(ForeignKey("scale_tasks.id"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)


class IdempotentReply(Base):
    """The stored reply to a POST sent with an Idempotency-Key header."""

    __tablename__ = "scale_idempotent_replies"
    __table_args__ = (UniqueConstraint("experimenter_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"))
    key: Mapped[str] = mapped_column(String(255))
    # Method, path and body of the first request: another request under the key is refused.
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column()
    body: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
