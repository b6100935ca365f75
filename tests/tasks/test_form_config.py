"""The form HIT's field declarations and study config: defaults, normalising, and errors that
name the path of the bad part (fields[2].choices)."""

from __future__ import annotations

from typing import Any

import pytest

from crowd.exceptions import InvalidConfig
from tests.tasks.form_helpers import HIT, category, rating, sample_config, text


def fields_of(*fields: dict[str, Any]) -> list[dict[str, Any]]:
    return list(HIT.validate_config({"fields": list(fields)}).extra["fields"])


def test_fields_get_their_defaults_and_a_stored_config_validates_to_itself() -> None:
    config = HIT.validate_config(
        {
            "fields": [
                rating(),
                category(),
                text(),
                {"id": "order", "type": "rank", "title": "Order"},
            ],
            "instructions": " Read. ",
        }
    ).to_config()
    quality, topic, why, order = config["fields"]
    assert quality == {
        "id": "quality",
        "type": "rating",
        "title": "How good is it?",
        "help": "",
        "required": True,
        "scale": [1, 5],
        "labels": ["", ""],
    }
    assert topic["choices"] == [{"label": c, "value": c} for c in ("news", "sport", "other")]
    assert (topic["min_choices"], topic["max_choices"]) == (1, 1)
    assert (why["max_characters"], why["min_characters"]) == (1000, 0)
    assert "choices" not in order  # ranks the item's attachments
    assert config["instructions"] == "Read."
    assert HIT.validate_config(config).to_config() == config
    assert HIT.validate_config(None).extra == {"fields": None, "instructions": ""}


def test_choice_values_become_text_and_show_if_becomes_a_list() -> None:
    flag = {
        "id": "flag",
        "type": "category",
        "title": "OK?",
        "choices": [
            {"label": "Yes", "value": True},
            {"label": "No", "value": False},
            {"label": "One", "value": 1.0, "hint": "a float"},
        ],
    }
    later = text("why", show_if={"field": "flag", "equals": False})
    score = text("score why", show_if={"field": "quality", "in": [1, 2]})
    fields = fields_of(rating(), flag, later, score)
    assert [c["value"] for c in fields[1]["choices"]] == ["true", "false", "1.0"]
    assert fields[1]["choices"][2]["hint"] == "a float"
    blank_hints = fields_of(
        category(choices=[{"label": "a", "hint": ""}, {"label": "b", "hint": "  "}, "c"])
    )
    assert [set(choice) for choice in blank_hints[0]["choices"]] == [{"label", "value"}] * 3
    # A label may hold "|": only values are joined.
    either = {"label": "a|b", "value": "ab"}
    assert fields_of(category(choices=[either, "c"]))[0]["choices"][0]["label"] == "a|b"
    assert fields[2]["show_if"] == {"field": "flag", "in": ["false"]}
    assert fields[3]["show_if"] == {"field": "quality", "in": [1, 2]}
    assert fields_of(*fields) == fields  # normalised declarations are kept as they are


@pytest.mark.parametrize(
    ("config", "where", "message"),
    [
        ({"colour": 1}, "colour", "unknown config key"),
        ({"fields": []}, "fields", "1 to 50 fields"),
        ({"fields": [rating(), rating()]}, "fields[1].id", "declared twice"),
        ({"fields": [rating(id="")]}, "fields[0].id", "1 to 100 characters"),
        ({"fields": [rating(id="a\tb")]}, "fields[0].id", "control characters"),
        ({"fields": [rating(id="x" * 101)]}, "fields[0].id", "1 to 100"),
        ({"fields": [{"id": "a", "title": "t"}]}, "fields[0].type", "rating, category"),
        ({"fields": [rating(title="")]}, "fields[0].title", "1 to 500"),
        ({"fields": [rating(help="h" * 2001)]}, "fields[0].help", "0 to 2000"),
        ({"fields": [rating(required="yes")]}, "fields[0].required", "true or false"),
        ({"fields": [rating(choices=["a", "b"])]}, "fields[0].choices", "unknown key"),
        ({"fields": [rating(scale=[1, 1])]}, "fields[0].scale", "high - low <= 20"),
        ({"fields": [rating(scale=[0, 21])]}, "fields[0].scale", "high - low <= 20"),
        ({"fields": [rating(scale=[1.0, 5])]}, "fields[0].scale", "whole numbers"),
        ({"fields": [rating(labels=["a"])]}, "fields[0].labels", "two texts"),
        ({"fields": [rating(), category(choices=["a"])]}, "fields[1].choices", "2 to 50"),
        ({"fields": [category(choices=["a", "b", {"label": "c", "value": "a"}])]},
         "fields[0].choices", "repeated: ['a']"),
        ({"fields": [category(choices=["1", {"label": "one", "value": 1}])]},
         "fields[0].choices", "once made text"),
        ({"fields": [category(choices=["a", {"label": "b", "value": [1]}])]},
         "fields[0].choices[1].value", "string, number"),
        ({"fields": [category(choices=["a", {"value": "b"}])]}, "fields[0].choices[1].label",
         "1 to 500"),
        ({"fields": [category(choices=["a", {"label": "b", "colour": "red"}])]},
         "fields[0].choices[1]", "unknown keys ['colour']"),
        ({"fields": [category(max_choices=4)]}, "fields[0].max_choices", "number of choices (3)"),
        ({"fields": [category(max_choices=0)]}, "fields[0].max_choices", "from 1"),
        ({"fields": [category(min_choices=2)]}, "fields[0].min_choices", "at most max_choices"),
        ({"fields": [text(max_characters=10001)]}, "fields[0].max_characters", "1 to 10000"),
        ({"fields": [text(min_characters=20, max_characters=10)]}, "fields[0].min_characters",
         "at most max_characters"),
        ({"fields": [{"id": "r", "type": "rank", "title": "t", "choices": ["a"] * 1}]},
         "fields[0].choices", "2 to 10"),
        ({"fields": [{"id": "r", "type": "rank", "title": "t",
                      "choices": [str(n) for n in range(11)]}]}, "fields[0].choices", "2 to 10"),
        ({"fields": [text(show_if={"field": "quality", "equals": 1}), rating()]},
         "fields[0].show_if.field", "not a field declared before"),
        ({"fields": [text("a"), text("b", show_if={"field": "a", "equals": "x"})]},
         "fields[1].show_if.field", "a text field"),
        ({"fields": [category(), text(show_if={"field": "topic", "equals": "weather"})]},
         "fields[1].show_if.equals", "not a choice value"),
        ({"fields": [rating(), text(show_if={"field": "quality", "in": [0]})]},
         "fields[1].show_if.in", "not a rating"),
        ({"fields": [rating(), text(show_if={"field": "quality", "in": []})]},
         "fields[1].show_if.in", "non-empty list"),
        ({"fields": [rating(), text(show_if={"field": "quality"})]}, "fields[1].show_if",
         '"equals"'),
        ({"fields": [rating(), text(show_if={"field": "quality", "equals": 1, "in": [1]})]},
         "fields[1].show_if", '"in"'),
        ({"instructions": 5}, "instructions", "at most 5000"),
        ({"instructions": 0}, "instructions", "must be text"),
        ({"instructions": []}, "instructions", "must be text"),
        ({"instructions": False}, "instructions", "must be text"),
        ({"fields": [category(choices=["a", "news|sport"])]}, "fields[0].choices[1].value",
         "must not contain '|'"),
        ({"fields": [rating(), category(choices=["a", {"label": "b", "value": "b|c"}])]},
         "fields[1].choices[1].value", "must not contain '|'"),
        ({"fields": [{"id": "r", "type": "rank", "title": "t", "choices": ["x", "y|z"]}]},
         "fields[0].choices[1].value", "must not contain '|'"),
    ],
)  # fmt: skip
def test_bad_configs_name_the_path_and_say_how_to_fix_it(
    config: dict[str, Any], where: str, message: str
) -> None:
    with pytest.raises(InvalidConfig) as error:
        HIT.validate_config(config)
    assert error.value.where == where
    assert message in error.value.message


def test_the_sample_study_config_is_valid_and_conditions_the_other_text() -> None:
    config = HIT.validate_config(sample_config()).to_config()
    kinds = [(field["id"], field["type"]) for field in config["fields"]]
    assert kinds == [
        ("faithfulness", "rating"),
        ("problems", "category"),
        ("other problem", "text"),
        ("strengths", "rank"),
    ]
    assert config["fields"][2]["show_if"] == {"field": "problems", "in": ["other"]}
    assert config["fields"][1]["max_choices"] == 3
