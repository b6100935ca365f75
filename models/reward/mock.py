"""A mock labeling task, like the mock sentiment task of Ziegler et al. (2019), section 3.1.

Queries open a short story (about 50 tokens; the paper's BookCorpus queries had 64); each of
K continuations (about 20 tokens; the paper's had 24) mixes positive, negative and neutral
words. The hidden rule (the "true" reward) is the number of positive words minus negative
ones. A simulated labeler picks the best of K with probability softmax(u / temperature):
labels are noisy, as human ones are, and a reward model should recover the rule from them.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from models.reward.data import Comparison

POSITIVE = (
    "wonderful", "happy", "delightful", "joyful", "lovely", "cheerful", "brilliant", "kind",
    "warm", "beautiful", "glad", "friendly", "bright", "gentle", "proud", "calm",
)  # fmt: skip
NEGATIVE = (
    "terrible", "sad", "awful", "miserable", "gloomy", "angry", "cruel", "bitter", "cold",
    "ugly", "afraid", "lonely", "dark", "broken", "tired", "worried",
)  # fmt: skip
NEUTRAL = (
    "the", "house", "river", "morning", "table", "street", "window", "train", "letter",
    "garden", "road", "door", "city", "teacher", "dog", "market", "evening", "chair",
    "walked", "looked", "opened", "carried", "found", "waited", "said", "turned",
)  # fmt: skip
OPENINGS = (
    "When she came home that night,", "The old man looked at the sea and", "After the long trip,",
    "On the first day of school,", "The letter arrived in the morning and", "Nobody expected that",
    "In the small village by the river,", "He opened the door slowly and",
)  # fmt: skip


@dataclass(frozen=True)
class MockLabeler:
    """Picks the best of K by the hidden rule, with softmax noise at `temperature`."""

    temperature: float = 1.0

    def pick(self, utilities: list[float], rng: random.Random) -> int:
        top = max(utilities)
        weights = [math.exp((u - top) / self.temperature) for u in utilities]
        return rng.choices(range(len(utilities)), weights=weights)[0]


def utility(text: str) -> float:
    """The hidden rule: positive words minus negative words."""
    words = text.lower().replace(",", " ").replace(".", " ").split()
    return float(sum(w in POSITIVE for w in words) - sum(w in NEGATIVE for w in words))


def query(rng: random.Random, length: int = 40) -> str:
    """An opening followed by neutral story words."""
    return rng.choice(OPENINGS) + " " + " ".join(rng.choice(NEUTRAL) for _ in range(length)) + ","


def continuation(rng: random.Random, length: int = 16) -> str:
    # Each continuation leans one way by a random amount, so candidates differ by degrees.
    lean = rng.random()
    words = []
    for _ in range(length):
        roll = rng.random()
        if roll < 0.35:
            words.append(rng.choice(POSITIVE) if rng.random() < lean else rng.choice(NEGATIVE))
        else:
            words.append(rng.choice(NEUTRAL))
    return " " + " ".join(words) + "."


def mock_comparisons(
    n: int,
    k: int = 4,
    seed: int = 0,
    labeler: MockLabeler | None = None,
    query_words: int = 40,
    continuation_words: int = 16,
) -> list[Comparison]:
    """n labels of K continuations each, chosen by the (noisy) mock labeler."""
    rng = random.Random(seed)
    labeler = labeler or MockLabeler()
    comparisons = []
    for index in range(n):
        text = query(rng, query_words)
        candidates = tuple(continuation(rng, continuation_words) for _ in range(k))
        best = labeler.pick([utility(text) for text in candidates], rng)
        comparisons.append(
            Comparison(query=text, candidates=candidates, best=best, item=f"mock-{seed}-{index}",
                       worker="mock-labeler", policies=("base",) * k)  # fmt: skip
        )
    return comparisons


def true_best_accuracy(comparisons: list[Comparison]) -> float:
    """How often the label is a candidate with the top true utility (the labeler's ceiling)."""
    hits = sum(
        utility(c.candidates[c.best]) == max(utility(t) for t in c.candidates) for c in comparisons
    )
    return hits / len(comparisons) if comparisons else 0.0
