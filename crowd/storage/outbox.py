"""The outbox: events written in the same transaction as the data they describe.

Redis may be down when a response is stored; the row stays here until a job has
processed it, and the sweep re-enqueues whatever Redis never took.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from crowd.storage.base import Base, utcnow

# The platform's own topics, emitted and handled by several features (crowd.queue.hooks).
# A feature whose events only it handles (platform calls, a live game's moves) names its own.
RESPONSE_STORED = "response.stored"  # payload: response_id, study_id
RESPONSE_EXPLAINED = "response.explained"  # payload: response_id, study_id
# payload: study_id, worker_ids (whose QC standing is still to refresh); an event with more
# raters than one job refreshes passes the rest on in a new one, with continues: its id.
RESPONSES_IMPORTED = "responses.imported"
WORKER_BLOCKED = "worker.blocked"  # payload: study_id, worker_id (a reviewer's block)


class OutboxEvent(Base):
    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_pending", "processed_at", "enqueued_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(String(100))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    enqueued_at: Mapped[datetime | None] = mapped_column(default=None)
    # When the in-transaction handlers committed; processed_at once the follow-ups ran too.
    handled_at: Mapped[datetime | None] = mapped_column(default=None)
    processed_at: Mapped[datetime | None] = mapped_column(default=None)
    attempts: Mapped[int] = mapped_column(default=0)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
