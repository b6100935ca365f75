"""Adversarial Taboo over HTTP: the waiting room and games for players, records for
experimenters. Pages poll their game: each poll is the player's heartbeat."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request
from sqlalchemy import select

from crowd.context import platform
from crowd.exceptions import AlreadyExists, NoWorkLeft, ValidationError
from crowd.platforms import sessions as platforms
from crowd.storage import Assignment, PlatformSession, TabooGame, Worker
from crowd.studies.lifecycle import get_study
from crowd.web.common import current_experimenter, current_worker, current_worker_id
from crowd.web.contract import EXPERIMENTER, WORKER, Media, operation
from tasks.taboo.live import play as taboo
from tasks.taboo.live.schemas import (
    Games,
    GamesQuery,
    GameView,
    LobbyBody,
    MoveBody,
    NewTournament,
    Seat,
    SeatReply,
    TabooSummary,
    TournamentQueued,
    TranscriptsQuery,
)

bp = Blueprint("taboo", __name__)


@bp.after_request
def no_store(response: Response) -> Response:
    # A game view holds the word (for the attacker): it must not linger in shared caches.
    if request.path.startswith("/api/taboo/"):
        response.headers["Cache-Control"] = "no-store"
    return response
PLAY = ("taboo games",)
RECORDS = ("taboo records",)
TRANSCRIPTS = Media(
    types=("application/x-ndjson", "text/csv"),
    description="jsonl: a game a line (word, players, outcome, every utterance with its "
    "judge scores); csv: an utterance a row, the game's columns repeated",
)


@bp.post("/api/taboo/studies/<int:study_id>/lobby")
@operation("Ask for a game in the study's waiting room", body=LobbyBody, body_required=False,
           responses={200: SeatReply}, auth=WORKER, errors=(409,), tags=PLAY)  # fmt: skip
def lobby(study_id: int, body: LobbyBody) -> Any:
    worker_id, session_id = current_worker()
    try:
        with platform().db.session() as session:
            worker = session.get(Worker, worker_id)
            if worker is None:
                raise ValidationError("unknown worker: join again")
            on_platform = (
                platforms.load_session(session, session_id, worker_id) if session_id else None
            )
            seat = taboo.join_lobby(session, study_id, worker, body.opponent, on_platform)
            return taboo.seat_view(seat)
    except NoWorkLeft as done:
        # Outside the session: the seat it was about to take is rolled back. The page shows
        # `done` as it does for the other HIT types.
        return {"done": True, "message": str(done)}


@bp.get("/api/taboo/seats/<int:seat_id>")
@operation("Poll a seat (the player's heartbeat): paired once a partner or the timeout comes",
           responses={200: SeatReply}, auth=WORKER, tags=PLAY)  # fmt: skip
def seat(seat_id: int) -> Any:
    worker_id = current_worker_id()
    try:
        with platform().db.session() as session:
            return taboo.seat_view(taboo.seat_status(session, seat_id, worker_id))
    except NoWorkLeft as done:
        return {"done": True, "message": str(done)}


@bp.post("/api/taboo/seats/<int:seat_id>/leave")
@operation("Leave the waiting room", responses={200: Seat}, auth=WORKER, tags=PLAY)
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
@operation("Poll a game (the player's heartbeat)", responses={200: GameView}, auth=WORKER,
           tags=PLAY)  # fmt: skip
def game(game_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        return _game_view(session, taboo.poll(session, game_id, worker_id), worker_id)


@bp.post("/api/taboo/games/<int:game_id>/move")
@operation("Say something or guess the word", body=MoveBody, responses={200: GameView},
           auth=WORKER, errors=(409,), tags=PLAY)  # fmt: skip
def move(game_id: int, body: MoveBody) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        played = taboo.move(session, game_id, worker_id, body.model_dump(exclude_none=True))
        session.flush()
        return _game_view(session, played, worker_id)


@bp.post("/api/taboo/games/<int:game_id>/leave")
@operation("Leave the game: it ends, abandoned by this player", responses={200: GameView},
           auth=WORKER, tags=PLAY)  # fmt: skip
def leave(game_id: int) -> Any:
    worker_id = current_worker_id()
    with platform().db.session() as session:
        left = taboo.leave_game(session, game_id, worker_id)
        session.flush()
        return _game_view(session, left, worker_id)


# -- experimenters ---------------------------------------------------------------------------


@bp.get("/api/studies/<int:study_id>/taboo/games")
@operation("Every game of the study with full transcripts and judge scores", query=GamesQuery,
           responses={200: Games}, auth=EXPERIMENTER, tags=RECORDS)  # fmt: skip
def games(study_id: int, query: GamesQuery) -> Any:
    from tasks.taboo.live import records as taboo_records

    with platform().db.session() as session:
        study = get_study(session, study_id, current_experimenter(session))
        return {"games": taboo_records.records(session, study, query.tournament)}


@bp.post("/api/studies/<int:study_id>/taboo/tournaments")
@operation("Queue an agent-vs-agent tournament over the study's words", body=NewTournament,
           responses={202: TournamentQueued}, auth=EXPERIMENTER, errors=(409,),
           tags=RECORDS)  # fmt: skip
def tournament(study_id: int, body: NewTournament) -> Any:
    from tasks.taboo.live.jobs import enqueue_tournament

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
                                       TabooGame.tournament == body.name)
        )  # fmt: skip
        if played is not None:
            raise AlreadyExists(f"tournament {body.name!r} was played: pick a new name")
    job = enqueue_tournament(
        connection, study_id=study_id, name=body.name, attackers=body.attackers,
        defenders=body.defenders, games_per_pair=body.games_per_pair, seed=body.seed,
        judge=body.judge,
    )  # fmt: skip
    return {"tournament": body.name, "job_id": job.id, "status": "queued"}, 202


@bp.get("/api/studies/<int:study_id>/taboo/summary")
@operation("Rates, per word and per pairing, concreteness correlation, and the leaderboard",
           responses={200: TabooSummary}, auth=EXPERIMENTER, tags=RECORDS)  # fmt: skip
def summary(study_id: int) -> Any:
    from tasks.taboo.live import records as taboo_records

    with platform().db.session() as session:
        study = get_study(session, study_id, current_experimenter(session))
        return taboo_records.summary(session, study)


@bp.get("/api/studies/<int:study_id>/taboo/transcripts")
@operation("The study's transcripts", query=TranscriptsQuery, responses={200: TRANSCRIPTS},
           auth=EXPERIMENTER, tags=RECORDS)  # fmt: skip
def transcripts(study_id: int, query: TranscriptsQuery) -> Any:
    import io

    from tasks.taboo import export
    from tasks.taboo.live import records as taboo_records

    with platform().db.session() as session:
        study = get_study(session, study_id, current_experimenter(session))
        records = taboo_records.records(session, study, query.tournament)
    handle = io.StringIO()
    export.write(records, query.format, handle)
    mimetype = "application/x-ndjson" if query.format == "jsonl" else "text/csv"
    return Response(handle.getvalue(), mimetype=mimetype)
