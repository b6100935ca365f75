"""Experimenters and their API keys (stored hashed, never in clear)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from crowd.storage.base import Base, utcnow


class Experimenter(Base):
    __tablename__ = "experimenters"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    api_keys: Mapped[list[ApiKey]] = relationship(back_populates="experimenter")


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    experimenter_id: Mapped[int] = mapped_column(ForeignKey("experimenters.id"), index=True)
    # The public part of the key, used to find the row; the rest is only kept as a hash.
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)

    experimenter: Mapped[Experimenter] = relationship(back_populates="api_keys")
