"""Adversarial Taboo over HTTP: the waiting room and games for players, records for
experimenters. Pages poll their game: each poll is the player's heartbeat."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request
from sqlalchemy import select

from crowd.context import platform
from crowd.exceptions import AlreadyExists, ValidationError
from crowd.platforms import sessions as platforms
from crowd.storage import Assignment, PlatformSession, TabooGame, Worker
from crowd.studies.lifecycle import get_study
from crowd.web.common import current_experimenter, current_worker, current_worker_id, json_body
from tasks.taboo.live import play as taboo

bp = Blueprint("taboo", __name__)


@bp.post("/api/taboo/studies/<int:study_id>/lobby")
def lobby(study_id: int) -> Any:
    """Ask for a game: {"opponent": "human" | "agent" | "either"}."""
    worker_id, session_id = current_worker()
    body = json_body()
    with platform().db.session() as session:
        worker = session.get(Worker, worker_id)
        if worker is None:
            raise ValidationError("unknown worker: join again")
        on_platform = platforms.load_session(session, session_id, worker_id) if session_id else None
        seat = taboo.join_lobby(
            session, study_id, worker, body.get("opponent", "either"), on_platform
        )
        return taboo.seat_view(seat)


@bp.get("/api/taboo/seats/<int:seat_id>")
def seat(seat_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        return taboo.seat_view(taboo.seat_status(session, seat_id, worker_id))


@bp.post("/api/taboo/seats/<int:seat_id>/leave")
def leave_seat(seat_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        return taboo.seat_view(taboo.leave_seat(session, seat_id, worker_id))


def _game_view(session: Any, game: TabooGame, worker_id: int) -> dict[str, Any]:
    view = taboo.game_view(session, game, worker_id)
    if view["over"]:
        assignment_id = getattr(game, f"{view['role']}_assignment_id")
        assignment = session.get(Assignment, assignment_id) if assignment_id else None
        if assignment is not None and assignment.platform_session_id is not None:
            row = session.get(PlatformSession, assignment.platform_session_id)
            handover = row and platforms.completion(
                session, platform().settings, platform().signer, row
            )
            if handover:
                view["completion"] = handover
    return view


@bp.get("/api/taboo/games/<int:game_id>")
def game(game_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        return _game_view(session, taboo.poll(session, game_id, worker_id), worker_id)


@bp.post("/api/taboo/games/<int:game_id>/move")
def move(game_id: int) -> Any:
    """{"say": text, "version": n} or {"guess": word, "version": n}."""
    worker_id = current_worker_id()
    body = json_body()
    with platform().db.session() as session:
        played = taboo.move(session, game_id, worker_id, body)
        session.flush()
        return _game_view(session, played, worker_id)


@bp.post("/api/taboo/games/<int:game_id>/leave")
def leave(game_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        left = taboo.leave_game(session, game_id, worker_id)
        session.flush()
        return _game_view(session, left, worker_id)


# -- experimenters ---------------------------------------------------------------------------


@bp.get("/api/studies/<int:study_id>/taboo/games")
def games(study_id: int) -> Any:
    """Every game of the study with full transcripts and judge scores (?tournament=name)."""
    from tasks.taboo.live import records as taboo_records

    with platform().db.session() as session:
        study = get_study(session, study_id, current_experimenter(session))
        records = taboo_records.records(session, study, request.args.get("tournament"))
        return {"games": records}


@bp.post("/api/studies/<int:study_id>/taboo/tournaments")
def tournament(study_id: int) -> Any:
    """Queue an agent-vs-agent tournament over the study's words on the models queue:
    {name, attackers: [...], defenders: [...], games_per_pair?: 1, seed?: 0, judge?: true}."""
    from tasks.taboo.live.jobs import enqueue_tournament

    body = json_body()
    unknown = sorted(set(body) - {"name", "attackers", "defenders", "games_per_pair", "seed",
                                  "judge"})  # fmt: skip
    if unknown:
        raise ValidationError(f"unknown keys {unknown}", "body")
    judge = body.get("judge", True)
    if not isinstance(judge, bool):
        raise ValidationError("true or false", "judge")
    connection = platform().redis
    if connection is None:
        raise ValidationError("tournaments run on the queue: set CROWD_REDIS_URL and run "
                              "`crowd worker --queue crowd-models`")  # fmt: skip
    with platform().db.session() as session:
        study = get_study(session, study_id, current_experimenter(session))
        if study.hit_type != "taboo":
            raise ValidationError(f"study {study_id} is not a taboo study")
        played = session.scalar(
            select(TabooGame.id).where(TabooGame.study_id == study_id,
                                       TabooGame.tournament == body.get("name"))
        )  # fmt: skip
        if played is not None:
            raise AlreadyExists(f"tournament {body.get('name')!r} was played: pick a new name")
    job = enqueue_tournament(
        connection, study_id=study_id, name=body.get("name"), attackers=body.get("attackers"),
        defenders=body.get("defenders"), games_per_pair=body.get("games_per_pair", 1),
        seed=body.get("seed", 0), judge=judge,
    )  # fmt: skip
    return {"tournament": body.get("name"), "job_id": job.id, "status": "queued"}, 202


@bp.get("/api/studies/<int:study_id>/taboo/summary")
def summary(study_id: int) -> Any:
    """Rates, per word and per pairing, concreteness correlation, and the leaderboard."""
    from tasks.taboo.live import records as taboo_records

    with platform().db.session() as session:
        study = get_study(session, study_id, current_experimenter(session))
        return taboo_records.summary(session, study)


@bp.get("/api/studies/<int:study_id>/taboo/transcripts")
def transcripts(study_id: int) -> Any:
    """?format=jsonl (a game a line, the default) or csv (an utterance a row)."""
    import io

    from tasks.taboo import export
    from tasks.taboo.live import records as taboo_records

    fmt = request.args.get("format", "jsonl")
    if fmt not in export.FORMATS:
        raise ValidationError(f"transcripts export as {', '.join(export.FORMATS)}", "format")
    with platform().db.session() as session:
        study = get_study(session, study_id, current_experimenter(session))
        records = taboo_records.records(session, study, request.args.get("tournament"))
    handle = io.StringIO()
    export.write(records, fmt, handle)
    mimetype = "application/x-ndjson" if fmt == "jsonl" else "text/csv"
    return Response(handle.getvalue(), mimetype=mimetype)
