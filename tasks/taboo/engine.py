"""The rules of Adversarial Taboo, as pure functions over an immutable game state.

Yao et al., "Adversarial Language Games for Advanced Natural Language Intelligence" (AAAI
2021): an attacker knows a target word, a defender does not. The attacker speaks first and
they alternate for at most `max_turns` utterances (a turn is one utterance of either side).
The attacker wins when the defender says the target or a variant of it; the defender wins
by guessing the word, which it may do once, at any time, and must do at the end if it has
not; anything else is a tie. An attacker utterance that says the target is invalid, and so
is one the judge rules out (too high a perplexity, too little relevance) when the judge is
enforced; what an invalid utterance costs is a rule (`invalid_cost`).

Every move returns a new `GameState`; a move that the rules do not allow raises
`InvalidMove` and changes nothing. States round-trip through JSON (`to_json`/`from_json`),
which is how the platform stores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from crowd.exceptions import InvalidAction
from tasks.taboo.words import TargetWord, tokenize

DEFAULT_MAX_TURNS = 10
MAX_UTTERANCE_CHARS = 500
MAX_GUESS_CHARS = 60
# Under REDO a player gets this many tries at a turn; the last struck one uses up the turn,
# so no game can go on for ever (an agent retrying, or a person stalling).
MAX_REDOS = 3


class InvalidMove(InvalidAction):
    """A move the rules do not allow now (out of turn, after the end, a second guess)."""


class Role(StrEnum):
    ATTACKER = "attacker"
    DEFENDER = "defender"

    @property
    def other(self) -> Role:
        return Role.DEFENDER if self is Role.ATTACKER else Role.ATTACKER


class Phase(StrEnum):
    ATTACKER = "attacker"  # the attacker is to speak
    DEFENDER = "defender"  # the defender is to speak (or guess)
    JUDGING = "judging"  # an utterance waits for the enforced judge's verdict
    FINAL_GUESS = "final_guess"  # the turns are used up: the defender must guess
    OVER = "over"


class Outcome(StrEnum):
    ATTACKER = "attacker"
    DEFENDER = "defender"
    TIE = "tie"
    # A player left or timed out: recorded, and left out of win rates (nobody won it).
    ABANDONED = "abandoned"


class InvalidCost(StrEnum):
    LOSE = "lose"  # the speaker loses the game
    TURN = "turn"  # the utterance is struck but uses up the speaker's turn
    REDO = "redo"  # the utterance is struck and the speaker says something else


class EndReason(StrEnum):
    SAID_TARGET = "defender_said_target"
    GUESSED = "defender_guessed"
    WRONG_GUESS = "wrong_guess"
    NO_GUESS = "no_guess"
    INVALID = "invalid_utterance"
    LEFT = "player_left"
    TIMED_OUT = "player_timed_out"


@dataclass(frozen=True)
class Rules:
    """The configurable rules of one game (a study's `taboo` config)."""

    max_turns: int = DEFAULT_MAX_TURNS
    invalid_cost: InvalidCost = InvalidCost.LOSE
    # True: an utterance waits for the judge, and a failed check costs `invalid_cost`.
    # False: judge scores are recorded with each utterance but do not change the game.
    enforce_judge: bool = False
    # True: a wrong guess ends the game in a tie. False: play goes on, the guess used up.
    wrong_guess_ends: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.max_turns, int) or isinstance(self.max_turns, bool):
            raise ValueError("max_turns must be a whole number of utterances, e.g. 10")
        if not 1 <= self.max_turns <= 100:
            raise ValueError("max_turns must be from 1 to 100")
        if self.invalid_cost not in {cost.value for cost in InvalidCost}:
            choices = ", ".join(cost.value for cost in InvalidCost)
            raise ValueError(f"invalid_cost must be one of {choices}")
        object.__setattr__(self, "invalid_cost", InvalidCost(self.invalid_cost))
        for name in ("enforce_judge", "wrong_guess_ends"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "invalid_cost": str(self.invalid_cost)}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Rules:
        unknown = set(raw) - {"max_turns", "invalid_cost", "enforce_judge", "wrong_guess_ends"}
        if unknown:
            raise ValueError(f"unknown rules {sorted(unknown)}")
        return cls(**raw)


@dataclass(frozen=True)
class Utterance:
    """One thing a player said, with the rule and judge checks on it."""

    role: Role
    text: str
    # The turn it used (1-based); None when it was struck without using one (REDO).
    turn: int | None
    # None while the enforced judge has not ruled; then True or False.
    valid: bool | None = True
    reasons: tuple[str, ...] = ()
    # Judge scores, thresholds and model ids, recorded whether or not the judge is enforced.
    judge: dict[str, Any] = field(default_factory=dict)
    at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": str(self.role),
            "text": self.text,
            "turn": self.turn,
            "valid": self.valid,
            "reasons": list(self.reasons),
            "judge": dict(self.judge),
            "at": self.at,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Utterance:
        return cls(
            role=Role(raw["role"]),
            text=str(raw["text"]),
            turn=raw.get("turn"),
            valid=raw.get("valid"),
            reasons=tuple(raw.get("reasons") or ()),
            judge=dict(raw.get("judge") or {}),
            at=raw.get("at"),
        )


@dataclass(frozen=True)
class GameState:
    """Everything about one game; `phase` says whose move it is."""

    target: str
    variants: tuple[str, ...] = ()
    rules: Rules = field(default_factory=Rules)
    utterances: tuple[Utterance, ...] = ()
    phase: Phase = Phase.ATTACKER
    guess: str | None = None
    guess_turn: int | None = None
    outcome: Outcome | None = None
    end_reason: EndReason | None = None
    # Who left or timed out, or whose invalid utterance ended the game.
    ended_by: Role | None = None

    @property
    def word(self) -> TargetWord:
        return _target(self.target, self.variants)

    @property
    def turns(self) -> int:
        """Turns used so far: utterances that count (valid ones, and struck ones under TURN)."""
        return sum(1 for u in self.utterances if u.turn is not None)

    @property
    def over(self) -> bool:
        return self.phase == Phase.OVER

    def to_move(self) -> Role | None:
        """Whose move it is (the defender during a final guess); None while judging or over."""
        if self.phase == Phase.ATTACKER:
            return Role.ATTACKER
        if self.phase in (Phase.DEFENDER, Phase.FINAL_GUESS):
            return Role.DEFENDER
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "variants": list(self.variants),
            "rules": self.rules.to_json(),
            "utterances": [u.to_json() for u in self.utterances],
            "phase": str(self.phase),
            "guess": self.guess,
            "guess_turn": self.guess_turn,
            "outcome": None if self.outcome is None else str(self.outcome),
            "end_reason": None if self.end_reason is None else str(self.end_reason),
            "ended_by": None if self.ended_by is None else str(self.ended_by),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> GameState:
        return cls(
            target=str(raw["target"]),
            variants=tuple(raw.get("variants") or ()),
            rules=Rules.from_json(raw.get("rules") or {}),
            utterances=tuple(Utterance.from_json(u) for u in raw.get("utterances") or ()),
            phase=Phase(raw.get("phase", Phase.ATTACKER)),
            guess=raw.get("guess"),
            guess_turn=raw.get("guess_turn"),
            outcome=None if raw.get("outcome") is None else Outcome(raw["outcome"]),
            end_reason=None if raw.get("end_reason") is None else EndReason(raw["end_reason"]),
            ended_by=None if raw.get("ended_by") is None else Role(raw["ended_by"]),
        )


_TARGETS: dict[tuple[str, tuple[str, ...]], TargetWord] = {}


def _target(word: str, variants: tuple[str, ...]) -> TargetWord:
    key = (word, variants)
    if key not in _TARGETS:
        if len(_TARGETS) > 4096:
            _TARGETS.clear()
        _TARGETS[key] = TargetWord(word, variants)
    return _TARGETS[key]


def new_game(target: str, variants: tuple[str, ...] = (), rules: Rules | None = None) -> GameState:
    """A game about to start: the attacker speaks first."""
    if not tokenize(target):
        raise ValueError(f"{target!r} has no letters: a target word needs some")
    _target(target, tuple(variants))  # check the variants too
    return GameState(target=target, variants=tuple(variants), rules=rules or Rules())


def _finish(
    state: GameState, outcome: Outcome, reason: EndReason, by: Role | None = None, **changes: Any
) -> GameState:
    return replace(
        state, phase=Phase.OVER, outcome=outcome, end_reason=reason, ended_by=by, **changes
    )


def _clean(text: Any, limit: int, what: str) -> str:
    if not isinstance(text, str):
        raise InvalidMove(f"{what} must be text")
    cleaned = " ".join(text.split())
    if not cleaned:
        raise InvalidMove(f"{what} is empty: write something")
    if len(cleaned) > limit:
        raise InvalidMove(f"{what} is {len(cleaned)} characters: keep it under {limit}")
    return cleaned


def say(state: GameState, role: Role, text: Any, at: str | None = None) -> GameState:
    """`role` says `text` on its turn."""
    role = Role(role)
    if state.over:
        raise InvalidMove("the game is over")
    if state.phase == Phase.JUDGING:
        raise InvalidMove("wait: the judge is checking the last utterance")
    if state.phase == Phase.FINAL_GUESS:
        raise InvalidMove("the turns are used up: the defender must guess the word now")
    if state.to_move() != role:
        raise InvalidMove(f"it is the {state.to_move()}'s turn, not the {role}'s")
    cleaned = _clean(text, MAX_UTTERANCE_CHARS, "the utterance")
    said = state.word.mention(cleaned)
    turn = state.turns + 1
    if role == Role.ATTACKER and said is not None:
        struck = Utterance(role, cleaned, turn, False, (f"says the target ({said})",), at=at)
        return _apply_invalid(state, struck)
    utterance = Utterance(role, cleaned, turn, None if state.rules.enforce_judge else True, at=at)
    state = replace(state, utterances=(*state.utterances, utterance))
    if role == Role.DEFENDER and said is not None:
        return _finish(state, Outcome.ATTACKER, EndReason.SAID_TARGET)
    if state.rules.enforce_judge:
        return replace(state, phase=Phase.JUDGING)
    return _next_turn(state, role)


def _next_turn(state: GameState, spoke: Role) -> GameState:
    if state.turns >= state.rules.max_turns:
        if state.guess is None:
            return replace(state, phase=Phase.FINAL_GUESS)
        return _finish(state, Outcome.TIE, EndReason.NO_GUESS)
    return replace(state, phase=Phase(spoke.other.value))


def _apply_invalid(state: GameState, utterance: Utterance) -> GameState:
    """Charge an invalid utterance (already marked so) at the rules' cost."""
    cost = state.rules.invalid_cost
    if cost == InvalidCost.REDO and _redos(state, utterance.role) + 1 >= MAX_REDOS:
        cost = InvalidCost.TURN
    if cost == InvalidCost.REDO:
        utterance = replace(utterance, turn=None)
    state = replace(state, utterances=(*state.utterances, utterance))
    if cost == InvalidCost.LOSE:
        winner = Outcome(utterance.role.other.value)
        return _finish(state, winner, EndReason.INVALID, utterance.role)
    if cost == InvalidCost.REDO:
        return replace(state, phase=Phase(utterance.role.value))
    return _next_turn(state, utterance.role)


def _redos(state: GameState, role: Role) -> int:
    """How many struck, turnless utterances `role` has just made in a row."""
    count = 0
    for utterance in reversed(state.utterances):
        if utterance.role != role or utterance.turn is not None:
            break
        count += 1
    return count


def guess(state: GameState, word: Any) -> GameState:
    """The defender's one guess: right wins, wrong ends in a tie (or play goes on)."""
    if state.over:
        raise InvalidMove("the game is over")
    if state.guess is not None:
        raise InvalidMove("the defender has already used its one guess")
    if state.phase == Phase.JUDGING:
        raise InvalidMove("wait: the judge is checking the last utterance")
    cleaned = _clean(word, MAX_GUESS_CHARS, "the guess")
    state = replace(state, guess=cleaned, guess_turn=state.turns)
    if state.word.is_guessed_by(cleaned):
        return _finish(state, Outcome.DEFENDER, EndReason.GUESSED)
    if state.rules.wrong_guess_ends or state.phase == Phase.FINAL_GUESS:
        return _finish(state, Outcome.TIE, EndReason.WRONG_GUESS)
    return state


def judge(state: GameState, index: int, scores: Mapping[str, Any], passed: bool) -> GameState:
    """Record the judge's scores on utterance `index`; an enforced failure is charged.

    `scores` holds each check's score, threshold and model id; `passed` whether all passed.
    A verdict on an utterance that is not waiting for one (recorded scores) only records.
    """
    if not 0 <= index < len(state.utterances):
        raise InvalidMove(f"no utterance {index} in this game")
    utterance = state.utterances[index]
    waiting = state.phase == Phase.JUDGING and index == len(state.utterances) - 1
    reasons = utterance.reasons
    if not passed:
        failed = [name for name, check in scores.items() if not check.get("passed", True)]
        reasons = (*reasons, *(f"judge: {name}" for name in failed))
    recorded = replace(utterance, judge=dict(scores), reasons=reasons)
    if not waiting:
        return replace(state, utterances=_replace_at(state.utterances, index, recorded))
    earlier = replace(state, utterances=state.utterances[:index])
    if passed:
        state = replace(earlier, utterances=(*earlier.utterances, replace(recorded, valid=True)))
        return _next_turn(state, recorded.role)
    return _apply_invalid(earlier, replace(recorded, valid=False))


def _replace_at(items: tuple[Utterance, ...], index: int, item: Utterance) -> tuple[Utterance, ...]:
    return (*items[:index], item, *items[index + 1 :])


def end(state: GameState, reason: EndReason, by: Role) -> GameState:
    """A player left or timed out: the game ends, abandoned, and nobody wins it."""
    if state.over:
        return state
    if reason not in (EndReason.LEFT, EndReason.TIMED_OUT):
        raise InvalidMove("a game ends early only when a player leaves or times out")
    return _finish(state, Outcome.ABANDONED, reason, Role(by))


def seen_by(state: GameState, role: Role) -> list[dict[str, Any]]:
    """The utterances one side may see: the defender never sees struck attacker text.

    A struck attacker utterance may contain the target (that is why it was struck); the
    defender learns only that one was struck, and so does the attacker of a struck defender
    utterance. Utterances awaiting the judge are the speaker's alone until ruled on.
    """
    shown: list[dict[str, Any]] = []
    for index, utterance in enumerate(state.utterances):
        mine = utterance.role == role
        if not mine and utterance.valid is None:
            continue
        if not mine and utterance.valid is False:
            shown.append({"index": index, "role": str(utterance.role), "struck": True,
                          "turn": utterance.turn})  # fmt: skip
            continue
        shown.append({"index": index, "role": str(utterance.role), "text": utterance.text,
                      "turn": utterance.turn, "valid": utterance.valid,
                      "reasons": list(utterance.reasons)})  # fmt: skip
    return shown
