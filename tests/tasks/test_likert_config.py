"""The Likert HIT type's config, templates and item schema."""

from __future__ import annotations

from typing import Any

import pytest

from crowd.exceptions import InvalidConfig, InvalidItem
from tasks.likert.templates_builtin import TEMPLATES
from tests.tasks.likert_helpers import ATTACK, HIT, story


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
