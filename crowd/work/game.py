"""The open-web game (RoFT-style): categories, a player's profile, leaderboards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from crowd.storage import Item, ItemKind, Response, Study, StudyStatus, Worker

LEADERBOARD_SIZE = 50


@dataclass
class PlayerScore:
    worker_id: int
    name: str
    points: float = 0.0
    annotations: int = 0
    exact: int = 0
    distance_sum: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "points": self.points,
            "annotations": self.annotations,
            "exact": self.exact,
            "mean_distance": round(self.distance_sum / self.annotations, 3)
            if self.annotations
            else None,
        }


def open_studies(session: Session, provider: str = "local") -> list[dict[str, Any]]:
    """Published studies open to `provider`, with their categories (boundary games)."""
    from tasks import get_hit_type

    result = []
    for study in session.scalars(
        select(Study).where(Study.status == StudyStatus.PUBLISHED).order_by(Study.id)
    ):
        if provider not in study.providers:
            continue
        categories = session.scalars(
            select(Item.category)
            .where(Item.study_id == study.id, Item.category.is_not(None))
            .distinct()
            .order_by(Item.category)
        ).all()
        result.append(
            {
                "id": study.id,
                "name": study.name,
                "hit_type": study.hit_type,
                "title": get_hit_type(study.hit_type).title,
                "categories": categories if study.hit_type == "boundary" else [],
            }
        )
    return result


def _scores(session: Session, category: str | None, worker_id: int | None) -> list[PlayerScore]:
    query = (
        select(Worker.id, Worker.display_name, Response.score, Response.answer, Item.expected)
        .join(Response, Response.worker_id == Worker.id)
        .join(Item, Item.id == Response.item_id)
        .join(Study, Study.id == Response.study_id)
        .where(
            Worker.provider == "local",
            Item.kind != ItemKind.ATTENTION,
            Study.hit_type == "boundary",
        )
    )
    if category:
        query = query.where(Item.category == category)
    if worker_id is not None:
        query = query.where(Worker.id == worker_id)
    players: dict[int, PlayerScore] = {}
    for wid, name, score, answer, expected in session.execute(query):
        player = players.setdefault(wid, PlayerScore(wid, name or f"player {wid}"))
        distance = int(answer["guess"]) - int(expected["boundary"])
        player.points += score or 0.0
        player.annotations += 1
        player.exact += distance == 0
        player.distance_sum += distance
    return list(players.values())


def leaderboard(session: Session, category: str | None = None) -> list[dict[str, Any]]:
    ranked = sorted(
        _scores(session, category, None), key=lambda p: (-p.points, -p.exact, p.worker_id)
    )
    return [{"rank": n, **p.as_dict()} for n, p in enumerate(ranked[:LEADERBOARD_SIZE], 1)]


def categories(session: Session) -> list[str]:
    return list(
        session.scalars(
            select(Item.category)
            .join(Study, Study.id == Item.study_id)
            .where(Study.hit_type == "boundary", Item.category.is_not(None))
            .group_by(Item.category)
            .order_by(func.min(Item.category))
        )
    )


def profile(session: Session, worker_id: int) -> dict[str, Any]:
    worker = session.get(Worker, worker_id)
    overall = _scores(session, None, worker_id)
    per_category = {
        category: scores[0].as_dict()
        for category in categories(session)
        if (scores := _scores(session, category, worker_id))
    }
    totals = overall[0].as_dict() if overall else PlayerScore(worker_id, "").as_dict()
    totals["name"] = worker.display_name if worker else None
    return {**totals, "by_category": per_category}
