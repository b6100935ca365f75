"""Adversarial Taboo as the players' pages ask for it: the waiting room, moves, and what
each page may see.

A worker asks for a game in a study (`join_lobby`). Against an agent the game starts at
once; against a person the worker waits in the study's waiting room until another worker
comes (paired in order of arrival) or `wait_seconds` pass, after which the study's
`opponent: either` hands them an agent and `opponent: human` ends the wait (recorded as a
timed-out seat). Both pages poll their game (`poll`, `game_view`); each poll is a
heartbeat, and the other side's utterances arrive with it, without reloading. The game
itself (states, agents, clocks, the end) is games.py.

Concurrency: a study's waiting room is serialised by locking the study row.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from crowd.exceptions import (
    InvalidAction,
    NotFound,
    NoWorkLeft,
    PermissionDenied,
    StudyNotOpen,
    ValidationError,
)
from crowd.quality import exclusion
from crowd.quality import standing as quality
from crowd.storage import (
    Assignment,
    Item,
    ItemKind,
    Pairing,
    PlatformSession,
    SeatState,
    Serving,
    SessionState,
    Study,
    StudyStatus,
    TabooGame,
    TabooSeat,
    Worker,
    WorkerStatus,
    utcnow,
)
from crowd.work.assignments import NO_MORE_FOR_YOU
from tasks.taboo import engine
from tasks.taboo.config import OPPONENTS, TabooConfig
from tasks.taboo.engine import EndReason, GameState, Role
from tasks.taboo.live.games import (
    SEEDS,
    Side,
    check_clocks,
    config_of,
    load_game,
    new_game,
    players,
    result_for,
    role_of,
    state_of,
    store_state,
    study_config,
)


def _lock_study(session: Session, study_id: int) -> Study:
    study = session.scalar(select(Study).where(Study.id == study_id).with_for_update())
    if study is None:
        raise NotFound(f"no study {study_id}")
    if study.hit_type != "taboo":
        raise ValidationError(f"study {study_id} is a {study.hit_type} study, not a taboo game")
    return study



def join_lobby(
    session: Session,
    study_id: int,
    worker: Worker,
    opponent: str,
    platform_session: PlatformSession | None = None,
) -> TabooSeat:
    """The worker's seat: paired at once when someone waits (or an agent is asked for)."""
    study = _lock_study(session, study_id)
    if study.status != StudyStatus.PUBLISHED:
        raise StudyNotOpen(f"study {study.id} is {study.status}, not open for games")
    if worker.provider not in study.providers:
        raise StudyNotOpen(f"study {study.id} is not published to {worker.provider} workers")
    _check_access(session, study, worker, platform_session)
    config = study_config(study)
    if opponent not in OPPONENTS:
        raise ValidationError(f"must be one of {', '.join(OPPONENTS)}", "opponent")
    if not config.offers(opponent):
        raise ValidationError(
            f"this study pairs players with {config.opponent} opponents only", "opponent"
        )
    now = utcnow()
    open_game = _open_game_of(session, study.id, worker.id)
    if open_game is not None:
        seat = session.scalar(
            select(TabooSeat).where(TabooSeat.game_id == open_game.id,
                                    TabooSeat.worker_id == worker.id)
        )  # fmt: skip
        if seat is not None:
            return seat
    waiting = session.scalar(
        select(TabooSeat).where(
            TabooSeat.study_id == study.id,
            TabooSeat.worker_id == worker.id,
            TabooSeat.state == SeatState.WAITING,
        )
    )
    if waiting is None:
        waiting = TabooSeat(
            study_id=study.id,
            worker_id=worker.id,
            opponent=opponent,
            platform_session_id=platform_session.id if platform_session else None,
            created_at=now,
            seen_at=now,
            expires_at=now + timedelta(seconds=config.wait_seconds),
        )
        session.add(waiting)
        session.flush()
    _settle_seat(session, study, config, waiting, now)
    return waiting



def _check_access(
    session: Session, study: Study, worker: Worker, platform_session: PlatformSession | None
) -> None:
    """The checks every request for work passes (next_assignment makes them too)."""
    if worker.status == WorkerStatus.BLOCKED or exclusion.blocked_by(
        session, study.experimenter_id, worker.id
    ):
        raise PermissionDenied("this worker account is blocked from these studies")
    if platform_session is not None and (
        platform_session.study_id != study.id or platform_session.worker_id != worker.id
    ):
        raise PermissionDenied("this platform session belongs to another study or worker")
    if platform_session is not None and platform_session.state != SessionState.OPEN:
        raise StudyNotOpen(f"this session is {platform_session.state}: nothing more to do")
    if quality.standing(session, study.id, worker.id).serving == Serving.STOPPED:
        raise NoWorkLeft(NO_MORE_FOR_YOU)



def seat_status(session: Session, seat_id: int, worker_id: int) -> TabooSeat:
    """Poll a seat: a heartbeat, and a pairing once a partner (or the timeout) comes."""
    seat = session.get(TabooSeat, seat_id)
    if seat is None or seat.worker_id != worker_id:
        raise NotFound(f"no seat {seat_id} for this worker")
    if seat.state == SeatState.WAITING:
        study = _lock_study(session, seat.study_id)
        session.refresh(seat)
        _settle_seat(session, study, study_config(study), seat, utcnow())
    return seat



def leave_seat(session: Session, seat_id: int, worker_id: int) -> TabooSeat:
    seat = session.get(TabooSeat, seat_id)
    if seat is None or seat.worker_id != worker_id:
        raise NotFound(f"no seat {seat_id} for this worker")
    _lock_study(session, seat.study_id)
    session.refresh(seat)
    if seat.state == SeatState.WAITING:
        seat.state = SeatState.LEFT
    return seat



def _settle_seat(
    session: Session, study: Study, config: TabooConfig, seat: TabooSeat, now: datetime
) -> None:
    """Pair a waiting seat if it can be: an agent, the longest-waiting person, or the timeout."""
    seat.seen_at = now
    worker = session.get(Worker, seat.worker_id)
    assert worker is not None
    if seat.opponent == "agent":
        _start_with_agent(session, study, config, seat, worker)
        return
    away = now - timedelta(seconds=config.away_seconds)
    partner = session.scalar(
        select(TabooSeat)
        .where(
            TabooSeat.study_id == study.id,
            TabooSeat.state == SeatState.WAITING,
            TabooSeat.worker_id != seat.worker_id,
            TabooSeat.opponent != "agent",
            TabooSeat.seen_at >= away,
            TabooSeat.expires_at >= now,
        )
        .order_by(TabooSeat.created_at, TabooSeat.id)
        .limit(1)
    )
    if partner is not None:
        other = session.get(Worker, partner.worker_id)
        assert other is not None
        item = _pick_word(session, study, [worker.id, other.id])
        if item is not None:
            first, second = (partner, seat) if SEEDS.random() < 0.5 else (seat, partner)
            game = new_game(
                session, study, config, item, Pairing.HUMAN_HUMAN,
                attacker=(first, None), defender=(second, None),
            )  # fmt: skip
            for paired in (seat, partner):
                paired.state, paired.game_id = SeatState.PAIRED, game.id
            return
    if seat.expires_at >= now:
        return
    if seat.opponent == "either" and config.offers("agent"):
        _start_with_agent(session, study, config, seat, worker)
    else:
        seat.state = SeatState.TIMED_OUT



def _start_with_agent(
    session: Session, study: Study, config: TabooConfig, seat: TabooSeat, worker: Worker
) -> None:
    item = _pick_word(session, study, [worker.id])
    if item is None:
        raise NoWorkLeft("you have played every word of this study: thank you!")
    role = config.human_role
    if role == "random":
        role = SEEDS.choice(["attacker", "defender"])
    attacker: Side = (seat, None) if role == "attacker" else (None, config.agents.attacker)
    defender: Side = (None, config.agents.defender) if role == "attacker" else (seat, None)
    game = new_game(session, study, config, item, Pairing.HUMAN_AGENT, attacker, defender)
    seat.state, seat.game_id = SeatState.PAIRED, game.id



def _pick_word(session: Session, study: Study, worker_ids: list[int]) -> Item | None:
    """A word none of the players has played, among the least-played ones (at random)."""
    played = select(Assignment.item_id).where(Assignment.worker_id.in_(worker_ids))
    candidates = session.scalars(
        select(Item)
        .where(Item.study_id == study.id, Item.kind == ItemKind.REAL, Item.id.not_in(played))
        .order_by(Item.holders, func.random())
        .limit(1)
    ).all()
    return candidates[0] if candidates else None



def _open_game_of(session: Session, study_id: int, worker_id: int) -> TabooGame | None:
    return session.scalar(
        select(TabooGame).where(
            TabooGame.study_id == study_id,
            TabooGame.outcome.is_(None),
            or_(TabooGame.attacker_worker_id == worker_id,
                TabooGame.defender_worker_id == worker_id),
        )
    )  # fmt: skip



def move(
    session: Session, game_id: int, worker_id: int, body: Mapping[str, Any]
) -> TabooGame:
    """A player says something or guesses. `version` is the game version the page showed:
    a retried request whose move is already in is answered with the current game."""
    game = load_game(session, game_id, worker_id)
    role = role_of(game, worker_id)
    now = utcnow()
    check_clocks(session, game, now, polled_by=role)
    version = body.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidAction("'version' must be the game version the page shows")
    state = state_of(game)
    says, guesses = body.get("say"), body.get("guess")
    if (says is None) == (guesses is None):
        raise InvalidAction("send either 'say' (an utterance) or 'guess' (a word)")
    if version < game.version and _already_in(state, role, says, guesses):
        return game
    if version != game.version:
        raise InvalidAction(f"the game moved on (version {game.version}): look again first")
    if state.over:
        raise InvalidAction("the game is over")
    if guesses is not None:
        if role != Role.DEFENDER:
            raise InvalidAction("only the defender guesses the word")
        new = engine.guess(state, guesses)
    else:
        new = engine.say(state, role, says, at=now.isoformat())
    store_state(session, game, state, new)
    return game



def _already_in(state: GameState, role: Role, says: Any, guesses: Any) -> bool:
    if guesses is not None:
        return role == Role.DEFENDER and state.guess == " ".join(str(guesses).split())
    mine = [u for u in state.utterances if u.role == role]
    return bool(mine) and mine[-1].text == " ".join(str(says).split())



def leave_game(session: Session, game_id: int, worker_id: int) -> TabooGame:
    """A player leaves: the game ends, abandoned by them."""
    game = load_game(session, game_id, worker_id)
    state = state_of(game)
    if not state.over:
        left = engine.end(state, EndReason.LEFT, role_of(game, worker_id))
        store_state(session, game, state, left)
    return game



def poll(session: Session, game_id: int, worker_id: int) -> TabooGame:
    """A page's poll: its heartbeat, and the clocks of both sides checked."""
    game = load_game(session, game_id, worker_id)
    check_clocks(session, game, utcnow(), polled_by=role_of(game, worker_id))
    return game



def game_view(session: Session, game: TabooGame, worker_id: int) -> dict[str, Any]:
    """What one player's page may see. The defender's view never holds the target (nor a
    struck attacker utterance) until the game is over and stored."""
    role = role_of(game, worker_id)
    state = state_of(game)
    config = config_of(session, game)
    opponent = players(session, game)[str(role.other)]
    view: dict[str, Any] = {
        "game_id": game.id,
        "study_id": game.study_id,
        "version": game.version,
        "role": str(role),
        "opponent": {"kind": opponent.kind, "name": opponent.name if opponent.kind == "human"
                     else "a computer player"},  # fmt: skip
        "phase": str(state.phase),
        "your_turn": state.to_move() == role,
        "turns": state.turns,
        "max_turns": state.rules.max_turns,
        "utterances": engine.seen_by(state, role),
        "guess_used": state.guess is not None if role == Role.DEFENDER else None,
        "move_seconds": config.move_seconds,
        "deadline": (game.turn_started_at + timedelta(seconds=config.move_seconds)).isoformat(),
        "over": state.over,
    }
    if role == Role.ATTACKER:
        view["target"] = state.target
        view["variants"] = list(state.variants)
    if state.over:
        view.update(
            target=state.target,
            outcome=str(state.outcome),
            result=result_for(state, role),
            end_reason=None if state.end_reason is None else str(state.end_reason),
            guess=state.guess,
        )
    return view



def seat_view(seat: TabooSeat) -> dict[str, Any]:
    return {
        "seat_id": seat.id,
        "study_id": seat.study_id,
        "state": str(seat.state),
        "opponent": seat.opponent,
        "game_id": seat.game_id,
        "expires_at": seat.expires_at.isoformat(),
    }

