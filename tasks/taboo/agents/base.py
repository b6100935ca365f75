"""The agent contract: what an agent sees of a game, what it answers, and the registry.

An agent is built once from a `Corpus` and its settings and then plays any number of games:
`act` gets a fresh `AgentView` of the game each time and keeps no state between calls (it
may cache pure functions of the corpus and the target). The view is built from
`engine.seen_by`, so a defender never sees the target, its variants, or the text of a
struck attacker utterance (which may say the target).
"""

from __future__ import annotations

import inspect
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from crowd.registry import Registry
from tasks.taboo.agents.corpus import Corpus
from tasks.taboo.engine import GameState, Phase, Role, seen_by


@dataclass(frozen=True)
class AgentView:
    """One side's view of a game: the attacker alone gets the target and its variants."""

    role: Role
    target: str | None
    variants: tuple[str, ...]
    # (who spoke, what they said); the text is None for the other side's struck utterances.
    history: tuple[tuple[Role, str | None], ...]
    turns_used: int
    max_turns: int
    phase: Phase
    guess_used: bool

    @classmethod
    def of(cls, state: GameState, role: Role) -> AgentView:
        """What `role` may know of `state`."""
        role = Role(role)
        attacker = role == Role.ATTACKER
        history = tuple(
            (Role(seen["role"]), None if seen.get("struck") else str(seen["text"]))
            for seen in seen_by(state, role)
        )
        return cls(
            role=role,
            target=state.target if attacker else None,
            variants=state.variants if attacker else (),
            history=history,
            turns_used=state.turns,
            max_turns=state.rules.max_turns,
            phase=state.phase,
            guess_used=state.guess is not None,
        )

    def said_by(self, role: Role) -> list[str]:
        """The texts `role` said that this side may read, in order."""
        return [text for who, text in self.history if who == role and text is not None]

    def last_said_by(self, role: Role) -> str | None:
        said = self.said_by(role)
        return said[-1] if said else None


@dataclass(frozen=True)
class Move:
    """What an agent does: say something, or (the defender) guess the word."""

    kind: Literal["say", "guess"]
    text: str

    def __post_init__(self) -> None:
        if self.kind not in ("say", "guess"):
            raise ValueError(f"a move is 'say' or 'guess', not {self.kind!r}")
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("a move needs some text")


class Agent(ABC):
    """A Taboo player: `act` answers a view of the game with a move."""

    name: ClassVar[str]
    role: ClassVar[Role]
    # Keyword settings the constructor takes, with their help text.
    settings: ClassVar[dict[str, str]] = {}

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus

    @abstractmethod
    def act(self, view: AgentView, rng: random.Random) -> Move:
        """The agent's move now; `view.role` is always this agent's role."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.corpus!r})"


AGENTS: Registry[type[Agent]] = Registry("taboo agent")


def make_agent(name: str, corpus: Corpus | None = None, **settings: Any) -> Agent:
    """Build the registered agent `name` from a corpus (the sample one by default)."""
    agent_class = AGENTS.get(name)
    unknown = sorted(set(settings) - set(agent_class.settings))
    if unknown:
        takes = ", ".join(f"{key} ({help_text})" for key, help_text in agent_class.settings.items())
        raise ValueError(
            f"taboo agent {name!r} has no setting {', '.join(map(repr, unknown))}; "
            f"it takes: {takes or 'no settings'}"
        )
    return agent_class(corpus if corpus is not None else Corpus.default(), **settings)


def agent_names(role: Role | None = None) -> list[str]:
    """The registered agents' names, those playing `role` only when given."""
    return [name for name, agent in AGENTS.items() if role is None or agent.role == role]


def register_agent(agent_class: type[Agent]) -> type[Agent]:
    """Register an agent class under its `name`; its `settings` must match its keywords."""
    signature = inspect.signature(agent_class.__init__)
    keywords = {
        name
        for name, parameter in signature.parameters.items()
        if parameter.kind == inspect.Parameter.KEYWORD_ONLY
    }
    if keywords != set(agent_class.settings):
        raise TypeError(
            f"{agent_class.__name__}.settings must describe its keyword-only arguments "
            f"{sorted(keywords)}"
        )
    return AGENTS.register(agent_class.name, agent_class)
