"""Form exports (JSONL, CSV one column per field) and answers imported back from them."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from crowd.exceptions import InvalidConfig, InvalidItem
from tasks.form.analysis import field_types_of
from tasks.form.config import validate_fields
from tasks.form.export import export, parse_imported

FIELDS: list[dict[str, Any]] = validate_fields([
    {"id": "Keyword Feedback", "type": "rating", "title": "Keywords?", "scale": [0, 10]},
    {
        "id": "topic",
        "type": "category",
        "title": "Topic",
        "choices": [{"label": "News", "value": "news"}, "sport", {"label": "One", "value": 1}],
    },
    {
        "id": "flaws",
        "type": "category",
        "title": "Flaws",
        "choices": ["typo", "bias", {"label": "Yes", "value": True}],
        "min_choices": 0,
        "max_choices": 3,
    },
    {"id": "order", "type": "rank", "title": "Best first", "choices": ["a", "b", "c"]},
    {"id": "why", "type": "text", "title": "Why?", "required": False, "max_characters": 40},
    {
        "id": "sport_detail",
        "type": "text",
        "title": "Which sport?",
        "required": False,
        "show_if": {"field": "topic", "equals": "sport"},
    },
])  # fmt: skip
TYPES = field_types_of(FIELDS)
ANSWERS: list[dict[str, Any]] = [
    {"Keyword Feedback": 7, "topic": ["sport"], "flaws": ["typo", "true"], "order": [2, 0, 1],
     "why": "commas, \"quotes\"\nand lines", "sport_detail": "chess"},
    {"Keyword Feedback": 0, "topic": ["1"], "flaws": ["bias"], "order": [0, 1, 2],
     "why": None, "sport_detail": None},
    {"Keyword Feedback": None, "topic": ["news"], "flaws": None, "order": [1, 2, 0],
     "why": "a|b>c", "sport_detail": None},
]  # fmt: skip


def rows() -> list[dict[str, Any]]:
    return [
        {
            "response_id": n,
            "worker": f"local:w{n}",
            "rater_group": "crowd" if n else "expert",
            "item": f"q{n}",
            "item_group": None,
            "kind": "real",
            "created_at": "2024-05-01T12:00:00",
            "source": "live",
            "fields": answer,
            "field_types": TYPES,
            "score": None,
        }
        for n, answer in enumerate(ANSWERS)
    ]


def test_jsonl_round_trips_every_field() -> None:
    handle = io.StringIO()
    assert export(rows(), "jsonl", handle) == 3
    lines = [json.loads(line) for line in handle.getvalue().splitlines()]
    assert set(lines[0]) == {
        "response_id", "worker", "rater_group", "item", "item_group", "kind", "created_at",
        "source", "fields",
    }  # fmt: skip
    assert lines[0]["rater_group"] == "expert"
    for line, answer in zip(lines, ANSWERS, strict=True):
        assert parse_imported({"fields": line["fields"]}, FIELDS) == {"fields": answer}


def test_csv_has_one_column_per_field_and_round_trips() -> None:
    handle = io.StringIO()
    assert export(rows(), "csv", handle) == 3
    table = list(csv.DictReader(io.StringIO(handle.getvalue())))
    assert list(table[0])[-6:] == [f"field:{f['id']}" for f in FIELDS]
    assert table[0]["field:flaws"] == "typo|true"
    assert table[0]["field:order"] == "2>0>1"
    assert table[0]["field:Keyword Feedback"] == "7"
    assert table[1]["field:why"] == "" and table[2]["field:Keyword Feedback"] == ""
    for line, answer in zip(table, ANSWERS, strict=True):
        # What the annotation import hands over: the non-generic columns, blanks as None.
        given = {
            name: (value.strip() or None)
            for name, value in line.items()
            if name not in ("worker", "item", "rater_group", "created_at")
        }
        # The text keeps its inner line break and separators; CSV blanks are None.
        assert parse_imported(given, FIELDS) == {"fields": answer}


def test_bare_column_names_and_loose_values_are_read() -> None:
    got = parse_imported(
        {"Keyword Feedback": "4.0", "topic": "sport", "flaws": "bias|typo", "order": " 1 > 0 >2"},
        FIELDS,
    )
    assert got["fields"] == {
        "Keyword Feedback": 4, "topic": ["sport"], "flaws": ["typo", "bias"],
        "order": [1, 0, 2], "why": None, "sport_detail": None,
    }  # fmt: skip
    # JSON values may be native: a single category as one value, a boolean choice as true.
    native = parse_imported({"fields": {"topic": 1, "flaws": [True, "typo"]}}, FIELDS)
    assert native["fields"]["topic"] == ["1"] and native["fields"]["flaws"] == ["typo", "true"]
    # A multi-choice with nothing chosen is an answer where min_choices is 0.
    assert parse_imported({"fields": {"flaws": []}}, FIELDS)["fields"]["flaws"] == []
    # A rank over attachments: as many indexes as there are attachments.
    ranked = [{"id": "r", "type": "rank", "title": "R"}]
    assert parse_imported({"r": "1>0>2"}, ranked, n_attachments=3) == {"fields": {"r": [1, 0, 2]}}
    with pytest.raises(InvalidItem, match="0 to 3"):
        parse_imported({"r": "1>0>2"}, ranked, n_attachments=4)


@pytest.mark.parametrize(
    ("raw", "where", "message"),
    [
        ({"Keyword Feedback": "11"}, "field:Keyword Feedback", "0 to 10"),
        ({"Keyword Feedback": "much"}, "field:Keyword Feedback", "whole number"),
        ({"fields": {"Keyword Feedback": 2.5}}, "fields.Keyword Feedback", "whole number"),
        ({"fields": {"Keyword Feedback": True}}, "fields.Keyword Feedback", "whole number"),
        ({"topic": "golf"}, "field:topic", "not a choice"),
        ({"topic": "news|sport"}, "field:topic", "choose exactly 1, not 2"),
        ({"fields": {"flaws": ["typo", "typo"]}}, "fields.flaws", "twice"),
        ({"fields": {"flaws": {"typo": 1}}}, "fields.flaws", "list of choice values"),
        ({"order": "2>0"}, "field:order", "each once"),
        ({"order": "2>0>0"}, "field:order", "each once"),
        ({"order": "b>a>c"}, "field:order", "indexes 0 to 2"),
        ({"fields": {"order": "abc"}}, "fields.order", "indexes 0 to 2"),
        ({"why": "x" * 41}, "field:why", "at most 40 characters"),
        ({"fields": {"why": 3}}, "fields.why", "must be text"),
        ({"topic": "news", "sport_detail": "golf"}, "field:sport_detail", "hidden"),
        ({"colour": "red"}, "field:colour", "no such field"),
        ({"field:colour": "red"}, "field:colour", "no such field"),
        ({"fields": {"colour": "red"}}, "fields.colour", "no such field"),
        ({"fields": {"topic": "news"}, "extra": 1}, "answer", "unknown answer keys"),
        ({"fields": ["news"]}, "fields", "must be an object"),
        ({"topic": None, "why": "  "}, "field:*", "no field answered"),
        ({"fields": {}}, "fields.*", "no field answered"),
    ],
)
def test_bad_values_are_refused_naming_the_field(
    raw: dict[str, Any], where: str, message: str
) -> None:
    with pytest.raises(InvalidItem, match=message) as caught:
        parse_imported(raw, FIELDS)
    assert caught.value.where == where


def test_unknown_export_formats_are_refused() -> None:
    with pytest.raises(InvalidConfig, match="jsonl, csv"):
        export(rows(), "xlsx", io.StringIO())


def test_csv_columns_follow_the_order_fields_first_appear() -> None:
    own = field_types_of([{"id": "extra", "type": "text", "title": "More"}, FIELDS[0]])
    mixed = [
        {**rows()[1], "fields": {"extra": "x", "Keyword Feedback": 3}, "field_types": own},
        rows()[0],
    ]
    handle = io.StringIO()
    export(mixed, "csv", handle)
    header = handle.getvalue().splitlines()[0].split(",")
    assert header[8:] == [
        "field:extra", "field:Keyword Feedback", "field:topic", "field:flaws", "field:order",
        "field:why", "field:sport_detail",
    ]  # fmt: skip
