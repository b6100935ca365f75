"""A taboo study's `taboo` config: rules, who plays whom, clocks, agents and the judge.

Example (every key optional; these are the defaults):

    {"taboo": {
        "rules": {"max_turns": 10, "invalid_cost": "lose", "enforce_judge": false,
                  "wrong_guess_ends": true},
        "opponent": "either",        # human | agent | either (a person, else an agent)
        "human_role": "defender",    # against an agent: attacker | defender | random
        "wait_seconds": 60, "move_seconds": 120, "away_seconds": 30,
        "agents": {"attacker": "retrieval", "defender": "threshold", "settings": {}},
        "judge": {"relevance_model": "minilm", "relevance_threshold": 0.4,
                  "fluency_model": null, "fluency_threshold": 35.0}}}

`judge: null` turns judging off. Judge models are names ("minilm", or a directory under
CROWD_DATA_DIR/backbones), never paths: study configs come from experimenters over the API.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from crowd.exceptions import InvalidConfig
from tasks.taboo.engine import Rules

# Who a player may ask to play; the web API declares its bodies with the same Literal.
Opponent = Literal["human", "agent", "either"]
OPPONENTS: tuple[str, ...] = get_args(Opponent)
HUMAN_ROLES = ("attacker", "defender", "random")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
DEFAULT_JUDGE: dict[str, Any] = {"relevance_model": "minilm"}


@dataclass(frozen=True)
class AgentChoice:
    """The agents a study's games use, and each agent's settings by name."""

    attacker: str = "retrieval"
    defender: str = "threshold"
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class TabooConfig:
    rules: Rules = field(default_factory=Rules)
    opponent: str = "either"
    human_role: str = "defender"
    wait_seconds: float = 60.0
    move_seconds: float = 120.0
    away_seconds: float = 30.0
    agents: AgentChoice = field(default_factory=AgentChoice)
    judge: dict[str, Any] | None = field(default_factory=lambda: dict(DEFAULT_JUDGE))

    def offers(self, opponent: str) -> bool:
        """Whether a player may ask for this kind of opponent in this study."""
        return self.opponent == "either" or opponent == self.opponent

    def to_json(self) -> dict[str, Any]:
        return {
            "rules": self.rules.to_json(),
            "opponent": self.opponent,
            "human_role": self.human_role,
            "wait_seconds": self.wait_seconds,
            "move_seconds": self.move_seconds,
            "away_seconds": self.away_seconds,
            "agents": {
                "attacker": self.agents.attacker,
                "defender": self.agents.defender,
                "settings": self.agents.settings,
            },
            "judge": self.judge,
        }

    @classmethod
    def from_json(cls, raw: Any) -> TabooConfig:
        """Validate a study's `taboo` config; errors name the key and say what fits."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise InvalidConfig("must be an object (rules, opponent, agents, judge, ...)", "taboo")
        known = {"rules", "opponent", "human_role", "wait_seconds", "move_seconds",
                 "away_seconds", "agents", "judge"}  # fmt: skip
        unknown = set(raw) - known
        if unknown:
            raise InvalidConfig(f"unknown keys {sorted(unknown)}; known: {sorted(known)}", "taboo")
        try:
            rules = Rules.from_json(raw.get("rules") or {})
        except (TypeError, ValueError) as error:
            raise InvalidConfig(str(error), "taboo.rules") from None
        opponent = raw.get("opponent", "either")
        if opponent not in OPPONENTS:
            raise InvalidConfig(f"must be one of {', '.join(OPPONENTS)}", "taboo.opponent")
        human_role = raw.get("human_role", "defender")
        if human_role not in HUMAN_ROLES:
            raise InvalidConfig(f"must be one of {', '.join(HUMAN_ROLES)}", "taboo.human_role")
        clocks = {}
        for name, low, high in (("wait_seconds", 1, 3600), ("move_seconds", 5, 3600),
                                ("away_seconds", 5, 600)):  # fmt: skip
            value = raw.get(name, getattr(cls, name))
            if not isinstance(value, int | float) or isinstance(value, bool) or not (
                low <= value <= high
            ):
                raise InvalidConfig(f"must be a number of seconds from {low} to {high}",
                                    f"taboo.{name}")  # fmt: skip
            clocks[name] = float(value)
        judge = _judge(raw.get("judge", DEFAULT_JUDGE))
        if rules.enforce_judge and judge is None:
            raise InvalidConfig(
                "enforce_judge needs a judge: set taboo.judge (or leave it out for the default "
                "MiniLM relevance check)",
                "taboo.rules",
            )
        return cls(
            rules=rules,
            opponent=opponent,
            human_role=human_role,
            agents=_agents(raw.get("agents")),
            judge=judge,
            **clocks,
        )


def _agents(raw: Any) -> AgentChoice:
    from tasks.taboo.agents import AGENTS, make_agent

    if raw is None:
        return AgentChoice()
    if not isinstance(raw, Mapping) or set(raw) - {"attacker", "defender", "settings"}:
        raise InvalidConfig("must be {attacker, defender, settings}", "taboo.agents")
    choice = AgentChoice(
        attacker=raw.get("attacker", "retrieval"),
        defender=raw.get("defender", "threshold"),
        settings=dict(raw.get("settings") or {}),
    )
    for role in ("attacker", "defender"):
        name = getattr(choice, role)
        if name not in AGENTS:
            raise InvalidConfig(f"unknown agent {name!r}; known: {', '.join(AGENTS)}",
                                f"taboo.agents.{role}")  # fmt: skip
        if str(AGENTS.get(name).role) != role:
            raise InvalidConfig(f"agent {name!r} plays the {AGENTS.get(name).role}",
                                f"taboo.agents.{role}")  # fmt: skip
    for name, settings in choice.settings.items():
        if name not in AGENTS or not isinstance(settings, Mapping):
            raise InvalidConfig(f"settings are keyed by agent name ({', '.join(AGENTS)})",
                                "taboo.agents.settings")  # fmt: skip
        try:
            make_agent(name, **dict(settings))
        except (TypeError, ValueError) as error:
            raise InvalidConfig(str(error), f"taboo.agents.settings.{name}") from None
    return choice


def _judge(raw: Any) -> dict[str, Any] | None:
    from models.judges.config import JudgeConfig

    if raw is None or raw is False:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidConfig("must be an object of judge settings, or null for none", "taboo.judge")
    for key in ("fluency_model", "relevance_model"):
        name = raw.get(key)
        if name is not None and (not isinstance(name, str) or not MODEL_NAME.fullmatch(name)
                                 or ".." in name):  # fmt: skip
            raise InvalidConfig(
                "must be 'minilm' or the name of a model directory in CROWD_DATA_DIR/backbones "
                "(no paths)",
                f"taboo.judge.{key}",
            )
    try:
        return JudgeConfig.from_json(dict(raw)).to_json()
    except (TypeError, ValueError) as error:
        raise InvalidConfig(str(error), "taboo.judge") from None
