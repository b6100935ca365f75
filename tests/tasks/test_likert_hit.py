"""The Likert HIT type: schema, templates, the one-question-per-step flow, imports, exports,
simulated raters, and the HTTP flow through the platform."""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.exceptions import InvalidAction, InvalidConfig, InvalidItem
from crowd.platforms.publishing import open_study
from crowd.settings import Settings
from crowd.storage import Database, Item, Response, Study
from crowd.studies.annotations import import_file
from crowd.studies.lifecycle import create_study, import_items
from crowd.studies.reports import analysis_rows, build_report, platform_rows
from tasks import get_hit_type
from tasks.likert.hit import LikertHit
from tasks.likert.simulate import BEHAVIOURS, LikertSimulator, Truth, offline_ratings
from tasks.likert.templates_builtin import TEMPLATES
from tests.conftest import join

SAMPLES = Path(__file__).resolve().parents[2] / "tasks" / "likert" / "samples"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HIT = LikertHit()
STORY = HIT.validate_config(None).to_config()
ATTACK = HIT.validate_config({"template": "attack"}).to_config()


def story(item_id: str, group: str = "human", **extra: Any) -> dict[str, Any]:
    return {
        "id": item_id,
        "text": f"Story {item_id} begins on a quiet morning.",
        "prompt": f"Write about {item_id}.",
        "group": group,
        **extra,
    }


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLES / name).read_text().splitlines()]


@pytest.fixture
def likert_study(db: Database, api_key: str) -> Callable[..., int]:
    """Create, fill and publish a Likert study; returns its id."""

    def factory(
        items: list[dict[str, Any]],
        config: dict[str, Any] | None = None,
        providers: tuple[str, ...] = ("local", "sim"),
    ) -> int:
        with db.session() as session:
            study: Study = create_study(
                session,
                authenticate(session, api_key),
                "likert study",
                "likert",
                {"annotations_per_item": 1, **(config or {})},
            )
            import_items(session, study, json.loads(json.dumps(items)))
            open_study(session, study, providers)
            return study.id

    return factory


# -- config and templates --------------------------------------------------------------------
def test_no_config_means_the_story_template_with_three_raters() -> None:
    options = HIT.validate_config(None)
    assert options.annotations_per_item == 3
    assert options.extra["template"] == "story"
    names = [a["name"] for a in options.extra["attributes"]]
    assert names == ["grammaticality", "cohesiveness", "likability", "relevance"]
    shown = [a["name"] for a in options.extra["attributes"] if a["show_prompt"]]
    assert shown == ["relevance"]
    assert all(a["scale"] == [1, 5] for a in options.extra["attributes"])
    assert options.extra["group_order"] == "mixed"
    assert HIT.shuffle_items(options.to_config())
    # A stored config validates to itself.
    assert HIT.validate_config(options.to_config()).to_config() == options.to_config()


def test_attack_template_shows_title_1_for_meaning_only() -> None:
    attributes = ATTACK["attributes"]
    assert [a["name"] for a in attributes] == ["fluency", "meaning_preservation"]
    assert [a["show_reference"] for a in attributes] == [False, True]
    assert attributes[1]["labels"] == ["strongly disagree", "strongly agree"]
    assert "title 1" in attributes[1]["question"] and ATTACK["instructions"]


def test_custom_attributes_fill_defaults_and_keep_instructions() -> None:
    config = HIT.validate_config(
        {"attributes": [{"name": "clarity", "question": "How clear is it?"}], "instructions": "Hi"}
    ).to_config()
    assert config["template"] is None and config["instructions"] == "Hi"
    assert config["attributes"] == [
        {
            "name": "clarity",
            "question": "How clear is it?",
            "scale": [1, 5],
            "labels": ["", ""],
            "show_prompt": False,
            "show_reference": False,
        }
    ]
    # A template's instructions with one's own attributes.
    mixed = HIT.validate_config(
        {"template": "story", "attributes": [{"name": "x", "question": "?", "scale": [0, 10]}]}
    )
    assert mixed.extra["instructions"] == TEMPLATES["story"]["instructions"]
    assert mixed.extra["attributes"][0]["scale"] == [0, 10]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"colour": "red"}, "template, instructions, attributes, group_order, groups"),
        ({"template": "poem"}, "story"),
        ({"template": None}, "give a list of attributes"),
        ({"attributes": []}, "1 to 20"),
        ({"attributes": [{"name": "Bad Name", "question": "?"}]}, "lowercase"),
        ({"attributes": [{"name": "worker", "question": "?"}]}, "reserved"),
        ({"attributes": [{"name": "a", "question": ""}]}, "question"),
        ({"attributes": [{"name": "a", "question": "?", "scale": [5, 1]}]}, "low < high"),
        ({"attributes": [{"name": "a", "question": "?", "scale": [0, 20]}]}, "at most 11"),
        ({"attributes": [{"name": "a", "question": "?", "scale": [1.5, 5]}]}, "whole numbers"),
        ({"attributes": [{"name": "a", "question": "?", "labels": ["x"]}]}, "labels"),
        ({"attributes": [{"name": "a", "question": "?", "show_prompt": "yes"}]}, "true or false"),
        ({"attributes": [{"name": "a", "question": "?", "colour": 1}]}, "unknown keys"),
        (
            {"attributes": [{"name": "a", "question": "?"}, {"name": "a", "question": "!"}]},
            "differ",
        ),
        ({"group_order": "alphabetical"}, "mixed"),
        ({"groups": ["human"]}, "sequential"),
        ({"group_order": "sequential", "groups": ["a", "a"]}, "distinct"),
        ({"instructions": 3}, "text"),
    ],
)
def test_bad_configs_say_how_to_fix_them(config: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfig, match=message):
        HIT.validate_config(config)


# -- items -----------------------------------------------------------------------------------
def test_an_item_splits_into_content_secret_expectation_and_server_side_group() -> None:
    spec = HIT.validate_item(story("s1", "gpt2", meta={"quality": 3.2}))
    assert spec.content == {
        "text": "Story s1 begins on a quiet morning.",
        "prompt": "Write about s1.",
    }
    assert spec.meta == {"quality": 3.2, "group": "gpt2"}
    assert spec.category is None and spec.expected == {} and spec.kind == "real"
    gold = HIT.validate_item(story("g", kind="gold", expected_ratings={"relevance": 4}))
    assert gold.expected == {"expected_ratings": {"relevance": 4}}
    check = HIT.validate_item(story("a", kind="attention", expected_rating=2))
    assert check.expected == {"expected_rating": 2}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"text": "x"}, "needs an 'id'"),
        ({"id": "a"}, "'text' must be"),
        ({"id": "a", "text": "  "}, "'text' must be"),
        ({"id": "a", "text": "x" * 5001}, "at most 5000"),
        ({"id": "a", "text": "x", "title": "t"}, "unknown keys \\['title'\\]"),
        ({"id": "a", "text": "x", "kind": "bonus"}, "'kind' must be"),
        ({"id": "a", "text": "x", "prompt": 3}, "'prompt' must be"),
        ({"id": "a", "text": "x", "group": ""}, "'group' must be"),
        ({"id": "a", "text": "x", "meta": []}, "'meta' must be"),
        ({"id": "a", "text": "x", "kind": "attention"}, "expected_rating"),
        ({"id": "a", "text": "x", "kind": "attention", "expected_rating": "2"}, "whole number"),
        ({"id": "a", "text": "x", "expected_rating": 2}, "attention items only"),
        ({"id": "a", "text": "x", "kind": "gold"}, "expected_ratings"),
        ({"id": "a", "text": "x", "kind": "gold", "expected_ratings": {"f": 2.5}}, "whole"),
        ({"id": "a", "text": "x", "expected_ratings": {"f": 2}}, "gold and training items"),
    ],
)
def test_bad_items_name_the_line_and_field(record: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidItem, match=message) as error:
        HIT.validate_item(record, "line 7")
    assert "line 7" in str(error.value)


def test_plan_checks_items_against_the_attributes() -> None:
    story_options = HIT.validate_config(None)
    no_prompt = HIT.validate_item({"id": "a", "text": "x"})
    with pytest.raises(InvalidItem, match="every item needs a 'prompt'"):
        HIT.plan_items([no_prompt], story_options)
    attack = HIT.validate_config({"template": "attack"})
    with pytest.raises(InvalidItem, match="needs a 'reference'"):
        HIT.plan_items([HIT.validate_item({"id": "t", "text": "x"})], attack)
    HIT.plan_items([HIT.validate_item({"id": "t", "text": "x", "reference": "y"})], attack)
    wrong_name = HIT.validate_item(story("g", kind="gold", expected_ratings={"fluency": 3}))
    with pytest.raises(InvalidItem, match="not an attribute"):
        HIT.plan_items([wrong_name], story_options)
    out_of_scale = HIT.validate_item(story("g", kind="gold", expected_ratings={"relevance": 6}))
    with pytest.raises(InvalidItem, match="outside the scale"):
        HIT.plan_items([out_of_scale], story_options)
    check = HIT.validate_item(story("c", kind="attention", expected_rating=9))
    with pytest.raises(InvalidItem, match="outside the scale"):
        HIT.plan_items([check], story_options)


def test_sequential_order_ranks_groups_by_the_given_list() -> None:
    specs = [HIT.validate_item(story(f"s{n}", group)) for n, group in enumerate("BABCA")]
    specs.append(HIT.validate_item(story("check", kind="attention", expected_rating=1)))
    mixed = HIT.plan_items(specs, HIT.validate_config(None))
    assert {spec.rank for spec in mixed} == {0}
    # Learnt from each import, the order could differ between imports: it must be given.
    with pytest.raises(InvalidConfig, match="lists its groups"):
        HIT.validate_config({"group_order": "sequential"})
    listed = HIT.validate_config({"group_order": "sequential", "groups": ["C", "A", "B"]})
    assert [spec.rank for spec in HIT.plan_items(specs, listed)] == [2, 1, 2, 0, 1, 0]
    partial = HIT.validate_config({"group_order": "sequential", "groups": ["A"]})
    with pytest.raises(InvalidItem, match="not in the study's 'groups'"):
        HIT.plan_items(specs, partial)


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


# -- through the platform --------------------------------------------------------------------
def start(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    response = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def rate(client: FlaskClient, who: dict[str, str], view: dict[str, Any], rating: Any) -> Any:
    return client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": view["task"]["step"], "rating": rating},
        headers=who,
    )


def play(client: FlaskClient, who: dict[str, str], study_id: int) -> tuple[list, dict]:
    """Rate one item through; returns the views before the answer and the final view."""
    view = start(client, who, study_id)
    seen = []
    while "task" in view and not view.get("answered"):
        seen.append(view)
        response = rate(client, who, view, 1 + view["task"]["step"])
        assert response.status_code == 200, response.get_json()
        view = response.get_json()
    return seen, view


def test_http_flow_stores_all_ratings_and_never_shows_the_group(
    client: FlaskClient, auth: dict[str, str], likert_study: Callable[..., int], db: Database
) -> None:
    study_id = likert_study([story("s1", "secretgroup", meta={"quality": {"relevance": 4.5}})])
    who = join(client, auth)
    view = start(client, who, study_id)
    assert rate(client, who, view, 9).status_code == 409
    assert rate(client, who, view, "4").status_code == 422  # a number, not text (the model)
    seen, final = play(client, who, study_id)
    assert [v["task"]["step"] for v in seen] == [0, 1, 2, 3]
    assert ["prompt" in v["task"] for v in seen] == [False, False, False, True]
    for body in seen:
        text = json.dumps(body)
        assert "secretgroup" not in text and "quality" not in text and "4.5" not in text
    assert final["feedback"]["message"].startswith("Thank you")
    with db.session() as session:
        response = session.scalars(select(Response)).one()
        assert response.answer["ratings"] == {
            "grammaticality": 1,
            "cohesiveness": 2,
            "likability": 3,
            "relevance": 4,
        }
        assert response.score is None and response.rater_group == "crowd"
        assert [e["type"] for e in response.events] == ["show"] + ["rating"] * 4
        times = [datetime.fromisoformat(e["at"]) for e in response.events]
        assert times == sorted(times) and all(t.tzinfo is not None for t in times)
    assert start(client, who, study_id)["done"] is True


def test_sequential_order_serves_one_group_after_another(
    client: FlaskClient, auth: dict[str, str], likert_study: Callable[..., int], db: Database
) -> None:
    items = [story(f"{group}{n}", group) for n in range(3) for group in ("human", "gpt2")]
    study_id = likert_study(items, {"group_order": "sequential", "groups": ["gpt2", "human"]})
    who = join(client, auth)
    for _ in items:
        play(client, who, study_id)
    with db.session() as session:
        order = [
            item.meta["group"]
            for item in session.scalars(
                select(Item).join(Response, Response.item_id == Item.id).order_by(Response.id)
            )
        ]
    assert order == ["gpt2"] * 3 + ["human"] * 3


def test_mixed_order_serves_every_group_without_telling_which(
    client: FlaskClient, auth: dict[str, str], likert_study: Callable[..., int], db: Database
) -> None:
    items = [story(f"i{g[0]}{n}", g) for n in range(4) for g in ("alpha", "omega")]
    study_id = likert_study(items)
    with db.session() as session:
        assert {item.rank for item in session.scalars(select(Item))} == {0}
    who = join(client, auth)
    for _ in items:
        seen, final = play(client, who, study_id)
        for body in [*seen, final]:
            assert "alpha" not in json.dumps(body) and "omega" not in json.dumps(body)
    with db.session() as session:
        assert len(session.scalars(select(Response)).all()) == len(items)


def test_attention_check_flag_gold_score_and_the_report(
    client: FlaskClient,
    auth: dict[str, str],
    likert_study: Callable[..., int],
    db: Database,
    settings: Settings,
) -> None:
    items = [
        story("real", "human"),
        story("gold", "gpt2", kind="gold", expected_ratings={"grammaticality": 1, "relevance": 2}),
        story("check", kind="attention", expected_rating=1),
    ]
    gold_first = {"gold": {"min_rate": 1.0, "max_rate": 1.0}}
    study_id = likert_study(
        items, {"attention_rate": 0.5, "annotations_per_item": 2, "qc": gold_first}
    )
    for worker in ("w1", "w2"):
        who = join(client, auth, external_id=worker)
        for _ in range(3):
            play(client, who, study_id)  # rates 1, 2, 3, 4
    with open(SAMPLES / "expert_ratings.csv") as handle:
        lines = [line for n, line in enumerate(handle) if n == 0 or ",story-01-" in line]
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        import_items(session, study, [r for r in records("stories.jsonl") if "-01-" in r["id"]])
        summary = import_file(session, study, "".join(lines), "csv")
        assert summary.added == 6
        rows = platform_rows(session, study)
        checks = [r for r in rows if r["kind"] == "attention"]
        assert checks and all(r["qc_flags"]["attention_passed"] is False for r in checks)
        gold = [r for r in rows if r["item"] == "gold"]
        # grammaticality 1 vs 1, relevance 4 vs 2: mean absolute error 1.
        assert gold and all(r["score"] == pytest.approx(-1.0) for r in gold)
        analysed, excluded = analysis_rows(session, study)
        assert excluded == {"sim:w1", "sim:w2"}
        assert {r["rater_group"] for r in analysed} == {"crowd", "expert"}
        report = build_report(session, settings, study_id)
        data = report.data
    json.dumps(data, allow_nan=False)
    assert data["full"]["rater_groups"] == ["crowd", "expert"]
    assert data["filtered"]["rater_groups"] == ["expert"]
    assert data["attention"]["workers_failed"] == 2
    assert data["rules"]["attention_failed"]["workers"] == 2
    assert "attention_failed" in report.html and "Welch" in report.html
    out_dir = settings.reports_dir / f"study-{study_id}"
    assert (out_dir / "means_full.png").exists() and (out_dir / "report.json").exists()


def test_the_simulated_crowd_plays_the_sample_stories(
    live_server: Any, likert_study: Callable[..., int], api_key: str, db: Database
) -> None:
    from crowd.platforms.providers.sim import SimulatedCrowd

    items = records("stories.jsonl")[:6] + records("attention.jsonl")
    study_id = likert_study(items, {"annotations_per_item": 3, "attention_rate": 0.2})
    crowd = SimulatedCrowd(
        live_server.url,
        api_key,
        study_id,
        "likert",
        items,
        {"careful": 2, "spammer": 1, "straightliner": 1},
        seed=4,
        items_per_worker=6,
    )
    result = crowd.run(threads=2)
    assert result.errors == []
    with db.session() as session:
        answers = [r.answer for r in session.scalars(select(Response))]
    assert len(answers) >= 18
    assert all(len(answer["ratings"]) == 4 for answer in answers)
    assert get_hit_type("likert") is not None
