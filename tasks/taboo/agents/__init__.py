"""Agents that play Adversarial Taboo, as plugins of one registry (`AGENTS`).

Built-in: `retrieval` (attacker), `threshold` and `naive` (defenders); each module ends by
registering its agents. Build one with `make_agent(name, corpus, **settings)`; an unknown
name raises `RegistryError` listing the known ones, an unknown or bad setting `ValueError`.
"""

from __future__ import annotations

from tasks.taboo.agents.base import (
    AGENTS,
    Agent,
    AgentView,
    Move,
    agent_names,
    make_agent,
    register_agent,
)
from tasks.taboo.agents.corpus import SAMPLE_CORPUS, Corpus, Pair, UtteranceGroup
from tasks.taboo.agents.defenders import NaiveDefender, ThresholdDefender
from tasks.taboo.agents.retrieval import RetrievalAttacker

__all__ = [
    "AGENTS",
    "SAMPLE_CORPUS",
    "Agent",
    "AgentView",
    "Corpus",
    "Move",
    "NaiveDefender",
    "Pair",
    "RetrievalAttacker",
    "ThresholdDefender",
    "UtteranceGroup",
    "agent_names",
    "make_agent",
    "register_agent",
]
