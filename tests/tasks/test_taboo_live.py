"""Taboo games through the HTTP API: the waiting room, live play, agents, clocks, records."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient
from rq import Worker as RQWorker
from sqlalchemy import select, update

from crowd.queue import fetch_job
from crowd.settings import Settings
from crowd.storage import Database, JudgeScore, Response, TabooGame, TabooSeat
from crowd.storage.base import utcnow
from tests.conftest import join
from tests.crowd.queue.workers import Workers

WORDS = [
    {"id": "t1", "word": "banana", "variants": ["plantain"], "concreteness": 5.0},
    {"id": "t2", "word": "music", "concreteness": 3.5},
    {"id": "t3", "word": "freedom", "concreteness": 1.5},
]


@pytest.fixture
def taboo_study(make_study: Callable[..., int]) -> Callable[..., int]:
    def factory(**taboo: Any) -> int:
        config = {"taboo": {"judge": None, **taboo}}
        return make_study(WORDS, config, providers=("local",), hit_type="taboo")

    return factory


def lobby(client: FlaskClient, worker: dict[str, str], study: int, opponent: str) -> Any:
    response = client.post(f"/api/taboo/studies/{study}/lobby", json={"opponent": opponent},
                           headers=worker)  # fmt: skip
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def view(client: FlaskClient, worker: dict[str, str], game: int) -> dict[str, Any]:
    response = client.get(f"/api/taboo/games/{game}", headers=worker)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def move(client: FlaskClient, worker: dict[str, str], game: int, **body: Any) -> Any:
    version = view(client, worker, game)["version"]
    return client.post(f"/api/taboo/games/{game}/move", json={"version": version, **body},
                       headers=worker)  # fmt: skip


def pair(client: FlaskClient, study: int) -> tuple[int, dict[str, str], dict[str, str]]:
    """Two people in the waiting room; returns the game and (attacker, defender) headers."""
    first, second = join(client, name="ann"), join(client, name="bob")
    waiting = lobby(client, first, study, "human")
    assert waiting["state"] == "waiting" and waiting["game_id"] is None
    paired = lobby(client, second, study, "human")
    assert paired["state"] == "paired"
    seat = client.get(f"/api/taboo/seats/{waiting['seat_id']}", headers=first).get_json()
    assert seat["state"] == "paired" and seat["game_id"] == paired["game_id"]
    game = paired["game_id"]
    if view(client, first, game)["role"] == "attacker":
        return game, first, second
    return game, second, first


def test_two_people_play_a_game_and_the_defender_never_gets_the_word(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database
) -> None:
    study = taboo_study()
    game, attacker, defender = pair(client, study)
    seen_by_attacker = view(client, attacker, game)
    word = seen_by_attacker["target"]
    assert word in {w["word"] for w in WORDS} and seen_by_attacker["your_turn"]
    bodies: list[str] = []

    def defender_view() -> dict[str, Any]:
        response = client.get(f"/api/taboo/games/{game}", headers=defender)
        assert response.headers["Cache-Control"] == "no-store"  # the game's blueprint says so
        bodies.append(response.get_data(as_text=True))
        return response.get_json()

    assert "target" not in defender_view() and not defender_view()["your_turn"]
    # Out of turn, and a stale version, are refused.
    assert move(client, defender, game, say="hello").status_code == 409
    stale = client.post(f"/api/taboo/games/{game}/move", json={"version": 7, "say": "hi"},
                        headers=attacker)  # fmt: skip
    assert stale.status_code == 409
    opening = move(client, attacker, game, say="What do you like to eat or listen to?")
    assert opening.status_code == 200
    seen = defender_view()
    assert seen["your_turn"] and seen["utterances"][0]["text"].startswith("What do you like")
    said = move(client, defender, game, say=f"I really like {word}, honestly")
    assert said.status_code == 200
    over = said.get_json()
    assert over["over"] and over["result"] == "lost"  # the defender said it
    assert view(client, attacker, game)["result"] == "won"
    final = defender_view()
    assert final["result"] == "lost" and final["target"] == word  # revealed once stored
    # Before the end no defender response carried the word.
    assert len(bodies) > 3 and all(word not in body.lower() for body in bodies[:-1])
    with db.session() as session:
        responses = session.scalars(select(Response).order_by(Response.id)).all()
        assert sorted(r.answer["result"] for r in responses) == ["lost", "won"]
        assert {r.answer["role"] for r in responses} == {"attacker", "defender"}
        assert {r.score for r in responses} == {0.0, 1.0}
    # A retried move is answered with the game, not an error.
    retry = client.post(f"/api/taboo/games/{game}/move",
                        json={"version": 1, "say": f"I really like {word}, honestly"},
                        headers=defender)  # fmt: skip
    assert retry.status_code == 200 and retry.get_json()["over"]


def test_struck_attacker_text_never_reaches_the_defender(
    client: FlaskClient, taboo_study: Callable[..., int]
) -> None:
    study = taboo_study(rules={"invalid_cost": "turn"})
    game, attacker, defender = pair(client, study)
    word = view(client, attacker, game)["target"]
    struck = move(client, attacker, game, say=f"please say {word.upper()} now").get_json()
    assert struck["utterances"][0]["valid"] is False
    seen = view(client, defender, game)
    assert seen["utterances"] == [{"index": 0, "role": "attacker", "struck": True, "turn": 1}]
    assert word not in json.dumps(seen).lower()
    assert move(client, defender, game, guess="umbrella").get_json()["result"] == "tie"


def test_a_person_plays_an_agent_attacker(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database
) -> None:
    study = taboo_study(opponent="agent", human_role="defender")
    person = join(client, name="cat")
    seat = lobby(client, person, study, "agent")
    game = seat["game_id"]
    first = view(client, person, game)
    assert first["role"] == "defender" and first["opponent"]["kind"] == "agent"
    assert first["your_turn"] and len(first["utterances"]) == 1  # the agent spoke first
    assert "target" not in first
    for turn in range(4):
        current = view(client, person, game)
        if current["over"]:
            break
        reply = move(client, person, game, say=f"hmm, that is interesting number {turn}")
        assert reply.status_code == 200, reply.get_json()
    current = view(client, person, game)
    if not current["over"]:
        current = move(client, person, game, guess="umbrella").get_json()
    assert current["over"] and current["result"] in {"won", "lost", "tie"}
    with db.session() as session:
        stored = session.scalars(select(TabooGame)).one()
        assert stored.pairing == "human-agent" and stored.attacker_agent == "retrieval"
        assert session.scalars(select(Response)).one().answer["role"] == "defender"


def test_only_the_offered_opponents_and_known_settings(
    client: FlaskClient, taboo_study: Callable[..., int], make_study: Callable[..., int]
) -> None:
    study = taboo_study(opponent="human")
    person = join(client)
    refused = client.post(f"/api/taboo/studies/{study}/lobby", json={"opponent": "agent"},
                          headers=person)  # fmt: skip
    assert refused.status_code == 422 and "human opponents only" in refused.get_json()["error"]
    with pytest.raises(Exception, match="invalid_cost"):
        make_study(WORDS, {"taboo": {"rules": {"invalid_cost": "free"}}}, hit_type="taboo")
    with pytest.raises(Exception, match="unknown agent"):
        make_study(WORDS, {"taboo": {"agents": {"attacker": "oracle"}}}, hit_type="taboo")
    with pytest.raises(Exception, match="no paths"):
        make_study(WORDS, {"taboo": {"judge": {"fluency_model": "/etc/x"}}}, hit_type="taboo")


def test_the_waiting_room_times_out_to_an_agent_or_ends(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database
) -> None:
    either = taboo_study(opponent="either", wait_seconds=1)
    person = join(client)
    seat = lobby(client, person, either, "either")
    assert seat["state"] == "waiting"
    with db.session() as session:
        session.execute(update(TabooSeat).values(expires_at=utcnow() - timedelta(seconds=1)))
    polled = client.get(f"/api/taboo/seats/{seat['seat_id']}", headers=person).get_json()
    assert polled["state"] == "paired" and polled["game_id"] is not None
    humans_only = taboo_study(opponent="human", wait_seconds=1)
    other = join(client)
    seat = lobby(client, other, humans_only, "human")
    with db.session() as session:
        session.execute(
            update(TabooSeat).where(TabooSeat.id == seat["seat_id"])
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )  # fmt: skip
    polled = client.get(f"/api/taboo/seats/{seat['seat_id']}", headers=other).get_json()
    assert polled["state"] == "timed_out" and polled["game_id"] is None


def test_a_player_who_goes_away_or_stalls_ends_the_game_fairly(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database
) -> None:
    study = taboo_study()
    game, attacker, defender = pair(client, study)
    with db.session() as session:
        session.execute(
            update(TabooGame).values(attacker_seen_at=utcnow() - timedelta(seconds=120))
        )
    seen = view(client, defender, game)
    assert seen["over"] and seen["result"] == "partner_left" and seen["end_reason"] == "player_left"
    assert view(client, attacker, game)["result"] == "left"
    with db.session() as session:
        answers = {r.answer["result"]: r.score for r in session.scalars(select(Response))}
    assert answers == {"left": 0.0, "partner_left": None}
    # A stalled move: the side to move times out even while its page keeps polling.
    game, attacker, defender = pair(client, taboo_study(move_seconds=5))
    with db.session() as session:
        session.execute(
            update(TabooGame).where(TabooGame.id == game)
            .values(turn_started_at=utcnow() - timedelta(seconds=10))
        )  # fmt: skip
    assert view(client, attacker, game)["result"] == "left"
    assert view(client, defender, game)["end_reason"] == "player_timed_out"


def test_summary_transcripts_and_report_cover_games(
    client: FlaskClient, taboo_study: Callable[..., int], auth: dict[str, str]
) -> None:
    study = taboo_study()
    game, attacker, defender = pair(client, study)
    move(client, attacker, game, say="What fruit do monkeys like?")
    move(client, defender, game, guess="banana")
    summary = client.get(f"/api/studies/{study}/taboo/summary", headers=auth).get_json()
    assert summary["leaderboard"] and summary["full"]
    lines = client.get(f"/api/studies/{study}/taboo/transcripts", headers=auth)
    record = json.loads(lines.get_data(as_text=True).splitlines()[0])
    assert record["pairing"] == "human-human"
    rows = client.get(f"/api/studies/{study}/taboo/transcripts?format=csv", headers=auth)
    assert rows.get_data(as_text=True).count("What fruit do monkeys like?") == 1
    bad = client.get(f"/api/studies/{study}/taboo/transcripts?format=xml", headers=auth)
    assert bad.status_code == 422
    assert client.get(f"/api/studies/{study}/taboo/games", headers=join(client)).status_code == 401


def test_judge_jobs_score_every_utterance_once_with_a_cache(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database, settings: Any
) -> None:
    from crowd.queue.runner import run_worker

    study = taboo_study(judge={"relevance_model": "minilm", "relevance_threshold": 0.4})
    game, attacker, defender = pair(client, study)
    move(client, attacker, game, say="What do monkeys like to eat in the jungle?")
    move(client, defender, game, say="They eat fruit and leaves in the trees.")
    run_worker(settings, burst=True)
    with db.session() as session:
        state = session.get(TabooGame, game).state
        first, second = state["utterances"]
        assert first["judge"]["relevance"]["skipped"] == "first utterance"
        relevance = second["judge"]["relevance"]
        assert relevance["model"] and relevance["threshold"] == 0.4
        assert 0.0 < relevance["score"] <= 1.0
        assert relevance["passed"] == (relevance["score"] >= 0.4)
        cached = session.scalars(select(JudgeScore)).all()
        assert len(cached) == 1 and cached[0].kind == "relevance"


def test_an_enforced_judge_holds_the_turn_and_strikes_what_fails(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database, settings: Any
) -> None:
    from crowd.queue.runner import run_worker

    study = taboo_study(
        rules={"enforce_judge": True, "invalid_cost": "turn"},
        judge={"relevance_model": "minilm", "relevance_threshold": 0.95},
    )
    game, attacker, defender = pair(client, study)
    move(client, attacker, game, say="What do monkeys like to eat in the jungle?")
    waiting = view(client, defender, game)
    assert waiting["phase"] == "judging" and waiting["utterances"] == []
    assert move(client, defender, game, say="hi").status_code == 409
    run_worker(settings, burst=True)  # the first utterance has nothing to be relevant to
    assert view(client, defender, game)["your_turn"]
    move(client, defender, game, say="The stock market fell sharply today.")
    run_worker(settings, burst=True)
    seen = view(client, attacker, game)
    assert seen["your_turn"] and seen["turns"] == 2
    assert seen["utterances"][1] == {"index": 1, "role": "defender", "struck": True, "turn": 2}
    with db.session() as session:
        struck = session.get(TabooGame, game).state["utterances"][1]
        assert struck["valid"] is False and struck["reasons"] == ["judge: relevance"]
        assert struck["judge"]["relevance"]["score"] < 0.95


def test_a_judge_that_never_answers_does_not_hang_the_game(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database
) -> None:
    study = taboo_study(rules={"enforce_judge": True}, move_seconds=5,
                        judge={"relevance_model": "minilm"})  # fmt: skip
    game, attacker, defender = pair(client, study)
    move(client, attacker, game, say="What do monkeys like to eat?")
    with db.session() as session:
        session.execute(update(TabooGame).values(turn_started_at=utcnow() - timedelta(seconds=10)))
    seen = view(client, defender, game)
    assert seen["your_turn"] and not seen["over"]
    assert seen["utterances"][0]["valid"] is True
    with pytest.raises(Exception, match="enforce_judge needs a judge"):
        taboo_study(rules={"enforce_judge": True})  # judge None in this fixture


def test_fluency_comes_from_a_named_local_causal_lm(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database, settings: Any
) -> None:
    from crowd.queue.runner import run_worker
    from models.backbones import build_tiny_causal_lm

    build_tiny_causal_lm(settings.data_dir / "backbones" / "tiny-lm")
    study = taboo_study(judge={"fluency_model": "tiny-lm", "fluency_threshold": 35.0})
    game, attacker, _ = pair(client, study)
    move(client, attacker, game, say="What do monkeys like to eat?")
    run_worker(settings, burst=True)
    with db.session() as session:
        fluency = session.get(TabooGame, game).state["utterances"][0]["judge"]["fluency"]
    # A random tiny model is far from fluent: its perplexity is near its vocabulary size.
    assert fluency["model"].startswith("tiny-lm@") and fluency["threshold"] == 35.0
    assert fluency["score"] > 35.0 and fluency["passed"] is False


def test_tournaments_run_as_a_job_from_the_cli(
    runner: Any, taboo_study: Callable[..., int], db: Database
) -> None:
    from crowd.cli import main

    study = taboo_study()
    args = ["taboo", "tournament", str(study), "--name", "t1", "--defender", "threshold",
            "--defender", "naive", "--games", "2", "--no-judge"]  # fmt: skip
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "agent-agent: 12 games" in result.output
    with db.session() as session:
        games = session.scalars(select(TabooGame)).all()
        assert len(games) == 12 and {g.pairing for g in games} == {"agent-agent"}
        assert all(g.outcome is not None and g.tournament == "t1" for g in games)
    again = runner.invoke(main, args)
    assert again.exit_code == 0 and '"already_played": true' in again.output
    exported = runner.invoke(main, ["taboo", "export", str(study), "--format", "jsonl"])
    assert len(exported.output.splitlines()) == 12
    assert runner.invoke(main, ["taboo", "agents"]).output.count("(defender)") >= 2


def test_a_tournament_taken_by_a_running_worker_is_waited_for(
    runner: Any, taboo_study: Callable[..., int], db: Database, settings: Settings,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The CLI does not take the job from a `crowd worker` that listens: it waits for it
    and prints the outcome, exit status 0."""
    from crowd.cli import main

    study = taboo_study()
    (tmp_path / "logs").mkdir()
    workers = Workers(settings, tmp_path / "logs")
    connection = redis.Redis.from_url(settings.redis_url or "")
    try:
        workers.start(1)
        deadline = time.monotonic() + 60
        while not RQWorker.count(connection=connection) and time.monotonic() < deadline:
            time.sleep(0.2)
        (listening,) = [w.name for w in RQWorker.all(connection=connection)]
        args = ["taboo", "tournament", str(study), "--name", "live", "--no-judge"]
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output + workers.log_tail()
        job_id = re.search(r"queued \(job ([^)]+)\)", result.output)
        assert job_id is not None
        assert fetch_job(job_id[1], connection).worker_name == listening
    finally:
        workers.stop()
    with db.session() as session:
        games = session.scalars(select(TabooGame).where(TabooGame.tournament == "live")).all()
        assert games and all(game.outcome is not None for game in games)


def test_tournaments_are_queued_over_the_api_and_checked_first(
    client: FlaskClient,
    taboo_study: Callable[..., int],
    auth: dict[str, str],
    db: Database,
    settings: Any,
) -> None:
    from crowd.queue.runner import run_worker

    study = taboo_study()
    url = f"/api/studies/{study}/taboo/tournaments"
    body = {"name": "api-1", "attackers": ["retrieval"], "defenders": ["naive"], "judge": False}
    for bad, field in (
        (dict(body, defenders=["retrieval"]), "defenders"),
        (dict(body, games_per_pair=0), "games_per_pair"),
        (dict(body, name="../x"), "name"),
        (dict(body, extra=1), "extra"),
    ):
        refused = client.post(url, json=bad, headers=auth)
        assert refused.status_code == 422 and field in refused.get_json()["error"]
    queued = client.post(url, json=body, headers=auth)
    assert queued.status_code == 202, queued.get_json()
    run_worker(settings, burst=True)
    games = client.get(f"/api/studies/{study}/taboo/games?tournament=api-1", headers=auth)
    assert len(games.get_json()["games"]) == len(WORDS)
    assert client.post(url, json=body, headers=auth).status_code == 409


def test_games_nobody_polls_are_ended_by_the_sweep(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database
) -> None:
    from tasks.taboo.live.games import sweep_games

    study = taboo_study()
    game, attacker, _ = pair(client, study)
    with db.session() as session:
        assert sweep_games(session) == 0  # both pages fresh
        session.execute(
            update(TabooGame).values(attacker_seen_at=utcnow() - timedelta(seconds=60),
                                     defender_seen_at=utcnow() - timedelta(seconds=60))
        )  # fmt: skip
    with db.session() as session:
        assert sweep_games(session) == 1
        stored = session.get(TabooGame, game)
        # The attacker was to move: the attacker's page went away, not the waiting defender's.
        assert stored.outcome == "abandoned" and stored.state["ended_by"] == "attacker"
        assert len(session.scalars(select(Response)).all()) == 2


def test_blocked_workers_get_no_game(
    client: FlaskClient, taboo_study: Callable[..., int], db: Database
) -> None:
    from crowd.storage import Worker, WorkerStatus

    study = taboo_study()
    person = join(client, name="eve")
    with db.session() as session:
        session.execute(update(Worker).values(status=WorkerStatus.BLOCKED))
    refused = client.post(f"/api/taboo/studies/{study}/lobby", json={"opponent": "agent"},
                          headers=person)  # fmt: skip
    assert refused.status_code == 403


def test_bodies_are_checked_field_by_field(
    client: FlaskClient, taboo_study: Callable[..., int], auth: dict[str, str]
) -> None:
    study = taboo_study(opponent="agent", human_role="defender")
    person = join(client, name="fay")
    refused = client.post(f"/api/taboo/studies/{study}/lobby", json={"opponent": "robot"},
                          headers=person)  # fmt: skip
    assert refused.status_code == 422 and refused.get_json()["field"] == "opponent"
    game = lobby(client, person, study, "agent")["game_id"]
    version = view(client, person, game)["version"]
    url = f"/api/taboo/games/{game}/move"
    for body, field in (
        ({"say": "hi"}, "version"),
        ({"version": -1, "say": "hi"}, "version"),
        ({"version": version, "say": "x" * 501}, "say"),
        ({"version": version, "guess": "x" * 61}, "guess"),
        ({"version": version, "shout": "hi"}, "shout"),
    ):
        reply = client.post(url, json=body, headers=person)
        assert reply.status_code == 422 and reply.get_json()["field"] == field, reply.get_json()
    both = client.post(url, json={"version": version, "say": "hi", "guess": "x"}, headers=person)
    assert both.status_code == 409  # the game's own rule: one move at a time
    tournaments = f"/api/studies/{study}/taboo/tournaments"
    body = {"name": "t1", "attackers": ["retrieval", "oracle"], "defenders": ["naive"]}
    unknown = client.post(tournaments, json=body, headers=auth)
    assert unknown.status_code == 422 and unknown.get_json()["field"] == "attackers[1]"
    assert "retrieval" in unknown.get_json()["error"]
    listed = client.post(tournaments, json=dict(body, attackers=[]), headers=auth)
    assert listed.status_code == 422 and listed.get_json()["field"] == "attackers"
    games = client.get(f"/api/studies/{study}/taboo/games?tournament={'x' * 101}", headers=auth)
    assert games.status_code == 422 and games.get_json()["field"] == "tournament"


def test_a_player_with_no_word_left_is_told_they_are_done(
    client: FlaskClient, taboo_study: Callable[..., int]
) -> None:
    study = taboo_study(opponent="agent", human_role="defender")
    person = join(client, name="gil")
    for _ in WORDS:
        game = lobby(client, person, study, "agent")["game_id"]
        left = client.post(f"/api/taboo/games/{game}/leave", headers=person).get_json()
        assert left["over"] and left["result"] == "left" and left["target"]
    done = lobby(client, person, study, "agent")
    assert done["done"] is True and "every word" in done["message"]
    assert set(done) == {"done", "message"}


def test_openapi_describes_the_taboo_api(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").get_json()
    schemas = spec["components"]["schemas"]
    assert schemas["LobbyBody"]["properties"]["opponent"]["enum"] == ["human", "agent", "either"]
    tournament = schemas["NewTournament"]["properties"]
    assert tournament["attackers"]["items"]["enum"] == ["retrieval"]
    assert "naive" in tournament["defenders"]["items"]["enum"]
    transcripts = spec["paths"]["/api/studies/{study_id}/taboo/transcripts"]["get"]
    assert set(transcripts["responses"]["200"]["content"]) == {"application/x-ndjson", "text/csv"}
    assert [p["name"] for p in transcripts["parameters"]] == ["study_id", "format", "tournament"]
    # The defender's view has no target until the game is over: optional, never null.
    game = schemas["GameView"]
    assert "target" not in game["required"] and game["properties"]["target"]["type"] == "string"
