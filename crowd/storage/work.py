"""Workers, their assignments (an explicit state machine) and their responses."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Float, ForeignKey, Index, String, Text, UniqueConstraint, update
from sqlalchemy.orm import Mapped, mapped_column, object_session, relationship

from crowd.exceptions import InvalidTransition
from crowd.storage.base import Base, utcnow
from crowd.storage.studies import Item
from tasks.base import LIVE_RATER_GROUP


class WorkerStatus(StrEnum):
    ACTIVE = "active"
    BLOCKED = "blocked"


class AssignmentState(StrEnum):
    ASSIGNED = "assigned"
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    RETURNED = "returned"
    ABANDONED = "abandoned"
    EXPIRED = "expired"


TRANSITIONS: dict[AssignmentState, frozenset[AssignmentState]] = {
    AssignmentState.ASSIGNED: frozenset(
        {
            AssignmentState.SUBMITTED,
            AssignmentState.RETURNED,
            AssignmentState.ABANDONED,
            AssignmentState.EXPIRED,
        }
    ),
    AssignmentState.SUBMITTED: frozenset({AssignmentState.APPROVED, AssignmentState.REJECTED}),
    # A rejection can be overturned (MTurk allows it within 30 days); nothing else moves on.
    AssignmentState.REJECTED: frozenset({AssignmentState.APPROVED}),
    AssignmentState.APPROVED: frozenset(),
    AssignmentState.RETURNED: frozenset(),
    AssignmentState.ABANDONED: frozenset(),
    AssignmentState.EXPIRED: frozenset(),
}

# States in which an assignment holds its item (counts towards the item's target).
HOLDING_STATES = (
    AssignmentState.ASSIGNED,
    AssignmentState.SUBMITTED,
    AssignmentState.APPROVED,
    AssignmentState.REJECTED,
)


class Worker(Base):
    __tablename__ = "workers"
    __table_args__ = (UniqueConstraint("provider", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(50))
    external_id: Mapped[str] = mapped_column(String(200))
    display_name: Mapped[str | None] = mapped_column(String(100), default=None)
    status: Mapped[WorkerStatus] = mapped_column(String(20), default=WorkerStatus.ACTIVE)
    # Derived by queue jobs from the worker's responses (recomputed, never incremented).
    stats: Mapped[dict[str, Any]] = mapped_column(default=dict)
    qc_flags: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Assignment(Base):
    __tablename__ = "assignments"
    # A worker never gets the same item twice, whatever happened to the first assignment.
    __table_args__ = (
        UniqueConstraint("item_id", "worker_id"),
        Index("ix_assignments_study_state", "study_id", "state"),
        Index("ix_assignments_worker_study", "worker_id", "study_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"))
    provider: Mapped[str] = mapped_column(String(50))
    state: Mapped[AssignmentState] = mapped_column(String(20), default=AssignmentState.ASSIGNED)
    # The HIT type's in-progress state (e.g. how many sentences are revealed).
    progress: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Per-step events with server timestamps, copied to the response when it is stored.
    events: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    submitted_at: Mapped[datetime | None] = mapped_column(default=None)
    # The crowd platform's session (MTurk assignment, Prolific submission) it was done in.
    platform_session_id: Mapped[int | None] = mapped_column(
        ForeignKey("platform_sessions.id"), default=None, index=True
    )

    item: Mapped[Item] = relationship()
    worker: Mapped[Worker] = relationship()
    # The stored answer, set in memory when it is created (no query to read it back).
    response: Mapped[Response | None] = relationship(back_populates="assignment")

    def transition(self, new: AssignmentState) -> None:
        """Move to `new`, or raise if the state machine does not allow it.

        Leaving the holding states frees the item's slot for another worker.
        """
        current = AssignmentState(self.state)
        if new not in TRANSITIONS[current]:
            raise InvalidTransition(
                f"assignment {self.id} is {current.value}; it cannot become {new.value}"
            )
        self.state = new
        if current in HOLDING_STATES and new not in HOLDING_STATES:
            session = object_session(self)
            if session is not None:
                session.execute(
                    update(Item).where(Item.id == self.item_id).values(holders=Item.holders - 1)
                )


class ResponseSource(StrEnum):
    LIVE = "live"
    IMPORTED = "imported"


class Response(Base):
    __tablename__ = "responses"
    # A worker answers an item at most once.
    __table_args__ = (
        UniqueConstraint("item_id", "worker_id"),
        Index("ix_responses_study_worker", "study_id", "worker_id"),
        Index("ix_responses_study_group", "study_id", "rater_group"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int | None] = mapped_column(
        ForeignKey("assignments.id"), unique=True, default=None
    )
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"))
    answer: Mapped[dict[str, Any]] = mapped_column(default=dict)
    events: Mapped[list[Any]] = mapped_column(default=list)
    explanation: Mapped[str | None] = mapped_column(Text, default=None)
    reasons: Mapped[list[Any]] = mapped_column(default=list)
    score: Mapped[float | None] = mapped_column(Float, default=None)
    qc_flags: Mapped[dict[str, Any]] = mapped_column(default=dict)
    source: Mapped[ResponseSource] = mapped_column(String(20), default=ResponseSource.LIVE)
    # Who gave the answer, as analyses compare them: "crowd" for live workers, or a group
    # named on import ("expert", "teachers") or by an LLM evaluation.
    rater_group: Mapped[str] = mapped_column(
        String(100), default=LIVE_RATER_GROUP, server_default=LIVE_RATER_GROUP
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    explained_at: Mapped[datetime | None] = mapped_column(default=None)

    item: Mapped[Item] = relationship()
    worker: Mapped[Worker] = relationship()
    assignment: Mapped[Assignment | None] = relationship(back_populates="response")
