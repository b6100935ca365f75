"""Quality control state: each worker's standing in a study, the audit log, bonuses,
aggregated labels, and the people who review."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from crowd.storage.base import Base, utcnow


class Serving(StrEnum):
    """Whether the worker gets more items in the study."""

    ACTIVE = "active"
    STOPPED = "stopped"


class Qualification(StrEnum):
    PASSED = "passed"
    FAILED = "failed"


class Decision(StrEnum):
    """A reviewer's decision on a worker's work in a study."""

    APPROVED = "approved"
    REJECTED = "rejected"
    # Paid, but left out of the filtered set.
    SOFT_REJECTED = "soft_rejected"


class StudyWorker(Base):
    """One worker's QC standing in one study: serving, exclusion, flags, evidence, decision."""

    __tablename__ = "study_workers"
    __table_args__ = (UniqueConstraint("study_id", "worker_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"), index=True)
    serving: Mapped[Serving] = mapped_column(String(20), default=Serving.ACTIVE)
    # Left out of the filtered set, and by what: "rule:<name>" or "reviewer:<name>".
    excluded_by: Mapped[str | None] = mapped_column(String(200), default=None)
    # Rules whose action is "flag" and that fired; cleared when a reviewer decides.
    flags: Mapped[list[Any]] = mapped_column(default=list)
    qualification: Mapped[Qualification | None] = mapped_column(String(20), default=None)
    decision: Mapped[Decision | None] = mapped_column(String(20), default=None)
    # Rules a person overruled (e.g. by approving the worker while they fired): they record
    # their findings but no longer act; rules that fire later still do.
    cleared_rules: Mapped[list[Any]] = mapped_column(default=list)
    # Where in each run of 1/attention_rate items this worker meets the attention check:
    # random per worker and kept on the server, so nobody can work out which item it is.
    attention_phase: Mapped[float] = mapped_column(default=0.0)
    # The latest QC evidence (qc.evidence.worker_evidence) and the rules that fire on it.
    evidence: Mapped[dict[str, Any]] = mapped_column(default=dict)
    rule_hits: Mapped[list[Any]] = mapped_column(default=list)
    # The latest answer of the worker's that a refresh after an answer is known to have read
    # (crowd.quality.stats): the queue skips refreshing for an answer at or before it.
    refreshed_through: Mapped[int | None] = mapped_column(default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class AuditEntry(Base):
    """Who did what to which worker or study, when and why; written for every QC action."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_study_worker", "study_id", "worker_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    # "rule:<name>", "reviewer:<name>", "experimenter:<name>" or "system".
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(50))
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"), default=None)
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id"), default=None)
    reason: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)


class WorkerBlock(Base):
    """An experimenter's block of a worker: none of their studies serves the worker.

    Blocks are per experimenter, so one experimenter's block never reaches another's studies
    (a platform-wide ban is the worker's status, set by an operator).
    """

    __tablename__ = "worker_blocks"
    __table_args__ = (UniqueConstraint("experimenter_id", "worker_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"), index=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Bonus(Base):
    """A bonus paid to a worker; the token makes a retried payment pay once."""

    __tablename__ = "bonuses"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"), index=True)
    amount: Mapped[str] = mapped_column(String(20))  # decimal text, e.g. "0.50"
    reason: Mapped[str] = mapped_column(Text)
    token: Mapped[str] = mapped_column(String(64), unique=True)
    actor: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AggregatedLabels(Base):
    """A study's labels aggregated by one method, with the workers' estimated skills."""

    __tablename__ = "aggregations"
    __table_args__ = (UniqueConstraint("study_id", "method"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    method: Mapped[str] = mapped_column(String(50))
    # {"labels": {task: label}, "confidence": {task: p}, "skills": {worker: s}, ...}
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    computed_at: Mapped[datetime] = mapped_column(default=utcnow)


class Role(StrEnum):
    """What a person logged in to the web UI may do (see crowd.review.ALLOWED)."""

    EXPERIMENTER = "experimenter"
    REVIEWER = "reviewer"


class User(Base):
    """A person who logs in to the reviewer UI, working on one experimenter's studies."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"), index=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[Role] = mapped_column(String(20))
    password_hash: Mapped[str] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
