"""Reward-model runs: what was trained on which labels, where it went, how well it did."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from crowd.storage.base import Base, utcnow


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"


OPEN_RUN_STATES = (RunStatus.QUEUED, RunStatus.RUNNING)


class RewardRun(Base):
    """One training of a reward model from scratch on a study's labels so far."""

    __tablename__ = "reward_runs"
    __table_args__ = (Index("ix_reward_runs_study_status", "study_id", "status"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    status: Mapped[RunStatus] = mapped_column(String(20), default=RunStatus.QUEUED)
    # "manual" (CLI, API) or "retrain_every" (after every N new labels).
    trigger: Mapped[str] = mapped_column(String(50), default="manual")
    # "raw" (every accepted label) or the aggregation method whose labels were used.
    labels: Mapped[str] = mapped_column(String(50), default="raw")
    # Accepted labels in the study when the run was requested (what retrain_every counts).
    labels_at_request: Mapped[int] = mapped_column(default=0)
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Counts of the data it read: labels, items, workers left out, held-out labels.
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    path: Mapped[str | None] = mapped_column(String(1000), default=None)
    job_id: Mapped[str | None] = mapped_column(String(100), default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
