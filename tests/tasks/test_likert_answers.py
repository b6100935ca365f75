"""The Likert HIT type's one-question-per-step flow, scoring, imports, exports and simulated
raters, without the platform."""

from __future__ import annotations

import csv
import io
import json
import random
from typing import Any

import pytest

from crowd.exceptions import InvalidAction, InvalidConfig, InvalidItem
from tasks.likert.simulate import BEHAVIOURS, LikertSimulator, Truth, offline_ratings
from tasks.likert.templates_builtin import TEMPLATES
from tests.tasks.likert_helpers import ATTACK, HIT, NOW, SAMPLES, STORY, records, story


# -- the worker's flow -----------------------------------------------------------------------
def play_offline(config: dict[str, Any], spec: Any, ratings: list[int]) -> tuple[list, Any]:
    first = HIT.start(spec.content, NOW, config)
    progress, views, result = first.progress, [], first
    for rating in ratings:
        views.append(HIT.view(spec.content, progress, config))
        result = HIT.step(
            spec.content, progress, {"step": progress["step"], "rating": rating}, NOW, config
        )
        progress = result.progress
    return views, result


def test_one_attribute_per_step_and_the_prompt_only_for_relevance() -> None:
    spec = HIT.validate_item(story("s1", "gpt2", meta={"quality": 2}))
    views, result = play_offline(STORY, spec, [4, 3, 2, 5])
    assert [v["step"] for v in views] == [0, 1, 2, 3]
    assert all(v["n_steps"] == 4 and v["text"] == spec.content["text"] for v in views)
    assert [v["attribute"]["name"] for v in views] == [
        "grammaticality",
        "cohesiveness",
        "likability",
        "relevance",
    ]
    assert ["prompt" in v for v in views] == [False, False, False, True]
    assert views[3]["prompt"] == "Write about s1."
    assert all(v["attribute"]["labels"][0] and v["instructions"] for v in views)
    for view in views:
        text = json.dumps(view)
        assert "gpt2" not in text and "quality" not in text and "group" not in text
    assert result.answer == {
        "ratings": {"grammaticality": 4, "cohesiveness": 3, "likability": 2, "relevance": 5},
        "scales": {
            name: [1, 5] for name in ("grammaticality", "cohesiveness", "likability", "relevance")
        },
    }
    assert result.event == {
        "type": "rating",
        "attribute": "relevance",
        "rating": 5,
        "at": NOW.isoformat(),
    }


def test_the_reference_is_shown_only_with_the_meaning_question() -> None:
    spec = HIT.validate_item({"id": "t", "text": "Stocks rise", "reference": "Stocks go up"})
    views, result = play_offline(ATTACK, spec, [5, 4])
    assert ["reference" in v for v in views] == [False, True]
    assert views[1]["reference"] == "Stocks go up" and "prompt" not in views[1]
    assert result.answer is not None
    assert result.answer["ratings"] == {"fluency": 5, "meaning_preservation": 4}


@pytest.mark.parametrize("rating", [0, 6, "3", 3.0, True, None, [3]])
def test_bad_ratings_are_refused(rating: Any) -> None:
    spec = HIT.validate_item(story("s"))
    progress = HIT.start(spec.content, NOW, STORY).progress
    with pytest.raises(InvalidAction, match="whole number from 1 to 5 for 'grammaticality'"):
        HIT.step(spec.content, progress, {"step": 0, "rating": rating}, NOW, STORY)


def test_a_finished_assignment_takes_no_more_ratings() -> None:
    spec = HIT.validate_item(story("s"))
    _, result = play_offline(STORY, spec, [3, 3, 3, 3])
    with pytest.raises(InvalidAction, match="every question"):
        HIT.step(spec.content, result.progress, {"step": 4, "rating": 3}, NOW, STORY)


def test_scores_attention_and_feedback_hide_what_was_expected() -> None:
    answer = {
        "ratings": {"grammaticality": 4, "cohesiveness": 2, "likability": None, "relevance": 5}
    }
    gold = {"expected_ratings": {"grammaticality": 5, "cohesiveness": 2, "likability": 3}}
    # |4-5| + |2-2| over the two rated attributes; likability is missing.
    assert HIT.score(gold, answer) == pytest.approx(-0.5)
    assert HIT.score({}, answer) is None
    assert HIT.passed_attention({"expected_rating": 2}, {"ratings": {"a": 2, "b": 2}})
    assert not HIT.passed_attention({"expected_rating": 2}, {"ratings": {"a": 2, "b": 3}})
    assert not HIT.passed_attention({"expected_rating": 2}, {"ratings": {"a": 2, "b": None}})
    feedbacks = [
        HIT.feedback({"text": "t"}, expected, answer, kind, STORY)
        for kind, expected in (("real", {}), ("gold", gold), ("attention", {"expected_rating": 1}))
    ]
    assert feedbacks[0] == feedbacks[1] == feedbacks[2]
    assert "expected" not in json.dumps(feedbacks[0])


# -- imports and exports ---------------------------------------------------------------------
def test_import_answer_reads_jsonl_and_wide_csv_values() -> None:
    content = {"text": "t", "prompt": "p"}
    jsonl = HIT.import_answer(
        content,
        {"ratings": {"grammaticality": 4, "cohesiveness": "3.5", "likability": None}},
        STORY,
    )
    assert jsonl["ratings"] == {
        "grammaticality": 4,
        "cohesiveness": 3.5,
        "likability": None,
        "relevance": None,
    }
    assert jsonl["scales"]["relevance"] == [1, 5]
    wide = HIT.import_answer(
        content,
        {"grammaticality": " 4 ", "cohesiveness": "", "likability": "5.0", "relevance": "NA"},
        STORY,
    )
    assert wide["ratings"] == {
        "grammaticality": 4,
        "cohesiveness": None,
        "likability": 5,
        "relevance": None,
    }
    assert isinstance(wide["ratings"]["likability"], int)


@pytest.mark.parametrize(
    ("raw", "where", "message"),
    [
        ({"grammaticality": "6"}, "grammaticality", "outside the scale"),
        ({"grammaticality": "0.5"}, "grammaticality", "outside the scale"),
        ({"cohesiveness": "3.3"}, "cohesiveness", "neither a whole nor a half"),
        ({"cohesiveness": "good"}, "cohesiveness", "not a number"),
        ({"cohesiveness": True}, "cohesiveness", "must be a number"),
        ({"cohesiveness": "inf"}, "cohesiveness", "not a rating"),
        ({"fluency": "3"}, "fluency", "unknown attribute 'fluency'"),
        ({"ratings": {"fluency": 3}}, "ratings.fluency", "this study rates grammaticality"),
        ({"ratings": [3]}, "ratings", "must be an object"),
        ({"ratings": {}, "guess": 1}, "answer", "unknown answer keys"),
    ],
)
def test_import_answer_errors_name_the_field(raw: dict[str, Any], where: str, message: str) -> None:
    with pytest.raises(InvalidItem, match=message) as error:
        HIT.import_answer({"text": "t"}, raw, STORY)
    assert error.value.where == where


def platform_row(n: int, ratings: dict[str, Any], kind: str = "real") -> dict[str, Any]:
    return {
        "response_id": n,
        "worker": f"sim:w{n}",
        "worker_status": "active",
        "item": f"s{n}",
        "kind": kind,
        "category": None,
        "meta": {"group": "human", "quality": 4},
        "content": {"text": "t"},
        "expected": {"expected_rating": 2} if kind == "attention" else {},
        "answer": {"ratings": ratings, "scales": {name: [1, 5] for name in ratings}},
        "score": None,
        "explanation": None,
        "reasons": [],
        "qc_flags": {"attention_passed": False} if kind == "attention" else {},
        "events": [],
        "position": 0,
        "created_at": NOW.isoformat(),
        "source": "live",
        "rater_group": "crowd",
    }


def test_analysis_rows_and_exports_have_one_row_per_rating() -> None:
    rows = [
        HIT.analysis_row(platform_row(1, {"fluency": 4, "meaning_preservation": None})),
        HIT.analysis_row(platform_row(2, {"fluency": 2, "meaning_preservation": 1}, "attention")),
    ]
    assert rows[0]["item_group"] == "human" and rows[0]["rater_group"] == "crowd"
    assert rows[1]["attention_passed"] is False and rows[1]["expected_rating"] == 2
    buffer = io.StringIO()
    assert HIT.export(rows, "jsonl", buffer) == 4
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert lines[0] == {
        "response_id": 1,
        "worker": "sim:w1",
        "rater_group": "crowd",
        "item": "s1",
        "item_group": "human",
        "kind": "real",
        "attribute": "fluency",
        "rating": 4,
        "scale_low": 1,
        "scale_high": 5,
        "created_at": NOW.isoformat(),
        "source": "live",
    }
    assert lines[1]["rating"] is None
    buffer = io.StringIO()
    assert HIT.export(rows, "csv", buffer) == 4
    table = list(csv.DictReader(io.StringIO(buffer.getvalue())))
    assert [(r["item"], r["attribute"], r["rating"]) for r in table] == [
        ("s1", "fluency", "4"),
        ("s1", "meaning_preservation", ""),
        ("s2", "fluency", "2"),
        ("s2", "meaning_preservation", "1"),
    ]
    with pytest.raises(InvalidConfig, match="jsonl"):
        HIT.export(rows, "roft", io.StringIO())


# -- simulated raters ------------------------------------------------------------------------
def ratings_by(kind: str, truth: Truth, n: int, seed: int = 1, raters: int = 20) -> list[int]:
    simulator = LikertSimulator()
    master = random.Random(seed)
    values = []
    for _ in range(raters):
        rng = random.Random(master.random())
        values += [simulator.rate(kind, rng, "fluency", 1, 5, truth) for _ in range(n)]
    return values


def test_simulated_kinds_behave_as_named() -> None:
    assert LikertSimulator.kinds == tuple(BEHAVIOURS)
    truth = Truth({"fluency": 4.0})
    far = {kind: sum(abs(r - 4) >= 2 for r in ratings_by(kind, truth, 20)) for kind in BEHAVIOURS}
    assert far["careful"] < 10 and far["spammer"] > 150 and far["noisy"] > far["careful"]
    careful = ratings_by("careful", truth, 20)
    assert 3.7 < sum(careful) / len(careful) < 4.3
    # Straightliners give one number throughout, a different one per rater.
    simulator = LikertSimulator()
    rng = random.Random(5)
    same = {
        simulator.rate("straightliner", rng, a, 1, 5, Truth(q))
        for a, q in (("x", 1.0), ("y", 5.0), ("z", 3.0))
    }
    assert len(same) == 1
    # A biased rater is harsh or lenient by about a point, consistently.
    means = []
    for seed in range(8):
        rng = random.Random(seed)
        values = [simulator.rate("biased", rng, "f", 1, 5, Truth(3.0)) for _ in range(40)]
        means.append(sum(values) / len(values))
    assert all(abs(abs(mean - 3) - 1) < 0.4 for mean in means)
    assert min(means) < 3 < max(means)


def test_readers_pass_attention_checks_and_non_readers_mostly_fail() -> None:
    check = Truth(None, expected_rating=2)
    for kind in ("careful", "noisy", "biased"):
        assert set(ratings_by(kind, check, 4)) == {2}
    assert ratings_by("spammer", check, 4).count(2) < 40
    # The fallback truth without a quality is the middle of the scale.
    assert Truth(None).of("x", 1, 5) == 3 and Truth({"a": 2.0}).of("b", 1, 5) == 2


def test_simulator_finds_items_by_text_and_is_deterministic() -> None:
    simulator = LikertSimulator()
    truths = simulator.truths(records("stories.jsonl") + records("attention.jsonl"))
    spec = HIT.validate_item(records("stories.jsonl")[0])
    view = HIT.view(spec.content, HIT.start(spec.content, NOW, STORY).progress, STORY)
    truth = truths[simulator.key(view)]
    assert truth.quality == records("stories.jsonl")[0]["meta"]["quality"]
    first = [simulator.act("noisy", random.Random(3), view, truth) for _ in range(5)]
    again = [LikertSimulator().act("noisy", random.Random(3), view, truth) for _ in range(5)]
    assert first == again and all(1 <= a["rating"] <= 5 for a in first)


def test_samples_and_the_simulated_expert_csv() -> None:
    stories = records("stories.jsonl")
    assert len(stories) == 30
    assert sum(s["group"] == "human" for s in stories) == 15
    for attribute in ("cohesiveness", "likability"):
        human = [s["meta"]["quality"][attribute] for s in stories if s["group"] == "human"]
        gpt2 = [s["meta"]["quality"][attribute] for s in stories if s["group"] == "gpt2"]
        assert sum(human) / 15 > sum(gpt2) / 15 + 0.7
    checks = records("attention.jsonl")
    assert len(checks) == 3 and all(c["kind"] == "attention" for c in checks)
    HIT.plan_items([HIT.validate_item(r) for r in stories + checks], HIT.validate_config(None))
    # The CSV is what the documented generator makes (simulated experts, seed 2023).
    with open(SAMPLES / "expert_ratings.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    attributes = TEMPLATES["story"]["attributes"]
    regenerated = offline_ratings(
        stories, attributes, ("expert-1", "expert-2", "expert-3"), "expert", seed=2023
    )
    assert table == [{k: str(v) for k, v in row.items()} for row in regenerated]
    assert {r["worker"] for r in table} == {"expert-1", "expert-2", "expert-3"}
    generic = {"worker", "item", "rater_group"}
    for line in table:
        answer = HIT.import_answer({}, {k: v for k, v in line.items() if k not in generic}, STORY)
        assert all(value is not None for value in answer["ratings"].values())
