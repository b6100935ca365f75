"""Adversarial Taboo: the waiting room, games between players and agents, judge scores."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from crowd.storage.base import Base, utcnow


class SeatState(StrEnum):
    WAITING = "waiting"
    PAIRED = "paired"
    TIMED_OUT = "timed_out"  # nobody came in time (and the study offers no agent)
    LEFT = "left"


class Pairing(StrEnum):
    HUMAN_HUMAN = "human-human"
    HUMAN_AGENT = "human-agent"
    AGENT_AGENT = "agent-agent"


class TabooSeat(Base):
    """A worker in a study's waiting room, until paired with a partner or timed out."""

    __tablename__ = "taboo_seats"
    __table_args__ = (Index("ix_taboo_seats_study_state", "study_id", "state"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("workers.id"))
    # "human" (wait for a person), "agent" (play an agent now) or "either".
    opponent: Mapped[str] = mapped_column(String(20))
    state: Mapped[SeatState] = mapped_column(String(20), default=SeatState.WAITING)
    platform_session_id: Mapped[int | None] = mapped_column(
        ForeignKey("platform_sessions.id"), default=None
    )
    game_id: Mapped[int | None] = mapped_column(ForeignKey("taboo_games.id"), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(default=utcnow)


class TabooGame(Base):
    """One game; `state` is the engine's GameState as JSON, `version` counts its changes."""

    __tablename__ = "taboo_games"
    __table_args__ = (Index("ix_taboo_games_study_outcome", "study_id", "outcome"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"), default=None)
    item_id: Mapped[int | None] = mapped_column(ForeignKey("items.id"), default=None)
    # The tournament that played it (agent-agent simulations), if any.
    tournament: Mapped[str | None] = mapped_column(String(100), default=None, index=True)
    pairing: Mapped[Pairing] = mapped_column(String(20))
    attacker_worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id"), default=None)
    defender_worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id"), default=None)
    attacker_agent: Mapped[str | None] = mapped_column(String(100), default=None)
    defender_agent: Mapped[str | None] = mapped_column(String(100), default=None)
    attacker_assignment_id: Mapped[int | None] = mapped_column(
        ForeignKey("assignments.id"), default=None
    )
    defender_assignment_id: Mapped[int | None] = mapped_column(
        ForeignKey("assignments.id"), default=None
    )
    state: Mapped[dict[str, Any]] = mapped_column(default=dict)
    version: Mapped[int] = mapped_column(default=0)
    # The engine's outcome once over (attacker, defender, tie, abandoned); NULL while playing.
    outcome: Mapped[str | None] = mapped_column(String(20), default=None)
    # Where the agents' randomness came from, so a game can be replayed.
    seed: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # When the side to move got the turn (move timeouts count from here).
    turn_started_at: Mapped[datetime] = mapped_column(default=utcnow)
    attacker_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    defender_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(default=None)


class JudgeScore(Base):
    """A cached judge score: one text's perplexity or one (previous, reply) pair's relevance."""

    __tablename__ = "judge_scores"
    __table_args__ = (UniqueConstraint("kind", "model", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(20))
    model: Mapped[str] = mapped_column(String(300))
    # sha256 of the text (or of the pair), as models.judges.cache_key makes it.
    key: Mapped[str] = mapped_column(String(64))
    score: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
