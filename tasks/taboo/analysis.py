"""Pure analysis of Adversarial Taboo games: outcome rates, turns, guesses, judges, leaderboard.

Yao et al., "Adversarial Language Games for Advanced Natural Language Intelligence" (AAAI
2021). Input is a list of game records (plain dicts):

    {"game_id", "study_id", "word", "concreteness", "pairing", "attacker": {"kind", "id",
     "name"}, "defender": {...}, "excluded", "state": GameState.to_json(), "created_at",
     "ended_at"}

Which games count where:
- a game still running (state.phase != "over") is counted as running and nowhere else;
- an abandoned game (a player left or timed out) is counted, with its end reason and who
  left, but nobody won it, so it stays out of the outcome rates, the turn means and the
  guess statistics;
- utterance statistics (invalid utterances, judge checks and scores) cover every finished
  game, abandoned ones included: what was said before a player left was still said.
- Rates are over the finished, non-abandoned ("scored") games. Turns are the utterances that
  used a turn (`turn` not null), as the engine counts them; standard deviations use ddof=1.

`analyze(games, filtered=False)` gives the full set and `analyze(games)` the filtered set,
which leaves out the games flagged `excluded` (a human player in them was QC-excluded or
blocked), each next to the paper's reference numbers; the HIT type puts the two under
"full" and "filtered", as the other types' analyses do. A statistic the data cannot give
(no games, fewer than three words with a concreteness, constant values) is None with the
reason, never NaN.

Example:
    >>> from tasks.taboo.engine import Role, guess, new_game, say
    >>> state = guess(say(new_game("apple"), Role.ATTACKER, "a red fruit"), "apple")
    >>> game = {"game_id": 1, "word": "apple", "pairing": "agent-agent",
    ...         "attacker": {"kind": "agent", "id": "a", "name": "a"},
    ...         "defender": {"kind": "agent", "id": "b", "name": "b"},
    ...         "state": state.to_json()}
    >>> analyze([game])["rates"]
    {'attacker': 0.0, 'defender': 1.0, 'tie': 0.0}
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from tasks.taboo.engine import DEFAULT_MAX_TURNS, EndReason, Outcome, Phase, Role

Game = Mapping[str, Any]

PAIRINGS: tuple[str, ...] = ("human-human", "human-agent", "agent-agent")
PLAYER_KINDS = frozenset({"human", "agent"})
OUTCOMES: tuple[str, ...] = (Outcome.ATTACKER.value, Outcome.DEFENDER.value, Outcome.TIE.value)
MIN_CORRELATION_WORDS = 3
# Leaderboard points: a win 1, a tie a half, a loss or a game the player left 0.
WIN_POINTS = 1.0
TIE_POINTS = 0.5
_DIGITS = 4
_P_DIGITS = 4  # significant digits: a p-value of 3e-9 must not round to 0

REFERENCE: dict[str, Any] = {
    "source": (
        "Yao et al., Adversarial Language Games for Advanced Natural Language Intelligence "
        "(AAAI 2021)"
    ),
    "setting": "agent attacker vs human defender, 50 games each",
    "conditions": [
        {
            "condition": "humans unaware of the rules",
            "n_games": 50,
            "rates": {"attacker": 0.60, "defender": 0.00, "tie": 0.40},
            "mean_turns": 7.04,
        },
        {
            "condition": "humans aware of the rules",
            "n_games": 50,
            "rates": {"attacker": 0.46, "defender": 0.10, "tie": 0.44},
            "mean_turns": 7.24,
        },
    ],
}


def _num(value: Any) -> float | None:
    """Round for JSON; NaN and infinities become None so the output never carries NaN."""
    if value is None:
        return None
    number = float(value)
    return round(number, _DIGITS) if math.isfinite(number) else None


def _p(value: Any) -> float | None:
    if value is None or not math.isfinite(float(value)):
        return None
    return float(f"{float(value):.{_P_DIGITS}g}")


def _share(part: int, whole: int) -> float | None:
    return _num(part / whole) if whole else None


def describe(values: Sequence[float]) -> dict[str, Any]:
    """n, mean and sample standard deviation (ddof=1; None below two values)."""
    arr = np.asarray(values, dtype=float)
    n = int(arr.size)
    return {
        "n": n,
        "mean": _num(arr.mean()) if n else None,
        "std": _num(arr.std(ddof=1)) if n >= 2 else None,
    }


def _check_games(games: Sequence[Game]) -> None:
    for index, game in enumerate(games):
        where = f"game record {index} (game {game.get('game_id')!r})"
        state = game.get("state")
        if not isinstance(state, Mapping) or "phase" not in state:
            raise ValueError(f"{where} has no state: pass GameState.to_json() as 'state'")
        for role in Role:
            player = game.get(role.value)
            if not isinstance(player, Mapping) or player.get("kind") not in PLAYER_KINDS:
                raise ValueError(
                    f"{where} needs '{role}' as {{'kind': 'human' or 'agent', 'id', 'name'}}"
                )
        pairing = game.get("pairing")
        if pairing is not None and pairing not in PAIRINGS:
            raise ValueError(f"{where} has pairing {pairing!r}; use one of {', '.join(PAIRINGS)}")


def _state(game: Game) -> Mapping[str, Any]:
    state: Mapping[str, Any] = game["state"]
    return state


def is_over(game: Game) -> bool:
    """Whether the game has ended (abandoned games included)."""
    return _state(game).get("phase") == Phase.OVER


def is_scored(game: Game) -> bool:
    """Whether the game ended with a result: over, and not abandoned."""
    return is_over(game) and _state(game).get("outcome") in OUTCOMES


def turns(game: Game) -> int:
    """Turns used: utterances with a turn number (struck ones under REDO use none)."""
    return sum(1 for u in _state(game).get("utterances") or () if u.get("turn") is not None)


def word_of(game: Game) -> str:
    return str(game.get("word") or _state(game)["target"])


def pairing_of(game: Game) -> str:
    """The record's pairing, or the one its players' kinds give."""
    if game.get("pairing"):
        return str(game["pairing"])
    kinds = sorted(str(game[role.value]["kind"]) for role in Role)
    return "-".join(reversed(kinds)) if kinds == ["agent", "human"] else "-".join(kinds)


def side_label(player: Mapping[str, Any]) -> str:
    """A side of a matchup: "human" for any human, "agent:<name>" for an agent."""
    if player.get("kind") == "agent":
        return f"agent:{player.get('name') or player.get('id')}"
    return "human"


def _max_turns(game: Game) -> int:
    return int((_state(game).get("rules") or {}).get("max_turns") or DEFAULT_MAX_TURNS)


def outcomes(finished: Sequence[Game]) -> dict[str, Any]:
    """Counts, rates and turns over finished games (rates and turns leave abandoned out)."""
    scored = [game for game in finished if is_scored(game)]
    counts = Counter(str(_state(game)["outcome"]) for game in scored)
    return {
        "n_games": len(finished),
        "n_abandoned": len(finished) - len(scored),
        "n_scored": len(scored),
        "counts": {name: counts[name] for name in OUTCOMES},
        "rates": {name: _share(counts[name], len(scored)) for name in OUTCOMES},
        "turns": describe([turns(game) for game in scored]),
    }


def _abandoned(finished: Sequence[Game]) -> dict[str, Any]:
    gone = [game for game in finished if _state(game).get("outcome") == Outcome.ABANDONED]
    reasons = Counter(str(_state(game).get("end_reason")) for game in gone)
    roles = Counter(str(_state(game).get("ended_by")) for game in gone)
    return {
        "n": len(gone),
        "by_reason": {reason: reasons[reason] for reason in sorted(reasons)},
        "by_role": {role: roles[role] for role in sorted(roles)},
        "turns": describe([turns(game) for game in gone]),
    }


def _guesses(scored: Sequence[Game]) -> dict[str, Any]:
    """The defender's one guess: early (its own choice) or forced once the turns ran out.

    A guess is forced when it was made with every turn used (guess_turn >= max_turns); it
    was right exactly when the game ended "defender_guessed" (a right guess always ends it).
    """
    early: list[tuple[int, bool]] = []
    forced: list[bool] = []
    for game in scored:
        state = _state(game)
        if state.get("guess") is None:
            continue
        right = state.get("end_reason") == EndReason.GUESSED
        guess_turn = int(state.get("guess_turn") or 0)
        if guess_turn >= _max_turns(game):
            forced.append(right)
        else:
            early.append((guess_turn, right))
    guessed = len(early) + len(forced)
    right_early = sum(right for _, right in early)
    return {
        "n_games": len(scored),
        "n_guessed": guessed,
        "n_no_guess": len(scored) - guessed,
        "n_early": len(early),
        "n_forced": len(forced),
        "early_share": _share(len(early), guessed),
        "forced_share": _share(len(forced), guessed),
        "n_correct": right_early + sum(forced),
        "accuracy": _share(right_early + sum(forced), guessed),
        "early_accuracy": _share(right_early, len(early)),
        "forced_accuracy": _share(sum(forced), len(forced)),
        "early_guess_turn": describe([turn for turn, _ in early]),
    }


def reason_key(reason: str) -> str:
    """A reason without its detail: "says the target (bananas)" -> "says the target"."""
    return reason.split(" (", 1)[0].strip()


def _utterances(finished: Sequence[Game]) -> dict[str, Any]:
    """Invalid utterances by role and reason, and judge failures by check.

    An utterance may carry several reasons, so the reason shares (of invalid utterances)
    may add up to more than 1. Judge checks count wherever a check recorded "passed",
    enforced or not: a recorded failure leaves the utterance valid but still counts here.
    """
    said = [u for game in finished for u in _state(game).get("utterances") or ()]
    invalid = [u for u in said if u.get("valid") is False]
    roles = Counter(str(u.get("role")) for u in invalid)
    reasons = Counter(reason_key(str(r)) for u in invalid for r in u.get("reasons") or ())
    checked: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for utterance in said:
        for check, verdict in (utterance.get("judge") or {}).items():
            if isinstance(verdict, Mapping) and verdict.get("passed") is not None:
                checked[check] += 1
                failed[check] += not verdict["passed"]
    return {
        "n_utterances": len(said),
        "by_role": {role.value: sum(1 for u in said if u.get("role") == role) for role in Role},
        "n_invalid": len(invalid),
        "invalid_share": _share(len(invalid), len(said)),
        "invalid_by_role": {role.value: roles[role.value] for role in Role},
        "invalid_by_reason": {
            reason: {"n": reasons[reason], "share": _share(reasons[reason], len(invalid))}
            for reason in sorted(reasons)
        },
        "judge_checks": {
            check: {
                "n_checked": checked[check],
                "n_failed": failed[check],
                "fail_rate": _share(failed[check], checked[check]),
            }
            for check in sorted(checked)
        },
    }


def _judge_scores(finished: Sequence[Game]) -> dict[str, Any]:
    """Per judge check (fluency: perplexity; relevance: score) over the recorded scores."""
    scores: dict[str, list[float]] = defaultdict(list)
    thresholds: dict[str, set[float]] = defaultdict(set)
    models: dict[str, set[str]] = defaultdict(set)
    for game in finished:
        for utterance in _state(game).get("utterances") or ():
            for check, verdict in (utterance.get("judge") or {}).items():
                if not isinstance(verdict, Mapping):
                    continue
                score = verdict.get("score")
                if score is not None and math.isfinite(float(score)):
                    scores[check].append(float(score))
                if verdict.get("threshold") is not None:
                    thresholds[check].add(float(verdict["threshold"]))
                if verdict.get("model"):
                    models[check].add(str(verdict["model"]))
    return {
        check: {
            **describe(scores[check]),
            "median": _num(np.median(scores[check])) if scores[check] else None,
            "thresholds": sorted(thresholds[check]),
            "models": sorted(models[check]),
        }
        for check in sorted(set(scores) | set(thresholds) | set(models))
    }


def _spearman(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    n = len(x)
    result: dict[str, Any] = {"rho": None, "p": None, "n": n, "reason": None}
    if n < MIN_CORRELATION_WORDS:
        result["reason"] = (
            f"{n} word(s) with a concreteness and a scored game; "
            f"a correlation needs at least {MIN_CORRELATION_WORDS}"
        )
    elif len(set(x)) < 2:
        result["reason"] = "every word has the same concreteness"
    elif len(set(y)) < 2:
        result["reason"] = "the value is the same for every word"
    else:
        rho, p_value = stats.spearmanr(x, y)
        result.update(rho=_num(rho), p=_p(p_value))
    return result


def concreteness(by_word: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Spearman's rho between word concreteness and the attacker-win rate and mean turns.

    One point per word that has a concreteness and at least one scored game.
    """
    points = [
        (word, entry)
        for word, entry in sorted(by_word.items())
        if entry.get("concreteness") is not None and entry["n_scored"]
    ]
    xs = [float(entry["concreteness"]) for _, entry in points]
    return {
        "n_words": len(points),
        "attacker_win_rate": _spearman(xs, [float(e["rates"]["attacker"]) for _, e in points]),
        "mean_turns": _spearman(xs, [float(e["turns"]["mean"]) for _, e in points]),
        "words": [
            {
                "word": word,
                "concreteness": entry["concreteness"],
                "n_scored": entry["n_scored"],
                "attacker_win_rate": entry["rates"]["attacker"],
                "mean_turns": entry["turns"]["mean"],
            }
            for word, entry in points
        ],
    }


def _by_word(finished: Sequence[Game]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Game]] = defaultdict(list)
    for game in finished:
        groups[word_of(game)].append(game)
    result = {}
    for word in sorted(groups):
        values = [
            float(g["concreteness"]) for g in groups[word] if g.get("concreteness") is not None
        ]
        result[word] = {
            "concreteness": _num(np.mean(values)) if values else None,
            **outcomes(groups[word]),
        }
    return result


def _by_matchup(finished: Sequence[Game]) -> dict[str, dict[str, Any]]:
    groups: dict[tuple[str, str], list[Game]] = defaultdict(list)
    for game in finished:
        groups[(side_label(game["attacker"]), side_label(game["defender"]))].append(game)
    return {
        f"{attacker} vs {defender}": {
            "attacker": attacker,
            "defender": defender,
            **outcomes(groups[(attacker, defender)]),
        }
        for attacker, defender in sorted(groups)
    }


def summarize(games: Sequence[Game]) -> dict[str, Any]:
    """Every statistic over one set of game records; running games are only counted."""
    finished = [game for game in games if is_over(game)]
    scored = [game for game in finished if is_scored(game)]
    by_outcome: dict[str, list[int]] = defaultdict(list)
    for game in scored:
        by_outcome[str(_state(game)["outcome"])].append(turns(game))
    reasons = Counter(str(_state(game).get("end_reason")) for game in scored)
    pairings = defaultdict(list)
    for game in finished:
        pairings[pairing_of(game)].append(game)
    by_word = _by_word(finished)
    return {
        "n_records": len(games),
        "n_running": len(games) - len(finished),
        **outcomes(finished),
        "abandoned": _abandoned(finished),
        "turns_by_outcome": {name: describe(by_outcome[name]) for name in OUTCOMES},
        "end_reasons": {reason: reasons[reason] for reason in sorted(reasons)},
        "guesses": _guesses(scored),
        "utterances": _utterances(finished),
        "judge_scores": _judge_scores(finished),
        "by_pairing": {
            pairing: outcomes(pairings[pairing])
            for pairing in (*PAIRINGS, *sorted(set(pairings) - set(PAIRINGS)))
        },
        # The reference setting of the paper, for a like-for-like comparison.
        "agent_attacker_vs_human_defender": outcomes(
            [
                game
                for game in finished
                if game["attacker"]["kind"] == "agent" and game["defender"]["kind"] == "human"
            ]
        ),
        "by_matchup": _by_matchup(finished),
        "by_word": by_word,
        "concreteness": concreteness(by_word),
    }


def analyze(games: Sequence[Game], filtered: bool = True) -> dict[str, Any]:
    """Every statistic over the games, with the paper's reference numbers alongside.

    `filtered` leaves out the games flagged `excluded` (a QC-excluded or blocked human played
    in them), as the other types' filtered sets do; False keeps every game (the full set).
    Call it once each way for the full and filtered sets; "excluded" says how many games
    carry the flag and whether they were left out.
    """
    _check_games(games)
    flagged = [game for game in games if game.get("excluded")]
    kept = [game for game in games if not game.get("excluded")] if filtered else list(games)
    return {
        "filtered": filtered,
        "excluded": {
            "n_games": len(flagged),
            "n_finished": sum(1 for game in flagged if is_over(game)),
            "n_scored": sum(1 for game in flagged if is_scored(game)),
            "left_out": filtered,
        },
        **summarize(kept),
        "reference": REFERENCE,
    }


def player_key(player: Mapping[str, Any]) -> str:
    """Who a player is on the leaderboard: humans by id, agents by name."""
    if player.get("kind") == "agent":
        return f"agent:{player.get('name') or player.get('id')}"
    return f"human:{player.get('id')}"


def _new_row(player: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "player": player_key(player),
        "kind": str(player.get("kind")),
        "id": None if player.get("id") is None else str(player["id"]),
        "name": str(player.get("name") or player.get("id")),
        "games": 0,
        "attacker_played": 0,
        "attacker_won": 0,
        "defender_played": 0,
        "defender_won": 0,
        "wins": 0,
        "ties": 0,
        "losses": 0,
        "abandoned": 0,
        "opponent_left": 0,
        "points": 0.0,
        "win_rate": None,
    }


def leaderboard(games: Iterable[Game]) -> list[dict[str, Any]]:
    """One row per player over the finished games, best first.

    Points: a win 1, a tie 0.5, a loss 0, a game the player left (or timed out of) 0.
    An abandoned game counts against the player who left it only: it is one of their games
    (lowering their win rate) and earns nothing; for the other player it is not a game at
    all, only counted under "opponent_left". Win rate = wins / games. Rows are sorted by
    points, then win rate, then fewer games (the same points from fewer games), then name.
    Pass the games you want ranked (e.g. leave out the excluded ones first); running games
    are skipped.
    """
    games = list(games)
    _check_games(games)
    rows: dict[str, dict[str, Any]] = {}
    for game in games:
        if not is_over(game):
            continue
        state = _state(game)
        outcome = state.get("outcome")
        for role in Role:
            player = game[role.value]
            row = rows.setdefault(player_key(player), _new_row(player))
            if outcome == Outcome.ABANDONED:
                if state.get("ended_by") != role:
                    row["opponent_left"] += 1
                    continue
                row["abandoned"] += 1
            elif outcome == Outcome.TIE:
                row["ties"] += 1
                row["points"] += TIE_POINTS
            elif outcome == role:
                row["wins"] += 1
                row[f"{role}_won"] += 1
                row["points"] += WIN_POINTS
            else:
                row["losses"] += 1
            row["games"] += 1
            row[f"{role}_played"] += 1
    for row in rows.values():
        row["win_rate"] = _share(row["wins"], row["games"])
    ranked = sorted(
        rows.values(),
        key=lambda r: (
            -r["points"],
            -(r["win_rate"] if r["win_rate"] is not None else -1.0),
            r["games"],
            r["player"],
        ),
    )
    for rank, row in enumerate(ranked, start=1):
        row["rank"] = rank
    return ranked
