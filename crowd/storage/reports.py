"""The latest analysis report of each study."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Text
from sqlalchemy.orm import Mapped, mapped_column

from crowd.storage.base import Base, utcnow


class Report(Base):
    """The latest analysis of a study: every number as JSON, plus the rendered HTML."""

    __tablename__ = "reports"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), unique=True)
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    html: Mapped[str] = mapped_column(Text, default="")
    responses_seen: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
