"""Adversarial Taboo on the platform: the waiting room, games, moves, agents and clocks.

A worker asks for a game in a study (`join_lobby`). Against an agent the game starts at
once; against a person the worker waits in the study's waiting room until another worker
comes (paired in order of arrival) or `wait_seconds` pass, after which the study's
`opponent: either` hands them an agent and `opponent: human` ends the wait (recorded as a
timed-out seat). Both pages poll their game (`game_view`); each poll is a heartbeat, and
the other side's utterances arrive with it, without reloading.

Clocks end games fairly: a player who has not polled for `away_seconds` has left, and one
who does not move within `move_seconds` of getting the turn has timed out. Either way the
game is over, abandoned by that player (the engine's ABANDONED outcome): nobody wins it,
the analysis leaves it out of the rates and counts it, and the leaderboard charges the
leaver. The player who stayed keeps the game as done work.

Every human player holds an Assignment on the word's item; when the game ends, each gets a
Response (the outcome from their side), so QC, reports and platform hand-over work as for
every HIT type. Agents are plugins (tasks.taboo.agents) and move inside the request that
gave them the turn. Utterances are judged by batched RQ jobs (jobs.py).

Concurrency: a study's waiting room is serialised by locking the study row, a game by
locking the game row (on SQLite every write transaction holds the database lock anyway).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from crowd.exceptions import InvalidAction, NotFound, NoWorkLeft, StudyNotOpen, ValidationError
from crowd.queue.hooks import SweepContext, every_sweep
from crowd.storage import (
    Assignment,
    AssignmentState,
    Item,
    ItemKind,
    OutboxEvent,
    Pairing,
    PlatformSession,
    SeatState,
    Study,
    StudyStatus,
    TabooGame,
    TabooSeat,
    Worker,
    utcnow,
)
from crowd.work.assignments import STALE_SWEEP_ORDER
from tasks import get_hit_type
from tasks.taboo import engine
from tasks.taboo.config import OPPONENTS, TabooConfig
from tasks.taboo.engine import EndReason, GameState, Outcome, Role

TABOO_MOVE = "taboo.move"
# Agents never need more moves than this in a row (REDO costs can make them try again).
MAX_AGENT_MOVES = 8
WAITING_SIDE_FACTOR = 10
_SEEDS = random.SystemRandom()


def study_config(study: Study) -> TabooConfig:
    return TabooConfig.from_json(study.config.get("taboo") or {})


def _lock_study(session: Session, study_id: int) -> Study:
    study = session.scalar(select(Study).where(Study.id == study_id).with_for_update())
    if study is None:
        raise NotFound(f"no study {study_id}")
    if study.hit_type != "taboo":
        raise ValidationError(f"study {study_id} is a {study.hit_type} study, not a taboo game")
    return study


# -- the waiting room ----------------------------------------------------------------------


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
    from crowd.exceptions import PermissionDenied
    from crowd.quality import standing as quality
    from crowd.storage import Serving, SessionState, WorkerStatus
    from crowd.work.assignments import NO_MORE_FOR_YOU

    if worker.status == WorkerStatus.BLOCKED or quality.blocked_by(
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
            first, second = (partner, seat) if _SEEDS.random() < 0.5 else (seat, partner)
            game = _new_game(
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
        role = _SEEDS.choice(["attacker", "defender"])
    attacker: Side = (seat, None) if role == "attacker" else (None, config.agents.attacker)
    defender: Side = (None, config.agents.defender) if role == "attacker" else (seat, None)
    game = _new_game(session, study, config, item, Pairing.HUMAN_AGENT, attacker, defender)
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


# -- games ---------------------------------------------------------------------------------

Side = tuple[TabooSeat | None, str | None]  # a waiting human's seat, or an agent's name


def _new_game(
    session: Session,
    study: Study,
    config: TabooConfig,
    item: Item,
    pairing: Pairing,
    attacker: Side,
    defender: Side,
) -> TabooGame:
    now = utcnow()
    expected = item.expected
    state = engine.new_game(
        expected["word"], tuple(expected.get("variants") or ()), config.rules
    )
    game = TabooGame(
        study_id=study.id,
        item_id=item.id,
        pairing=pairing,
        attacker_agent=attacker[1],
        defender_agent=defender[1],
        state=state.to_json(),
        seed=_SEEDS.randrange(2**31),
        created_at=now,
        turn_started_at=now,
        attacker_seen_at=now,
        defender_seen_at=now,
    )
    session.add(game)
    session.flush()
    for role, (seat, _agent) in ((Role.ATTACKER, attacker), (Role.DEFENDER, defender)):
        if seat is None:
            continue
        worker = session.get(Worker, seat.worker_id)
        assert worker is not None
        assignment = Assignment(
            study_id=study.id,
            item_id=item.id,
            worker_id=worker.id,
            provider=worker.provider,
            progress={"step": 0, "game_id": game.id, "role": str(role)},
            events=[{"type": "paired", "game_id": game.id, "role": str(role),
                     "pairing": str(pairing), "at": now.isoformat()}],  # fmt: skip
            platform_session_id=seat.platform_session_id,
        )
        session.add(assignment)
        session.flush()
        item.holders = Item.holders + 1
        setattr(game, f"{role}_worker_id", worker.id)
        setattr(game, f"{role}_assignment_id", assignment.id)
    store_state(session, game, state, state)
    return game


def load_game(session: Session, game_id: int, worker_id: int | None = None) -> TabooGame:
    """A game, locked; with `worker_id`, only one that worker plays in."""
    game = session.scalar(select(TabooGame).where(TabooGame.id == game_id).with_for_update())
    playing = None if game is None else (game.attacker_worker_id, game.defender_worker_id)
    if game is None or (worker_id is not None and worker_id not in (playing or ())):
        raise NotFound(f"no game {game_id} for this worker")
    return game


def role_of(game: TabooGame, worker_id: int) -> Role:
    return Role.ATTACKER if game.attacker_worker_id == worker_id else Role.DEFENDER


def state_of(game: TabooGame) -> GameState:
    return GameState.from_json(game.state)


def move(
    session: Session, game_id: int, worker_id: int, body: Mapping[str, Any]
) -> TabooGame:
    """A player says something or guesses. `version` is the game version the page showed:
    a retried request whose move is already in is answered with the current game."""
    game = load_game(session, game_id, worker_id)
    role = role_of(game, worker_id)
    now = utcnow()
    _check_clocks(session, game, now, polled_by=role)
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
    _check_clocks(session, game, utcnow(), polled_by=role_of(game, worker_id))
    return game


def _check_clocks(
    session: Session, game: TabooGame, now: datetime, polled_by: Role | None
) -> None:
    if polled_by is not None:
        setattr(game, f"{polled_by}_seen_at", now)
        # A live game's assignment is in use: the stale-assignment sweep must leave it be.
        assignment_id = getattr(game, f"{polled_by}_assignment_id")
        assignment = session.get(Assignment, assignment_id) if assignment_id else None
        if assignment is not None and assignment.state == AssignmentState.ASSIGNED:
            assignment.updated_at = now
    state = state_of(game)
    if state.over:
        return
    config = config_of(session, game)
    for role in (Role.ATTACKER, Role.DEFENDER):
        if getattr(game, f"{role}_worker_id") is None:
            continue
        # The side waiting for the other may have its tab in the background, where
        # browsers slow timers to a minute: it gets a longer window than the side to move.
        window = config.away_seconds * (1 if state.to_move() == role else WAITING_SIDE_FACTOR)
        seen = getattr(game, f"{role}_seen_at")
        if seen < now - timedelta(seconds=window):
            store_state(session, game, state, engine.end(state, EndReason.LEFT, role))
            return
    if state.phase == engine.Phase.JUDGING and now - game.turn_started_at > timedelta(
        seconds=config.move_seconds
    ):
        # The judge's job never answered (a worker down, a failed model): the utterance
        # stands, recorded as unjudged, rather than the game hanging for both players.
        unjudged = {"judge": {"score": None, "threshold": None, "model": None, "passed": True,
                              "skipped": "no verdict in time"}}  # fmt: skip
        ruled = engine.judge(state, len(state.utterances) - 1, unjudged, passed=True)
        store_state(session, game, state, ruled)
        return
    mover = state.to_move()
    if (
        mover is not None
        and getattr(game, f"{mover}_worker_id") is not None
        and now - game.turn_started_at > timedelta(seconds=config.move_seconds)
    ):
        store_state(session, game, state, engine.end(state, EndReason.TIMED_OUT, mover))


def store_state(session: Session, game: TabooGame, before: GameState, after: GameState) -> None:
    """Store a new state; let agents move; judge new utterances; finish an ended game."""
    now = utcnow()
    settings = config_of(session, game).agents.settings
    for _ in range(MAX_AGENT_MOVES):
        mover = after.to_move()
        agent = None if mover is None else getattr(game, f"{mover}_agent")
        if after.over or agent is None or mover is None:
            break
        after = agent_move(game, after, mover, agent, settings.get(agent, {}))
    if after.to_move() != before.to_move() or len(after.utterances) != len(before.utterances):
        game.turn_started_at = now
    game.state = after.to_json()
    if _visible(after) != _visible(before):
        game.version = game.version + 1
    if len(after.utterances) > len(before.utterances):
        session.add(OutboxEvent(topic=TABOO_MOVE, payload={"game_id": game.id}))
    if after.over and game.outcome is None:
        _finish(session, game, after, now)


def _visible(state: GameState) -> Any:
    """What either page may show of a state: recorded judge scores alone change nothing."""
    return (state.phase, state.guess, state.outcome,
            [(u.role, u.text, u.turn, u.valid) for u in state.utterances])  # fmt: skip


def sweep_games(session: Session, now: datetime | None = None) -> int:
    """Check the clocks of open games nobody polls (both pages closed, or a person gone
    from a game against an agent); returns how many ended."""
    now = now or utcnow()
    ended = 0
    for game in session.scalars(
        select(TabooGame).where(TabooGame.outcome.is_(None)).with_for_update(skip_locked=True)
    ).all():
        _check_clocks(session, game, now, polled_by=None)
        ended += game.outcome is not None
    return ended


# Before the stale-assignment sweep: a game that ends stores its players' answers.
@every_sweep("taboo-games", order=STALE_SWEEP_ORDER - 1)
def sweep_open_games(sweep: SweepContext) -> None:
    with sweep.db.session() as session:
        sweep_games(session)


def agent_move(
    game: TabooGame, state: GameState, role: Role, name: str, settings: Mapping[str, Any]
) -> GameState:
    """One move of the agent playing `role`, which sees only what its side may see."""
    from tasks.taboo.agents import AgentView, make_agent

    agent = make_agent(name, **dict(settings))
    rng = random.Random(f"{game.seed}:{len(state.utterances)}:{state.guess is not None}")
    chosen = agent.act(AgentView.of(state, role), rng)
    if chosen.kind == "guess":
        return engine.guess(state, chosen.text)
    return engine.say(state, role, chosen.text, at=utcnow().isoformat())


def config_of(session: Session, game: TabooGame) -> TabooConfig:
    study = session.get(Study, game.study_id) if game.study_id is not None else None
    return study_config(study) if study is not None else TabooConfig()


def _finish(session: Session, game: TabooGame, state: GameState, now: datetime) -> None:
    """Record the end, and store each human player's side of it as their Response."""
    from crowd.work.assignments import store_response

    assert state.outcome is not None
    game.outcome = str(state.outcome)
    game.ended_at = now
    hit = get_hit_type("taboo")
    for role in (Role.ATTACKER, Role.DEFENDER):
        assignment_id = getattr(game, f"{role}_assignment_id")
        if assignment_id is None:
            continue
        assignment = session.get(Assignment, assignment_id)
        if assignment is None or assignment.state != AssignmentState.ASSIGNED:
            continue
        answer = {
            "game_id": game.id,
            "role": str(role),
            "pairing": str(game.pairing),
            "outcome": str(state.outcome),
            "result": result_for(state, role),
            "end_reason": None if state.end_reason is None else str(state.end_reason),
            "turns": state.turns,
            "guess": state.guess if role == Role.DEFENDER else None,
        }
        assignment.events = [*assignment.events, {"type": "game_over", "at": now.isoformat()}]
        store_response(session, hit, assignment, answer)


def result_for(state: GameState, role: Role) -> str:
    """"won", "lost", "tie", "left" (this side abandoned it) or "partner_left"."""
    if state.outcome == Outcome.ABANDONED:
        return "left" if state.ended_by == role else "partner_left"
    if state.outcome == Outcome.TIE:
        return "tie"
    return "won" if str(state.outcome) == str(role) else "lost"


# -- what a page sees ----------------------------------------------------------------------


@dataclass(frozen=True)
class Player:
    kind: str  # "human" or "agent"
    id: str
    name: str


def players(session: Session, game: TabooGame) -> dict[str, Player]:
    result: dict[str, Player] = {}
    for role in ("attacker", "defender"):
        worker_id = getattr(game, f"{role}_worker_id")
        if worker_id is not None:
            worker = session.get(Worker, worker_id)
            name = (worker.display_name if worker else None) or f"worker {worker_id}"
            result[role] = Player("human", f"worker:{worker_id}", name)
        else:
            agent = str(getattr(game, f"{role}_agent"))
            result[role] = Player("agent", f"agent:{agent}", agent)
    return result


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
