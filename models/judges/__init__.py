"""The judge of Adversarial Taboo (Yao et al., AAAI 2021): fluency and relevance checks.

`config` holds the settings (JudgeConfig); `fluency` scores texts by a causal LM's
perplexity, `relevance` pairs of utterances by the cosine similarity of sentence
embeddings, and `judge` turns both into a Verdict per utterance, with a score cache. None of
these modules imports torch or transformers at import time; the models load on first use.
"""

from __future__ import annotations

from models.judges.config import JudgeConfig
from models.judges.fluency import FluencyScorer
from models.judges.judge import (
    CheckScore,
    Judge,
    JudgeRequest,
    MemoryCache,
    ScoreCache,
    Verdict,
    cache_key,
)
from models.judges.relevance import RelevanceScorer

__all__ = [
    "CheckScore",
    "FluencyScorer",
    "Judge",
    "JudgeConfig",
    "JudgeRequest",
    "MemoryCache",
    "RelevanceScorer",
    "ScoreCache",
    "Verdict",
    "cache_key",
]
