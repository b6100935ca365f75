"""Studies and their items; an item's expected answer never leaves the server."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from crowd.storage.base import Base, utcnow


class StudyStatus(StrEnum):
    DRAFT = "draft"
    PUBLISHED = "published"
    PAUSED = "paused"
    COMPLETED = "completed"


class ItemKind(StrEnum):
    REAL = "real"
    GOLD = "gold"
    ATTENTION = "attention"
    # Examples labelled by the experimenter, served first with feedback; not analysed.
    TRAINING = "training"


class Study(Base):
    __tablename__ = "studies"

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    hit_type: Mapped[str] = mapped_column(String(50))
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[StudyStatus] = mapped_column(String(20), default=StudyStatus.DRAFT)
    # Names of the providers the study is published to (e.g. ["local", "sim"]).
    providers: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    published_at: Mapped[datetime | None] = mapped_column(default=None)
    # Archived studies keep their data and leave the lists an experimenter works from.
    archived_at: Mapped[datetime | None] = mapped_column(default=None)

    items: Mapped[list[Item]] = relationship(back_populates="study")


class Item(Base):
    __tablename__ = "items"
    __table_args__ = (
        UniqueConstraint("study_id", "external_id"),
        # Serving's statements (crowd.work): the open items counted (read from the index
        # alone) and the next item taken in serving order without sorting the study's items.
        Index("ix_items_open", "study_id", "kind", "holders", "target"),
        Index("ix_items_serving", "study_id", "kind", "rank", text("holders DESC"), "id"),
        Index("ix_items_study_holders", "study_id", "holders"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    external_id: Mapped[str] = mapped_column(String(200))
    kind: Mapped[ItemKind] = mapped_column(String(20), default=ItemKind.REAL)
    # What a worker may eventually see (served piece by piece by the HIT type).
    content: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The expected answer (true boundary, gold label): server-side only.
    expected: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Category, generator, decoding, ...: used by analyses and for choosing items.
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    category: Mapped[str | None] = mapped_column(String(100), default=None, index=True)
    # How many assignments hold the item now (assigned, submitted, approved or rejected).
    # Kept as a counter, changed atomically in SQL, so choosing an item does not count
    # the assignments of every item in the study on each request.
    holders: Mapped[int] = mapped_column(default=0)
    # How many workers should answer it; NULL means the study's annotations_per_item.
    target: Mapped[int | None] = mapped_column(default=None)
    # Answers by excluded workers already asked for again (target raised by as many), so an
    # exclusion judged twice raises the target once (crowd.quality.exclusion.replace_excluded).
    replaced: Mapped[int] = mapped_column(default=0, server_default="0")
    # Serving order: lower ranks first (e.g. one group of texts after another).
    rank: Mapped[int] = mapped_column(default=0, server_default="0")
    # Of a gold item: its live answers' weight and their gold accuracy summed, each answer
    # weighed by its worker's agreement with the crowd above chance, recounted in every QC
    # refresh (crowd.quality.tally), so serving can put the gold readers get right first
    # (qc.gold.easy_first) without reading the answers.
    gold_weight: Mapped[float] = mapped_column(default=0.0, server_default="0")
    gold_right: Mapped[float] = mapped_column(default=0.0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    study: Mapped[Study] = relationship(back_populates="items")
