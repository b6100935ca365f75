"""The QC benchmark's studies: items of each HIT type with their truth, and the study
settings (`benchmarks/qc_bench.py` runs them; `benchmarks/qc_crowd.py` plays them)."""

from __future__ import annotations

import random
from typing import Any

WORDS = [
    "river", "stone", "lamp", "quiet", "market", "winter", "signal", "garden", "paper", "orbit",
    "violet", "harbor", "engine", "canvas", "thunder", "meadow", "silver", "pocket", "lantern",
    "bridge", "copper", "window", "velvet", "ember", "forest",
]  # fmt: skip
ATTRIBUTES = ("grammaticality", "cohesiveness", "likability", "relevance")
CONFIGS: dict[str, dict[str, Any]] = {
    "boundary": {"attention_rate": 0.1},
    "likert": {"template": "story", "attention_rate": 0.1},
    "comparison": {"template": "sentiment", "attention_rate": 0.1, "overlap_share": 0},
    "form": {
        "attention_rate": 0.1,
        "instructions": "Read the summary, then rate it and say what is wrong with it.",
        "fields": [
            {"id": "quality", "type": "rating", "title": "How good is the summary?",
             "scale": [1, 5]},
            {"id": "verdict", "type": "category", "title": "What is its main problem?",
             "choices": [{"label": label, "value": value} for value, label in (
                 ("none", "None"), ("missing", "It leaves out a key point"),
                 ("invented", "It states something the source does not"),
                 ("unclear", "It is hard to follow"))],
             "min_choices": 1, "max_choices": 1},
        ],
    },
}  # fmt: skip
VERDICTS = ("none", "missing", "invented", "unclear")


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def boundary_items(rng: random.Random, n_real: int, n_gold: int, n_att: int) -> list[dict]:
    items = []
    for i in range(n_real + n_gold):
        sentences = [f"Passage {i}, sentence {s}: {words(rng, 14)}." for s in range(10)]
        kind = "gold" if i >= n_real else "real"
        items.append(
            {"id": f"p{i}", "sentences": sentences, "boundary": rng.randint(1, 10), "kind": kind}
        )
    for i in range(n_att):
        sentences = [f"Check {i}, sentence {s}: {words(rng, 8)}." for s in range(9)]
        sentences.append("This passage is all human: answer human at every step.")
        items.append({"id": f"att{i}", "sentences": sentences, "kind": "attention"})
    return items


def likert_items(rng: random.Random, n_real: int, n_gold: int, n_att: int) -> list[dict]:
    items = []
    for i in range(n_real + n_gold):
        quality_ = {name: round(rng.uniform(1.3, 4.7), 2) for name in ATTRIBUTES}
        record: dict[str, Any] = {
            "id": f"s{i}",
            "prompt": f"Prompt {i}: {words(rng, 8)}",
            "text": f"Story {i}. {words(rng, 60)}.",
            "meta": {"quality": quality_},
        }
        if i >= n_real:
            record["kind"] = "gold"
            record["expected_ratings"] = {k: int(v + 0.5) for k, v in quality_.items()}
        items.append(record)
    for i in range(n_att):
        wanted = rng.randint(1, 5)
        items.append(
            {
                "id": f"att{i}",
                "kind": "attention",
                "expected_rating": wanted,
                "prompt": "Attention check: read the text below.",
                "text": f"Check {i}: this is not a story. Choose {wanted} for every "
                f"question about this text. {words(rng, 20)}.",
            }
        )
    return items


def comparison_items(rng: random.Random, n_real: int, n_gold: int, n_att: int) -> list[dict]:
    items = []
    for i in range(n_real + n_gold):
        utility = [round(rng.gauss(0, 1), 3) for _ in range(4)]
        record: dict[str, Any] = {
            "id": f"q{i}",
            "query": f"Query {i}: {words(rng, 12)}",
            "candidates": [f"Candidate {i}.{c}: {words(rng, 12)}." for c in range(4)],
            "meta": {"utility": utility},
        }
        if i >= n_real:
            record["kind"] = "gold"
            record["best"] = utility.index(max(utility))
        items.append(record)
    for i in range(n_att):
        best = rng.randrange(4)
        candidates = [f"Check {i}.{c}: {words(rng, 10)}." for c in range(4)]
        candidates[best] = f"Check {i}.{best}: the banana {words(rng, 8)}."
        items.append(
            {
                "id": f"att{i}",
                "kind": "attention",
                "best": best,
                "candidates": candidates,
                "query": f"Attention check {i}: choose the candidate that says banana.",
            }
        )
    return items


def form_items(rng: random.Random, n_real: int, n_gold: int, n_att: int) -> list[dict]:
    """Summaries to rate (1 to 5) and to give one main problem (of 4): a rating field and a
    single-choice category field."""
    items = []
    for i in range(n_real + n_gold):
        quality_ = round(rng.uniform(1.3, 4.7), 2)
        verdict = rng.choice(VERDICTS)
        record: dict[str, Any] = {
            "id": f"f{i}",
            "attachments": [{"type": "text", "content": f"Summary {i}. {words(rng, 50)}."}],
            "meta": {"truth": {"quality": quality_, "verdict": verdict}},
        }
        if i >= n_real:
            record["kind"] = "gold"
            record["expected"] = {"quality": int(quality_ + 0.5), "verdict": [verdict]}
            record["tolerance"] = {"quality": 1}
        items.append(record)
    for i in range(n_att):
        wanted, verdict = rng.randint(1, 5), rng.choice(VERDICTS)
        text = (f"Check {i}: this is not a summary. Rate it {wanted} and choose the problem "
                f"{verdict!r}. {words(rng, 20)}.")  # fmt: skip
        items.append({"id": f"att{i}", "kind": "attention",
                      "attachments": [{"type": "text", "content": text}],
                      "expected": {"quality": wanted, "verdict": [verdict]}})  # fmt: skip
    return items


MAKERS = {"boundary": boundary_items, "likert": likert_items, "comparison": comparison_items,
          "form": form_items}  # fmt: skip


def truth_labels(hit_type: str, records: list[dict]) -> dict[str, Any]:
    """The true label of every (real item, question) task, keyed like crowd.quality.labels."""
    truth: dict[str, Any] = {}
    for record in records:
        if record.get("kind", "real") != "real":
            continue
        if hit_type == "boundary":
            truth[f"{record['id']}/boundary"] = record["boundary"]
        elif hit_type == "likert":
            for name, value in record["meta"]["quality"].items():
                truth[f"{record['id']}/{name}"] = min(5, max(1, int(value + 0.5)))
        elif hit_type == "form":
            fields = record["meta"]["truth"]
            truth[f"{record['id']}/quality"] = min(5, max(1, int(fields["quality"] + 0.5)))
            truth[f"{record['id']}/verdict"] = fields["verdict"]
        else:
            utility = record["meta"]["utility"]
            truth[f"{record['id']}/best"] = utility.index(max(utility))
    return truth
