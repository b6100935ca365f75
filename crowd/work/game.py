"""The open-web game (RoFT-style): categories, a player's profile, leaderboards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from crowd.storage import Assignment, Item, ItemKind, Response, Study, StudyStatus, Worker

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
    """Published studies open to `provider`, as workers see them: public title, description
    and the categories of their real items (boundary games); never the internal study name."""
    from tasks import get_hit_type

    result = []
    for study in session.scalars(
        select(Study).where(Study.status == StudyStatus.PUBLISHED).order_by(Study.id)
    ):
        if provider not in study.providers:
            continue
        page = get_hit_type(study.hit_type).public_page(study.config)
        result.append(
            {
                "id": study.id,
                "hit_type": study.hit_type,
                "title": page["title"],
                "description": page["description"],
                "categories": _real_categories(session, study.id)
                if study.hit_type == "boundary"
                else [],
            }
        )
    return result


def _real_categories(session: Session, study_id: int) -> list[str]:
    # Attention, gold and training items carry categories too ("check"): a worker picking
    # one would learn which items check them.
    return list(
        session.scalars(
            select(Item.category)
            .where(
                Item.study_id == study_id,
                Item.kind == ItemKind.REAL,
                Item.category.is_not(None),
            )
            .distinct()
            .order_by(Item.category)
        )
    )


def has_started(session: Session, study_id: int, worker_id: int) -> bool:
    """Whether the worker was ever given an item of the study (and so saw its intro)."""
    return (
        session.scalar(
            select(Assignment.id)
            .where(Assignment.study_id == study_id, Assignment.worker_id == worker_id)
            .limit(1)
        )
        is not None
    )


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
            .where(
                Study.hit_type == "boundary",
                Item.kind == ItemKind.REAL,
                Item.category.is_not(None),
            )
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
