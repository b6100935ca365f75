"""Which questions each aggregation method runs on: HitType.label_applies, as labels.py
uses it to pick the (task, worker, label) triples of each method."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from crowd.quality.labels import method_triples
from qc.aggregation import aggregate
from tasks.likert.hit import LikertHit

LABELLED: list[tuple[str, str, str, Hashable]] = [
    ("s1", "fluency", "w1", 4),
    ("s1", "verdict", "w1", "human"),
    ("s1", "fluency", "w2", 5),
    ("s1", "verdict", "w2", "machine"),
    ("s2", "fluency", "w1", 2),
]


class RatedOnly(LikertHit):
    """A type whose config names the questions that are ratings; the rest are categories."""

    def label_applies(self, method: str, question: str, config: Mapping[str, Any]) -> bool:
        return method != "ordinal_mean" or question in config["ratings"]


def test_every_method_takes_every_question_by_default() -> None:
    triples = method_triples(LikertHit(), "ordinal_mean", LABELLED, {})
    assert triples == [(f"{item}/{q}", worker, label) for item, q, worker, label in LABELLED]


def test_a_type_keeps_a_method_to_the_questions_it_fits() -> None:
    hit = RatedOnly()
    config = {"ratings": ["fluency"]}
    ordinal = method_triples(hit, "ordinal_mean", LABELLED, config)
    assert ordinal == [("s1/fluency", "w1", 4), ("s1/fluency", "w2", 5), ("s2/fluency", "w1", 2)]
    # The filtered triples aggregate; all of them would not (a text label is no rating).
    assert aggregate("ordinal_mean", ordinal).labels == {"s1/fluency": 5, "s2/fluency": 2}
    assert len(method_triples(hit, "majority_vote", LABELLED, config)) == len(LABELLED)
    assert method_triples(hit, "ordinal_mean", LABELLED, {"ratings": []}) == []
