"""Taboo analysis, leaderboard, export and report on hand-built games with known outcomes.

Games (states built with the engine; bot and bot2 are agents, Ann, Bob and Cy humans, Cy
QC-excluded):
  g1 apple  bot  vs Ann  A "a red fruit", D "is it a cherry", A "grows on trees",
                         D "i like apples"                        attacker wins, 4 turns
            judge scores recorded on utterances 0 (both pass) and 1 (both fail; stays valid)
  g2 apple  bot  vs Bob  A "a fruit", guess "apple"               defender wins, 1 turn, early
  g3 river  bot  vs Ann  (max 2 turns) A, D, forced guess "lake"  tie, 2 turns, forced
  g4 river  Ann  vs Bob  A, D, then Bob (defender) leaves         abandoned, 2 turns
  g5 house  Bob  vs bot  A "you live in a house"                  struck: defender wins, 1 turn
  g6 house  bot  vs bot2 (enforced judge, invalid costs the turn) A struck by fluency,
                         guess "home"                             tie, 1 turn, early
  g7 dog    bot  vs Cy   A "barks", D "dogs bark"                 attacker wins, 2 turns
  g8 cat    bot  vs Ann  A "meows"                                running

Worked by hand (full set): scored g1 g2 g3 g5 g6 g7: attacker 2, defender 2, tie 2; turns
4 1 2 1 1 2. Filtered (no g7): attacker 1, defender 2, tie 2 over 5, turns 4 1 2 1 1.
"""

from __future__ import annotations

import csv
import io
import json
import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

from tasks.taboo.analysis import REFERENCE, analyze, leaderboard
from tasks.taboo.engine import (
    EndReason,
    GameState,
    Role,
    Rules,
    end,
    guess,
    judge,
    new_game,
    say,
)
from tasks.taboo.export import FORMATS, write
from tasks.taboo.report import PLOT_FILES, render_report

A, D = Role.ATTACKER, Role.DEFENDER
BOT = {"kind": "agent", "id": "agent-1", "name": "bot"}
BOT2 = {"kind": "agent", "id": "agent-2", "name": "bot2"}
ANN = {"kind": "human", "id": "w1", "name": "Ann"}
BOB = {"kind": "human", "id": "w2", "name": "Bob"}
CY = {"kind": "human", "id": "w3", "name": "Cy"}
CONCRETENESS = {"apple": 5.0, "river": 4.5, "house": 4.9, "dog": 4.8, "cat": 4.9}
PASS = {
    "fluency": {"score": 20.0, "threshold": 35.0, "model": "gpt2", "passed": True},
    "relevance": {"score": 0.8, "threshold": 0.4, "model": "rel-clf", "passed": True},
}
FAIL = {
    "fluency": {"score": 50.0, "threshold": 35.0, "model": "gpt2", "passed": False},
    "relevance": {"score": 0.2, "threshold": 0.4, "model": "rel-clf", "passed": False},
}
DISFLUENT = {"fluency": {"score": 90.0, "threshold": 35.0, "model": "gpt2", "passed": False}}


def record(
    game_id: int,
    word: str,
    attacker: dict[str, str],
    defender: dict[str, str],
    state: GameState,
    *,
    excluded: bool = False,
    concreteness: float | None = None,
) -> dict[str, Any]:
    mixed = attacker["kind"] != defender["kind"]
    pairing = "human-agent" if mixed else f"{attacker['kind']}-{defender['kind']}"
    return {
        "game_id": game_id,
        "study_id": 7,
        "word": word,
        "concreteness": CONCRETENESS.get(word) if concreteness is None else concreteness,
        "pairing": pairing,
        "attacker": attacker,
        "defender": defender,
        "excluded": excluded,
        "state": state.to_json(),
        "created_at": "2026-01-01T00:00:00+00:00",
        "ended_at": None,
    }


def play(word: str, *moves: Callable[[GameState], GameState], rules: Rules | None = None) -> Any:
    state = new_game(word, rules=rules)
    for move in moves:
        state = move(state)
    return state


def s(role: Role, text: str) -> Callable[[GameState], GameState]:
    return lambda state: say(state, role, text)


def g(word: str) -> Callable[[GameState], GameState]:
    return lambda state: guess(state, word)


@pytest.fixture(scope="module")
def games() -> list[dict[str, Any]]:
    g1 = play("apple", s(A, "a red fruit"), s(D, "is it a cherry"))
    g1 = judge(judge(g1, 0, PASS, passed=True), 1, FAIL, passed=False)
    g1 = say(say(g1, A, "grows on trees"), D, "i like apples")
    g6 = play("house", s(A, "a home"), rules=Rules(enforce_judge=True, invalid_cost="turn"))
    g6 = guess(judge(g6, 0, DISFLUENT, passed=False), "home")
    return [
        record(1, "apple", BOT, ANN, g1),
        record(2, "apple", BOT, BOB, play("apple", s(A, "a fruit"), g("apple"))),
        record(
            3,
            "river",
            BOT,
            ANN,
            play("river", s(A, "water flows"), s(D, "a stream?"), g("lake"), rules=Rules(2)),
        ),
        record(
            4,
            "river",
            ANN,
            BOB,
            end(play("river", s(A, "flowing water"), s(D, "rain")), EndReason.LEFT, D),
        ),
        record(5, "house", BOB, BOT, play("house", s(A, "you live in a house"))),
        record(6, "house", BOT, BOT2, g6),
        record(7, "dog", BOT, CY, play("dog", s(A, "barks"), s(D, "dogs bark")), excluded=True),
        record(8, "cat", BOT, ANN, play("cat", s(A, "meows"))),
    ]


def test_the_fixture_games_end_as_described(games: list[dict[str, Any]]) -> None:
    ends = [(r["state"]["outcome"], r["state"]["end_reason"]) for r in games]
    assert ends == [
        ("attacker", "defender_said_target"),
        ("defender", "defender_guessed"),
        ("tie", "wrong_guess"),
        ("abandoned", "player_left"),
        ("defender", "invalid_utterance"),
        ("tie", "wrong_guess"),
        ("attacker", "defender_said_target"),
        (None, None),
    ]
    assert [r["pairing"] for r in games[3:6]] == ["human-human", "human-agent", "agent-agent"]


def test_overall_rates_turns_and_counts(games: list[dict[str, Any]]) -> None:
    full, filtered = analyze(games, filtered=False), analyze(games)
    assert (full["n_records"], full["n_running"], full["n_games"]) == (8, 1, 7)
    assert (full["n_abandoned"], full["n_scored"]) == (1, 6)
    assert full["counts"] == {"attacker": 2, "defender": 2, "tie": 2}
    assert full["rates"] == {"attacker": 0.3333, "defender": 0.3333, "tie": 0.3333}
    turns = [4, 1, 2, 1, 1, 2]
    assert full["turns"] == {
        "n": 6,
        "mean": round(float(np.mean(turns)), 4),
        "std": round(float(np.std(turns, ddof=1)), 4),
    }
    assert full["turns_by_outcome"]["attacker"]["mean"] == 3.0
    assert full["turns_by_outcome"]["defender"]["mean"] == 1.0
    assert full["turns_by_outcome"]["tie"]["mean"] == 1.5
    assert full["end_reasons"] == {
        "defender_guessed": 1, "defender_said_target": 2, "invalid_utterance": 1, "wrong_guess": 2,
    }  # fmt: skip
    # Filtered: g7 (Cy, excluded) is left out.
    assert filtered["counts"] == {"attacker": 1, "defender": 2, "tie": 2}
    assert filtered["rates"] == {"attacker": 0.2, "defender": 0.4, "tie": 0.4}
    assert filtered["turns"]["mean"] == 1.8
    assert filtered["excluded"] == {"n_games": 1, "n_finished": 1, "n_scored": 1, "left_out": True}
    assert full["excluded"]["left_out"] is False and full["excluded"]["n_games"] == 1
    assert full["reference"] == filtered["reference"] == REFERENCE
    assert REFERENCE["conditions"][0]["rates"]["attacker"] == 0.6
    json.dumps([full, filtered], allow_nan=False)


def test_abandoned_games_are_counted_but_left_out_of_rates(games: list[dict[str, Any]]) -> None:
    full = analyze(games, filtered=False)
    assert full["abandoned"]["n"] == 1
    assert full["abandoned"]["by_reason"] == {"player_left": 1}
    assert full["abandoned"]["by_role"] == {"defender": 1}
    river = full["by_word"]["river"]
    assert (river["n_games"], river["n_abandoned"], river["n_scored"]) == (2, 1, 1)
    assert river["rates"] == {"attacker": 0.0, "defender": 0.0, "tie": 1.0}
    assert river["turns"]["mean"] == 2.0  # g4's 2 turns are not in it
    human_human = full["by_pairing"]["human-human"]
    assert (human_human["n_games"], human_human["n_scored"]) == (1, 0)
    assert human_human["rates"] == {"attacker": None, "defender": None, "tie": None}


def test_per_word_pairing_and_matchup(games: list[dict[str, Any]]) -> None:
    full = analyze(games, filtered=False)
    assert list(full["by_word"]) == ["apple", "dog", "house", "river"]  # cat is still running
    apple = full["by_word"]["apple"]
    assert apple["concreteness"] == 5.0
    assert apple["rates"] == {"attacker": 0.5, "defender": 0.5, "tie": 0.0}
    assert apple["turns"]["mean"] == 2.5
    assert full["by_pairing"]["human-agent"]["counts"] == {"attacker": 2, "defender": 2, "tie": 1}
    assert full["by_pairing"]["agent-agent"]["counts"] == {"attacker": 0, "defender": 0, "tie": 1}
    reference_like = full["agent_attacker_vs_human_defender"]
    assert reference_like["rates"] == {"attacker": 0.5, "defender": 0.25, "tie": 0.25}
    assert reference_like["turns"]["mean"] == 2.25
    assert set(full["by_matchup"]) == {
        "agent:bot vs human", "human vs agent:bot", "human vs human", "agent:bot vs agent:bot2",
    }  # fmt: skip
    assert full["by_matchup"]["human vs agent:bot"]["counts"]["defender"] == 1


def test_guess_stats(games: list[dict[str, Any]]) -> None:
    guesses = analyze(games, filtered=False)["guesses"]
    assert (guesses["n_games"], guesses["n_guessed"], guesses["n_no_guess"]) == (6, 3, 3)
    assert (guesses["n_early"], guesses["n_forced"]) == (2, 1)
    assert guesses["early_share"] == 0.6667
    assert guesses["accuracy"] == 0.3333
    assert (guesses["early_accuracy"], guesses["forced_accuracy"]) == (0.5, 0.0)
    assert guesses["early_guess_turn"]["mean"] == 1.0


def test_invalid_utterances_and_judge(games: list[dict[str, Any]]) -> None:
    full = analyze(games, filtered=False)
    utterances = full["utterances"]
    assert utterances["n_utterances"] == 13  # finished games only, abandoned g4 included
    # g1's recorded judge failure leaves its utterance valid: only g5 and g6 are struck.
    assert utterances["n_invalid"] == 2
    assert utterances["invalid_by_role"] == {"attacker": 2, "defender": 0}
    assert utterances["invalid_by_reason"] == {
        "judge: fluency": {"n": 1, "share": 0.5},
        "says the target": {"n": 1, "share": 0.5},
    }
    assert utterances["judge_checks"] == {
        "fluency": {"n_checked": 3, "n_failed": 2, "fail_rate": 0.6667},
        "relevance": {"n_checked": 2, "n_failed": 1, "fail_rate": 0.5},
    }
    scores = full["judge_scores"]
    assert scores["fluency"]["mean"] == round((20 + 50 + 90) / 3, 4)
    assert scores["fluency"]["thresholds"] == [35.0]
    assert scores["fluency"]["models"] == ["gpt2"]
    assert scores["relevance"]["mean"] == 0.5


def _word_game(game_id: int, word: str, concreteness: float, attacker_wins: bool, n: int) -> Any:
    """An agent-agent game on `word` with `n` turns before it ends."""
    moves = []
    for turn in range(n - 1):
        moves.append(s(A if turn % 2 == 0 else D, f"hint number {turn}"))
    last = A if (n - 1) % 2 == 0 else D
    if attacker_wins:
        state = play(word, *moves)
        state = say(state, D, f"a {word}") if last == D else say(say(state, A, "x"), D, word)
    else:
        state = guess(play(word, *moves, s(last, "more hints")), "zzz")
    return record(game_id, word, BOT, BOT2, state, concreteness=concreteness)


def test_spearman_matches_scipy() -> None:
    plan = [  # word, concreteness, attacker wins, turns
        ("apple", 4.9, True, 2), ("apple", 4.9, True, 4),
        ("river", 4.5, True, 2), ("river", 4.5, False, 3),
        ("idea", 1.6, False, 5), ("justice", 1.4, False, 6), ("tree", 5.0, True, 6),
    ]  # fmt: skip
    games = [_word_game(i, *entry) for i, entry in enumerate(plan)]
    result = analyze(games, filtered=False)
    by_word = result["by_word"]
    words = sorted(by_word)
    x = [by_word[w]["concreteness"] for w in words]
    for key, values in (
        ("attacker_win_rate", [by_word[w]["rates"]["attacker"] for w in words]),
        ("mean_turns", [by_word[w]["turns"]["mean"] for w in words]),
    ):
        rho, p_value = stats.spearmanr(x, values)
        corr = result["concreteness"][key]
        assert corr["n"] == 5 and corr["reason"] is None
        assert corr["rho"] == pytest.approx(rho, abs=1e-4)
        assert corr["p"] == pytest.approx(p_value, rel=1e-3)
    assert result["concreteness"]["attacker_win_rate"]["rho"] > 0.5


def test_spearman_says_why_it_is_missing(games: list[dict[str, Any]]) -> None:
    two = [g for g in games if g["word"] in ("apple", "river")]
    corr = analyze(two, filtered=False)["concreteness"]["attacker_win_rate"]
    assert corr["rho"] is None and corr["p"] is None and corr["n"] == 2
    assert "at least 3" in corr["reason"]
    flat = [dict(g, concreteness=3.0) for g in games]
    assert (
        "same concreteness" in analyze(flat, filtered=False)["concreteness"]["mean_turns"]["reason"]
    )
    none = [dict(g, concreteness=None) for g in games]
    assert analyze(none, filtered=False)["concreteness"]["n_words"] == 0


def test_leaderboard_points_and_order(games: list[dict[str, Any]]) -> None:
    rows = leaderboard(games)
    assert [r["name"] for r in rows] == ["bot", "Bob", "bot2", "Ann", "Cy"]
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5]
    bot, bob, bot2, ann, cy = rows
    assert bot["player"] == "agent:bot"
    assert (bot["games"], bot["wins"], bot["ties"], bot["points"]) == (6, 3, 2, 4.0)
    assert (bot["attacker_played"], bot["attacker_won"]) == (5, 2)
    assert (bot["defender_played"], bot["defender_won"]) == (1, 1)
    assert bot["win_rate"] == 0.5
    # Bob left g4: it counts against him (a game, no points) and not against Ann.
    assert (bob["games"], bob["abandoned"], bob["points"], bob["win_rate"]) == (3, 1, 1.0, 0.3333)
    assert (ann["games"], ann["abandoned"], ann["opponent_left"], ann["points"]) == (2, 0, 1, 0.5)
    assert ann["attacker_played"] == 0
    assert (bot2["games"], bot2["points"]) == (1, 0.5)  # same points as Ann from fewer games
    assert (cy["player"], cy["points"], cy["win_rate"]) == ("human:w3", 0.0, 0.0)
    json.dumps(rows, allow_nan=False)


def test_jsonl_export_has_whole_transcripts(games: list[dict[str, Any]]) -> None:
    handle = io.StringIO()
    assert write(games, "jsonl", handle) == 8
    lines = [json.loads(line) for line in handle.getvalue().splitlines()]
    first = lines[0]
    assert (first["word"], first["pairing"], first["outcome"]) == (
        "apple",
        "human-agent",
        "attacker",
    )
    assert first["end_reason"] == "defender_said_target"
    assert (first["turns"], first["guess"], first["guess_correct"]) == (4, None, None)
    assert first["attacker"] == {"kind": "agent", "id": "agent-1", "name": "bot"}
    assert [u["role"] for u in first["utterances"]] == ["attacker", "defender"] * 2
    assert first["utterances"][0]["judge"] == PASS
    assert first["utterances"][1]["reasons"] == ["judge: fluency", "judge: relevance"]
    assert first["utterances"][1]["valid"] is True
    assert (lines[1]["guess"], lines[1]["guess_correct"], lines[1]["guess_turn"]) == (
        "apple",
        True,
        1,
    )
    assert lines[2]["guess_correct"] is False
    assert lines[4]["utterances"][0]["valid"] is False
    assert lines[7]["outcome"] is None  # the running game is exported as it stands


def test_csv_export_flattens_the_judge(games: list[dict[str, Any]]) -> None:
    handle = io.StringIO()
    assert write(games, "csv", handle) == 14
    rows = list(csv.DictReader(io.StringIO(handle.getvalue())))
    assert len(rows) == 14
    first = rows[0]
    assert (first["game_id"], first["word"], first["attacker_name"]) == ("1", "apple", "bot")
    assert (first["role"], first["text"], first["turn"]) == ("attacker", "a red fruit", "1")
    assert (first["fluency_score"], first["fluency_threshold"]) == ("20.0", "35.0")
    assert (first["fluency_model"], first["fluency_passed"]) == ("gpt2", "True")
    assert (first["relevance_score"], first["relevance_passed"]) == ("0.8", "True")
    assert rows[1]["reasons"] == "judge: fluency; judge: relevance"
    assert rows[1]["relevance_passed"] == "False"
    assert rows[2]["fluency_score"] == ""  # not judged
    house = [r for r in rows if r["game_id"] == "5"]
    assert house[0]["valid"] == "False" and house[0]["reasons"].startswith("says the target")
    assert house[0]["outcome"] == "defender"


def test_export_keeps_games_without_utterances_and_rejects_unknown_formats() -> None:
    left = record(9, "apple", ANN, BOT, end(new_game("apple"), EndReason.TIMED_OUT, A))
    handle = io.StringIO()
    assert write([left], "csv", handle) == 1
    row = next(csv.DictReader(io.StringIO(handle.getvalue())))
    assert (row["game_id"], row["outcome"], row["text"]) == ("9", "abandoned", "")
    assert FORMATS == ("jsonl", "csv")
    with pytest.raises(ValueError, match="jsonl, csv"):
        write([left], "parquet", io.StringIO())


def test_report_has_the_tables_and_writes_the_plot(
    games: list[dict[str, Any]], tmp_path: pathlib.Path
) -> None:
    data = {
        "full": analyze(games, filtered=False),
        "filtered": analyze(games),
        "leaderboard": leaderboard(games),
    }
    html = render_report(data, tmp_path, "Taboo <study>")
    assert "<title>Taboo &lt;study&gt;</title>" in html
    for table_id in (
        "counts", "overall", "reference", "pairing-full", "pairing-filtered", "words-full",
        "words-filtered", "matchup-full", "concreteness", "guesses", "invalid", "judge-checks",
        "judge-scores", "leaderboard",
    ):  # fmt: skip
        assert f'id="{table_id}"' in html
    assert "humans unaware of the rules" in html and "60.0%" in html and "7.04" in html
    assert "33.3%" in html and "40.0%" in html  # full and filtered rates
    assert "Bob" in html and "river" in html
    plot = tmp_path / PLOT_FILES["outcomes"]
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert "data:image/png;base64," in html


def test_report_without_games_or_filtered_set(tmp_path: pathlib.Path) -> None:
    html = render_report({"full": analyze([], filtered=False)}, tmp_path, "Empty")
    assert 'id="overall"' in html and "Filtered set" not in html
    assert "leaderboard" not in html
    assert (tmp_path / PLOT_FILES["outcomes"]).exists()
