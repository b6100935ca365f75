"""Adversarial Taboo (Yao et al., AAAI 2021): a two-player word game with a model judge.

engine.py holds the rules, words.py the target matching (lemminflect), config.py a study's
settings, hit.py the HIT type, agents/ the agent plugins, simulate.py agent-vs-agent games
and tournaments, analysis.py the rates and the leaderboard, export.py transcripts. Samples:
samples/words.jsonl (target words with estimated concreteness, the study's items) and
data/corpus.jsonl (utterance/reply pairs the agents draw on).
"""

from __future__ import annotations

from tasks import HIT_TYPES
from tasks.taboo.hit import TabooHit

HIT_TYPES.register(TabooHit.name, TabooHit())
