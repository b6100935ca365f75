"""Taboo's RQ jobs: judging utterances in batches (with a score cache in the database) and
agent-vs-agent tournaments. Both run on the models queue and take plain values."""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

import redis
from rq import get_current_job
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from crowd.queue import MODELS, job_queue
from crowd.queue.hooks import Event, after_event
from crowd.queue.jobs import context
from crowd.settings import Settings
from crowd.storage import Database, Item, ItemKind, JudgeScore, Pairing, Study, TabooGame, utcnow
from tasks.taboo import engine
from tasks.taboo.live.games import TABOO_MOVE, config_of, state_of, store_state, study_config

log = logging.getLogger(__name__)

JUDGE_TIMEOUT = 600
TOURNAMENT_TIMEOUT = 3600
_judges: dict[str, Any] = {}
_judges_lock = threading.Lock()


class DatabaseCache:
    """models.judges.ScoreCache over the judge_scores table: a score is computed once."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get_many(self, kind: str, model_id: str, keys: list[str]) -> dict[str, float]:
        if not keys:
            return {}
        with self.db.read_session() as session:
            rows = session.execute(
                select(JudgeScore.key, JudgeScore.score).where(
                    JudgeScore.kind == kind, JudgeScore.model == model_id,
                    JudgeScore.key.in_(keys),
                )  # fmt: skip
            ).all()
        return {key: score for key, score in rows}

    def put_many(self, kind: str, model_id: str, scores: dict[str, float]) -> None:
        with self.db.session() as session:
            for key, score in scores.items():
                try:
                    with session.begin_nested():
                        session.add(JudgeScore(kind=kind, model=model_id, key=key, score=score))
                except IntegrityError:
                    pass  # another job stored the same score first


def resolve_models(settings: Settings, raw: dict[str, Any]) -> dict[str, Any]:
    """A study's judge config with model names turned into directories ('minilm' stays)."""
    resolved = dict(raw)
    for key in ("fluency_model", "relevance_model"):
        name = resolved.get(key)
        if name is not None and name != "minilm":
            resolved[key] = str(settings.data_dir / "backbones" / name)
    return resolved


def judge_for(settings: Settings, db: Database, raw: dict[str, Any]) -> Any:
    """One Judge per configuration per process: models load once, not per job."""
    from models.judges import Judge, JudgeConfig

    resolved = resolve_models(settings, raw)
    key = json.dumps(resolved, sort_keys=True)
    with _judges_lock:
        if key not in _judges:
            _judges[key] = Judge(JudgeConfig.from_json(resolved), DatabaseCache(db))
        return _judges[key]


def previous_text(state: engine.GameState, index: int) -> str | None:
    """The utterance a reply answers: the last shown one before it from the other side."""
    role = state.utterances[index].role
    for utterance in reversed(state.utterances[:index]):
        if utterance.role != role and utterance.valid is not False:
            return utterance.text
    return None


def judge_games(game_ids: list[int]) -> str:
    """Judge every utterance of these games that has no scores yet, in one batch per judge.

    Safe to run twice: scored utterances are skipped and scores come from the cache.
    """
    from models.judges import JudgeRequest

    ctx = context()
    pending: dict[str, list[tuple[int, int, Any]]] = {}
    configs: dict[str, dict[str, Any]] = {}
    with ctx.db.read_session() as session:
        for game_id in game_ids:
            game = session.get(TabooGame, game_id)
            if game is None:
                continue
            raw = config_of(session, game).judge
            if raw is None:
                continue
            key = json.dumps(raw, sort_keys=True)
            configs[key] = raw
            state = state_of(game)
            for index, utterance in enumerate(state.utterances):
                if not utterance.judge:
                    request = JudgeRequest(utterance.text, previous_text(state, index))
                    pending.setdefault(key, []).append((game_id, index, request))
    judged = 0
    for key, entries in pending.items():
        judge = judge_for(ctx.settings, ctx.db, configs[key])
        verdicts = judge.check([request for _, _, request in entries])
        by_game: dict[int, list[tuple[int, Any]]] = {}
        for (game_id, index, _), verdict in zip(entries, verdicts, strict=True):
            by_game.setdefault(game_id, []).append((index, verdict))
        for game_id, results in by_game.items():
            with ctx.db.session() as session:
                game = session.scalar(
                    select(TabooGame).where(TabooGame.id == game_id).with_for_update()
                )
                if game is None:
                    continue
                before = state = state_of(game)
                for index, verdict in results:
                    if index < len(state.utterances) and not state.utterances[index].judge:
                        state = engine.judge(state, index, verdict.scores, verdict.passed)
                        judged += 1
                store_state(session, game, before, state)
    log.info("%s judged %d utterances of %d games", _tag(), judged, len(game_ids))
    return f"judged {judged} utterances"


def _tag() -> str:
    job = get_current_job()
    return f"[job {job.id}]" if job else "[inline]"


def enqueue_judging(connection: redis.Redis, game_ids: list[int], job_id: str) -> None:
    job_queue(MODELS, connection).enqueue(
        judge_games, game_ids, job_id=job_id, job_timeout=JUDGE_TIMEOUT,
        result_ttl=3600, failure_ttl=7 * 24 * 3600,
    )  # fmt: skip


@after_event(TABOO_MOVE)
def after_move(connection: redis.Redis, event: Event) -> None:
    """An utterance was stored (a TABOO_MOVE outbox event): judge it on the models queue."""
    enqueue_judging(connection, [int(event.payload["game_id"])], f"taboo-judge-{event.id}")


# -- tournaments ---------------------------------------------------------------------------


TOURNAMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
MAX_GAMES_PER_PAIR = 100


def check_tournament(
    name: Any, attackers: Any, defenders: Any, games_per_pair: Any, seed: Any
) -> None:
    """Refuse a tournament the job could not play, with what to change."""
    from crowd.exceptions import ValidationError
    from tasks.taboo.agents import AGENTS

    if not isinstance(name, str) or not TOURNAMENT_NAME.fullmatch(name):
        raise ValidationError("1 to 100 letters, digits, '.', '_' or '-'", "name")
    for role, names in (("attacker", attackers), ("defender", defenders)):
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise ValidationError(f"a non-empty list of {role} agent names", f"{role}s")
        for agent in names:
            if agent not in AGENTS or str(AGENTS.get(agent).role) != role:
                known = [n for n, a in AGENTS.items() if str(a.role) == role]
                raise ValidationError(f"{agent!r} is not a {role} agent (known: {known})",
                                      f"{role}s")  # fmt: skip
    if not isinstance(games_per_pair, int) or isinstance(games_per_pair, bool) or not (
        1 <= games_per_pair <= MAX_GAMES_PER_PAIR
    ):
        raise ValidationError(f"a whole number from 1 to {MAX_GAMES_PER_PAIR}", "games_per_pair")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValidationError("a whole number", "seed")


def run_tournament(
    study_id: int,
    name: str,
    attackers: list[str],
    defenders: list[str],
    games_per_pair: int,
    seed: int,
    judge: bool = True,
) -> dict[str, Any]:
    """Agents play every word of the study against each other; games are stored under
    `name` and judged in one batch. Safe to run twice: a name already played is kept."""
    from tasks.taboo.simulate import Word, tournament

    ctx = context()
    with ctx.db.session() as session:
        study = session.get(Study, study_id)
        if study is None:
            raise ValueError(f"no study {study_id}")
        done = session.scalars(
            select(TabooGame.id).where(TabooGame.study_id == study_id, TabooGame.tournament == name)
        ).all()
        if done:
            return {"tournament": name, "games": len(done), "already_played": True}
        config = study_config(study)
        items = session.scalars(
            select(Item).where(Item.study_id == study.id, Item.kind == ItemKind.REAL)
            .order_by(Item.id)
        ).all()  # fmt: skip
        words = [
            Word(item.expected["word"], tuple(item.expected.get("variants") or ()),
                 item.meta.get("concreteness"))
            for item in items
        ]  # fmt: skip
        by_word = {item.expected["word"]: item.id for item in items}
        if not words:
            raise ValueError(f"study {study_id} has no words to play")
        played = tournament(
            words, attackers, defenders, games_per_pair, rules=config.rules, seed=seed,
            settings=config.agents.settings,
        )  # fmt: skip
        now = utcnow()
        ids = []
        for result in played:
            state = result.state
            game = TabooGame(
                study_id=study.id, item_id=by_word.get(result.word.word), tournament=name,
                pairing=Pairing.AGENT_AGENT, attacker_agent=result.attacker,
                defender_agent=result.defender, state=state.to_json(), version=1,
                outcome=None if state.outcome is None else str(state.outcome),
                seed=result.seed % 2**63, created_at=now, turn_started_at=now, ended_at=now,
            )  # fmt: skip
            session.add(game)
            session.flush()
            ids.append(game.id)
    if judge and config.judge is not None and ids:
        judge_games(ids)
    return {"tournament": name, "games": len(ids), "already_played": False}


def enqueue_tournament(connection: redis.Redis, **kwargs: Any) -> Any:
    """Check a tournament's settings and put it on the models queue."""
    check_tournament(kwargs.get("name"), kwargs.get("attackers"), kwargs.get("defenders"),
                     kwargs.get("games_per_pair"), kwargs.get("seed"))  # fmt: skip
    return job_queue(MODELS, connection).enqueue(
        run_tournament, kwargs=kwargs, job_id=f"taboo-tournament-{kwargs['study_id']}-"
        f"{kwargs['name']}", job_timeout=TOURNAMENT_TIMEOUT, result_ttl=7 * 24 * 3600,
        failure_ttl=7 * 24 * 3600,
    )  # fmt: skip


