"""Agent-vs-agent Adversarial Taboo: one game (`play`) and round-robin tournaments.

Each agent gets only its own side's view of the game (`AgentView.of`, built from
`engine.seen_by`), so a defender agent never sees the target. A game runs under a hard cap
of steps, so an agent that keeps saying struck utterances under the REDO rule cannot loop
for ever: the game ends as if that player timed out (abandoned).

A tournament plays every word x attacker x defender `games_per_pair` times, each game with
its own seed derived from the tournament seed, the word, the pairing and the game number,
so the results do not depend on the order the games are played in. `TournamentGame.to_json`
gives the game records that `tasks.taboo.analysis.analyze` reads.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crowd.exceptions import RegistryError
from tasks.taboo import engine
from tasks.taboo.agents import AGENTS, Agent, AgentView, Corpus, make_agent
from tasks.taboo.engine import EndReason, GameState, InvalidMove, Phase, Role, Rules
from tasks.taboo.words import tokenize

# The sample words' concreteness values are our own estimates on the Brysbaert 1-5 scale,
# not the published norms (Brysbaert, Warriner & Kuperman 2014): look those up for research.
SAMPLE_WORDS = Path(__file__).resolve().parent / "samples" / "words.jsonl"
# Concreteness norms run from 1 (abstract) to 5 (concrete) (Brysbaert et al. 2014).
CONCRETENESS_RANGE = (1.0, 5.0)

# A judge for simulated games under an enforced judge: rates the last utterance of a state,
# returning the check scores (name -> {"score", "threshold", "passed", ...}) and the verdict.
Judge = Callable[[GameState], tuple[Mapping[str, Any], bool]]


@dataclass(frozen=True)
class Word:
    """A target word, its explicit variants and its concreteness (1-5) if known."""

    word: str
    variants: tuple[str, ...] = ()
    concreteness: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.word, str) or not tokenize(self.word):
            raise ValueError(f"{self.word!r} is not a word: a target needs some letters")
        if isinstance(self.variants, str) or not all(isinstance(v, str) for v in self.variants):
            raise ValueError('variants must be a list of words, e.g. ["bike"]')
        object.__setattr__(self, "variants", tuple(self.variants))
        if self.concreteness is not None:
            low, high = CONCRETENESS_RANGE
            value = self.concreteness
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError("concreteness must be a number from 1 to 5, or left out")
            if not low <= value <= high:
                raise ValueError(f"concreteness {value} is off the 1-5 scale: give 1 to 5")
            object.__setattr__(self, "concreteness", float(value))

    @classmethod
    def from_json(cls, raw: Any) -> Word:
        if isinstance(raw, str):
            return cls(raw)
        if not isinstance(raw, Mapping):
            raise ValueError('a word is "banana" or {"word": "banana", "variants": [...]}')
        unknown = set(raw) - {"word", "variants", "concreteness"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}: use word, variants, concreteness")
        if "word" not in raw:
            raise ValueError('a word needs "word"')
        variants = raw.get("variants") or ()
        if isinstance(variants, str) or not isinstance(variants, list | tuple):
            raise ValueError('variants must be a list of words, e.g. ["bike"]')
        return cls(raw["word"], tuple(variants), raw.get("concreteness"))

    def to_json(self) -> dict[str, Any]:
        return {
            "word": self.word,
            "variants": list(self.variants),
            "concreteness": self.concreteness,
        }


def load_words(path: str | Path | None = None) -> list[Word]:
    """Target words from JSONL (the sample list by default); a bad line raises naming it."""
    path = Path(path) if path is not None else SAMPLE_WORDS
    words: list[Word] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                words.append(Word.from_json(json.loads(line)))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path} line {number}: not JSON ({error.msg})") from None
            except ValueError as error:
                raise ValueError(f"{path} line {number}: {error}") from None
    if not words:
        raise ValueError(f"{path} has no words: write one JSON object a line")
    return words


def max_steps(rules: Rules) -> int:
    """The most moves a game may take: every turn struck and redone a few times."""
    return 4 * rules.max_turns + 8


def play(
    attacker: Agent,
    defender: Agent,
    target: str,
    variants: Sequence[str] = (),
    rules: Rules | None = None,
    rng: random.Random | None = None,
    judge: Judge | None = None,
) -> GameState:
    """One game between two agents; returns the final state.

    Under an enforced judge (`rules.enforce_judge`) each utterance is rated by `judge`;
    without one, every utterance passes with no scores recorded.
    """
    if attacker.role != Role.ATTACKER:
        raise ValueError(f"{attacker.name!r} is a {attacker.role} agent: pass an attacker")
    if defender.role != Role.DEFENDER:
        raise ValueError(f"{defender.name!r} is a {defender.role} agent: pass a defender")
    rng = rng if rng is not None else random.Random(0)
    state = engine.new_game(target, tuple(variants), rules)
    for _ in range(max_steps(state.rules)):
        if state.over:
            return state
        if state.phase == Phase.JUDGING:
            scores, passed = judge(state) if judge is not None else ({}, True)
            state = engine.judge(state, len(state.utterances) - 1, scores, passed)
            continue
        role = state.to_move()
        if role is None:  # the engine has no other phase: a new one needs handling here
            raise RuntimeError(f"no player to move in phase {state.phase}")
        agent = attacker if role == Role.ATTACKER else defender
        move = agent.act(AgentView.of(state, role), rng)
        if move.kind == "guess":
            if role != Role.DEFENDER:
                raise InvalidMove(f"{agent.name!r} is the attacker: only the defender guesses")
            state = engine.guess(state, move.text)
        else:
            state = engine.say(state, role, move.text)
    if not state.over:
        stuck = state.to_move() or Role.ATTACKER
        state = engine.end(state, EndReason.TIMED_OUT, stuck)
    return state


@dataclass(frozen=True)
class TournamentGame:
    """One tournament game: who played which word, its seed and its final state."""

    word: Word
    attacker: str
    defender: str
    seed: int
    state: GameState

    def to_json(self) -> dict[str, Any]:
        """A game record in the shape `tasks.taboo.analysis` reads."""
        return {
            "game_id": f"{self.word.word}/{self.attacker}/{self.defender}/{self.seed}",
            "word": self.word.word,
            "variants": list(self.word.variants),
            "concreteness": self.word.concreteness,
            "pairing": "agent-agent",
            "attacker": {"kind": "agent", "id": self.attacker, "name": self.attacker},
            "defender": {"kind": "agent", "id": self.defender, "name": self.defender},
            "seed": self.seed,
            "state": self.state.to_json(),
        }


def game_seed(seed: int, word: str, attacker: str, defender: str, number: int) -> int:
    """A game's own seed: stable across runs and machines (not Python's salted hash)."""
    key = json.dumps([seed, word, attacker, defender, number]).encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def _agents(
    names: Iterable[str],
    role: Role,
    corpus: Corpus,
    settings: Mapping[str, Mapping[str, Any]],
) -> dict[str, Agent]:
    agents: dict[str, Agent] = {}
    for name in names:
        if name in agents:
            continue
        agent_class = AGENTS.get(name)
        if agent_class.role != role:
            of_role = ", ".join(n for n, a in AGENTS.items() if a.role == role) or "none"
            raise RegistryError(
                f"taboo agent {name!r} plays the {agent_class.role}: "
                f"as the {role} use one of {of_role}"
            )
        agents[name] = make_agent(name, corpus, **dict(settings.get(name) or {}))
    return agents


def tournament(
    words: Sequence[Word | str],
    attackers: Sequence[str],
    defenders: Sequence[str],
    games_per_pair: int = 1,
    rules: Rules | None = None,
    seed: int = 0,
    corpus: Corpus | None = None,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    judge: Judge | None = None,
) -> list[TournamentGame]:
    """Every word x attacker x defender, `games_per_pair` times; deterministic for a seed.

    `settings` maps an agent name to its keyword settings (e.g. {"threshold": {"threshold":
    0.7}}).
    """
    if isinstance(games_per_pair, bool) or not isinstance(games_per_pair, int):
        raise ValueError("games_per_pair must be a whole number, e.g. 3")
    if games_per_pair < 1:
        raise ValueError("games_per_pair must be at least 1")
    if not words:
        raise ValueError("no words: give at least one target word")
    if not attackers or not defenders:
        raise ValueError("give at least one attacker and one defender agent by name")
    targets = [word if isinstance(word, Word) else Word.from_json(word) for word in words]
    corpus = corpus if corpus is not None else Corpus.default()
    settings = settings or {}
    attacking = _agents(attackers, Role.ATTACKER, corpus, settings)
    defending = _agents(defenders, Role.DEFENDER, corpus, settings)
    rules = rules or Rules()
    games: list[TournamentGame] = []
    for target in targets:
        for attacker_name, attacker in attacking.items():
            for defender_name, defender in defending.items():
                for number in range(games_per_pair):
                    own_seed = game_seed(seed, target.word, attacker_name, defender_name, number)
                    state = play(
                        attacker,
                        defender,
                        target.word,
                        target.variants,
                        rules,
                        random.Random(own_seed),
                        judge,
                    )
                    games.append(
                        TournamentGame(target, attacker_name, defender_name, own_seed, state)
                    )
    return games
