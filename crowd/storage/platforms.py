"""Crowd platforms: what a study was published as (HITs, Prolific studies), the platform's
sessions of our workers (an MTurk assignment, a Prolific submission), and the calls we owe
the platform (approve, reject, bonus, block, ...), made by a job after the commit.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from crowd.storage.base import Base, utcnow


class Publication(Base):
    """One publishing of a study to a platform: its options and the remote ids it made."""

    __tablename__ = "publications"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    provider: Mapped[str] = mapped_column(String(50))
    # What the experimenter asked for (reward, lifetime, qualifications, sandbox, ...).
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # What the platform gave back (HIT type id, Prolific study id, cost, ...).
    remote: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RemoteTaskStatus(StrEnum):
    OPEN = "open"
    EXPIRED = "expired"


class RemoteTask(Base):
    """A unit of work on the platform that our page serves: an MTurk HIT, a Prolific study."""

    __tablename__ = "remote_tasks"
    __table_args__ = (UniqueConstraint("provider", "remote_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    publication_id: Mapped[int] = mapped_column(ForeignKey("publications.id"), index=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    provider: Mapped[str] = mapped_column(String(50))
    remote_id: Mapped[str] = mapped_column(String(100))
    places: Mapped[int] = mapped_column(default=1)
    status: Mapped[RemoteTaskStatus] = mapped_column(String(20), default=RemoteTaskStatus.OPEN)
    expires_at: Mapped[datetime | None] = mapped_column(default=None)
    synced_at: Mapped[datetime | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SessionState(StrEnum):
    OPEN = "open"  # the worker is on our page
    SUBMITTED = "submitted"  # our page sent the worker back to the platform to submit
    APPROVED = "approved"
    REJECTED = "rejected"
    RETURNED = "returned"
    ABANDONED = "abandoned"


# States in which the platform's session no longer holds work on our side.
CLOSED_SESSION_STATES = (SessionState.RETURNED, SessionState.ABANDONED)


class PlatformSession(Base):
    """One platform session of a worker: an MTurk assignment or a Prolific submission.

    It covers a run of our assignments (items_per_session items); the platform pays and
    judges it as one piece of work.
    """

    __tablename__ = "platform_sessions"
    __table_args__ = (
        UniqueConstraint("provider", "remote_id"),
        Index("ix_platform_sessions_study_worker", "study_id", "worker_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"))
    remote_task_id: Mapped[int] = mapped_column(ForeignKey("remote_tasks.id"), index=True)
    provider: Mapped[str] = mapped_column(String(50))
    # MTurk's assignmentId, Prolific's SESSION_ID.
    remote_id: Mapped[str] = mapped_column(String(100))
    # Prolific's submission id, learnt when syncing (MTurk's is remote_id itself).
    submission_id: Mapped[str | None] = mapped_column(String(100), default=None)
    # Where the page posts the finished work (MTurk's turkSubmitTo), checked on binding.
    submit_to: Mapped[str | None] = mapped_column(String(300), default=None)
    state: Mapped[SessionState] = mapped_column(String(20), default=SessionState.OPEN)
    # The platform's own word for the session when last synced (e.g. "Submitted").
    remote_state: Mapped[str | None] = mapped_column(String(50), default=None)
    items_done: Mapped[int] = mapped_column(default=0)
    # Prolific completion code, issued only once the session's answers are stored.
    completion_code: Mapped[str | None] = mapped_column(String(40), default=None)
    # Problems seen on sync (another worker id, a code that does not match, ...).
    problems: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    submitted_at: Mapped[datetime | None] = mapped_column(default=None)


class ActionStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class PlatformAction(Base):
    """A call we owe a platform, written in the transaction that decided it.

    A job makes the call after the commit (so a rolled-back decision never reaches the
    platform) and retries it; every call carries what makes a retry harmless (a request
    token for bonuses; approving twice is refused by the platform and counted as done).
    """

    __tablename__ = "platform_actions"
    __table_args__ = (Index("ix_platform_actions_status", "status", "created_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(50))
    action: Mapped[str] = mapped_column(String(30))
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"), default=None)
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id"), default=None)
    session_id: Mapped[int | None] = mapped_column(
        ForeignKey("platform_sessions.id"), default=None
    )
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[ActionStatus] = mapped_column(String(20), default=ActionStatus.PENDING)
    attempts: Mapped[int] = mapped_column(default=0)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    result: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    done_at: Mapped[datetime | None] = mapped_column(default=None)


class PlatformAccount(Base):
    """What we keep of an experimenter's account on a platform, per workspace of it, set up
    once by the provider: on Prolific, the participant group of the workers they blocked in
    that workspace, which every study published there for them excludes
    ({"exclusion_group_id", "workspace_id"})."""

    __tablename__ = "platform_accounts"
    __table_args__ = (UniqueConstraint("experimenter_id", "provider", "workspace"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"))
    provider: Mapped[str] = mapped_column(String(50))
    # The platform's workspace it is about (Prolific's workspace id: a participant group
    # belongs to one workspace, as a study does); "" for a platform without workspaces.
    workspace: Mapped[str] = mapped_column(String(100), default="")
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
