"""Taboo games as plain records for the analysis, the leaderboard and transcript export."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.storage import Item, Study, TabooGame, Worker
from crowd.studies.reports import excluded_workers, worker_key
from tasks.taboo.live.games import players


def records(
    session: Session, study: Study | None, tournament: str | None = None
) -> list[dict[str, Any]]:
    """One record per game (of a study, or of a tournament), with its full state."""
    query = select(TabooGame).order_by(TabooGame.id)
    if study is not None:
        query = query.where(TabooGame.study_id == study.id)
    if tournament is not None:
        query = query.where(TabooGame.tournament == tournament)
    result = []
    for game in session.scalars(query):
        item = session.get(Item, game.item_id) if game.item_id is not None else None
        meta = item.meta if item is not None else {}
        workers = [
            worker_key(worker)
            for worker_id in (game.attacker_worker_id, game.defender_worker_id)
            if worker_id is not None and (worker := session.get(Worker, worker_id)) is not None
        ]
        sides = players(session, game)
        result.append(
            {
                "game_id": game.id,
                "study_id": game.study_id,
                "tournament": game.tournament,
                "word": game.state["target"],
                "concreteness": meta.get("concreteness", game.state.get("concreteness")),
                "pairing": str(game.pairing),
                "attacker": vars(sides["attacker"]),
                "defender": vars(sides["defender"]),
                "workers": workers,
                "excluded": False,
                "state": game.state,
                "created_at": game.created_at.isoformat(),
                "ended_at": None if game.ended_at is None else game.ended_at.isoformat(),
            }
        )
    return result


def summary(session: Session, study: Study) -> dict[str, Any]:
    """The study's taboo analysis over every game (full and filtered) and its leaderboard."""
    from tasks import get_hit_type

    excluded = set().union(*excluded_workers(session, study, refresh=False).values())
    return get_hit_type("taboo").analyze(records(session, study), excluded, study.config)
