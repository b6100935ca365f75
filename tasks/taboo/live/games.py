"""Adversarial Taboo games on the platform: creating a game, storing its states, agents'
moves, the clocks, the end.

Clocks end games fairly: a player who has not polled for `away_seconds` has left, and one
who does not move within `move_seconds` of getting the turn has timed out. Either way the
game is over, abandoned by that player (the engine's ABANDONED outcome): nobody wins it,
the analysis leaves it out of the rates and counts it, and the leaderboard charges the
leaver. The player who stayed keeps the game as done work. A sweep checks the clocks of
games nobody polls.

Every human player holds an Assignment on the word's item; when the game ends, each gets a
Response (the outcome from their side), so QC, reports and platform hand-over work as for
every HIT type. Agents are plugins (tasks.taboo.agents) and move inside the request that
gave them the turn. Each new utterance is an outbox event (TABOO_MOVE), judged by batched
RQ jobs (jobs.py).

Concurrency: a game is serialised by locking the game row (on SQLite every write
transaction holds the database lock anyway).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from crowd.exceptions import (
    NotFound,
)
from crowd.queue.hooks import SweepContext, every_sweep
from crowd.storage import (
    Assignment,
    AssignmentState,
    Item,
    OutboxEvent,
    Pairing,
    Study,
    TabooGame,
    TabooSeat,
    Worker,
    utcnow,
)
from crowd.work.assignments import STALE_SWEEP_ORDER, store_response
from tasks import get_hit_type
from tasks.taboo import engine
from tasks.taboo.agents import AgentView, make_agent
from tasks.taboo.config import TabooConfig
from tasks.taboo.engine import EndReason, GameState, Outcome, Role

TABOO_MOVE = "taboo.move"

# Agents never need more moves than this in a row (REDO costs can make them try again).
MAX_AGENT_MOVES = 8

WAITING_SIDE_FACTOR = 10

SEEDS = random.SystemRandom()



def study_config(study: Study) -> TabooConfig:
    return TabooConfig.from_json(study.config.get("taboo") or {})



Side = tuple[TabooSeat | None, str | None]  # a waiting human's seat, or an agent's name



def new_game(
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
        seed=SEEDS.randrange(2**31),
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



def check_clocks(
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
        check_clocks(session, game, now, polled_by=None)
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

